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

``--end-to-end`` times the whole task instead, model loading and encoding included: protoembed
(``protoembed.load("default").encode`` on the task's distinct sentences, ``--runtime onnx``: its cached
fp32 ONNX export, then the batched nested cross-validation) against the straightforward baseline
(``SentenceTransformer(<default model folder>).encode(..., batch_size=64)``, then the scikit-learn loop
above), one after the other in one process; it prints the encoding and probe times of each, the largest
difference between the two sets of vectors, and the same agreement line and last ``ratio=``.

    python benchmarks/transfer.py --end-to-end [--task MR] [--runtime torch|onnx] [--outer-folds 10]

``--smoke`` (checks that the script runs; measures nothing): the probes on 400 random 16-dimensional
features with two classes instead of the task's embeddings, one outer fold.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

import smoke
from protoembed.model.runtimes import TORCH, runtime_choices


def task_features(task: str, data_dir: str, cache: Path | None) -> tuple[np.ndarray, np.ndarray]:
    """The task's classifier inputs and labels from the default model (read from / written to ``cache``)."""
    if cache is not None and cache.exists():
        saved = np.load(cache)
        return saved["x"], saved["y"]
    from protoembed import load
    from protoembed.evaluation.shared import sentence_embeddings
    from protoembed.evaluation.tasks import TASKS
    from protoembed.evaluation.transfer import features

    data = TASKS[task].load(data_dir)
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


def end_to_end_features(
    task: str, data_dir: str, runtime: str
) -> tuple[np.ndarray, np.ndarray, dict[str, float], np.ndarray]:
    """Load + encode the task twice (protoembed, then sentence-transformers): protoembed's features and
    labels, the two encoding times (model loading included) and the sentence-transformers vectors."""
    from sentence_transformers import SentenceTransformer

    from protoembed import load
    from protoembed.evaluation.shared import sentence_embeddings
    from protoembed.evaluation.tasks import TASKS
    from protoembed.evaluation.transfer import features, task_sentences
    from protoembed.model.backbones import resolve_model_dir
    from protoembed.model.export.cache import with_runtime

    data = TASKS[task].load(data_dir)
    sentences = list(dict.fromkeys(task_sentences(data)))
    times = {}
    started = time.perf_counter()
    model = with_runtime(load("default"), runtime)  # torch: as loaded; else its cached fp32 export
    embeddings, index = sentence_embeddings(lambda s: model.encode(s, batch_size=64), sentences)
    times["protoembed"] = time.perf_counter() - started
    started = time.perf_counter()
    st = SentenceTransformer(str(resolve_model_dir("default")), device="cpu")
    reference = st.encode(sentences, batch_size=64)
    times["sentence-transformers"] = time.perf_counter() - started
    x, y = features(data, "all", embeddings, index), data.splits["all"].labels
    st_x = features(data, "all", np.asarray(reference, dtype=np.float64), index)
    return x, y, times, st_x


def outer_folds(x: np.ndarray, y: np.ndarray, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The first ``n`` of SentEval's 10 stratified outer folds (seed 1111)."""
    from sklearn.model_selection import StratifiedKFold

    from protoembed.evaluation.transfer import SEED

    return list(StratifiedKFold(n_splits=10, shuffle=True, random_state=SEED).split(x, y))[:n]


def time_probes(
    x: np.ndarray, reference_x: np.ndarray, y: np.ndarray, task: str, outer: list
) -> tuple[dict[str, object], dict[str, object]]:
    """Our nested cross-validation on ``x`` and scikit-learn's GridSearchCV inside cross_validate on
    ``reference_x``, same folds and grid: ``({"time", "acc", "C"}, {"time", "acc", "C"})``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_validate

    from protoembed.evaluation.transfer import SEED, nested_selection

    grid = c_grid(task)
    started = time.perf_counter()
    chosen = nested_selection(x, y, outer, inner_folds=10, seed=SEED, grid=grid)
    ours = {
        "time": time.perf_counter() - started,
        "acc": float(np.mean([np.mean(r["predicted"] == y[te]) for r, (_, te) in zip(chosen, outer)])) * 100,
        "C": [r["C"] for r in chosen],
    }
    inner = StratifiedKFold(n_splits=10, shuffle=True, random_state=SEED)
    search = GridSearchCV(LogisticRegression(max_iter=1000), {"C": grid}, cv=inner, scoring="accuracy")
    started = time.perf_counter()
    reference = cross_validate(search, reference_x, y, cv=outer, scoring="accuracy", return_estimator=True)
    sklearn = {
        "time": time.perf_counter() - started,
        "acc": float(reference["test_score"].mean()) * 100,
        "C": [float(s.best_params_["C"]) for s in reference["estimator"]],
    }
    return ours, sklearn


def c_grid(task: str) -> list[float]:
    """The C values searched on ``task``: its task entry's ``c_grid`` (SentEval's grid for these tasks)."""
    from protoembed.evaluation.tasks import get_task

    return list(get_task(task).c_grid)


def random_features(rows: int = 400, width: int = 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A smoke run's classifier inputs: two Gaussian classes one standard deviation apart, labels 0/1."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=rows)
    return rng.standard_normal((rows, width)) + y[:, None] * (1 / np.sqrt(width)), y


def print_agreement(ours: dict[str, object], sklearn: dict[str, object], folds: int) -> None:
    """Whether the accuracies agree within 0.1 and in how many folds the chosen C is equal."""
    difference = ours["acc"] - sklearn["acc"]
    same_c = sum(a == b for a, b in zip(ours["C"], sklearn["C"]))
    print(
        f"accuracies agree within 0.1: {abs(difference) <= 0.1} (difference {difference:+.3f}); "
        f"chosen C equal in {same_c} of {folds} folds"
    )


def end_to_end(args: argparse.Namespace) -> None:
    """Time the whole task (load + encode + probe) both ways and print the ratio."""
    x, y, encode_time, st_x = end_to_end_features(args.task, args.data_dir, args.runtime)
    outer = outer_folds(x, y, args.outer_folds)
    print(
        f"{args.task}: {x.shape[0]} examples, {len(outer)} outer folds, C grid {c_grid(args.task)}, "
        f"runtime {args.runtime}"
    )
    print(
        f"max abs difference of the vectors (protoembed - sentence-transformers): {np.abs(x - st_x).max():.1e}"
    )
    ours, sklearn = time_probes(x, st_x, y, args.task, outer)
    total = encode_time["protoembed"] + ours["time"]
    print(
        f"protoembed:   {total:8.1f} s (load + encode {encode_time['protoembed']:.1f}, probe {ours['time']:.1f})"
        f"  acc {ours['acc']:.2f}  C {ours['C']}",
        flush=True,
    )
    baseline = encode_time["sentence-transformers"] + sklearn["time"]
    print(
        f"baseline:     {baseline:8.1f} s (load + encode {encode_time['sentence-transformers']:.1f}, "
        f"probe {sklearn['time']:.1f})  acc {sklearn['acc']:.2f}  C {sklearn['C']}"
    )
    print_agreement(ours, sklearn, len(outer))
    print(f"ratio={baseline / total:.2f}")


def main() -> None:
    """Time both probes on the same folds (or, with ``--end-to-end``, both whole runs) and print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="MR", choices=("MR", "CR", "SUBJ", "MPQA"))
    parser.add_argument("--cache", type=Path, default=None, metavar="FILE.npz")
    parser.add_argument("--outer-folds", type=int, default=10, help="run the first N outer folds (of 10)")
    parser.add_argument("--data-dir", default=os.environ.get("PROTOEMBED_DATA", "../shared/data"))
    parser.add_argument("--end-to-end", action="store_true", help="time loading + encoding + probe")
    parser.add_argument("--runtime", choices=runtime_choices(), default=TORCH, help="with --end-to-end")
    smoke.add_argument(parser)
    args = parser.parse_args()
    if args.end_to_end and not args.smoke:
        end_to_end(args)
        return

    if args.smoke:
        smoke.enable()
        (x, y), args.outer_folds = random_features(), 1
    else:
        x, y = task_features(args.task, args.data_dir, args.cache)
    outer = outer_folds(x, y, args.outer_folds)
    print(
        f"{args.task}: {x.shape[0]} examples x {x.shape[1]} features, {len(outer)} outer folds, "
        f"C grid {c_grid(args.task)}"
    )
    ours, sklearn = time_probes(x, x, y, args.task, outer)
    print(f"protoembed:   {ours['time']:8.1f} s  acc {ours['acc']:.2f}  C {ours['C']}")
    print(f"scikit-learn: {sklearn['time']:8.1f} s  acc {sklearn['acc']:.2f}  C {sklearn['C']}")
    print_agreement(ours, sklearn, len(outer))
    print(f"ratio={sklearn['time'] / ours['time']:.2f}")


if __name__ == "__main__":
    main()
