"""Short-text clustering: k-means on the embeddings, accuracy after Hungarian matching, and NMI.

Protocol (as SCCL and the ConPVP paper report it): k-means with k = the number of classes,
run ``runs`` times (default 10, seeds 0..runs-1, one k-means++ initialisation each, scikit-learn's
``KMeans``); each run's accuracy is the share of texts whose cluster maps to their class under the best
one-to-one cluster-to-class assignment (Hungarian algorithm on the contingency table,
``scipy.optimize.linear_sum_assignment``), and NMI is scikit-learn's ``normalized_mutual_info_score``.
Both are reported x100 as mean and sample standard deviation over the runs. Embeddings are used as the
encoder returns them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import Field

from protoembed.core.pydantic_util import check_options
from protoembed.data.benchmarks.clustering import ClusteringData
from protoembed.evaluation.shared import (
    Encode,
    evaluate_tasks,
    fmt,
    papers_row,
    sentence_embeddings,
    table_head,
)
from protoembed.evaluation.suite import (
    OVER_SEEDS,
    CommandLine,
    Inputs,
    ReportLayout,
    Suite,
    SuiteOptions,
    extra_protocol,
)
from protoembed.evaluation.tasks import Task, get_tasks, table_names


class ClusteringOptions(SuiteOptions):
    """The ``clustering`` suite's options."""

    runs: int = Field(10, ge=1, description="k-means runs (seeds 0..runs-1)")


#: The options' defaults (the functions below default to them).
DEFAULT = ClusteringOptions()


def hungarian_accuracy(labels: np.ndarray, clusters: np.ndarray) -> float:
    """Accuracy of ``clusters`` against ``labels`` under the best one-to-one cluster -> class map (0..1)."""
    from scipy.optimize import linear_sum_assignment

    n_clusters, n_classes = int(clusters.max()) + 1, int(labels.max()) + 1
    contingency = np.zeros((n_clusters, n_classes), dtype=np.int64)
    np.add.at(contingency, (clusters, labels), 1)
    rows, cols = linear_sum_assignment(contingency, maximize=True)
    return float(contingency[rows, cols].sum()) / len(labels)


def cluster_runs(
    embeddings: np.ndarray, labels: np.ndarray, k: int, runs: int = DEFAULT.runs
) -> dict[str, Any]:
    """``runs`` k-means runs (seeds 0..runs-1): per-run and mean/std accuracy and NMI, x100."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import normalized_mutual_info_score

    accuracy, nmi = [], []
    for seed in range(runs):
        clusters = KMeans(n_clusters=k, n_init=1, random_state=seed).fit_predict(embeddings)
        accuracy.append(hungarian_accuracy(labels, clusters) * 100)
        nmi.append(float(normalized_mutual_info_score(labels, clusters)) * 100)
    spread = (lambda v: float(np.std(v, ddof=1))) if runs > 1 else (lambda v: 0.0)
    return {
        "acc": float(np.mean(accuracy)),
        "acc_std": spread(accuracy),
        "nmi": float(np.mean(nmi)),
        "nmi_std": spread(nmi),
        "runs_acc": accuracy,
        "runs_nmi": nmi,
    }


def evaluate_task(
    encode: Encode, data: ClusteringData, runs: int = DEFAULT.runs, n_clusters: int | None = None
) -> dict[str, Any]:
    """One dataset: encode its distinct texts once, cluster into ``n_clusters`` (``None``: as many as
    classes; the task entry's ``n_clusters``), score."""
    vectors, index = sentence_embeddings(encode, data.texts)
    embeddings = vectors[[index[t] for t in data.texts]]
    result = cluster_runs(embeddings, data.labels, n_clusters or data.n_classes, runs)
    return {**result, "n": len(data.texts), "classes": data.n_classes, "skipped_empty": data.skipped_empty}


def evaluate_clustering(
    encode: Encode,
    data_dir: str | os.PathLike[str] | None,
    tasks: Sequence[str | Task] | None = None,
    runs: int = DEFAULT.runs,
    progress: bool = False,
) -> dict[str, Any]:
    """Evaluate an encoder on short-text clustering.

    Every dataset is read (and checked) before the first encoding.

    Args:
        encode: ``encode(texts) -> array (len(texts), dim)``, called once per dataset on its distinct texts.
        data_dir: the data directory (``None``: ``$PROTOEMBED_DATA``, else the user data directory).
        tasks: the datasets (``None``: the suite's default run).
        runs: the number of k-means runs.
        progress: one stderr line per finished dataset.
    Returns:
        ``{"protocol", "tasks": {task: {"acc", "acc_std", "nmi", "nmi_std", "runs_acc", "runs_nmi",
        "n", "classes", "skipped_empty"}}, "avg"}`` (x100; ``avg`` = mean accuracy). The caller adds
        ``"model"``.
    """
    check_options(ClusteringOptions, {"runs": runs})
    protocol = {"algorithm": "k-means (k = classes, k-means++ init, n_init=1)", "runs": runs}
    entries = {t.name: t for t in get_tasks(tasks, "clustering")}
    return {
        "protocol": protocol,
        **evaluate_tasks(
            "clustering",
            list(entries),
            lambda task: entries[task].load(data_dir),
            lambda data: evaluate_task(encode, data, runs, entries[data.name].n_clusters),
            lambda r: f"acc {r['acc']:.2f}, NMI {r['nmi']:.2f}",
            progress,
        ),
    }


def format_clustering_table(result: dict[str, Any]) -> str:
    """Render an :func:`evaluate_clustering` result: one row per dataset, then the one-row layout."""
    tasks: dict[str, dict[str, Any]] = result["tasks"]
    runs = result.get("protocol", {}).get("runs", "?")
    title = f"Short-text clustering (k-means, {runs} runs; accuracy and NMI x100, mean ± std"
    lines = table_head(title, result, ["Dataset", "Acc.", "NMI", "texts", "classes"], "lrrrr")
    for task, r in tasks.items():
        lines.append(
            f"| {task} | {fmt(r['acc'])} ± {fmt(r['acc_std'])} | {fmt(r['nmi'])} ± {fmt(r['nmi_std'])} "
            f"| {r['n']} | {r['classes']} |"
        )
    values = [r["acc"] for r in tasks.values()]
    lines += papers_row("Accuracy x100 (papers' layout):", table_names(tasks), values, result["avg"])
    return "\n".join(lines) + "\n"


def evaluate_suite(inputs: Inputs, tasks: Sequence[str] | None, runs: int) -> dict[str, Any]:
    """The ``clustering`` suite: :func:`evaluate_clustering` on ``tasks`` (``None``: the suite's default
    run)."""
    return evaluate_clustering(
        inputs.encode, inputs.data_dir, tasks=tasks, runs=runs, progress=inputs.progress
    )


def clustering_protocol_line(p: dict[str, Any]) -> str:
    """The report's line under the clustering tables (ConPVP Table 6), from the results' protocol record."""
    return (
        f"Protocol: {p.get('algorithm', 'k-means')}, {p.get('runs', '?')} runs; accuracy after the best "
        f"one-to-one cluster-class matching (Hungarian) and NMI, each averaged over the runs, x100"
        f"{extra_protocol(p, ('algorithm', 'runs'))}; {OVER_SEEDS}."
    )


SUITE = Suite(
    name="clustering",
    scores=("acc", "nmi"),
    evaluate=evaluate_suite,
    options=ClusteringOptions,
    format_table=format_clustering_table,
    command=CommandLine(
        help="short-text clustering: k-means, Hungarian-matched accuracy and NMI",
        description="Cluster each dataset with k-means (k = classes, several runs); report accuracy after "
        "the best one-to-one cluster-class matching and NMI, mean ± std over the runs.",
    ),
    report=ReportLayout(
        page_order=6,
        title="Clustering (ConPVP Table 6)",
        tables=(("Accuracy:", "acc"), ("NMI:", "nmi")),
        summary=(("acc", "Clustering acc. (Table 6)"), ("nmi", "Clustering NMI (Table 6)")),
        protocol_line=clustering_protocol_line,
    ),
)
