"""protoembed: train and evaluate sentence embeddings.

Public API: :func:`load` (backbone + head -> :class:`Embedder`; an ONNX export folder -> an
``OnnxEmbedder`` with the same ``encode``), :meth:`Embedder.encode`, :meth:`Embedder.save`, and
:func:`evaluate` (a model on named tasks -> per suite, the results JSON ``protoembed eval`` writes). They
are imported on first use (from :mod:`protoembed.loading`, :mod:`protoembed.embedder` and
:mod:`protoembed.evaluation.run`), so ``import protoembed`` (and the CLI's ``--help``) does not load torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protoembed.version import __version__

if TYPE_CHECKING:
    from protoembed.embedder import Embedder
    from protoembed.evaluation.run import evaluate
    from protoembed.loading import load


def __getattr__(name: str) -> Any:
    """``Embedder``, ``load`` and ``evaluate``, imported (``Embedder`` and ``load`` with torch) when first
    asked for."""
    if name == "Embedder":
        from protoembed.embedder import Embedder

        return Embedder
    if name == "load":
        from protoembed.loading import load

        return load
    if name == "evaluate":
        from protoembed.evaluation.run import evaluate

        return evaluate
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Embedder", "evaluate", "load", "__version__"]
