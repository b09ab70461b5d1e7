"""Run suites on a model from Python: :func:`evaluate` (exported as ``protoembed.evaluate``), and the
one function that both it and ``protoembed eval`` call for each suite (:func:`run_suite`).

``protoembed.evaluate(model, tasks=["STS-B", "MR"], **options)`` groups the tasks by the suite that
evaluates them (a task's first suite in :data:`protoembed.evaluation.tasks.TASKS`, or ``suite=``),
checks every file they read before the model is loaded, loads the model once, and returns, per suite,
exactly the JSON ``protoembed eval <suite> --output`` writes (the model's description, ``"suite"``, the
protocol record, per-task results and ``avg``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from protoembed.core.errors import ProtoembedError
from protoembed.core.pydantic_util import check_options
from protoembed.evaluation.encoders import LazyEncoder
from protoembed.evaluation.suite import SUITES, Inputs, Suite
from protoembed.evaluation.tasks import TASKS, Task, get_task, get_tasks, registered_for_now
from protoembed.model.model_spec import model_settings, model_spec
from protoembed.model.runtimes import AUTO

logger = logging.getLogger(__name__)


def model_record(spec: str, encoder: LazyEncoder) -> dict[str, Any]:
    """The model's description in a results JSON: its spec, head, the runtime and precision that encoded
    the vectors (a report never mixes them silently) and its template, if any, as the loaded
    :class:`~protoembed.protocol.SentenceEmbedder` states them. A model that was never loaded (STS's
    cross-encoder) is described by its spec alone."""
    model = encoder.model
    if model is None:
        return {"model": spec}
    meta: dict[str, Any] = {"model": spec, "head": model.head}
    meta["runtime"] = model.runtime
    meta["precision"] = model.precision
    if model.encoder.template is not None:
        meta["template"] = model.encoder.template
    return meta


def suite_options(suite: Suite, options: Mapping[str, Any]) -> dict[str, Any]:
    """``suite``'s options: its options model (:attr:`Suite.options`) made from ``options``, as a dict
    (the defaults filled in).

    Raises:
        ProtoembedError: an option the suite does not have (the suite's options named), or an invalid
            value (the option and what it must be).
    """
    known = suite.options.model_fields
    unknown = [k for k in options if k not in known]
    if unknown:
        listed = ", ".join(known) or "none"
        raise ProtoembedError(f"{suite.name}: unknown option {unknown[0]!r}; its options: {listed}")
    return check_options(suite.options, options, f"{suite.name}: ").model_dump()


def resolve_tasks(suite: Suite, tasks: Sequence[str] | None, options: Mapping[str, Any]) -> list[str]:
    """The canonical names of ``tasks`` (each once), or the suite's default run for its options; with a
    ``split`` option, each task checked to have that split.

    Raises:
        ProtoembedError: a task the suite does not evaluate (the known names listed), or a split it lacks.
    """
    return [task.name for task in get_tasks(tasks, suite.name, options.get("split"))]


def check_files(
    suite: Suite, tasks: Sequence[str], data_dir: str | os.PathLike[str] | None, options: Mapping[str, Any]
) -> None:
    """The one-line error for the first file the tasks read that is missing (the command that fetches
    it named), before any model is loaded."""
    from protoembed.data.needs import check_present, task_needs

    variant, split = options.get("variant", "senteval"), options.get("split", "test")
    entries = [get_task(name, suite.name) for name in tasks]
    check_present(task_needs(entries, None if data_dir is None else os.fspath(data_dir), variant, split))


def run_suite(
    suite: Suite,
    encoder: LazyEncoder,
    spec: str,
    tasks: Sequence[str] | None,
    options: Mapping[str, Any],
    *,
    model_path: str | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    progress: bool = False,
    batch_size: int = 64,
    device: str | None = None,
) -> dict[str, Any]:
    """One suite's results JSON (what ``protoembed eval <suite> --output`` writes).

    In: the suite, the encoder of the model (loaded on first use), the model's ``model`` field
    (``spec``), the tasks (``None``: the suite's default), the suite's options (checked by
    :func:`suite_options`), the model's folder when it was given as one (a cross-encoder reads it), the
    data directory, and the options a cross-encoder uses (``batch_size``, ``device``).
    Out: ``{model description..., "suite", suite's result...}``.
    """
    chosen = suite_options(suite, options)
    names = resolve_tasks(suite, tasks, chosen)
    check_files(suite, names, data_dir, chosen)
    inputs = Inputs(encoder, data_dir, progress, model_path, batch_size, device)
    result = suite.evaluate(inputs, names, **chosen)
    return {**model_record(spec, encoder), "suite": suite.name, **result}


def group_by_suite(
    tasks: Sequence[str | Task] | None, suite: str | None = None
) -> dict[str, list[str] | None]:
    """Suite -> its tasks (canonical names, in the order given; ``None``: the suite's default tasks), in
    :data:`~protoembed.evaluation.suite.SUITES`' order.

    Raises:
        ProtoembedError: an unknown suite or task (the known names listed), a task ``suite`` does not
            evaluate, or neither tasks nor a suite.
    """
    if suite is not None and suite not in SUITES:
        raise ProtoembedError(SUITES.unknown(suite))
    if isinstance(tasks, str):
        tasks = [tasks]
    if tasks is None:
        if suite is None:
            raise ProtoembedError(f"name the tasks (e.g. tasks=['STS-B']) or a suite ({', '.join(SUITES)})")
        return {suite: None}
    if not tasks:
        raise ProtoembedError("no task to evaluate: tasks is empty")
    grouped: dict[str, list[str]] = {}
    for name in tasks:
        task = get_task(name, suite)
        chosen = suite or task.suites[0]
        if task.name not in grouped.setdefault(chosen, []):
            grouped[chosen].append(task.name)
    return {name: grouped[name] for name in SUITES if name in grouped}


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
        same model, tasks and options.
    Raises:
        ProtoembedError: one line for a bad model setting, an unknown task, suite or option, or a missing
            data file (before the model is loaded).
    """
    with registered_for_now(tasks):  # a Task entry is evaluated as it is, registered or not
        settings = {k: options.pop(k) for k in model_settings() if k in options}
        spec = model_spec(model=model if isinstance(model, str) else "default", **settings)
        planned = group_by_suite(tasks, suite)
        suites = [SUITES[s] for s in planned]
        known = {k for s in suites for k in s.options.model_fields}
        unknown = [k for k in options if k not in known]
        if unknown:
            listed = "; ".join(f"{s.name}: {', '.join(s.options.model_fields) or 'none'}" for s in suites)
            raise ProtoembedError(f"unknown option {unknown[0]!r} for the suites run ({listed})")
        per_suite = {
            s.name: {k: v for k, v in options.items() if k in s.options.model_fields} for s in suites
        }
        for s in suites:  # every suite's tasks, options and files, before the model is loaded
            chosen = suite_options(s, per_suite[s.name])
            check_files(s, resolve_tasks(s, planned[s.name], chosen), data_dir, chosen)
        if isinstance(model, str):
            label = name or model

            def load() -> Any:
                from protoembed.model.loading import load_model

                return load_model(spec)
        else:
            label = name or type(model).__name__

            def load() -> Any:
                return model

        encoder = (
            LazyEncoder(  # a spec is loaded on ``runtime`` as the command loads it; a model is moved there
                load,
                batch_size=batch_size,
                allow_empty=allow_empty,
                runtime=AUTO if isinstance(model, str) else spec.runtime,
                cache_embeddings=cache_embeddings,
            )
        )
        results = {}
        for s in suites:
            results[s.name] = run_suite(
                s,
                encoder,
                label,
                planned[s.name],
                per_suite[s.name],
                model_path=model if isinstance(model, str) else None,
                data_dir=data_dir,
                progress=progress,
                batch_size=batch_size,
                device=spec.device,
            )
        logger.debug("evaluated %s on %s", label, ", ".join(f"{k}: {v}" for k, v in planned.items()))
        return results


__all__ = ["TASKS", "evaluate", "model_record", "group_by_suite", "run_suite"]
