"""The unsupervised CPU study's figure: each method's STS average over seeds, and its per-task change.

In: per method, the STS results of its finished seeds (the ``results.json`` format of ``protoembed train``
and ``protoembed eval sts``), and the untrained model's. Out: one PNG (written atomically) with two panels:

- left: the average over the tasks per method, one dot per seed, a diamond at the mean with a ± sample
  standard deviation whisker, and a dashed line at the untrained model;
- right: mean Spearman (x100) minus the untrained model's, per method and task (a diverging heat map,
  the value printed in each cell).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from experiments.records import pyplot, save_figure


def plot_study(
    path: Path,
    results: dict[str, list[dict[str, Any]]],
    tasks: list[str],
    untrained: dict[str, Any] | None = None,
    short: Callable[[str], str] = str,
) -> Path | None:
    """Draw the study figure to ``path``; returns it, or ``None`` when no method has a finished run.

    Args:
        path: the PNG to write (its folder must exist).
        results: method label -> the results dicts of its finished seeds (keys ``avg`` and
            ``tasks[task]["spearman"]``).
        tasks: the task names, in column order.
        untrained: the untrained model's results dict, if evaluated.
        short: a task's display name (e.g. ``STSBenchmark`` -> ``STS-B``; default: the name itself).
    """
    plt = pyplot()

    methods = [m for m, runs in results.items() if runs]
    if not methods:
        return None
    averages = [np.array([r["avg"] for r in results[m]], dtype=float) for m in methods]
    y = np.arange(len(methods))[::-1]
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(13, 0.55 * len(methods) + 2.2), gridspec_kw={"width_ratios": [1, 1.5]}
    )
    means = np.array([a.mean() for a in averages])
    stds = np.array([a.std(ddof=1) if len(a) > 1 else 0.0 for a in averages])
    for row, values in zip(y, averages):
        left.scatter(values, np.full(len(values), row), color="#6baed6", s=16, zorder=2)
    left.errorbar(means, y, xerr=stds, fmt="D", color="#08519c", capsize=3, markersize=6, label="mean ± std")
    if untrained is not None:
        left.axvline(untrained["avg"], color="#444444", linestyle="--", linewidth=1, label="untrained")
    left.legend(fontsize=8, loc="lower left")
    left.grid(axis="x", alpha=0.3)
    low = min(float(np.min(np.concatenate(averages))), untrained["avg"] if untrained else np.inf)
    high = max(float(np.max(np.concatenate(averages))), untrained["avg"] if untrained else -np.inf)
    left.set_xlim(low - 1.5, high + 1.0)
    left.set_yticks(y, [f"{m} ({len(results[m])})" for m in methods], fontsize=8)
    left.set_ylim(-0.6, len(methods) - 0.4)
    left.set_xlabel("STS avg, Spearman x100 (dots: seeds)")

    if untrained is not None:
        base = np.array([untrained["tasks"][t]["spearman"] for t in tasks], dtype=float)
        title = "mean change from the untrained model"
    else:
        base = np.zeros(len(tasks))
        title = "mean Spearman x100"
    cells = np.array(
        [[np.mean([r["tasks"][t]["spearman"] for r in results[m]]) for t in tasks] for m in methods]
    )
    delta = cells - base
    bound = max(float(np.abs(delta).max()), 1e-6) if untrained is not None else None
    image = right.imshow(
        delta,
        cmap="RdBu" if untrained is not None else "viridis",
        vmin=-bound if bound else None,
        vmax=bound,
        aspect="auto",
    )
    for i in range(len(methods)):
        for j in range(len(tasks)):
            right.text(
                j,
                i,
                f"{delta[i, j]:+.1f}" if untrained else f"{delta[i, j]:.1f}",
                ha="center",
                va="center",
                fontsize=7,
            )
    right.set_xticks(range(len(tasks)), [short(t) for t in tasks], fontsize=8)
    right.set_yticks(range(len(methods)), [""] * len(methods))
    right.set_title(title, fontsize=9)
    fig.colorbar(image, ax=right, fraction=0.03)
    fig.tight_layout()
    return save_figure(fig, path)
