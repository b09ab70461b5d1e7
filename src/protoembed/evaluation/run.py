"""Run suites on a model from Python: :func:`evaluate`, exported as ``protoembed.evaluate``.

``protoembed.evaluate(model, tasks=["STS-B", "MR"], **options)`` makes the
:class:`~protoembed.evaluation.evaluator.Evaluator` of those tasks (grouped by the suite that evaluates
each: a task's first suite in :data:`protoembed.evaluation.tasks.TASKS`, or ``suite=``), checks every
file they read before the model is loaded, loads the model once, and returns, per suite, exactly the
JSON ``protoembed eval <suite> --output`` writes (the model's description, ``"suite"``, the protocol
record, per-task results and ``avg``), as the evaluator's :meth:`~protoembed.evaluation.evaluator.Evaluator.run` does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from protoembed.evaluation.encoders import LazyEncoder
from protoembed.evaluation.evaluator import Evaluator, model_record
from protoembed.evaluation.tasks import TASKS, Task
from protoembed.model.model_spec import model_settings, model_spec
from protoembed.model.runtimes import AUTO


def evaluate(
    model: Any = "default",
    tasks: Sequence[str | Task] | str | None = None,
    *,
    suite: str | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    name: str | None = None,
    batch_size: int = 64,
    allow_empty: bool = False,
    cache_embeddings: bool = False,
    progress: bool = False,
    dims: Sequence[int] | None = None,
    **options: Any,
) -> dict[str, dict[str, Any]]:
    """Evaluate a model on tasks; the Python side of ``protoembed eval``.

    Args:
        model: a model spec as ``protoembed.load`` takes it (``default``, a model folder, a hub id, an
            export folder), or a loaded model (a :class:`~protoembed.protocol.SentenceEmbedder`: what
            ``protoembed.load`` returns).
        tasks: task names or the papers' table names (``["STS-B", "MR"]``; see
            :data:`protoembed.evaluation.tasks.TASKS`), or :class:`~protoembed.evaluation.tasks.Task`
            entries, registered or not (``beir_folder_task("my-beir")``: evaluated as they are); each goes
            to its first suite (MR: ``transfer``) unless ``suite`` is given. ``None``: the default tasks
            of ``suite``.
        suite: run every task in this suite (``fewshot`` for MR, CR, ...).
        data_dir: the benchmark data (``None``: ``$PROTOEMBED_DATA``, else the user data directory).
        name: the results' ``model`` field (default: ``model`` when it is a spec, else its class name).
        batch_size: as ``protoembed eval``'s ``--batch-size``.
        allow_empty: as ``protoembed eval``'s ``--allow-empty``.
        cache_embeddings: as ``protoembed eval``'s ``--cache-embeddings``.
        progress: a stderr line per finished task (what the command prints).
        dims: vector widths (``[384, 256, 128]``): each suite scored on the vectors cut to each, from one
            encode, as ``protoembed eval <suite> --dims`` (:meth:`Evaluator.run`'s ``dims``).
        **options: the model's settings (the keyword arguments of ``protoembed.load``: the fields of
            :class:`~protoembed.model_spec.ModelSpec`, ``head``, ``template``, ``max_seq_length``,
            ``device``, ``precision``, ``runtime``, ...; a loaded model reads only ``runtime``, other than
            ``auto`` moving it there, and ``device``, a cross-encoder's), and the suites' own options, as
            ``protoembed eval <suite> --help`` lists them with ``_`` for ``-`` (STS: ``variant``,
            ``split``, ``cross_encoder``; transfer: ``folds``, ``inner_folds``, ``seed``,
            ``mrpc_features``, ``classifier``; few-shot: ``shots``, ``seeds``, ``c``; clustering:
            ``runs``). Each suite option goes to the suites that have it; one no suite in play has is an
            error.
    Returns:
        ``{suite: results}``, each exactly the JSON ``protoembed eval <suite> --output`` writes for the
        same model, tasks and options (and ``--dims``).
    Raises:
        ProtoembedError: one line for a bad model setting, an unknown task, suite or option, or a missing
            data file (before the model is loaded).
    """
    settings = {k: options.pop(k) for k in model_settings() if k in options}
    spec = model_spec(model=model if isinstance(model, str) else "default", **settings)
    # every suite's tasks and options are checked here, its files by run() before the model is loaded
    evaluator = Evaluator(tasks, suite=suite, data_dir=data_dir, batch_size=batch_size, **options)
    if isinstance(model, str):

        def load() -> Any:
            from protoembed.model.loading import load_model

            return load_model(spec)
    else:

        def load() -> Any:
            return model

    encoder = LazyEncoder(  # a spec is loaded on ``runtime`` as the command loads it; a model is moved there
        load,
        batch_size=batch_size,
        allow_empty=allow_empty,
        runtime=AUTO if isinstance(model, str) else spec.runtime,
        cache_embeddings=cache_embeddings,
    )
    return evaluator.run(
        encoder,
        label=name or (model if isinstance(model, str) else type(model).__name__),
        model_path=model if isinstance(model, str) else None,
        progress=progress,
        device=spec.device,
        dims=dims,
    )


__all__ = ["TASKS", "Evaluator", "evaluate", "model_record"]
