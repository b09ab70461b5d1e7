"""A cached fp32 export of a loaded model, for commands that encode many sentences.

:func:`onnx_embedder` exports a torch :class:`~protoembed.Embedder` once in
:data:`~protoembed.model.runtimes.DEFAULT_FORMAT` (ONNX; fp32, no quantisation: under ONNX Runtime the vectors
equal the torch model's to float rounding, about 1e-7) into a cache folder keyed by a digest of its
weights and settings, and opens it on a registered runtime that reads that format (ONNX Runtime,
OpenVINO; :func:`with_runtime` is the ``--runtime`` switch). A later call for the same model reuses the
folder. The cache lives in ``$PROTOEMBED_CACHE/onnx`` (default ``~/.cache/protoembed/onnx``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from protoembed.core.errors import ProtoembedError
from protoembed.core.version import __version__
from protoembed.model.export.layout import EXPORT_CONFIG, FORMAT_VERSION
from protoembed.model.runtimes import AUTO, DEFAULT_FORMAT, check_export_runtime, check_runtime, get_runtime
from protoembed.outputs.io import cache_dir

if TYPE_CHECKING:
    from protoembed.model.export.runtime import ExportedEmbedder
    from protoembed.model.protocol import SentenceEmbedder

logger = logging.getLogger(__name__)


def export_digest(folder: str | os.PathLike, max_seq_length: int | None = None) -> str:
    """SHA-256 (first 16 hex digits) of every file of an export folder (names and bytes, in sorted
    order) and the ``max_seq_length`` it tokenises with: two opened exports with the same digest encode
    alike. The graph, its weights, the tokenizer and the export config are all files of the folder."""
    root = Path(folder)
    digest = hashlib.sha256()
    digest.update(json.dumps({"max_seq_length": max_seq_length, "export": True}).encode())
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(file.relative_to(root).as_posix().encode())
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def model_digest(embedder: SentenceEmbedder) -> str:
    """SHA-256 (first 16 hex digits) of the weights, the tokenizer's vocabulary size and every setting
    the graph or the tokenisation depends on, and the prompts and score function the export keeps: two
    models with the same digest encode alike. An opened
    export (no torch weights) is keyed on its folder's files instead (:func:`export_digest`)."""
    from protoembed.model.export.runtime import ExportedEmbedder

    if isinstance(embedder, ExportedEmbedder) and embedder.root is not None:
        return export_digest(embedder.root, embedder.encoder.max_seq_length)
    digest = hashlib.sha256()
    settings = {
        "head": embedder.head,
        "normalize": embedder.normalize,
        "truncate_dim": embedder.truncate_dim,
        "template": embedder.encoder.template,
        "max_seq_length": embedder.encoder.max_seq_length,
        "n_soft_prompt": embedder.encoder.n_soft_prompt,
        "do_lower_case": embedder.encoder.do_lower_case,
        "vocab": len(embedder.tokenizer),
        "prompts": embedder.prompts,
        "similarity_fn_name": embedder.similarity_fn_name,
        "format_version": FORMAT_VERSION,
        "protoembed": __version__,
    }
    digest.update(json.dumps(settings, sort_keys=True).encode())
    for name, tensor in sorted(embedder.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def onnx_embedder(
    embedder: SentenceEmbedder,
    root: str | os.PathLike | None = None,
    digest: str | None = None,
    runtime: str = DEFAULT_FORMAT,
    precision: str | None = None,
) -> ExportedEmbedder:
    """``embedder`` run by ``runtime`` (a registered runtime that reads
    :data:`~protoembed.model.runtimes.DEFAULT_FORMAT`: ``onnx``, ``openvino``) on its fp32 export, exported into
    ``root / <digest>`` (default ``cache_dir("onnx")``: ``$PROTOEMBED_CACHE/onnx``) on the first call and
    reused afterwards. ``digest``: :func:`model_digest` of ``embedder`` when the caller has it already;
    ``precision``: as :func:`~protoembed.model.export.runtime.load_export` (``None``: the runtime's choice).
    An ``embedder`` that is already an opened export is returned as it is when it runs on ``runtime``,
    else reopened from its folder on ``runtime``.

    Raises:
        ProtoembedError: ``runtime`` is unknown or does not read that format (a torch model cannot be
            run there through the cache), or as :func:`~protoembed.model.export.runtime.load_export`.
    """
    from protoembed.model.export.graph import export_embedder
    from protoembed.model.export.runtime import ExportedEmbedder, load_export

    if isinstance(embedder, ExportedEmbedder):
        if embedder.runtime == runtime and precision in (None, embedder.precision):
            return embedder
        if embedder.root is None:
            raise ProtoembedError("this export was not opened from a folder; it cannot switch runtime")
        return load_export(
            embedder.root,
            max_seq_length=embedder.max_seq_length,
            runtime=runtime,
            precision=precision,
            prompts=embedder.prompts,
        )
    spec = get_runtime(runtime)
    if DEFAULT_FORMAT not in spec.reads:
        raise ProtoembedError(
            f"runtime {runtime!r} does not read {DEFAULT_FORMAT} exports, so it cannot run a torch model; "
            f"export the model in its format first (protoembed export --format ...)"
        )
    folder = Path(root or cache_dir(DEFAULT_FORMAT)) / (digest or model_digest(embedder))
    if not (folder / EXPORT_CONFIG).is_file():
        logger.info("exporting the model to %s (fp32) in %s", DEFAULT_FORMAT, folder)
        folder.parent.mkdir(parents=True, exist_ok=True)
        export_embedder(embedder, folder)
    return load_export(
        folder, max_seq_length=embedder.encoder.max_seq_length, runtime=runtime, precision=precision
    )


def with_runtime(model: SentenceEmbedder, runtime: str, precision: str | None = None) -> SentenceEmbedder:
    """``model`` on ``runtime`` (``auto`` or a key of :data:`~protoembed.model.runtimes.RUNTIMES`):

    - ``auto``: as it is (a torch model stays on torch; an export was opened by ``auto``'s rule);
    - ``torch``: a torch model as it is; an export is refused (it has no torch weights);
    - a runtime that opens exports (``onnx``, ``openvino``): an export on that runtime; a torch model's
      cached fp32 export (:func:`onnx_embedder`) on it.
    """
    from protoembed.model.export.runtime import ExportedEmbedder

    check_runtime(runtime)
    exported = isinstance(model, ExportedEmbedder)
    if exported:
        check_export_runtime(runtime, model.root)
    if runtime == AUTO or not get_runtime(runtime).runs_exports:  # torch: the model as it is
        return model
    return onnx_embedder(model, runtime=runtime, precision=precision)
