"""Few-shot transfer: logistic regression on K labelled examples per class, over several seeds.

Protocol (16 examples per class, 10 seeds, the distribution over seeds reported), on the
SentEval transfer tasks (:mod:`protoembed.data.benchmarks.transfer`):

- for seed s in 0..seeds-1, draw ``shots`` examples of every class without replacement
  (``numpy.random.default_rng(s)``) from the training pool: the ``train`` split (SST-2, TREC, MRPC) or,
  for the tasks without splits (MR, CR, SUBJ, MPQA), the whole set;
- fit scikit-learn's logistic regression with a fixed inverse regularisation ``C`` (default 1.0: with
  16 examples per class there is no data to spare for choosing it) on the frozen embeddings;
- score accuracy x100 on the ``test`` split, or on every example not drawn for tasks without splits.
  MRPC's features are SentEval's ``[|u-v|, u*v]``, as in the full transfer suite.

Only the sentences that some seed draws, plus the test sentences, are encoded (once each).
Out per task: the accuracy of every seed, mean, sample std, min and max; :func:`plot_fewshot` draws the
distribution (a violin per task).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from protoembed.core.errors import ProtoembedError
from protoembed.core.pydantic_util import Flag, check_options
from protoembed.data.benchmarks.transfer import TransferData
from protoembed.evaluation.shared import (
    Encode,
    evaluate_tasks,
    fmt,
    papers_row,
    sentence_embeddings,
    table_head,
)
from protoembed.evaluation.suite import (
    CommandLine,
    Inputs,
    ReportLayout,
    Suite,
    SuiteOptions,
    extra_protocol,
)
from protoembed.evaluation.tasks import Task, get_tasks, table_names
from protoembed.evaluation.transfer import features
from protoembed.outputs.io import pyplot, save_figure


class FewshotOptions(SuiteOptions):
    """The ``fewshot`` suite's options."""

    shots: int = Field(16, ge=1, description="labelled examples per class")
    seeds: int = Field(10, ge=1, description="draws (seeds 0..seeds-1)")
    c: Annotated[float, Flag("--C")] = Field(1.0, gt=0, description="inverse L2 strength of the classifier")


#: The options' defaults (the functions below default to them).
DEFAULT = FewshotOptions()


def draw_shots(labels: np.ndarray, shots: int, seed: int) -> np.ndarray:
    """Indices of ``shots`` examples of every class (sorted), drawn without replacement with ``seed``."""
    rng = np.random.default_rng(seed)
    picked = []
    for label in np.unique(labels):
        pool = np.flatnonzero(labels == label)
        if len(pool) < shots:
            raise ProtoembedError(f"class {label} has {len(pool)} examples, fewer than --shots {shots}")
        picked.append(rng.choice(pool, size=shots, replace=False))
    return np.sort(np.concatenate(picked))


def evaluate_task(
    encode: Encode,
    data: TransferData,
    shots: int = DEFAULT.shots,
    seeds: int = DEFAULT.seeds,
    c: float = DEFAULT.c,
) -> dict[str, Any]:
    """One task: every seed's accuracy x100 and their summary (see the module docstring)."""
    from sklearn.linear_model import LogisticRegression

    pool = "all" if "all" in data.splits else "train"
    labels = data.splits[pool].labels
    draws = [draw_shots(labels, shots, seed) for seed in range(seeds)]
    needed = sorted(set(np.concatenate(draws).tolist())) if pool == "train" else list(range(len(labels)))
    sub = data.splits[pool].subset(needed)
    local = {row: i for i, row in enumerate(needed)}
    parts = {pool: sub} | ({"test": data.splits["test"]} if pool == "train" else {})
    view = TransferData(data.name, data.classes, parts)
    embeddings, index = sentence_embeddings(encode, [s for p in parts.values() for s in p.sentences()])
    x_pool = features(view, pool, embeddings, index)
    if pool == "train":  # one fixed test split for every seed
        x_test, y_test = features(view, "test", embeddings, index), data.splits["test"].labels
    accuracies = []
    for rows in draws:
        train = np.array([local[r] for r in rows])
        model = LogisticRegression(C=c, max_iter=1000, random_state=0).fit(x_pool[train], sub.labels[train])
        if pool == "all":  # the examples this seed did not draw
            rest = np.setdiff1d(np.arange(len(labels)), rows)
            x_test, y_test = x_pool[rest], labels[rest]
        accuracies.append(float(np.mean(model.predict(x_test) == y_test)) * 100)
    values = np.array(accuracies)
    return {
        "acc": float(values.mean()),
        "acc_std": float(values.std(ddof=1)) if seeds > 1 else 0.0,
        "min": float(values.min()),
        "max": float(values.max()),
        "seeds_acc": accuracies,
        "classes": len(data.classes),
    }


def evaluate_fewshot(
    encode: Encode,
    data_dir: str | os.PathLike[str] | None,
    tasks: Sequence[str | Task] | None = None,
    shots: int = DEFAULT.shots,
    seeds: int = DEFAULT.seeds,
    c: float = DEFAULT.c,
    progress: bool = False,
) -> dict[str, Any]:
    """Few-shot evaluation of an encoder on SentEval transfer tasks.

    ``tasks``: the suite's tasks (``None``: its default run).
    Out: ``{"protocol", "tasks": {task: {"acc", "acc_std", "min", "max", "seeds_acc", "classes"}},
    "avg"}`` (x100; ``avg`` = mean of the per-task means). The caller adds ``"model"``.
    """
    check_options(FewshotOptions, dict(shots=shots, seeds=seeds, c=c))
    entries = {t.name: t for t in get_tasks(tasks, "fewshot")}
    return {
        "protocol": {"shots_per_class": shots, "seeds": seeds, "C": c},
        **evaluate_tasks(
            "fewshot",
            list(entries),
            lambda task: entries[task].load(data_dir),
            lambda data: evaluate_task(encode, data, shots, seeds, c),
            lambda r: f"acc {r['acc']:.2f} ± {r['acc_std']:.2f}",
            progress,
        ),
    }


def format_fewshot_table(result: dict[str, Any]) -> str:
    """Render an :func:`evaluate_fewshot` result: per task mean ± std [min, max], then the one-row layout."""
    tasks: dict[str, dict[str, Any]] = result["tasks"]
    p = result.get("protocol", {})
    title = f"Few-shot transfer ({p.get('shots_per_class', '?')} per class, {p.get('seeds', '?')} seeds; accuracy x100"
    lines = table_head(title, result, ["Task", "mean ± std", "min", "max"], "lrrr")
    for task, r in tasks.items():
        lines.append(
            f"| {task} | {fmt(r['acc'])} ± {fmt(r['acc_std'])} | {fmt(r['min'])} | {fmt(r['max'])} |"
        )
    values = [r["acc"] for r in tasks.values()]
    lines += papers_row("Mean accuracy x100 (papers' layout):", table_names(tasks), values, result["avg"])
    return "\n".join(lines) + "\n"


def plot_fewshot(result: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """A violin per task of the seeds' accuracies (dots: seeds), written atomically as PNG to ``path``."""
    plt = pyplot()

    tasks = list(result["tasks"])
    values = [result["tasks"][t]["seeds_acc"] for t in tasks]
    fig, ax = plt.subplots(figsize=(1.2 * len(tasks) + 2, 4))
    positions = np.arange(1, len(tasks) + 1)
    if all(len(v) > 1 for v in values):
        ax.violinplot(values, positions=positions, showmeans=True)
    for x, v in zip(positions, values):
        ax.scatter(np.full(len(v), x), v, s=10, color="#08519c", zorder=3)
    ax.set_xticks(positions, table_names(tasks))
    p = result.get("protocol", {})
    ax.set_ylabel("accuracy x100")
    ax.set_title(
        f"Few-shot: {p.get('shots_per_class', '?')} per class, {p.get('seeds', '?')} seeds", fontsize=10
    )
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path)


def evaluate_suite(
    inputs: Inputs, tasks: Sequence[str] | None, shots: int, seeds: int, c: float
) -> dict[str, Any]:
    """The ``fewshot`` suite: :func:`evaluate_fewshot` on ``tasks`` (``None``: the suite's default run)."""
    options = dict(shots=shots, seeds=seeds, c=c)
    return evaluate_fewshot(inputs.encode, inputs.data_dir, tasks=tasks, progress=inputs.progress, **options)


def _write_files(args: argparse.Namespace, result: dict[str, Any]) -> list[Path]:
    """``--figure``: the violin plot of one model's draws."""
    return [plot_fewshot(result, args.figure)] if args.figure else []


def _draw_comparison(models: Sequence[tuple[str, Sequence[dict[str, Any]]]], png: Path) -> dict[str, Any]:
    """The report's Fig. 7 (:func:`protoembed.evaluation.fewshot_figure.plot_fewshot_comparison`)."""
    from protoembed.evaluation.fewshot_figure import plot_fewshot_comparison

    return plot_fewshot_comparison(models, png)


def fewshot_protocol_line(p: dict[str, Any]) -> str:
    """The report's line under the few-shot table (ConPVP Fig. 7), from the results' protocol record."""
    return (
        f"Protocol: logistic regression (C = {p.get('C', '?')}) on {p.get('shots_per_class', '?')} examples "
        f"per class, {p.get('seeds', '?')} draws; accuracy x100 on the test split or the undrawn examples"
        f"{extra_protocol(p, ('C', 'shots_per_class', 'seeds'))}; mean ± std over every draw of every run of "
        "a model (the violins); Avg. = mean of the task means."
    )


SUITE = Suite(
    name="fewshot",
    scores=("acc",),
    evaluate=evaluate_suite,
    options=FewshotOptions,
    format_table=format_fewshot_table,
    command=CommandLine(
        help="few-shot transfer: K examples per class, several seeds, logistic regression",
        description="Train logistic regression on K labelled examples per class (drawn per seed) of each "
        "SentEval transfer task and report the accuracy over the seeds (test split, or the undrawn examples).",
        output_files=(("--figure", "FILE.png", "write the violin plot here"),),
        write_files=_write_files,
    ),
    report=ReportLayout(
        page_order=7,
        title="Few-shot (ConPVP Fig. 7)",
        pooled="seeds_acc",
        summary=(("acc", "Few-shot (Fig. 7)"),),
        protocol_line=fewshot_protocol_line,
        figure=_draw_comparison,
        figure_caption=(7, "few-shot accuracy over the draws"),
    ),
)
