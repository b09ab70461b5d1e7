"""protoembed: train and evaluate sentence embeddings.

Public API: :func:`load` (backbone + head -> :class:`Embedder`), :meth:`Embedder.encode`,
:meth:`Embedder.save`.
"""

from __future__ import annotations

__version__ = "0.1.0"

from protoembed.embedder import Embedder, load  # noqa: E402

__all__ = ["Embedder", "load", "__version__"]
