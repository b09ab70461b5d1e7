"""protoembed: train and evaluate sentence embeddings.

Public API: :func:`load` (backbone + head -> :class:`Embedder`; an export folder -> an
``ExportedEmbedder`` with the same ``encode``, run by ONNX Runtime or OpenVINO), :meth:`Embedder.encode`,
:meth:`Embedder.save`, :func:`export_embedder` (ONNX / OpenVINO export), :func:`evaluate` (a model on
named tasks -> per suite, the results JSON ``protoembed eval`` writes), and :func:`register_task` with
:class:`Task` (a task of one's own, known to ``eval``, ``evaluate`` and training's ``test_tasks`` by name;
:func:`get_task` looks one up). They are imported on first use
(from :mod:`protoembed.loading`, :mod:`protoembed.embedder`, :mod:`protoembed.export.graph` and
:mod:`protoembed.evaluation.run`), so ``import protoembed`` (and the CLI's ``--help``) does not load torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protoembed.version import __version__

if TYPE_CHECKING:
    from protoembed.embedder import Embedder
    from protoembed.evaluation.run import evaluate
    from protoembed.evaluation.tasks import Task, get_task, register_task
    from protoembed.export.graph import export_embedder
    from protoembed.loading import load


def __getattr__(name: str) -> Any:
    """``Embedder``, ``load``, ``export_embedder``, ``evaluate`` and the task registry's ``Task``,
    ``register_task`` and ``get_task``, imported (the first three with torch) when first asked for."""
    if name == "Embedder":
        from protoembed.embedder import Embedder

        return Embedder
    if name == "load":
        from protoembed.loading import load

        return load
    if name == "export_embedder":
        from protoembed.export.graph import export_embedder

        return export_embedder
    if name == "evaluate":
        from protoembed.evaluation.run import evaluate

        return evaluate
    if name in ("Task", "register_task", "get_task"):
        from protoembed.evaluation import tasks

        return getattr(tasks, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Embedder",
    "Task",
    "evaluate",
    "export_embedder",
    "get_task",
    "load",
    "register_task",
    "__version__",
]
