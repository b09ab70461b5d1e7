"""What an evaluation suite says about itself: its evaluation, and its two adapters (the command line and
the report page).

Each suite module (:mod:`~protoembed.evaluation.sts`, :mod:`~protoembed.evaluation.transfer`,
:mod:`~protoembed.evaluation.fewshot`, :mod:`~protoembed.evaluation.clustering`) declares one
:class:`Suite`; :data:`SUITES` holds them (the package registers them). The tasks themselves are entries of
:data:`protoembed.evaluation.tasks.TASKS`. A suite's evaluation is a typed function over an ``encode``
callable (:attr:`Suite.evaluate`, run by :func:`protoembed.evaluate` and by ``protoembed eval``);
``protoembed eval <name>`` is built from :attr:`Suite.command` and the report's section from
:attr:`Suite.report`.

A declaration imports no torch, scikit-learn or scipy: the suite modules import those inside the
functions that compute, so ``protoembed --help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from protoembed.core.registry import Registry

if TYPE_CHECKING:
    from protoembed.evaluation.shared import Encode
    from protoembed.evaluation.tasks import Task

#: How a report cell spreads over a model's runs (the end of most protocol lines).
OVER_SEEDS = "mean ± std over a model's runs (seeds)"
#: The keys of a results file that say what computed its vectors (the model's description ``eval``
#: writes). In a suite's protocol record they are not a refusal: the report gives each combination its
#: own table on the page (``None`` where a file did not record it).
ENCODING = ("runtime", "precision")


@dataclass(frozen=True)
class Inputs:
    """What every suite's evaluation gets besides its own options: ``encode(sentences) -> array (n, d)``,
    the data directory (``None``: ``$PROTOEMBED_DATA``, else the user data directory), whether to print a line per finished task
    (stderr), and the model's spec, batch size and device (only STS's cross-encoder reads those: it scores
    a pair as one input and never calls ``encode``)."""

    encode: Encode
    data_dir: str | os.PathLike[str] | None = None
    progress: bool = False
    model: str | None = None
    batch_size: int = 64
    device: str | None = None


#: ``evaluate(inputs, tasks, **options) -> result``: the tasks (canonical names, ``None``: the suite's
#: default), the suite's options (every field of :attr:`Suite.options`, checked); the result without the
#: model's description.
Evaluate = Callable[..., dict[str, Any]]


class SuiteOptions(BaseModel):
    """A suite's own options, one field each (a suite's options model subclasses this): the field's
    default, type and ``description`` are the option's default, check and help, from which ``protoembed
    eval <suite>``'s flags (``--inner-folds`` for ``inner_folds``; a :class:`~protoembed.pydantic_util.Flag`
    in the field's ``Annotated`` names another), :func:`protoembed.evaluate`'s keyword check and the suite's own defaults all come.
    Values are checked as Python gives them (``1`` is a valid float); unknown names are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def no_files(args: argparse.Namespace, result: dict[str, Any]) -> list[Path]:
    """A suite that writes nothing beside its results JSON."""
    return []


def result_protocol(data: dict[str, Any]) -> dict[str, Any]:
    """A results file's ``protocol`` record (what two results must share to share a report table)."""
    return dict(data.get("protocol") or {})


def extra_protocol(p: Mapping[str, Any], known: Sequence[str]) -> str:
    """``; key value, ...`` for the entries of a protocol record that its line does not spell out."""
    rest = [f"{k} {v}" for k, v in p.items() if k not in known]
    return f"; {', '.join(rest)}" if rest else ""


@dataclass(frozen=True)
class CommandLine:
    """``protoembed eval <name>``: ``help`` (one line in ``eval --help``), ``description``, ``tasks_help``
    (``None``: "tasks to run (default: ...)"), ``output_files`` (``(flag, metavar, help)`` of each
    further file the suite can write, checked writable when the command line is parsed, default
    ``None``), ``write_files(args, result) -> [paths]`` (anything written beside the JSON, such as
    few-shot's violin plot) and ``folder_task(folder) -> Task`` (with one, ``--task-dir DIR`` evaluates
    the folder DIR as a task entry registered for that run only, after the ``--tasks``: retrieval's BEIR
    folders) and ``dims`` (with one, ``--dims 384,256,...`` scores the suite at each vector width from
    one encode, in one table with a row per width: ``(its caption, the per-task score of its cells)``).
    The suite's own flags come from its :attr:`Suite.options` model."""

    help: str
    description: str
    tasks_help: str | None = None
    output_files: tuple[tuple[str, str, str], ...] = ()
    write_files: Callable[[argparse.Namespace, dict[str, Any]], list[Path]] = no_files
    folder_task: Callable[[str], Task] | None = None
    dims: tuple[str, str] | None = None


@dataclass(frozen=True)
class ReportLayout:
    """The suite's place on the report page: ``page_order`` (its section's rank: the paper's table order),
    ``title`` (the section heading), ``protocol_line(record) -> str`` (the line under the heading),
    ``summary`` (``(metric, heading)`` per column of the summary table), ``tables`` (``(caption or None,
    metric)`` per table of the section), ``ablation_title`` (with one, the ``--ablation`` labels get a
    second section in this layout, ConPVP Table 4), ``pooled`` (the per-run list of draws that a cell
    pools over every run instead of averaging each run's ``metric``: few-shot's ``seeds_acc``),
    ``protocol(data) -> record`` (equal records may share a table), ``figure`` (``draw(models, png) ->
    record`` with ``models = [(label, [result, ...])]``) and its ``figure_caption`` (number, caption).
    Column names are the tasks' table names (:func:`protoembed.evaluation.tasks.table_name`)."""

    page_order: int
    title: str
    protocol_line: Callable[[dict[str, Any]], str]
    summary: tuple[tuple[str, str], ...]
    tables: tuple[tuple[str | None, str], ...] = ((None, "acc"),)
    ablation_title: str | None = None
    pooled: str | None = None
    protocol: Callable[[dict[str, Any]], dict[str, Any]] = result_protocol
    figure: Callable[[Sequence[tuple[str, Sequence[dict[str, Any]]]], Path], dict[str, Any]] | None = None
    figure_caption: tuple[int, str] | None = None

    @property
    def read_keys(self) -> tuple[str, ...]:
        """The per-task keys the page reads, so every task of a results file must have them: the list of
        draws (``pooled``), else each table's and each summary column's metric."""
        if self.pooled:
            return (self.pooled,)
        return tuple(dict.fromkeys([m for _, m in self.tables] + [m for m, _ in self.summary]))


@dataclass(frozen=True)
class Suite:
    """One benchmark suite: ``name``, ``scores`` (the per-task keys it computes that a task's
    ``main_score`` may name), ``evaluate`` (see :data:`Evaluate`), ``options`` (its options model:
    :class:`SuiteOptions`), ``format_table(result) -> str`` (the printed table), and its adapters
    ``command`` and ``report``. Its tasks are the entries of :data:`~protoembed.evaluation.tasks.TASKS` that list it; those
    marked ``default`` (with the ``split`` option, those that have that split) run when none are named
    (:func:`~protoembed.evaluation.tasks.default_tasks`)."""

    name: str
    scores: tuple[str, ...]
    evaluate: Evaluate
    format_table: Callable[[dict[str, Any]], str]
    command: CommandLine
    report: ReportLayout
    options: type[SuiteOptions] = SuiteOptions


#: Suite name -> its declaration (a :class:`~protoembed.core.registry.Registry`), in ``protoembed eval
#: --help``'s order (the report sorts by ``page_order``): the built-in suites are registered by the
#: ``protoembed.evaluation`` package before anything of it is used, so a task entry is checked against
#: every suite.
SUITES: Registry[Suite] = Registry("suite")


def register_suite(suite: Suite, *, replace: bool = False) -> Suite:
    """Add ``suite`` to :data:`SUITES` (with ``replace``, in place of one of the same name); returns it.

    Raises:
        ProtoembedError: its name is already registered and ``replace`` is false.
    """
    return SUITES.register(suite, replace=replace)
