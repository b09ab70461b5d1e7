"""protoembed: train and evaluate sentence embeddings.

Public API: :func:`load` (backbone + head -> :class:`Embedder`; an export folder -> an
``ExportedEmbedder`` with the same ``encode``, run by ONNX Runtime or OpenVINO), :meth:`Embedder.encode`,
:meth:`Embedder.save`, :func:`export_embedder` (ONNX / OpenVINO export). They are
imported on first use (from :mod:`protoembed.loading` and :mod:`protoembed.embedder`), so
``import protoembed`` (and the CLI's ``--help``) does not load torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protoembed.version import __version__

if TYPE_CHECKING:
    from protoembed.embedder import Embedder
    from protoembed.export.graph import export_embedder
    from protoembed.loading import load


def __getattr__(name: str) -> Any:
    """``Embedder``, ``load`` and ``export_embedder``, imported (with torch) when first asked for."""
    if name == "Embedder":
        from protoembed.embedder import Embedder

        return Embedder
    if name == "load":
        from protoembed.loading import load

        return load
    if name == "export_embedder":
        from protoembed.export.graph import export_embedder

        return export_embedder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Embedder", "export_embedder", "load", "__version__"]
