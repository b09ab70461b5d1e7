"""The report page: the ConPVP paper's tables for any number of models, from their results JSON.

Sections (each present when some input has its suite): STS (Table 3), the ablation (Table 4: the STS
layout for the ``ablation`` labels), transfer (Table 5), clustering (Table 6, accuracy, then NMI),
few-shot (Fig. 7 and its table), the figures of the analysis JSON given, and the inputs. Each table states
its protocol in one line, taken from the results' own protocol record. A cell is the mean over a model's
runs (its seeds) of the run's number, ``± std`` (sample) when the model has more than one run; ``Avg.``
is the same over each run's mean over the table's tasks. Few-shot cells pool every draw of every run (what
the violins show). Tables are drawn by :mod:`protoembed.evaluation.tables`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from protoembed.data.sts import SHORT_NAMES as STS_NAMES
from protoembed.errors import ProtoembedError
from protoembed.evaluation.tables import fmt, fmt_spread, markdown_table, papers_table
from protoembed.io import check_writable, write_atomic, write_json_atomic
from protoembed.report.results import Result, by_suite, protocol

TRANSFER_NAMES = {"SST2": "SST"}
#: Analysis -> the paper's figure number and caption.
FIGURES = {
    "similarity": (4, "predicted cosine (scaled to [0, 1]) against gold, STS-B test"),
    "frequent-tokens": (5, "STS average with the k most frequent tokens left out of pooling"),
    "tsne": (6, "t-SNE of STS-B test pairs with gold 0 (orange), 3 (blue), 5 (green)"),
    "fewshot": (7, "few-shot accuracy over the draws"),
}
Groups = dict[str, list[Result]]


def _spread(values: Sequence[float]) -> tuple[float, float | None]:
    mean = float(np.mean(values))
    return mean, (float(np.std(values, ddof=1)) if len(values) > 1 else None)


def _tasks(groups: Groups) -> list[str]:
    return list(dict.fromkeys(t for runs in groups.values() for r in runs for t in r.data["tasks"]))


def seed_table(groups: Groups, names: dict[str, str], metric: str, label: str = "Model") -> list[str]:
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
    return papers_table([names.get(t, t) for t in tasks], rows, label)


def _per_run(runs: list[Result], tasks: list[str], metric: str) -> list[list[float | None]]:
    """``metric`` of each task (``None`` where missing), one row per run."""
    return [[r.data["tasks"].get(t, {}).get(metric) for t in tasks] for r in runs]


def _average_cell(per_run: list[list[float | None]]) -> str:
    """The ``Avg.`` cell: mean ± std over runs of each run's mean over the tasks; ``n/a`` if one is missing."""
    complete = all(v is not None for row in per_run for v in row)
    return fmt_spread(*_spread([float(np.mean(row)) for row in per_run])) if complete else fmt(None)


def _pooled_draws(runs: list[Result], tasks: list[str]) -> list[list[float]]:
    """Few-shot: every draw's accuracy of every run, per task."""
    return [[v for r in runs for v in r.data["tasks"].get(t, {}).get("seeds_acc", [])] for t in tasks]


def _fewshot_average(pooled: list[list[float]]) -> str:
    return fmt(float(np.mean([np.mean(v) for v in pooled]))) if all(pooled) else fmt(None)


def fewshot_table(groups: Groups) -> list[str]:
    """Few-shot: per task, mean ± std of every draw of every run of the label; ``Avg.``: mean of those."""
    tasks = _tasks(groups)
    rows = []
    for name, runs in groups.items():
        pooled = _pooled_draws(runs, tasks)
        cells = [fmt_spread(*_spread(v)) if v else fmt(None) for v in pooled]
        rows.append((name, cells, _fewshot_average(pooled)))
    return papers_table([TRANSFER_NAMES.get(t, t) for t in tasks], rows)


#: A summary cell of a model without results of that suite (``n/a`` stays for a suite missing a task).
NOT_RUN = "–"
#: The summary's columns: (suite, metric, heading), in the page's section order.
SUMMARY_COLUMNS = (
    ("sts", "spearman", "STS (Table 3)"),
    ("transfer", "acc", "Transfer (Table 5)"),
    ("fewshot", "acc", "Few-shot (Fig. 7)"),
    ("clustering", "acc", "Clustering acc. (Table 6)"),
    ("clustering", "nmi", "Clustering NMI (Table 6)"),
)


def summary_table(grouped: dict[str, Groups]) -> list[str]:
    """One row per label, one column per suite (and metric) present: the ``Avg.`` cell of that suite's
    table on the full page, computed the same way; :data:`NOT_RUN` where the label has no results of the suite.

    In: :func:`protoembed.report.results.by_suite`'s grouping. Out: the markdown table's lines.
    """
    columns = [c for c in SUMMARY_COLUMNS if c[0] in grouped]
    tasks = {suite: _tasks(groups) for suite, groups in grouped.items()}
    labels = list(dict.fromkeys(label for groups in grouped.values() for label in groups))
    rows = []
    for label in labels:
        cells = []
        for suite, metric, _ in columns:
            runs = grouped[suite].get(label)
            if not runs:
                cells.append(NOT_RUN)
            elif suite == "fewshot":
                cells.append(_fewshot_average(_pooled_draws(runs, tasks[suite])))
            else:
                cells.append(_average_cell(_per_run(runs, tasks[suite], metric)))
        rows.append([label, *cells])
    return markdown_table(["Model", *(c[2] for c in columns)], rows, "l" + "r" * len(columns))


def _extra(p: dict[str, Any], known: Sequence[str]) -> str:
    rest = [f"{k} {v}" for k, v in p.items() if k not in known]
    return f"; {', '.join(rest)}" if rest else ""


def _grids(grid: Any) -> str:
    """``0.25..8`` for one grid; ``0.25..8 (MR, CR), 0.5..32 (TREC)`` for per-task grids."""
    if not grid:
        return "?"
    if not isinstance(grid, dict):
        return f"{min(grid):g}..{max(grid):g}"
    by_grid: dict[str, list[str]] = {}
    for task, values in grid.items():
        by_grid.setdefault(_grids(values), []).append(TRANSFER_NAMES.get(task, task))
    return ", ".join(f"{g} ({', '.join(tasks)})" for g, tasks in by_grid.items())


def protocol_line(suite: str, p: dict[str, Any]) -> str:
    """One line saying how the numbers of a suite's table were obtained (from the results' protocol)."""
    seeds = "mean ± std over a model's runs (seeds)"
    if suite == "sts":
        return (
            f"Protocol: Spearman x100 of the cosine against gold, {p.get('variant')} data, {p.get('split')} "
            f"split (STS12-16: all subsets of a year pooled); {seeds}."
        )
    if suite == "transfer":
        return (
            "Protocol: SentEval logistic regression on frozen embeddings; MR, CR, SUBJ, MPQA by "
            f"{p.get('folds', '?')}-fold CV with C chosen by inner {p.get('inner_folds', '?')}-fold CV, "
            f"SST-2 with C chosen on dev, TREC and MRPC by inner CV on train; seed {p.get('seed', '?')}"
            f"; C from {_grids(p.get('C_grid'))}{_extra(p, ('folds', 'inner_folds', 'seed', 'C_grid'))}; "
            f"accuracy x100, {seeds}."
        )
    if suite == "clustering":
        return (
            f"Protocol: {p.get('algorithm', 'k-means')}, {p.get('runs', '?')} runs; accuracy after the best "
            f"one-to-one cluster-class matching (Hungarian) and NMI, each averaged over the runs, x100"
            f"{_extra(p, ('algorithm', 'runs'))}; {seeds}."
        )
    return (
        f"Protocol: logistic regression (C = {p.get('C', '?')}) on {p.get('shots_per_class', '?')} examples "
        f"per class, {p.get('seeds', '?')} draws; accuracy x100 on the test split or the undrawn examples"
        f"{_extra(p, ('C', 'shots_per_class', 'seeds'))}; mean ± std over every draw of every run of a model "
        "(the violins); Avg. = mean of the task means."
    )


def _relative(path: str | Path, base: Path) -> str:
    return Path(os.path.relpath(Path(path).resolve(), base.resolve())).as_posix()


def _figure_path(result: Result) -> Path:
    """An analysis JSON's figure: as recorded (absolute or from the working folder), else beside the JSON."""
    recorded = Path(result.data["figure"])
    return recorded if recorded.is_file() else result.path.parent / recorded.name


def _section(title: str, line: str, table: list[str]) -> list[str]:
    return [f"## {title}", "", line, "", *table, ""]


def _tables(grouped: dict[str, Groups], ablation: Sequence[str]) -> list[str]:
    lines: list[str] = []
    if "sts" in grouped:
        sts, line = grouped["sts"], protocol_line("sts", protocol(next(iter(grouped["sts"].values()))[0]))
        main = {k: v for k, v in sts.items() if k not in ablation[1:]}
        if main:
            lines += _section("STS (ConPVP Table 3)", line, seed_table(main, STS_NAMES, "spearman"))
        chosen = {k: sts[k] for k in ablation if k in sts}
        if chosen:
            lines += _section("Ablation (ConPVP Table 4)", line, seed_table(chosen, STS_NAMES, "spearman"))
    specs: list[tuple[str, str, Callable[[Groups], list[str]]]] = [
        ("transfer", "Transfer (ConPVP Table 5)", lambda g: seed_table(g, TRANSFER_NAMES, "acc")),
        (
            "clustering",
            "Clustering (ConPVP Table 6)",
            lambda g: ["Accuracy:", "", *seed_table(g, {}, "acc"), "", "NMI:", "", *seed_table(g, {}, "nmi")],
        ),
    ]
    for suite, title, draw in specs:
        if suite in grouped:
            first = next(iter(grouped[suite].values()))[0]
            lines += _section(title, protocol_line(suite, protocol(first)), draw(grouped[suite]))
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
    grouped = by_suite(results)
    lines = ["# Results", ""]
    if command:
        lines += [f"Made by `{command}`.", ""]
    lines += _tables(grouped, ablation)
    if "fewshot" in grouped:
        few = grouped["fewshot"]
        first = next(iter(few.values()))[0]
        lines += _section(
            "Few-shot (ConPVP Fig. 7)", protocol_line("fewshot", protocol(first)), fewshot_table(few)
        )
        if figures:
            from protoembed.evaluation.fewshot_figure import plot_fewshot_comparison

            png = out.with_name(f"{out.stem}-fewshot.png")
            drawn = plot_fewshot_comparison([(k, [r.data for r in v]) for k, v in few.items()], png)
            write_json_atomic(png.with_suffix(".json"), {"analysis": "fewshot", **drawn})
            lines += [f"![Fig. 7: {FIGURES['fewshot'][1]}]({_relative(png, out.parent)})", ""]
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
    for suite, groups in grouped.items():
        for label, runs in groups.items():
            rows.append(
                [label, suite, str(len(runs)), ", ".join(_relative(r.path, out.parent) for r in runs)]
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
    return _write_markdown(results, output, lambda _: "\n".join(summary_table(by_suite(results))) + "\n")


def _write_markdown(
    results: Sequence[Result], output: str | os.PathLike[str], text: Callable[[Path], str]
) -> Path:
    """Check ``output`` and the results' protocols before any work, then write ``text(output)`` atomically
    (missing folders are created)."""
    out = check_writable(output)
    by_suite(results)  # mixed protocols fail before anything is written
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ProtoembedError(f"cannot write {out}: {err.strerror or err}") from None
    content = text(out)
    return write_atomic(out, lambda tmp: Path(tmp).write_text(content, encoding="utf-8"))
