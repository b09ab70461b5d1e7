"""The report page: the ConPVP paper's tables for any number of models, from their results JSON.

Sections (each present when some input has its suite): STS (Table 3), the ablation (Table 4: the STS
layout for the ``ablation`` labels), transfer (Table 5), clustering (Table 6, accuracy, then NMI),
few-shot (Fig. 7 and its table), the figures of the analysis JSON given, and the inputs. Each table states
its protocol in one line, taken from the results' own protocol record. Results of one suite computed by
different runtimes or precisions get a section each (:func:`protoembed.report.results.by_table`), its
heading naming its protocol record (``STS (ConPVP Table 3): variant senteval, split test, runtime onnx,
precision int8``); the summary a column each, named the same way. A cell is the mean over a model's
runs (its seeds) of the run's number, ``± std`` (sample) when the model has more than one run; ``Avg.``
is the same over each run's mean over the table's tasks. Few-shot cells pool every draw of every run (what
the violins show). Each suite's section (title, tables, protocol line, summary columns, figure) comes
from its :class:`~protoembed.evaluation.suite.ReportLayout`, each column's name from its task's entry
(:func:`protoembed.evaluation.tasks.table_name`); tables are drawn by
:mod:`protoembed.evaluation.tables`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from protoembed.core.errors import ProtoembedError
from protoembed.evaluation.suite import SUITES as DECLARED
from protoembed.evaluation.suite import Suite
from protoembed.evaluation.tables import fmt, fmt_spread, markdown_table, papers_table
from protoembed.evaluation.tasks import table_names
from protoembed.outputs.io import check_writable, write_atomic, write_json_atomic
from protoembed.report.results import Result, Table, by_table

#: Analysis (or suite, for the figure the report draws of it) -> the paper's figure number and caption.
FIGURES = {
    "similarity": (4, "predicted cosine (scaled to [0, 1]) against gold, STS-B test"),
    "frequent-tokens": (5, "STS average with the k most frequent tokens left out of pooling"),
    "tsne": (6, "t-SNE of STS-B test pairs with gold 0 (orange), 3 (blue), 5 (green)"),
    **{s.name: s.report.figure_caption for s in DECLARED.values() if s.report.figure_caption is not None},
}
Groups = dict[str, list[Result]]


def _spread(values: Sequence[float]) -> tuple[float, float | None]:
    mean = float(np.mean(values))
    return mean, (float(np.std(values, ddof=1)) if len(values) > 1 else None)


def _tasks(groups: Groups) -> list[str]:
    return list(dict.fromkeys(t for runs in groups.values() for r in runs for t in r.data["tasks"]))


def seed_table(groups: Groups, metric: str, label: str = "Model") -> list[str]:
    """The papers' layout with a row per label: ``metric`` of each task and the runs' average,
    mean ± std over the label's runs; ``n/a`` where a run lacks the task."""
    tasks = _tasks(groups)
    rows = []
    for name, runs in groups.items():
        per_run = _per_run(runs, tasks, metric)
        cells = []
        for j in range(len(tasks)):
            column = [row[j] for row in per_run]
            cells.append(fmt(None) if None in column else fmt_spread(*_spread(column)))
        rows.append((name, cells, _average_cell(per_run)))
    return papers_table(table_names(tasks), rows, label)


def _per_run(runs: list[Result], tasks: list[str], metric: str) -> list[list[float | None]]:
    """``metric`` of each task (``None`` where missing), one row per run."""
    return [[r.data["tasks"].get(t, {}).get(metric) for t in tasks] for r in runs]


def _average_cell(per_run: list[list[float | None]]) -> str:
    """The ``Avg.`` cell: mean ± std over runs of each run's mean over the tasks; ``n/a`` if one is missing."""
    complete = all(v is not None for row in per_run for v in row)
    return fmt_spread(*_spread([float(np.mean(row)) for row in per_run])) if complete else fmt(None)


def _pooled_draws(runs: list[Result], tasks: list[str], key: str) -> list[list[float]]:
    """Every draw (``key``: few-shot's ``seeds_acc``) of every run, per task."""
    return [[v for r in runs for v in r.data["tasks"].get(t, {}).get(key, [])] for t in tasks]


def _pooled_average(pooled: list[list[float]]) -> str:
    return fmt(float(np.mean([np.mean(v) for v in pooled]))) if all(pooled) else fmt(None)


def pooled_table(groups: Groups, key: str) -> list[str]:
    """Per task, mean ± std of every draw (``key``) of every run of the label; ``Avg.``: mean of those
    (few-shot, ConPVP Fig. 7)."""
    tasks = _tasks(groups)
    rows = []
    for name, runs in groups.items():
        pooled = _pooled_draws(runs, tasks, key)
        cells = [fmt_spread(*_spread(v)) if v else fmt(None) for v in pooled]
        rows.append((name, cells, _pooled_average(pooled)))
    return papers_table(table_names(tasks), rows)


#: A summary cell of a model without results of that suite (``n/a`` stays for a suite missing a task).
NOT_RUN = "–"


def protocol_heading(record: dict[str, object]) -> str:
    """A protocol record as a heading's words: ``variant senteval, split test, runtime onnx, precision
    int8`` (``runtime not recorded`` for a ``None``; per-task records, such as C grids, left out)."""
    return ", ".join(
        f"{key} not recorded" if value is None else f"{key} {value}"
        for key, value in record.items()
        if not isinstance(value, dict | list)
    )


def _headed(title: str, table: Table, tables: Sequence[Table]) -> str:
    """``title``, followed by the table's protocol when its suite has more than one table."""
    alone = sum(t.suite == table.suite for t in tables) == 1
    return title if alone else f"{title}: {protocol_heading(table.protocol)}"


def summary_table(tables: Sequence[Table]) -> list[str]:
    """One row per label, one column per table (and metric of its suite's ``summary``): the ``Avg.`` cell
    of that table on the full page, computed the same way; :data:`NOT_RUN` where the label has no
    results in the table. A suite with several tables (runtimes, precisions) has a column each, its
    heading followed by the table's protocol.

    In: :func:`protoembed.report.results.by_table`'s tables. Out: the markdown table's lines.
    """
    order = {suite.name: n for n, suite in enumerate(DECLARED.values())}  # the registry's order
    columns = [
        (table, metric, _headed(heading, table, tables))
        for table in sorted(tables, key=lambda t: order[t.suite])  # stable: a suite's tables stay in order
        for metric, heading in DECLARED[table.suite].report.summary
    ]
    tasks = [_tasks(table.groups) for table, _, _ in columns]
    labels = list(dict.fromkeys(label for table in tables for label in table.groups))
    rows = []
    for label in labels:
        cells = []
        for (table, metric, _), names in zip(columns, tasks):
            runs = table.groups.get(label)
            pooled = DECLARED[table.suite].report.pooled
            if not runs:
                cells.append(NOT_RUN)
            elif pooled:
                cells.append(_pooled_average(_pooled_draws(runs, names, pooled)))
            else:
                cells.append(_average_cell(_per_run(runs, names, metric)))
        rows.append([label, *cells])
    return markdown_table(["Model", *(c[2] for c in columns)], rows, "l" + "r" * len(columns))


def suite_tables(suite: Suite, groups: Groups) -> list[str]:
    """A suite's tables on the page: one per ``(caption, metric)`` of :attr:`ReportLayout.tables` (the
    pooled layout for a suite with :attr:`ReportLayout.pooled`); columns are the tasks' table names."""
    layout = suite.report
    if layout.pooled:
        return pooled_table(groups, layout.pooled)
    lines: list[str] = []
    for caption, metric in layout.tables:
        lines += [""] if lines else []
        lines += [caption, ""] if caption else []
        lines += seed_table(groups, metric)
    return lines


def _relative(path: str | Path, base: Path) -> str:
    return Path(os.path.relpath(Path(path).resolve(), base.resolve())).as_posix()


def _figure_path(result: Result) -> Path:
    """An analysis JSON's figure: as recorded (absolute or from the working folder), else beside the JSON."""
    recorded = Path(result.data["figure"])
    return recorded if recorded.is_file() else result.path.parent / recorded.name


def _section(title: str, line: str, table: list[str]) -> list[str]:
    return [f"## {title}", "", line, "", *table, ""]


def _table_sections(
    table: Table, tables: Sequence[Table], ablation: Sequence[str], out: Path, figures: bool
) -> list[str]:
    """A table's section(s), headed by its protocol when its suite has several tables (``tables``: all
    of the page), with the protocol line of its first file: its tables (the ``ablation`` labels but the
    first left out when the suite has an ablation section, which then follows), and its figure (with
    ``figures``) drawn beside ``out`` as ``<name>-<suite>.png`` (the suite's n-th table from the second
    on: ``<name>-<suite>-<n>.png``) with its JSON."""
    suite, groups = DECLARED[table.suite], table.groups
    layout = suite.report
    line = layout.protocol_line(table.protocol)
    lines: list[str] = []
    main = {k: v for k, v in groups.items() if layout.ablation_title is None or k not in ablation[1:]}
    if main:
        lines += _section(_headed(layout.title, table, tables), line, suite_tables(suite, main))
    if layout.ablation_title is not None:
        chosen = {k: groups[k] for k in ablation if k in groups}
        if chosen:
            title = _headed(layout.ablation_title, table, tables)
            lines += _section(title, line, suite_tables(suite, chosen))
    if figures and layout.figure is not None:
        nth = [t for t in tables if t.suite == table.suite].index(table) + 1
        png = out.with_name(f"{out.stem}-{suite.name}{'' if nth == 1 else f'-{nth}'}.png")
        drawn = layout.figure([(k, [r.data for r in v]) for k, v in groups.items()], png)
        write_json_atomic(png.with_suffix(".json"), {"analysis": suite.name, **drawn})
        number, caption = FIGURES[suite.name]
        lines += [f"![Fig. {number}: {caption}]({_relative(png, out.parent)})", ""]
    return lines


def build_report(
    results: Sequence[Result],
    output: str | os.PathLike[str],
    ablation: Sequence[str] = (),
    command: str | None = None,
    figures: bool = True,
) -> str:
    """The report's markdown for ``results`` (see :func:`protoembed.report.results.load_results`), to be
    written at ``output``: links are relative to its folder, and Fig. 7 (with ``figures`` and few-shot
    results) is drawn beside it as ``<name>-fewshot.png`` with its JSON."""
    out = Path(output)
    tables = by_table(results)
    lines = ["# Results", ""]
    if command:
        lines += [f"Made by `{command}`.", ""]
    for table in tables:  # in the page's order (by_table's: the paper's)
        lines += _table_sections(table, tables, ablation, out, figures)
    analyses = [r for r in results if r.suite == "analysis"]
    if analyses:
        lines += ["## Figures", ""]
        for r in analyses:
            number, caption = FIGURES.get(r.data["analysis"], (None, r.data["analysis"]))
            models = ", ".join(m.get("label", "?") for m in r.data.get("models", [])) or r.data.get(
                "model", "?"
            )
            title = f"Fig. {number}: {caption}" if number else caption
            lines += [
                f"![{title}]({_relative(_figure_path(r), out.parent)})",
                "",
                f"{title}; models: {models}.",
                "",
            ]
    rows = []
    for table in tables:
        for label, runs in table.groups.items():
            rows.append(
                [label, table.suite, str(len(runs)), ", ".join(_relative(r.path, out.parent) for r in runs)]
            )
    lines += ["## Inputs", "", *markdown_table(["Model", "Suite", "Runs", "Files"], rows, "llrl"), ""]
    return "\n".join(lines)


def write_report(
    results: Sequence[Result],
    output: str | os.PathLike[str],
    ablation: Sequence[str] = (),
    command: str | None = None,
    figures: bool = True,
) -> Path:
    """Write :func:`build_report`'s page to ``output`` atomically (missing folders are created)."""
    return _write_markdown(
        results, output, lambda out: build_report(results, out, ablation, command, figures)
    )


def write_summary(results: Sequence[Result], output: str | os.PathLike[str]) -> Path:
    """Write :func:`summary_table` of ``results`` (a markdown table and nothing else) to ``output``
    atomically; mixed protocols fail before anything is written."""
    return _write_markdown(results, output, lambda _: "\n".join(summary_table(by_table(results))) + "\n")


def _write_markdown(
    results: Sequence[Result], output: str | os.PathLike[str], text: Callable[[Path], str]
) -> Path:
    """Check ``output`` and the results' protocols before any work, then write ``text(output)`` atomically
    (missing folders are created)."""
    out = check_writable(output)
    by_table(results)  # mixed protocols fail before anything is written
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ProtoembedError(f"cannot write {out}: {err.strerror or err}") from None
    content = text(out)
    return write_atomic(out, lambda tmp: Path(tmp).write_text(content, encoding="utf-8"))
