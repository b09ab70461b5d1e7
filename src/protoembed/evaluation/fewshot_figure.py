"""Fig. 7 of the ConPVP paper: few-shot accuracy as violins, the models side by side within each task.

Input: few-shot results JSON (``protoembed eval fewshot --output``), grouped by model; the seeds of one
model (several results files with the same label) are pooled, so a model's violin shows every
(training seed, few-shot draw) accuracy. Output: a PNG and, returned, a JSON-ready dict of what it drew.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from protoembed.core.errors import ProtoembedError
from protoembed.evaluation.analysis import model_colour
from protoembed.evaluation.tasks import table_names
from protoembed.outputs.io import pyplot, save_figure


def fewshot_values(results: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """Task -> every seed's accuracy of every result (in order), for the tasks of the first result."""
    tasks = list(results[0]["tasks"])
    return {t: [float(v) for r in results for v in r["tasks"][t]["seeds_acc"]] for t in tasks}


def plot_fewshot_comparison(
    models: Sequence[tuple[str, Sequence[dict[str, Any]]]], figure: str | os.PathLike[str]
) -> dict[str, Any]:
    """Draw Fig. 7 for ``models`` = ``[(label, [few-shot result, ...])]`` (one result per training seed).

    Every model must have every task of the first model. Out: ``{"figure", "tasks", "protocol", "models":
    [{"label", "runs", "values": {task: [accuracy x100, ...]}}]}``.
    """
    if not models or any(not results for _, results in models):
        raise ProtoembedError("the few-shot figure needs at least one results file per model")
    entries = [{"label": label, "runs": len(res), "values": fewshot_values(res)} for label, res in models]
    tasks = list(entries[0]["values"])
    for entry in entries[1:]:
        missing = [t for t in tasks if t not in entry["values"]]
        if missing:
            raise ProtoembedError(f"model {entry['label']!r} has no few-shot result for {', '.join(missing)}")
        entry["values"] = {t: entry["values"][t] for t in tasks}

    plt = pyplot()
    width = 0.8 / len(entries)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(tasks) * len(entries) + 2.5), 4.3))
    base = np.arange(1, len(tasks) + 1, dtype=np.float64)
    for m, entry in enumerate(entries):
        positions = base + (m - (len(entries) - 1) / 2) * width
        values = [entry["values"][t] for t in tasks]
        colour = model_colour(m)
        if all(len(v) > 1 for v in values):
            parts = ax.violinplot(values, positions=positions, widths=width * 0.95, showmeans=True)
            for body in parts["bodies"]:
                body.set_facecolor(colour)
                body.set_alpha(0.35)
            for key in ("cmeans", "cmins", "cmaxes", "cbars"):
                parts[key].set_color(colour)
        for x, v in zip(positions, values):
            ax.scatter(np.full(len(v), x), v, s=6, color=colour, zorder=3)
        ax.scatter([], [], color=colour, label=entry["label"])
    ax.set_xticks(base, table_names(tasks))
    protocol = models[0][1][0].get("protocol", {})
    ax.set_ylabel("accuracy x100")
    ax.set_title(
        f"Few-shot: {protocol.get('shots_per_class', '?')} per class, {protocol.get('seeds', '?')} draws",
        fontsize=10,
    )
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    target = save_figure(fig, figure)
    return {"figure": str(target), "tasks": tasks, "protocol": protocol, "models": entries}
