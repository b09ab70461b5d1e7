"""Export and fast inference: one graph from token ids to the final sentence vector.

:func:`export_embedder` writes a folder in a registered export format (see
:mod:`protoembed.model.export.graph` and :mod:`protoembed.model.runtimes`) that :func:`load_export` turns back into
an :class:`~protoembed.model.export.runtime.ExportedEmbedder` on a registered runtime (ONNX Runtime:
:class:`~protoembed.model.export.onnx.OnnxEmbedder`; OpenVINO), whose ``encode`` is the loop of
:meth:`protoembed.Embedder.encode` (:class:`~protoembed.model.batching.BatchEncoder`: same tokenisation, length
batching and input order) with the forward pass run by the runtime. Nothing here imports
:mod:`protoembed.model.embedder`; :mod:`protoembed.model.loading` sits above both.
"""

from __future__ import annotations

from typing import Any

from protoembed.model.export.layout import EXPORT_CONFIG, FORMAT_VERSION, GRAPH_FILE, QUANTIZE

_LAZY = {
    "export_embedder": "protoembed.model.export.graph",
    "ExportedEmbedder": "protoembed.model.export.runtime",
    "OnnxEmbedder": "protoembed.model.export.onnx",
    "is_export_dir": "protoembed.model.export.layout",
    "load_export": "protoembed.model.export.runtime",
}

__all__ = [
    "EXPORT_CONFIG",
    "FORMAT_VERSION",
    "GRAPH_FILE",
    "QUANTIZE",
    "ExportedEmbedder",
    "OnnxEmbedder",
    "export_embedder",
    "is_export_dir",
    "load_export",
]


def __getattr__(name: str) -> Any:
    """Import the torch / runtime parts on first use, so that the CLI starts fast."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'protoembed.model.export' has no attribute {name!r}")
