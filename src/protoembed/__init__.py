"""protoembed: train and evaluate sentence embeddings.

Public API: :func:`load` (backbone + head -> :class:`Embedder`; an ONNX export folder -> an
``OnnxEmbedder`` with the same ``encode``), :meth:`Embedder.encode`, :meth:`Embedder.save`. They are
imported on first use (from :mod:`protoembed.loading` and :mod:`protoembed.embedder`), so
``import protoembed`` (and the CLI's ``--help``) does not load torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protoembed.version import __version__

if TYPE_CHECKING:
    from protoembed.embedder import Embedder
    from protoembed.loading import load


def __getattr__(name: str) -> Any:
    """``Embedder`` and ``load``, imported (with torch) when first asked for."""
    if name == "Embedder":
        from protoembed.embedder import Embedder

        return Embedder
    if name == "load":
        from protoembed.loading import load

        return load
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Embedder", "load", "__version__"]
