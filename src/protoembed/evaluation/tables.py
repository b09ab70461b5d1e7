"""Markdown pieces shared by the evaluation suites' tables."""

from __future__ import annotations

import math
from collections.abc import Sequence


def fmt(value: float | None) -> str:
    """A score with 2 decimals; ``n/a`` for a missing or NaN one."""
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f}"


def papers_row(
    caption: str, names: Sequence[str], values: Sequence[float | None], avg: float | None
) -> list[str]:
    """The papers' one-row layout: a caption, then a table with a column per task and ``Avg.``."""
    return [
        "",
        caption,
        "",
        "| " + " | ".join([*names, "Avg."]) + " |",
        "|" + "---:|" * (len(names) + 1),
        "| " + " | ".join([fmt(v) for v in values] + [fmt(avg)]) + " |",
    ]
