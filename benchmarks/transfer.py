"""Transfer-suite probe: protoembed's batched nested cross-validation vs the straightforward scikit-learn loop.

On one SentEval task (default MR) with the default model's embeddings, times
``protoembed.evaluation.transfer.kfold_accuracy`` (every fit of the nested cross-validation solved
together) against ``cross_val_score(GridSearchCV(LogisticRegression(max_iter=1000), {"C": grid},
cv=inner), x, y, cv=outer)`` on the same stratified folds (seed 1111) and SentEval's grid of the task,
one after the other in one process. Prints both times, accuracies and chosen C, checks that the
accuracies agree within 0.1; last line ``ratio=<scikit-learn time / protoembed time>`` (> 1 = faster).

    python benchmarks/transfer.py [--task MR] [--cache emb.npz] [--outer-folds 10] [--data-dir D]

``--cache`` keeps the encoded features (written on the first run, read afterwards), so that a rerun
times the probes only. ``--outer-folds N`` runs the first N of the 10 outer folds in both (the same
per-fold work; for a quick look on a busy machine).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np


def task_features(task: str, data_dir: str, cache: Path | None) -> tuple[np.ndarray, np.ndarray]:
    """The task's classifier inputs and labels from the default model (read from / written to ``cache``)."""
    if cache is not None and cache.exists():
        saved = np.load(cache)
        return saved["x"], saved["y"]
    from protoembed import load
    from protoembed.data.transfer import load_transfer_task
    from protoembed.evaluation.shared import sentence_embeddings
    from protoembed.evaluation.transfer import features

    data = load_transfer_task(task, data_dir)
    if "all" not in data.splits:
        raise SystemExit(
            f"{task} has fixed splits; the benchmark times the cross-validated tasks (MR CR SUBJ MPQA)"
        )
    model = load("default")
    sentences = [s for part in data.splits.values() for s in part.sentences()]
    embeddings, index = sentence_embeddings(lambda s: model.encode(s, batch_size=64), sentences)
    x, y = features(data, "all", embeddings, index), data.splits["all"].labels
    if cache is not None:
        np.savez(cache, x=x, y=y)
    return x, y


def main() -> None:
    """Time both probes on the same folds and print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="MR", choices=("MR", "CR", "SUBJ", "MPQA"))
    parser.add_argument("--cache", type=Path, default=None, metavar="FILE.npz")
    parser.add_argument("--outer-folds", type=int, default=10, help="run the first N outer folds (of 10)")
    parser.add_argument("--data-dir", default=os.environ.get("PROTOEMBED_DATA", "../shared/data"))
    args = parser.parse_args()

    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_validate

    from protoembed.evaluation.transfer import C_GRIDS, SEED, nested_selection

    x, y = task_features(args.task, args.data_dir, args.cache)
    grid = list(C_GRIDS[args.task])
    outer = list(StratifiedKFold(n_splits=10, shuffle=True, random_state=SEED).split(x, y))[
        : args.outer_folds
    ]
    print(
        f"{args.task}: {x.shape[0]} examples x {x.shape[1]} features, {len(outer)} outer folds, C grid {grid}"
    )

    started = time.perf_counter()
    chosen = nested_selection(x, y, outer, inner_folds=10, seed=SEED, grid=grid)
    ours_time = time.perf_counter() - started
    ours_acc = float(np.mean([np.mean(r["predicted"] == y[te]) for r, (_, te) in zip(chosen, outer)])) * 100
    ours_c = [r["C"] for r in chosen]
    print(f"protoembed:   {ours_time:8.1f} s  acc {ours_acc:.2f}  C {ours_c}", flush=True)

    inner = StratifiedKFold(n_splits=10, shuffle=True, random_state=SEED)
    search = GridSearchCV(LogisticRegression(max_iter=1000), {"C": grid}, cv=inner, scoring="accuracy")
    started = time.perf_counter()
    reference = cross_validate(search, x, y, cv=outer, scoring="accuracy", return_estimator=True)
    sklearn_time = time.perf_counter() - started
    sklearn_acc = float(reference["test_score"].mean()) * 100
    sklearn_c = [float(s.best_params_["C"]) for s in reference["estimator"]]
    print(f"scikit-learn: {sklearn_time:8.1f} s  acc {sklearn_acc:.2f}  C {sklearn_c}")
    agree = abs(ours_acc - sklearn_acc) <= 0.1
    print(
        f"accuracies agree within 0.1: {agree} (difference {ours_acc - sklearn_acc:+.3f}); "
        f"chosen C equal in {sum(a == b for a, b in zip(ours_c, sklearn_c))} of {len(outer)} folds"
    )
    print(f"ratio={sklearn_time / ours_time:.2f}")


if __name__ == "__main__":
    main()
