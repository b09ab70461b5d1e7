"""protoembed: train and evaluate sentence embeddings.

Public API: :func:`load` (backbone + head -> :class:`Embedder`), :meth:`Embedder.encode`,
:meth:`Embedder.save`. They are imported on first use, so ``import protoembed`` (and the CLI's
``--help``) does not load torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from protoembed.embedder import Embedder, load


def __getattr__(name: str) -> Any:
    """``Embedder`` and ``load``, imported (with torch) when first asked for."""
    if name in ("Embedder", "load"):
        from protoembed import embedder

        return getattr(embedder, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Embedder", "load", "__version__"]
