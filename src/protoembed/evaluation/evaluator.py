"""The evaluator: tasks of any suite, the split and options they are run with, and the one score a model
gets from them.

An :class:`Evaluator` is what ``protoembed eval <suite>``, :func:`protoembed.evaluate` and training
all run. It is made from task entries (names, table names or :class:`~protoembed.evaluation.tasks.Task`
objects, registered or not: an STS set, a BEIR folder (:func:`~protoembed.evaluation.tasks.beir_folder_task`),
a dev split of one's own pairs, a classification or clustering set; one task or several), grouped by the
suite that evaluates each; everything about it is checked when it is made, before any model loads or
file is read: the tasks, the suites' options, the split (only suites that score a named split take one:
STS and retrieval; transfer, few-shot and clustering evaluate by their own protocol) and the metric.

- :meth:`Evaluator.run` gives, per suite, exactly the JSON ``protoembed eval <suite> --output`` writes;
- :meth:`Evaluator.score` turns those results into one number: the metric (``None``: each task's main
  score) averaged over the tasks, higher is better. Training selects ``best/`` by it
  (``training.selection`` in a config, or an evaluator given to :func:`protoembed.train`);
- an evaluator is itself the trainer's ``embedder -> float`` (:meth:`Evaluator.__call__`).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from protoembed.core.errors import ProtoembedError
from protoembed.core.pydantic_util import check_options
from protoembed.evaluation.encoders import LazyEncoder
from protoembed.evaluation.suite import SUITES, Inputs, Suite
from protoembed.evaluation.tasks import TASKS, Task, get_task, get_tasks, tasks_in_scope

if TYPE_CHECKING:
    import numpy as np

    from protoembed.data.needs import Need
    from protoembed.model.protocol import SentenceEmbedder

logger = logging.getLogger(__name__)

#: The option a suite takes when it scores a named split of its tasks (STS, retrieval).
SPLIT_OPTION = "split"


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


def group_by_suite(
    tasks: Sequence[str | Task] | str | Task | None, suite: str | None = None
) -> dict[str, list[str] | None]:
    """Suite -> its tasks (canonical names, in the order given; ``None``: the suite's default tasks), in
    :data:`~protoembed.evaluation.suite.SUITES`' order; a task goes to its first suite unless ``suite``.

    Raises:
        ProtoembedError: an unknown suite or task (the known names listed), a task ``suite`` does not
            evaluate, or neither tasks nor a suite.
    """
    if suite is not None and suite not in SUITES:
        raise ProtoembedError(SUITES.unknown(suite))
    if isinstance(tasks, (str, Task)):
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


def check_dims(dims: Sequence[int]) -> list[int]:
    """``dims`` (the vector widths of a ``dims`` run) as a list: distinct integers of at least 1.

    Raises:
        ProtoembedError: an empty list, a width below 1 or a repeated one (the list named)."""
    widths = list(dims)
    if not widths or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in widths):
        raise ProtoembedError(
            f"dims {widths!r}: expected distinct vector widths of at least 1, e.g. 384,256,128"
        )
    if len(set(widths)) != len(widths):
        raise ProtoembedError(f"dims {widths!r}: a width is repeated; expected distinct vector widths")
    return widths


class Evaluator:
    """Tasks of any suite, run together on a model; see the module docstring.

    Args:
        tasks: task names or table names (``["STS-B", "MR"]``), :class:`~protoembed.evaluation.tasks.Task`
            entries (registered or not), or one of them; each goes to its first suite unless ``suite``.
            ``None``: the default run of ``suite``.
        suite: run every task in this suite (``fewshot`` for MR, CR, ...).
        split: the split scored by the suites that take one (STS, retrieval); ``None``: their own
            default (``test``). A suite without a split (transfer, few-shot, clustering) refuses one.
        metric: the per-task key :meth:`score` averages (``spearman``, ``ndcg_at_10``, ``acc``, ...);
            ``None``: each task's main score. Every suite in play must compute it.
        data_dir: the benchmark data (``None``: ``$PROTOEMBED_DATA``, else the user data directory; a
            task whose files are absolute paths needs none).
        batch_size: sentences per forward when :meth:`run` is given a loaded model (and a
            cross-encoder's pairs per forward).
        options: the suites' own options (``variant``, ``cross_encoder``, ``folds``, ``shots``,
            ``runs``, ``score_function``, ...), each to the suites that have it; one that no suite in
            play has is an error.

    Raises:
        ProtoembedError: one line for an unknown task, suite, option, metric, or a split a task lacks
            or a suite does not take (the key and the choices named).
    """

    def __init__(
        self,
        tasks: Sequence[str | Task] | str | Task | None = None,
        *,
        suite: str | None = None,
        split: str | None = None,
        metric: str | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        batch_size: int = 64,
        **options: Any,
    ) -> None:
        self.batch_size = batch_size
        listed = [tasks] if isinstance(tasks, (str, Task)) else list(tasks or [])
        #: canonical name -> the entry of each task, as it was when this evaluator was made: known by name
        #: (:func:`~protoembed.evaluation.tasks.tasks_in_scope`) while it checks or runs them, never
        #: registered, so that another evaluator's task of the same name is another's
        self.entries: dict[str, Task] = {}
        self.split, self.metric, self.data_dir = split, metric, data_dir
        with tasks_in_scope(listed):
            planned = group_by_suite(None if tasks is None else listed, suite)
            suites = [SUITES[name] for name in planned]
            if split is not None:
                lacking = [s.name for s in suites if SPLIT_OPTION not in s.options.model_fields]
                if lacking:
                    takes = [s.name for s in SUITES.values() if SPLIT_OPTION in s.options.model_fields]
                    raise ProtoembedError(
                        f"split {split!r}: suite {lacking[0]} scores its tasks by its own protocol, not a "
                        f"split (suites that take one: {', '.join(takes)}); give no split for it"
                    )
            known = {k for s in suites for k in s.options.model_fields}
            unknown = [k for k in options if k not in known]
            if unknown:
                have = "; ".join(f"{s.name}: {', '.join(s.options.model_fields) or 'none'}" for s in suites)
                raise ProtoembedError(f"unknown option {unknown[0]!r} for the suites run ({have})")
            if metric is not None:
                for s in suites:
                    if metric not in s.scores:
                        raise ProtoembedError(
                            f"metric {metric!r} is not computed by suite {s.name}: expected one of "
                            f"{', '.join(s.scores)}"
                        )
            #: suite -> its options (checked, defaults filled)
            self.options: dict[str, dict[str, Any]] = {}
            #: suite -> its tasks' canonical names
            self.tasks: dict[str, list[str]] = {}
            for s in suites:
                own = {k: v for k, v in options.items() if k in s.options.model_fields}
                if split is not None:
                    own[SPLIT_OPTION] = split
                self.options[s.name] = suite_options(s, own)
                chosen = self.options[s.name].get(SPLIT_OPTION)
                entries = get_tasks(planned[s.name], s.name, chosen)
                self.tasks[s.name] = [t.name for t in entries]
                self.entries.update({t.name: t for t in entries})

    # ------------------------------------------------------------ what it is
    @property
    def suites(self) -> list[Suite]:
        """The suites in play, in :data:`~protoembed.evaluation.suite.SUITES`' order."""
        return [SUITES[name] for name in self.tasks]

    def task_names(self) -> list[str]:
        """Every task's canonical name, suite by suite."""
        return [name for names in self.tasks.values() for name in names]

    def metric_of(self, task: str) -> str:
        """The per-task key :meth:`score` reads for ``task``: :attr:`metric`, else its main score."""
        return self.metric if self.metric is not None else self.entries[task].main_score

    def describe(self) -> dict[str, Any]:
        """What the score is, for a results file and a log: ``{"tasks", "metric", "split"}`` (``metric``:
        one key, or task -> key where they differ; ``split``: ``None`` where the suites use their own)."""
        metrics = {task: self.metric_of(task) for task in self.task_names()}
        metric: Any = next(iter(metrics.values())) if len(set(metrics.values())) == 1 else metrics
        return {"tasks": self.task_names(), "metric": metric, "split": self.split}

    def needs(self, what: str = "task") -> list[Need]:
        """The files the tasks read (:func:`protoembed.data.needs.task_needs`), ``what`` starting each
        need's description."""
        from protoembed.data.needs import task_needs

        given = None if self.data_dir is None else os.fspath(self.data_dir)
        return [
            need
            for entry, variant, split in self.reads()
            for need in task_needs([entry], given, variant, split, what)
        ]

    def reads(self) -> list[tuple[Task, str, str]]:
        """Each task's entry with the data variant and split its suite reads it in (a suite without
        them: ``senteval``, ``test``, the entry's defaults), suite by suite."""
        out = []
        for name, names in self.tasks.items():
            opts = self.options[name]
            variant, split = opts.get("variant", "senteval"), opts.get(SPLIT_OPTION, "test")
            out += [(self.entries[task], variant, split) for task in names]
        return out

    def read_files(self, what: str = "task") -> list[str]:
        """Read every task's files whole, by the task's own reader as :meth:`run` reads them (what
        ``protoembed train --check`` does), so that a file that is there but holds nothing to evaluate
        fails here with the run's own error; returns one line per task (``what`` starting it).

        Raises:
            ProtoembedError: a missing file (named, with the command that fetches it), or the reader's
                one-line error (the file, line and what is wrong).
        """
        said = []
        for entry, variant, split in self.reads():
            entry.load(self.data_dir, variant, split)
            part = f"{split} split" if entry.splits else "one set"
            said.append(f"{what} {entry.name} ({part}): its files read")
        return said

    def check_files(self) -> None:
        """The one-line error for the first file the tasks read that is missing (the command that
        fetches it named), before any model is loaded."""
        from protoembed.data.needs import check_present

        check_present(self.needs())

    # ------------------------------------------------------------ running it
    def run(
        self,
        model: SentenceEmbedder | LazyEncoder,
        *,
        label: str | None = None,
        model_path: str | None = None,
        progress: bool = False,
        batch_size: int | None = None,
        device: str | None = None,
        dims: Sequence[int] | None = None,
    ) -> dict[str, dict[str, Any]]:
        """Every suite's results: ``{suite: {model description..., "suite", suite's result...}}``; with
        ``dims`` (vector widths, e.g. ``[384, 256, 128]``), ``{suite: {"suite", "dims": {"384": the
        suite's result on the vectors cut to 384, ...}}}``, every width scored from one encode at full size
        (:class:`~protoembed.evaluation.encoders.CutEncoders`: each width's vectors are those of
        ``truncate_dim`` at that width), what ``protoembed eval <suite> --dims`` writes.

        In: the model (a loaded :class:`~protoembed.protocol.SentenceEmbedder`, or a
        :class:`~protoembed.evaluation.encoders.LazyEncoder` that loads it on first use, with its
        runtime, embedding cache and pipeline settings), the results' ``model`` field (``label``;
        default: ``model_path``, else the model's class name), the model's folder when it was given as
        one (STS's cross-encoder reads it), a stderr line per finished task and a loaded model's
        encoding progress (``progress``: :class:`~protoembed.core.progress.Progress`, as ``protoembed
        eval`` shows it), and
        ``batch_size`` / ``device`` (a cross-encoder's; a loaded model is encoded ``batch_size`` at a
        time; ``None``: :attr:`batch_size`). Every file is checked first.
        """
        batch_size = self.batch_size if batch_size is None else batch_size
        self.check_files()
        if isinstance(model, LazyEncoder):
            encoder = model
        else:
            encoder = LazyEncoder(lambda: model, batch_size=batch_size, show_progress_bar=progress)
        name = label or model_path or type(model).__name__
        if dims is not None:
            from protoembed.evaluation.encoders import CutEncoders

            by_dim = {
                str(dim): self.run(
                    cut,
                    label=name,
                    model_path=model_path,
                    progress=progress,
                    batch_size=batch_size,
                    device=device,
                )
                for dim, cut in CutEncoders(encoder, check_dims(dims)).by_dim.items()
            }
            return {
                suite.name: {"suite": suite.name, "dims": {dim: r[suite.name] for dim, r in by_dim.items()}}
                for suite in self.suites
            }
        results = {}
        with tasks_in_scope(self.entries.values()):
            for suite in self.suites:
                inputs = Inputs(encoder, self.data_dir, progress, model_path, batch_size, device)
                result = suite.evaluate(inputs, self.tasks[suite.name], **self.options[suite.name])
                results[suite.name] = {**model_record(name, encoder), "suite": suite.name, **result}
        logger.debug("evaluated %s on %s", name, self.describe())
        return results

    def score(self, results: Mapping[str, Mapping[str, Any]]) -> float:
        """The metric averaged over every task (NaN when a task has none, e.g. a constant model's
        correlation); ``results`` as :meth:`run` returns them."""
        values = [
            float(results[suite]["tasks"][task][self.metric_of(task)])
            for suite, names in self.tasks.items()
            for task in names
        ]
        return math.fsum(values) / len(values)

    def score_pairs(
        self, scorer: Callable[[Sequence[str], Sequence[str]], np.ndarray | None]
    ) -> float | None:
        """With every task an STS-like task scored by Spearman or Pearson: that correlation of
        ``scorer(sentences1, sentences2)`` (a model's own pair scores, e.g. a cross-encoder's) against
        gold, averaged over the tasks; ``None`` when the tasks are not all such, or ``scorer`` returns
        ``None``."""
        from protoembed.evaluation.correlation import correlations

        if set(self.tasks) != {"sts"} or {self.metric_of(t) for t in self.task_names()} - {
            "spearman",
            "pearson",
        }:
            return None
        options = self.options["sts"]
        values = []
        for task in self.tasks["sts"]:
            pairs = self.entries[task].load(self.data_dir, options["variant"], options[SPLIT_OPTION])
            scores = scorer(pairs.sentences1, pairs.sentences2)
            if scores is None:
                return None
            spearman, pearson = correlations(scores, pairs.scores)
            values.append(spearman if self.metric_of(task) == "spearman" else pearson)
        return math.fsum(values) / len(values)

    def __call__(self, embedder: SentenceEmbedder) -> float:
        """:meth:`score` of :meth:`run` on ``embedder`` (the trainer's ``embedder -> float``)."""
        return self.score(self.run(embedder))

    def __repr__(self) -> str:
        return f"Evaluator({self.describe()})"


__all__ = ["TASKS", "Evaluator", "group_by_suite", "model_record", "suite_options"]
