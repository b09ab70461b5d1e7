"""ONNX export and fast inference: one graph from token ids to the final sentence vector.

:func:`export_embedder` writes a folder (see :mod:`protoembed.export.graph`) that
:func:`load_export` turns back into an :class:`~protoembed.export.runtime.OnnxEmbedder`, whose
``encode`` is :meth:`protoembed.Embedder.encode` itself (same tokenisation, length batching and input
order) with the forward pass run by ONNX Runtime.
"""

from __future__ import annotations

from protoembed.export.graph import EXPORT_CONFIG, FORMAT_VERSION, GRAPH_FILE, QUANTIZE, export_embedder
from protoembed.export.runtime import OnnxEmbedder, is_export_dir, load_export

__all__ = [
    "EXPORT_CONFIG",
    "FORMAT_VERSION",
    "GRAPH_FILE",
    "QUANTIZE",
    "OnnxEmbedder",
    "export_embedder",
    "is_export_dir",
    "load_export",
]
