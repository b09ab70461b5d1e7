"""Run an exported folder behind the ``encode`` of :class:`~protoembed.Embedder`: ONNX Runtime or OpenVINO.

:class:`ExportedEmbedder` composes the :class:`~protoembed.batching.BatchEncoder` loop that
``Embedder.encode`` runs with the exported graph as its forward pass; tokenisation is the
:class:`~protoembed.encoder.PromptEncoder`'s own (template, soft-prompt slots, sentence-only
truncation), built from the saved tokenizer and the backbone's module tree on the ``meta`` device (no
weights). :class:`OnnxEmbedder` runs the graph with ONNX Runtime, :class:`OpenVinoEmbedder` with
OpenVINO (see :mod:`protoembed.export.openvino`); :func:`auto_runtime` is the rule ``runtime="auto"``
follows.

ONNX Runtime's session options for speed on CPU: one intra-op thread per core, every graph
optimisation, sequential execution (the graph is one chain of layers: parallel execution only adds
scheduling).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from protoembed.batching import BatchEncoder
from protoembed.encoder import PromptEncoder
from protoembed.errors import ProtoembedError
from protoembed.export.graph import require_onnx
from protoembed.export.layout import EXPORT_CONFIG, EXPORT_RUNTIMES, FORMAT_VERSION, check_runtime
from protoembed.precision import check_precision

logger = logging.getLogger(__name__)


def is_export_dir(path: str | os.PathLike) -> bool:
    """True if ``path`` is a folder written by :func:`~protoembed.export.export_embedder`."""
    return (Path(path) / EXPORT_CONFIG).is_file()


def session_options(threads: int | None = None):
    """ONNX Runtime options: ``threads`` intra-op threads (default: the usable cores), all optimisations."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or len(os.sched_getaffinity(0))
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return options


def _weightless_backbone(config: Any) -> torch.nn.Module:
    """The backbone's module tree on the ``meta`` device (no weights, no memory): what tokenisation reads
    of it (position embeddings, their padding index, the config) without loading the checkpoint."""
    from transformers import AutoModel

    with torch.device("meta"):
        return AutoModel.from_config(config)


class ExportedEmbedder:
    """An exported model: ``encode`` by the :class:`~protoembed.batching.BatchEncoder` loop that
    :meth:`protoembed.Embedder.encode` runs, with the forward pass run by an inference runtime
    (:class:`OnnxEmbedder`: ONNX Runtime; :class:`~protoembed.export.runtime.OpenVinoEmbedder`: OpenVINO).

    Not a torch module: the weights and the pooling are inside the graph, so it can encode but not be
    trained, saved or exported again. Subclasses run one batch of feeds (:meth:`run`).

    Args:
        encoder: tokenisation-only :class:`PromptEncoder` (same settings as the exported model's).
        config: the folder's ``protoembed_export.json`` (its ``inputs``: the graph's input names).
        normalize: L2-normalise (the graph may already do it; it cannot be undone).
    """

    #: the runtime's name, as ``--runtime`` spells it
    runtime = ""

    def __init__(self, encoder: PromptEncoder, config: dict[str, Any], normalize: bool) -> None:
        self.encoder = encoder
        self.config = config
        self.head: str = config["head"]
        self.normalize = normalize
        self._inputs: list[str] = list(config["inputs"])  # the graph's input names, in order
        #: the export folder it was opened from (set by :func:`load_export`; keys the embedding store)
        self.root: Path | None = None

    @property
    def device(self) -> torch.device:
        """Always the CPU."""
        return torch.device("cpu")

    @property
    def precision(self) -> str:
        """What the graph computes in: ``fp32``, or ``int8`` for a quantised export."""
        return self.config.get("quantize") or "fp32"

    @property
    def dimension(self) -> int:
        """Width of the sentence vectors."""
        return int(self.config["dimension"])

    @property
    def max_seq_length(self) -> int | None:
        """The token budget of the tokenisation."""
        return self.encoder.max_seq_length

    @property
    def tokenizer(self):
        """The saved tokenizer."""
        return self.encoder.tokenizer

    def run(self, feeds: dict[str, np.ndarray]) -> torch.Tensor:
        """One padded batch (int64 arrays by input name) -> ``sentence_embedding`` (B, D) in fp32."""
        raise NotImplementedError

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Padded batch features -> sentence vectors (B, D) from the graph."""
        feeds = {name: np.ascontiguousarray(features[name].numpy(), dtype=np.int64) for name in self._inputs}
        vectors = self.run(feeds)
        if self.normalize and not self.config["normalize"]:
            vectors = torch.nn.functional.normalize(vectors, dim=-1)
        return vectors

    __call__ = forward

    def features(self, sentences: Sequence[str], allow_empty: bool = False) -> dict[str, torch.Tensor]:
        """Tokenise and pad ``sentences`` into one batch (as :meth:`protoembed.Embedder.features`)."""
        return self.encoder.collate(*self.encoder.tokenize_ids(sentences, allow_empty))

    def batch_encoder(self) -> BatchEncoder:
        """The encode loop over this export's tokenisation and its graph."""
        return BatchEncoder(self.encoder, self.forward, self.dimension, self.device, self.normalize)

    def encode(
        self,
        sentences: Sequence[str] | str,
        batch_size: int = 64,
        normalize: bool | None = None,
        show_progress_bar: bool | None = None,
        convert_to_tensor: bool = False,
        allow_empty: bool = False,
    ) -> np.ndarray | torch.Tensor:
        """Encode sentences to vectors: arguments, batching, order and result as
        :meth:`protoembed.Embedder.encode`."""
        return self.batch_encoder().encode(
            sentences, batch_size, normalize, show_progress_bar, convert_to_tensor, allow_empty
        )

    def eval(self) -> ExportedEmbedder:
        """Nothing to switch (the graph is inference only); returns ``self`` as a torch module would."""
        return self

    def save(self, path: str | os.PathLike) -> Path:
        """Refused: an export holds no torch modules to save."""
        raise ProtoembedError("an export cannot be saved again; export the torch model instead")


class OnnxEmbedder(ExportedEmbedder):
    """An export run by ONNX Runtime (CPU provider); ``session`` is its ``InferenceSession``."""

    runtime = "onnx"

    def __init__(self, encoder: PromptEncoder, session: Any, config: dict[str, Any], normalize: bool) -> None:
        super().__init__(encoder, config, normalize)
        self.session = session

    def run(self, feeds: dict[str, np.ndarray]) -> torch.Tensor:
        """One batch through the session."""
        return torch.from_numpy(self.session.run(["sentence_embedding"], feeds)[0])


class OpenVinoEmbedder(ExportedEmbedder):
    """An export run by OpenVINO's CPU plugin; ``compiled`` is its ``CompiledModel`` (one infer request,
    reused batch after batch)."""

    runtime = "openvino"

    def __init__(
        self, encoder: PromptEncoder, compiled: Any, config: dict[str, Any], normalize: bool
    ) -> None:
        from protoembed.export.openvino import compiled_precision

        super().__init__(encoder, config, normalize)
        self.compiled = compiled
        self._request = compiled.create_infer_request()
        self._compiled_precision = compiled_precision(compiled)  # fixed once compiled

    @property
    def precision(self) -> str:
        """``int8`` for a quantised export, else what OpenVINO computes in here (``bf16`` / ``fp32``)."""
        return self.config.get("quantize") or self._compiled_precision

    def run(self, feeds: dict[str, np.ndarray]) -> torch.Tensor:
        """One batch through the compiled model."""
        from protoembed.export.openvino import run_compiled

        return run_compiled(self._request, feeds)


def auto_runtime(config: dict[str, Any]) -> str:
    """The runtime ``auto`` picks for an export with this config, from the CPU's features:

    - an OpenVINO folder (``--format openvino``): ``openvino``;
    - an int8 ONNX folder: ``onnx`` (its dynamic-quantisation operators are ONNX Runtime's);
    - an fp32 ONNX folder: ``openvino`` where the CPU has native bf16 (AVX512-BF16 or AMX) and the
      ``openvino`` package is installed (it runs the graph in bf16 there), else ``onnx``.
    """
    from protoembed.export.openvino import openvino_available
    from protoembed.precision import native_bf16

    if config.get("format") == "openvino":
        return "openvino"
    if config.get("quantize"):
        return "onnx"
    return "openvino" if native_bf16("cpu") and openvino_available() else "onnx"


def read_export_config(path: Path) -> dict[str, Any]:
    """The folder's ``protoembed_export.json``, checked for its format version."""
    file = path / EXPORT_CONFIG
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
        version = int(config["format_version"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ProtoembedError(f"{file}: not a readable protoembed export config ({err})") from None
    if version > FORMAT_VERSION:
        raise ProtoembedError(
            f"{file}: export format version {version} was written by a newer protoembed "
            f"({config.get('protoembed_version', '?')}); this one reads up to version {FORMAT_VERSION}"
        )
    return config


def load_export(
    path: str | os.PathLike,
    *,
    head: str | None = None,
    template: str | None = None,
    max_seq_length: int | None = None,
    n_soft_prompt: int | None = None,
    soft_prompt_init: str | None = None,
    normalize: bool | None = None,
    device: str | torch.device | None = None,
    threads: int | None = None,
    runtime: str = "auto",
    precision: str | None = None,
) -> ExportedEmbedder:
    """Open an exported folder (arguments as :func:`protoembed.load`; head, template and soft prompt
    are fixed in the graph, ``max_seq_length`` only changes tokenisation).

    Args:
        runtime: ``onnx`` (ONNX Runtime), ``openvino``, or ``auto`` (:func:`auto_runtime`).
        precision: ``None`` (the graph's own; under OpenVINO, bf16 on CPUs with native bf16, else fp32),
            ``fp32`` or ``bf16`` (OpenVINO's inference precision; ONNX Runtime runs fp32 only). An int8
            export runs in int8 only.
    Raises:
        ProtoembedError: an unknown runtime, a precision the export or runtime cannot run, a missing
            optional package (with the pip command), or a missing / unreadable file (named).
    """
    from transformers import AutoConfig, AutoTokenizer

    root = Path(path)
    config = read_export_config(root)
    check_runtime(runtime, EXPORT_RUNTIMES, " for an export")
    if head is not None and head != config["head"]:
        raise ProtoembedError(f"{root}: exported with head {config['head']!r}; cannot switch to {head!r}")
    if template is not None or n_soft_prompt is not None or soft_prompt_init is not None:
        raise ProtoembedError(f"{root}: the template and soft prompt of an export are fixed in its graph")
    if normalize is False and config["normalize"]:
        raise ProtoembedError(f"{root}: this export normalises its vectors inside the graph")
    if device is not None and torch.device(device).type != "cpu":
        logger.warning("exports run on the CPU; ignoring device %s", device)
    chosen = auto_runtime(config) if runtime == "auto" else runtime
    if config.get("format") == "openvino" and chosen == "onnx":
        raise ProtoembedError(f"{root}: an OpenVINO export runs on OpenVINO only (--runtime openvino)")
    _check_precision(root, config, chosen, precision)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(root))
        backbone_config = AutoConfig.from_pretrained(str(root))
        settings = json.loads((root / PromptEncoder.config_file_name).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        first = str(err).strip().splitlines()[0]
        raise ProtoembedError(f"{root}: cannot read the export's tokenizer or settings: {first}") from None
    settings = {k: v for k, v in settings.items() if k in PromptEncoder.config_keys}
    settings["soft_prompt_init"] = "uniform"  # the trained vectors are in the graph
    if max_seq_length is not None:
        settings["max_seq_length"] = max_seq_length
    encoder = PromptEncoder(tokenizer=tokenizer, model=_weightless_backbone(backbone_config), **settings)
    normalize = bool(normalize) or bool(config["normalize"])
    if chosen == "onnx":
        embedder: ExportedEmbedder = OnnxEmbedder(
            encoder, _onnx_session(root, config, threads), config, normalize
        )
    else:
        embedder = OpenVinoEmbedder(
            encoder, _openvino_model(root, config, threads, precision), config, normalize
        )
    embedder.root = root
    if precision == "bf16" and embedder.precision != "bf16":
        logger.warning("%s: OpenVINO runs in %s on this CPU (no native bf16)", root, embedder.precision)
    logger.info(
        "%s: %s runs the %s export in %s%s",
        root,
        "ONNX Runtime" if chosen == "onnx" else "OpenVINO",
        config.get("format", "onnx"),
        embedder.precision,
        " (picked by auto)" if runtime == "auto" else "",
    )
    return embedder.eval()


def _check_precision(root: Path, config: dict[str, Any], runtime: str, precision: str | None) -> None:
    """Refuse a precision the export (int8) or the runtime (ONNX Runtime: fp32) cannot run."""
    if precision is None:
        return
    check_precision(precision)
    exported = config.get("quantize") or "fp32"
    if exported != "fp32":
        raise ProtoembedError(f"{root}: exported in {exported}; it cannot run in {precision}")
    if runtime == "onnx" and precision != "fp32":
        raise ProtoembedError(
            f"{root}: ONNX Runtime runs this export in fp32; for {precision} use --runtime openvino "
            "(or load the torch model it was exported from)"
        )


def _onnx_session(root: Path, config: dict[str, Any], threads: int | None) -> Any:
    """ONNX Runtime's session of the folder's ONNX graph."""
    require_onnx()
    import onnxruntime as ort

    graph = root / config.get("graph", "onnx/model.onnx")
    if not graph.is_file():
        raise ProtoembedError(f"{graph}: graph file missing; export the model again")
    try:
        return ort.InferenceSession(
            str(graph), sess_options=session_options(threads), providers=["CPUExecutionProvider"]
        )
    except Exception as err:  # truncated or corrupt protobuf
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ProtoembedError(
            f"{graph}: cannot load the ONNX graph (truncated or corrupt?): {first}"
        ) from None


def _openvino_model(root: Path, config: dict[str, Any], threads: int | None, precision: str | None) -> Any:
    """OpenVINO's compiled model of the folder's IR (an OpenVINO export) or ONNX graph; a file whose size
    differs from the one the export recorded is refused before OpenVINO reads it."""
    from protoembed.export.openvino import compile_graph, require_openvino

    require_openvino()
    graph = root / config.get("graph", "onnx/model.onnx")
    weights = graph.with_suffix(".bin") if graph.suffix == ".xml" else None
    for name, size in config.get("files", {}).items():
        file = root / name
        if not file.is_file():
            raise ProtoembedError(f"{file}: graph file missing; export the model again")
        if file.stat().st_size != size:
            raise ProtoembedError(
                f"{file}: {file.stat().st_size} bytes, the export wrote {size} (truncated?); export the model again"
            )
    return compile_graph(graph, threads, precision, weights)
