"""Pieces shared by the evaluation suites: markdown table parts and the per-task loop with progress."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

Data = TypeVar("Data")


def fmt(value: float | None) -> str:
    """A score with 2 decimals; ``n/a`` for a missing or NaN one."""
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f}"


def table_head(title: str, result: dict[str, Any], columns: Sequence[str], aligns: str) -> list[str]:
    """A table's first lines: ``title (..., model M)``, a blank line, the header and the rule.

    ``title`` ends without its closing parenthesis; ``aligns`` has one character per column
    (``l`` or ``r``).
    """
    model = f", model {result['model']})" if result.get("model") else ")"
    rule = "|" + "".join("---|" if a == "l" else "---:|" for a in aligns)
    return [title + model, "", "| " + " | ".join(columns) + " |", rule]


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


def run_tasks(
    suite: str,
    datasets: Sequence[Data],
    evaluate: Callable[[Data], dict[str, Any]],
    describe: Callable[[dict[str, Any]], str],
    progress: bool = False,
) -> dict[str, dict[str, Any]]:
    """``{data.name: evaluate(data)}`` in order; with ``progress``, one stderr line per finished task:
    ``<suite>: <name>: <describe(result)> (<seconds> s)``."""
    results: dict[str, dict[str, Any]] = {}
    for data in datasets:
        started = time.monotonic()
        name = data.name  # type: ignore[attr-defined]
        results[name] = evaluate(data)
        if progress:
            seconds = time.monotonic() - started
            print(
                f"{suite}: {name}: {describe(results[name])} ({seconds:.0f} s)", file=sys.stderr, flush=True
            )
    return results
