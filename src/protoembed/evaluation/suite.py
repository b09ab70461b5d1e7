"""What an evaluation suite says about itself, as an MTEB task carries its ``TaskMetadata``.

Each suite module (:mod:`~protoembed.evaluation.sts`, :mod:`~protoembed.evaluation.transfer`,
:mod:`~protoembed.evaluation.fewshot`, :mod:`~protoembed.evaluation.clustering`) declares one
:class:`Suite`; :mod:`protoembed.evaluation.suites` lists them. ``protoembed eval`` builds a sub-command
from each declaration (name, help, tasks, their table names, options, :attr:`Suite.evaluate`,
:attr:`Suite.format_table`), every results file it writes records ``"suite"``, and the report
(:mod:`protoembed.report`) draws each suite's section of the page (ConPVP Tables 3-6, Fig. 7) and its
protocol line from the declaration alone.

A declaration imports no torch, scikit-learn or scipy: the suite modules import those inside the
functions that compute, so ``protoembed --help`` stays fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: How a report cell spreads over a model's runs (the end of most protocol lines).
OVER_SEEDS = "mean ± std over a model's runs (seeds)"


def no_options(parser: argparse.ArgumentParser) -> None:
    """A suite without options of its own beyond those every suite has."""


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
class Suite:
    """One benchmark suite: its command line, its evaluation and its place on the report page.

    Command line (``protoembed eval <name>``): ``help`` (one line in ``eval --help``), ``description``,
    ``tasks`` (canonical names, the papers' column order; ``--tasks`` accepts ``display_names`` too),
    ``all_by_default`` (``--tasks`` defaults to every task, else to ``None`` and ``evaluate`` decides),
    ``tasks_help`` (``None``: "tasks to run (default: all of ...)"), ``add_options(parser)`` (the suite's
    own options), ``output_files`` (``(flag, metavar, help)`` of each further file the suite can write,
    checked writable when the command line is parsed, default ``None``).

    Evaluation: ``evaluate(args, encode) -> result`` with ``encode(sentences) -> array``, the parsed
    options, and the result without the model's description (the command adds it and ``"suite"``);
    ``format_table(result) -> str`` (printed); ``write_files(args, result) -> [paths]`` (anything
    written beside the JSON, such as few-shot's violin plot).

    Report: ``page_order`` (its section's rank on the page: the paper's table order), ``title`` (the
    section heading), ``tables`` (``(caption or None, metric)`` per table of the section), ``ablation_title``
    (with one, the ``--ablation`` labels get a second section in this layout, ConPVP Table 4),
    ``pooled`` (the per-run list of draws that a cell pools over every run instead of averaging each
    run's ``metric``: few-shot's ``seeds_acc``), ``summary`` (``(metric, heading)`` per column of the
    summary table), ``protocol(data) -> record`` (equal records may share a table) and
    ``protocol_line(record) -> str`` (the line under the heading), ``figure`` (``draw(models, png) ->
    record`` with ``models = [(label, [result, ...])]``, and its ``figure_caption``: (number, caption)).
    """

    name: str
    help: str
    description: str
    tasks: tuple[str, ...]
    evaluate: Callable[[argparse.Namespace, Callable[[list[str]], Any]], dict[str, Any]]
    format_table: Callable[[dict[str, Any]], str]
    page_order: int
    title: str
    protocol_line: Callable[[dict[str, Any]], str]
    summary: tuple[tuple[str, str], ...]
    display_names: Mapping[str, str] = field(default_factory=dict)
    all_by_default: bool = True
    tasks_help: str | None = None
    add_options: Callable[[argparse.ArgumentParser], None] = no_options
    output_files: tuple[tuple[str, str, str], ...] = ()
    write_files: Callable[[argparse.Namespace, dict[str, Any]], list[Path]] = no_files
    tables: tuple[tuple[str | None, str], ...] = ((None, "acc"),)
    ablation_title: str | None = None
    pooled: str | None = None
    protocol: Callable[[dict[str, Any]], dict[str, Any]] = result_protocol
    figure: Callable[[Sequence[tuple[str, Sequence[dict[str, Any]]]], Path], dict[str, Any]] | None = None
    figure_caption: tuple[int, str] | None = None

    def display(self, task: str) -> str:
        """The name the papers' tables print for ``task`` (``SST2`` -> ``SST``), else ``task``."""
        return self.display_names.get(task, task)
