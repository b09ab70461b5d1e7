"""Markdown tables of the evaluation results: the one code path behind every suite's table and the report.

- :func:`markdown_table`: header, alignment rule and rows.
- :func:`papers_table`: the papers' layout, a column per task and ``Avg.``, a row per model (ConPVP Tables
  3-6); with one unlabelled row it is :func:`papers_row`, the layout every ``protoembed eval`` table ends
  with.
- :func:`dims_table`: a row per vector width (``protoembed eval --dims``), the papers' columns.
- :func:`table_head`: the title line of a suite's detailed one-model table.
- :func:`encoded_by`: what computed the vectors (runtime and precision), in titles and protocol lines.
- :func:`fmt`, :func:`fmt_spread`: numbers with 2 decimals (``mean ± std``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def fmt(value: float | None) -> str:
    """A score with 2 decimals; ``n/a`` for a missing or NaN one."""
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f}"


def fmt_spread(mean: float | None, std: float | None = None) -> str:
    """``mean ± std`` with 2 decimals each, or just the mean when ``std`` is ``None``."""
    return fmt(mean) if std is None else f"{fmt(mean)} ± {fmt(std)}"


def markdown_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], aligns: str | None = None
) -> list[str]:
    """Lines of a markdown table. ``aligns``: one ``l`` or ``r`` per column (default: all ``r``)."""
    aligns = aligns or "r" * len(header)
    if len(aligns) != len(header) or any(len(row) != len(header) for row in rows):
        raise ValueError(f"a table of {len(header)} columns got aligns {aligns!r} or a row of another width")
    rule = "|" + "".join("---|" if a == "l" else "---:|" for a in aligns)
    return ["| " + " | ".join(header) + " |", rule, *("| " + " | ".join(row) + " |" for row in rows)]


def papers_table(
    names: Sequence[str], rows: Sequence[tuple[str | None, Sequence[str], str]], label: str = "Model"
) -> list[str]:
    """The papers' layout: columns ``names`` then ``Avg.``; each row ``(model label, cells, avg cell)``.

    Rows whose label is ``None`` have no label column (the one-model layout of :func:`papers_row`).
    """
    labelled = any(r[0] is not None for r in rows)
    header = [label] * labelled + [*names, "Avg."]
    body = [[r[0] or ""] * labelled + [*r[1], r[2]] for r in rows]
    return markdown_table(header, body, "l" * labelled + "r" * (len(names) + 1))


def papers_row(
    caption: str, names: Sequence[str], values: Sequence[float | None], avg: float | None
) -> list[str]:
    """A caption, then the papers' layout for one model: a column per task and ``Avg.``."""
    return ["", caption, "", *papers_table(names, [(None, [fmt(v) for v in values], fmt(avg))])]


def dims_table(
    caption: str, names: Sequence[str], rows: Sequence[tuple[int, Sequence[float | None], float | None]]
) -> list[str]:
    """A caption, then the papers' layout with a row per vector width: ``rows`` of ``(dimensions, the
    tasks' main scores, their average)``, widest first as given."""
    body = [(str(dim), [fmt(v) for v in values], fmt(avg)) for dim, values, avg in rows]
    return ["", caption, "", *papers_table(names, body, label="Dims")]


def encoded_by(p: dict[str, Any]) -> str:
    """What a protocol record says computed the vectors: ``encoded by onnx in int8``, or what of it was
    not recorded (never a default)."""
    from protoembed.evaluation.suite import ENCODING

    runtime, precision = (p.get(key) for key in ENCODING)
    if runtime is None and precision is None:
        return "runtime/precision not recorded"
    if runtime is None:
        return f"runtime not recorded, in {precision}"
    return f"encoded by {runtime}" + (
        " (precision not recorded)" if precision is None else f" in {precision}"
    )


def table_head(title: str, result: dict[str, Any], columns: Sequence[str], aligns: str) -> list[str]:
    """A table's first lines: ``title (..., model M, head H (template T), scorer S, encoded by R in P)``,
    a blank line, the header and the rule.

    ``title`` ends without its closing parenthesis; ``aligns`` has one character per column
    (``l`` or ``r``). The model, its head (and template) and the scorer come from ``result`` (``model``,
    ``head``, ``template``, ``scorer``; the runtime and precision: :func:`encoded_by`), each where present,
    so two tables of one model with different heads, scorers, runtimes or precisions never look alike.
    """
    parts = [f"model {result['model']}"] if result.get("model") else []
    if result.get("head"):
        template = f" (template {result['template']})" if result.get("template") else ""
        parts.append(f"head {result['head']}{template}")
    if result.get("scorer"):
        parts.append(f"scorer {result['scorer']}")
    if result.get("runtime") or result.get("precision"):
        parts.append(encoded_by(result))
    return [title + "".join(f", {p}" for p in parts) + ")", "", *markdown_table(columns, [], aligns)]
