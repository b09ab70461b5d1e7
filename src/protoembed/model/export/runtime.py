"""Run an exported folder behind the ``encode`` of :class:`~protoembed.Embedder`, on a registered runtime.

:class:`ExportedEmbedder` composes the :class:`~protoembed.model.batching.BatchEncoder` loop that
``Embedder.encode`` runs with the exported graph as its forward pass; tokenisation is the
:class:`~protoembed.model.encoder.PromptEncoder`'s own (template, soft-prompt slots, sentence-only
truncation), built from the saved tokenizer and the backbone's module tree on the ``meta`` device (no
weights). :func:`open_export` (:func:`load_export`: from keyword settings) reads the folder, picks the runtime (``auto``:
:func:`protoembed.model.runtimes.auto_runtime`), checks the precision against its registry entry and lets the
entry's loader build the runtime's subclass (:class:`~protoembed.model.export.onnx.OnnxEmbedder`: ONNX
Runtime; :class:`~protoembed.model.export.openvino.OpenVinoEmbedder`: OpenVINO).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from protoembed.core.errors import ProtoembedError
from protoembed.inputs.prompts import kept_default
from protoembed.model.batching import BatchEncoder, Encodes, check_truncate_dim
from protoembed.model.encoder import PromptEncoder
from protoembed.model.export.layout import (
    DEFAULT_PROMPT_NAME,
    EXPORT_CONFIG,
    FORMAT_VERSION,
    PROMPTS,
    SIMILARITY_FN_NAME,
    is_export_dir,  # noqa: F401 (imported from here by protoembed.model.loading)
)
from protoembed.model.model_spec import SOFT_PROMPT_INITS, ModelSpec, model_spec
from protoembed.model.precision import check_precision
from protoembed.model.protocol import DEFAULT_SCORE_FUNCTION
from protoembed.model.runtimes import (
    AUTO,
    RuntimeSpec,
    auto_runtime,
    check_export_runtime,
    folder_format,
    format_writer,
    get_runtime,
    readers,
)

logger = logging.getLogger(__name__)


def _weightless_backbone(config: Any) -> torch.nn.Module:
    """The backbone's module tree on the ``meta`` device (no weights, no memory): what tokenisation reads
    of it (position embeddings, their padding index, the config) without loading the checkpoint."""
    from transformers import AutoModel

    with torch.device("meta"):
        return AutoModel.from_config(config)


class ExportedEmbedder(Encodes):
    """An exported model: ``encode`` by the :class:`~protoembed.model.batching.BatchEncoder` loop that
    :meth:`protoembed.Embedder.encode` runs, with the forward pass run by an inference runtime
    (each registered runtime's loader returns its subclass, which runs one batch of feeds: :meth:`run`).

    Not a torch module: the weights and the pooling are inside the graph, so it can encode but not be
    trained, saved or exported again.

    Args:
        encoder: tokenisation-only :class:`PromptEncoder` (same settings as the exported model's).
        config: the folder's ``protoembed_export.json`` (its ``inputs``: the graph's input names; its
            ``prompts`` and ``similarity_fn_name``: the exported model's).
        normalize: L2-normalise (the graph may already do it; it cannot be undone).

    Attributes:
        prompts: input prompts, name -> text (:attr:`protoembed.Embedder.prompts`): the exported model's,
            or those :func:`load_export` was given.
        similarity_fn_name: the score function of its vectors (``cosine``, ``dot``).
    """

    #: the runtime's registry name, as ``--runtime`` spells it (set by :func:`load_export`)
    runtime = ""

    def __init__(self, encoder: PromptEncoder, config: dict[str, Any], normalize: bool) -> None:
        self.encoder = encoder
        self.config = config
        self.head: str = config["head"]
        self.normalize = normalize
        #: the width :meth:`encode` cuts the graph's vectors to by default (``None``: the graph's own
        #: width, already cut when the exported model had a ``truncate_dim``; set by :func:`open_export`)
        self.truncate_dim: int | None = None
        self.prompts: dict[str, str] = dict(config.get(PROMPTS) or {})
        self.default_prompt_name: str | None = config.get(DEFAULT_PROMPT_NAME)
        self.similarity_fn_name: str = config.get(SIMILARITY_FN_NAME) or DEFAULT_SCORE_FUNCTION
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
    def pooled_dimension(self) -> int:
        """Width of the graph's vectors."""
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
        return BatchEncoder(self.encoder, self.forward, self.pooled_dimension, self.device, self.normalize)

    @contextlib.contextmanager
    def encoding(self, precision: str | None) -> Iterator[None]:
        """Nothing to switch for :meth:`encode` (:meth:`protoembed.model.batching.Encodes.encoding`); a
        ``precision`` other than the export's own (:attr:`precision`) is refused.

        Raises:
            ProtoembedError: another precision (one line: the export's, and what runs the other)."""
        if precision is not None and precision != self.precision:
            check_precision(precision)
            raise ProtoembedError(
                f"this export runs in {self.precision} on {self.runtime or 'its runtime'}; for {precision} load "
                "it with precision= (where its runtime has it) or load the torch model it was exported from"
            )
        yield

    def eval(self) -> ExportedEmbedder:
        """Nothing to switch (the graph is inference only); returns ``self`` as a torch module would."""
        return self

    def save(self, path: str | os.PathLike) -> Path:
        """Refused: an export holds no torch modules to save."""
        raise ProtoembedError("an export cannot be saved again; export the torch model instead")


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


def load_export(path: str | os.PathLike, *, threads: int | None = None, **settings: Any) -> ExportedEmbedder:
    """Open an exported folder: :func:`open_export` with the
    :class:`~protoembed.model.model_spec.ModelSpec` made of ``settings`` (the keyword arguments of
    :func:`protoembed.load`); ``threads``: the runtime's CPU threads (default: its own choice).

    Raises:
        ProtoembedError: an unknown setting or a bad value (one line), or as :func:`open_export`.
    """
    return open_export(Path(path), model_spec(model=os.fspath(path), **settings), threads)


def open_export(root: Path, spec: ModelSpec, threads: int | None = None) -> ExportedEmbedder:
    """The export folder ``root`` on ``spec.runtime`` (head, template and soft prompt are fixed in the
    graph, ``spec.max_seq_length`` only changes tokenisation, ``spec.prompts`` replaces the exported
    model's prompts, ``spec.truncate_dim`` cuts the graph's vectors; ``spec.model`` is not read).

    ``spec.runtime``: ``auto`` (:func:`~protoembed.model.runtimes.auto_runtime`) or a registered runtime that
    reads the folder's format (``onnx``: ONNX Runtime; ``openvino``). ``spec.precision``: ``None`` (the
    runtime's choice: the graph's own; under OpenVINO, bf16 on CPUs with native bf16, else fp32), or one
    of the runtime's entry's ``precisions`` (OpenVINO: ``fp32``, ``bf16``; ONNX Runtime: ``fp32``
    only). An int8 export runs in int8 only.

    Raises:
        ProtoembedError: a runtime that cannot read the folder, a head, template or soft prompt other
            than the graph's, a precision the export or runtime cannot run, a missing optional package
            (with the pip command), or a missing / unreadable file (named).
    """
    from transformers import AutoConfig, AutoTokenizer

    config = read_export_config(root)
    runtime, precision = spec.runtime, spec.precision
    check_export_runtime(runtime, root)
    if spec.head is not None and spec.head != config["head"]:
        raise ProtoembedError(
            f"{root}: exported with head {config['head']!r}; cannot switch to {spec.head!r}"
        )
    if spec.template is not None or spec.n_soft_prompt is not None or spec.soft_prompt_init is not None:
        raise ProtoembedError(f"{root}: the template and soft prompt of an export are fixed in its graph")
    if spec.normalize is False and config["normalize"]:
        raise ProtoembedError(f"{root}: this export normalises its vectors inside the graph")
    if spec.device is not None and torch.device(spec.device).type != "cpu":
        logger.warning("exports run on the CPU; ignoring device %s", spec.device)
    entry = get_runtime(auto_runtime(config) if runtime == AUTO else runtime)
    _check_reads(root, config, entry)
    _check_precision(root, config, entry, precision)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(root))
        backbone_config = AutoConfig.from_pretrained(str(root))
        settings = json.loads((root / PromptEncoder.config_file_name).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        first = str(err).strip().splitlines()[0]
        raise ProtoembedError(f"{root}: cannot read the export's tokenizer or settings: {first}") from None
    settings = {k: v for k, v in settings.items() if k in PromptEncoder.config_keys}
    settings["soft_prompt_init"] = SOFT_PROMPT_INITS[0]  # the trained vectors are in the graph
    if spec.max_seq_length is not None:
        settings["max_seq_length"] = spec.max_seq_length
    encoder = PromptEncoder(tokenizer=tokenizer, model=_weightless_backbone(backbone_config), **settings)
    normalize = bool(spec.normalize) or bool(config["normalize"])
    embedder = entry.load(root, config, encoder, normalize, threads, precision)
    embedder.runtime = entry.name
    embedder.root = root
    embedder.truncate_dim = check_truncate_dim(spec.truncate_dim, embedder.pooled_dimension)
    if spec.prompts is not None:
        embedder.prompts = dict(spec.prompts)
        embedder.default_prompt_name = kept_default(embedder.default_prompt_name, embedder.prompts)
    if precision is not None and embedder.precision != precision:
        logger.warning(
            "%s: %s runs in %s on this CPU (no native %s)", root, entry.label, embedder.precision, precision
        )
    logger.info(
        "%s: %s runs the %s export in %s%s",
        root,
        entry.label,
        folder_format(config),
        embedder.precision,
        " (picked by auto)" if runtime == AUTO else "",
    )
    return embedder.eval()


def _check_reads(root: Path, config: dict[str, Any], spec: RuntimeSpec) -> None:
    """Refuse a runtime that does not read the folder's format (an OpenVINO export on ONNX Runtime)."""
    format = folder_format(config)
    if format not in spec.reads:
        able = readers(format)
        raise ProtoembedError(
            f"{root}: an {format_writer(format).format_label} export runs on "
            f"{' or '.join(s.label for s in able)} only (--runtime {' or '.join(s.name for s in able)})"
        )


def _check_precision(root: Path, config: dict[str, Any], spec: RuntimeSpec, precision: str | None) -> None:
    """Refuse a precision the export (int8) or the runtime (its entry's ``precisions``) cannot run."""
    if precision is None:
        return
    exported = config.get("quantize") or "fp32"
    if exported != "fp32":
        raise ProtoembedError(f"{root}: exported in {exported}; it cannot run in {precision}")
    if precision not in spec.precisions:
        able = [s.name for s in readers(folder_format(config)) if precision in s.precisions]
        instead = f"use --runtime {' or '.join(able)} (or load" if able else "(load"
        raise ProtoembedError(
            f"{root}: {spec.label} runs this export in {' or '.join(spec.precisions)}; for {precision} "
            f"{instead} the torch model it was exported from)"
        )
