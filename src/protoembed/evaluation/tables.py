"""Markdown tables of the evaluation results: the one code path behind every suite's table and the report.

- :func:`markdown_table`: header, alignment rule and rows.
- :func:`papers_table`: the papers' layout, a column per task and ``Avg.``, a row per model (ConPVP Tables
  3-6); with one unlabelled row it is :func:`papers_row`, the layout every ``protoembed eval`` table ends
  with.
- :func:`table_head`: the title line of a suite's detailed one-model table.
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


def table_head(title: str, result: dict[str, Any], columns: Sequence[str], aligns: str) -> list[str]:
    """A table's first lines: ``title (..., model M, head H (template T), scorer S)``, a blank line, the
    header and the rule.

    ``title`` ends without its closing parenthesis; ``aligns`` has one character per column
    (``l`` or ``r``). The model, its head (and template) and the scorer come from ``result`` (``model``,
    ``head``, ``template``, ``scorer``), each where present, so two tables of one model with different
    heads or scorers never look alike.
    """
    parts = [f"model {result['model']}"] if result.get("model") else []
    if result.get("head"):
        template = f" (template {result['template']})" if result.get("template") else ""
        parts.append(f"head {result['head']}{template}")
    if result.get("scorer"):
        parts.append(f"scorer {result['scorer']}")
    return [title + "".join(f", {p}" for p in parts) + ")", "", *markdown_table(columns, [], aligns)]
