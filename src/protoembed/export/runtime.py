"""Run an exported folder with ONNX Runtime behind the ``encode`` of :class:`~protoembed.Embedder`.

:class:`OnnxEmbedder` composes the :class:`~protoembed.batching.BatchEncoder` loop that
``Embedder.encode`` runs with the ONNX graph as its forward pass; tokenisation is the
:class:`~protoembed.encoder.PromptEncoder`'s own (template, soft-prompt slots, sentence-only
truncation), built from the saved tokenizer and the backbone's module tree on the ``meta`` device (no
weights).

Session options for speed on CPU: one intra-op thread per core, every graph optimisation, sequential
execution (the graph is one chain of layers: parallel execution only adds scheduling).
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
from protoembed.export.layout import EXPORT_CONFIG, FORMAT_VERSION

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


class OnnxEmbedder:
    """An exported model: ``encode`` by the :class:`~protoembed.batching.BatchEncoder` loop that
    :meth:`protoembed.Embedder.encode` runs, with the forward pass run by ONNX Runtime.

    Not a torch module: the weights and the pooling are inside the graph, so it can encode but not be
    trained, saved or exported again.

    Args:
        encoder: tokenisation-only :class:`PromptEncoder` (same settings as the exported model's).
        session: the ``onnxruntime.InferenceSession`` of the graph.
        config: the folder's ``protoembed_export.json``.
        normalize: L2-normalise (the graph may already do it; it cannot be undone).
    """

    def __init__(self, encoder: PromptEncoder, session: Any, config: dict[str, Any], normalize: bool) -> None:
        self.encoder = encoder
        self.session = session
        self.config = config
        self.head: str = config["head"]
        self.normalize = normalize
        self._inputs = [i.name for i in session.get_inputs()]
        #: the export folder it was opened from (set by :func:`load_export`; keys the embedding store)
        self.root: Path | None = None

    @property
    def device(self) -> torch.device:
        """Always the CPU (ONNX Runtime's CPU provider)."""
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
    def tokenizer(self):
        """The saved tokenizer."""
        return self.encoder.tokenizer

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Padded batch features -> sentence vectors (B, D) from the graph."""
        feeds = {name: np.ascontiguousarray(features[name].numpy(), dtype=np.int64) for name in self._inputs}
        vectors = torch.from_numpy(self.session.run(["sentence_embedding"], feeds)[0])
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

    def eval(self) -> OnnxEmbedder:
        """Nothing to switch (the graph is inference only); returns ``self`` as a torch module would."""
        return self

    def save(self, path: str | os.PathLike) -> Path:
        """Refused: an export holds no torch modules to save."""
        raise ProtoembedError("an ONNX export cannot be saved again; export the torch model instead")

    def export(self, path: str | os.PathLike, quantize: str | None = None) -> Path:
        """Refused: the graph is already exported."""
        raise ProtoembedError("an ONNX export cannot be exported again; export the torch model instead")


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
) -> OnnxEmbedder:
    """Open an exported folder (arguments as :func:`protoembed.load`; head, template and soft prompt
    are fixed in the graph, ``max_seq_length`` only changes tokenisation)."""
    require_onnx()
    import onnxruntime as ort
    from transformers import AutoConfig, AutoTokenizer

    root = Path(path)
    config = read_export_config(root)
    if head is not None and head != config["head"]:
        raise ProtoembedError(f"{root}: exported with head {config['head']!r}; cannot switch to {head!r}")
    if template is not None or n_soft_prompt is not None or soft_prompt_init is not None:
        raise ProtoembedError(f"{root}: the template and soft prompt of an export are fixed in its graph")
    if normalize is False and config["normalize"]:
        raise ProtoembedError(f"{root}: this export normalises its vectors inside the graph")
    if device is not None and torch.device(device).type != "cpu":
        logger.warning("ONNX exports run on the CPU; ignoring device %s", device)
    graph = root / config.get("graph", "onnx/model.onnx")
    if not graph.is_file():
        raise ProtoembedError(f"{graph}: graph file missing; export the model again")
    try:
        session = ort.InferenceSession(
            str(graph), sess_options=session_options(threads), providers=["CPUExecutionProvider"]
        )
    except Exception as err:  # truncated or corrupt protobuf
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ProtoembedError(
            f"{graph}: cannot load the ONNX graph (truncated or corrupt?): {first}"
        ) from None
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
    embedder = OnnxEmbedder(encoder, session, config, bool(normalize) or bool(config["normalize"]))
    embedder.root = root
    return embedder.eval()
