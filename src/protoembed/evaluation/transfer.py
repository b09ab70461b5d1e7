"""SentEval transfer tasks: logistic regression on frozen sentence embeddings, accuracy x100.

The protocol is SentEval's with its scikit-learn classifier (``usepytorch=False``), which DESIGN §5 and
both papers' transfer tables follow:

- MR, CR, SUBJ, MPQA: 10-fold stratified cross-validation (shuffled, seed 1111). Inside each training
  fold, the inverse L2 strength ``C`` is chosen from ``2^-2 .. 2^3`` by an inner 10-fold
  cross-validation (best mean accuracy, the smallest ``C`` on ties), then refit on the whole training
  fold and scored on the held-out fold; the result is the mean over the 10 folds.
- SST-2: ``C`` chosen on the dev split (fit on train), scored on test.
- TREC, MRPC: ``C`` chosen by inner 10-fold cross-validation on train, scored on test. MRPC's
  features are ``[u, v, |u - v|, u * v]`` (DESIGN §5; SentEval itself uses ``[|u - v|, u * v]``), and
  it reports F1 of the paraphrase class too.

Embeddings are used as the encoder returns them (no normalisation), as SentEval does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from sklearn.model_selection import StratifiedKFold

from protoembed.data.transfer import TRANSFER_TASKS, TransferData, load_transfer_task
from protoembed.errors import ProtoembedError
from protoembed.evaluation.shared import Encode, fmt, papers_row, run_suite, sentence_embeddings, table_head

#: SentEval's grid of the inverse L2 regularisation strength for scikit-learn's logistic regression.
C_GRID = tuple(2.0**t for t in range(-2, 4))
SEED = 1111
#: Column names of the papers' transfer tables.
SHORT_NAMES = {"SST2": "SST"}


def _classifier(c: float, seed: int) -> LogisticRegression:
    return LogisticRegression(C=c, max_iter=1000, random_state=seed)


def select_c(
    x: np.ndarray, y: np.ndarray, folds: int = 10, seed: int = SEED, grid: Sequence[float] = C_GRID
) -> tuple[float, float]:
    """Inner cross-validation: ``(best C, its mean accuracy x100)`` over ``folds`` stratified folds."""
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    splits = list(splitter.split(x, y))
    scores = []
    for c in grid:
        accuracy = [_classifier(c, seed).fit(x[tr], y[tr]).score(x[te], y[te]) for tr, te in splits]
        scores.append(float(np.mean(accuracy)) * 100)
    best = int(np.argmax(scores))
    return float(grid[best]), scores[best]


def kfold_accuracy(
    x: np.ndarray,
    y: np.ndarray,
    folds: int = 10,
    inner_folds: int = 10,
    seed: int = SEED,
    grid: Sequence[float] = C_GRID,
) -> dict[str, Any]:
    """Nested cross-validation (MR, CR, SUBJ, MPQA).

    Out: ``{"acc": mean test accuracy x100 over the outer folds, "dev_acc": mean of the inner
    cross-validation accuracies of the chosen C, "C": the C chosen in each outer fold}``.
    """
    outer = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    accuracies, dev, chosen = [], [], []
    for train, test in outer.split(x, y):
        c, dev_acc = select_c(x[train], y[train], inner_folds, seed, grid)
        model = _classifier(c, seed).fit(x[train], y[train])
        accuracies.append(model.score(x[test], y[test]) * 100)
        dev.append(dev_acc)
        chosen.append(c)
    return {"acc": float(np.mean(accuracies)), "dev_acc": float(np.mean(dev)), "C": chosen}


def train_test_accuracy(
    train: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    dev: tuple[np.ndarray, np.ndarray] | None = None,
    inner_folds: int = 10,
    seed: int = SEED,
    grid: Sequence[float] = C_GRID,
    f1: bool = False,
) -> dict[str, Any]:
    """Fixed splits: C chosen on ``dev`` (SST-2) or by inner cross-validation on ``train`` (TREC, MRPC).

    Out: ``{"acc", "dev_acc", "C"}`` (accuracies x100), plus ``"f1"`` (x100, positive class) if asked.
    """
    (x_train, y_train), (x_test, y_test) = train, test
    if dev is None:
        c, dev_acc = select_c(x_train, y_train, inner_folds, seed, grid)
        model = _classifier(c, seed).fit(x_train, y_train)
    else:
        fitted = [_classifier(c, seed).fit(x_train, y_train) for c in grid]
        dev_scores = [m.score(dev[0], dev[1]) * 100 for m in fitted]
        best = int(np.argmax(dev_scores))
        c, dev_acc, model = float(grid[best]), dev_scores[best], fitted[best]
    predicted = model.predict(x_test)
    result: dict[str, Any] = {"acc": float(np.mean(predicted == y_test)) * 100, "dev_acc": dev_acc, "C": c}
    if f1:
        result["f1"] = float(f1_score(y_test, predicted)) * 100
    return result


def features(data: TransferData, split: str, embeddings: np.ndarray, index: dict[str, int]) -> np.ndarray:
    """Classifier inputs of a split: the sentence embedding, or ``[u, v, |u-v|, u*v]`` for a pair."""
    part = data.splits[split]
    if not part.pairs:
        return embeddings[[index[t] for t in part.texts]]
    u = embeddings[[index[a] for a, _ in part.pairs]]
    v = embeddings[[index[b] for _, b in part.pairs]]
    return np.concatenate([u, v, np.abs(u - v), u * v], axis=1)


def evaluate_task(
    encode: Encode, data: TransferData, folds: int = 10, inner_folds: int = 10, seed: int = SEED
) -> dict[str, Any]:
    """One task: encode its sentences (once each), run its protocol (module docstring)."""
    sentences = [s for part in data.splits.values() for s in part.sentences()]
    embeddings, index = sentence_embeddings(encode, sentences)

    def xy(split: str) -> tuple[np.ndarray, np.ndarray]:
        return features(data, split, embeddings, index), data.splits[split].labels

    if "all" in data.splits:
        result = kfold_accuracy(*xy("all"), folds=folds, inner_folds=inner_folds, seed=seed)
        sizes = {"n": len(data.splits["all"])}
    else:
        dev = xy("dev") if "dev" in data.splits else None
        result = train_test_accuracy(xy("train"), xy("test"), dev, inner_folds, seed, f1=data.name == "MRPC")
        sizes = {f"n_{split}": len(part) for split, part in data.splits.items()}
    return {**result, **sizes, "classes": len(data.classes), "skipped_empty": data.skipped_empty}


def evaluate_transfer(
    encode: Encode,
    data_dir: str | os.PathLike[str] | None,
    tasks: Sequence[str] = TRANSFER_TASKS,
    folds: int = 10,
    inner_folds: int = 10,
    seed: int = SEED,
    progress: bool = False,
) -> dict[str, Any]:
    """Evaluate an encoder on SentEval transfer tasks (``progress``: a line per finished task on stderr).

    In: ``encode(sentences) -> array (len(sentences), dim)`` (called once per task, on its distinct
    sentences); the data directory (``None``: ``$PROTOEMBED_DATA``); the tasks; the fold counts and seed.
    Every task's data is read (and checked) before the first encoding.
    Out: ``{"protocol", "tasks": {task: {"acc", "dev_acc", "C", sizes..., ["f1"]}}, "avg"}``, accuracies
    x100 and ``avg`` their mean. The caller adds ``"model"``.
    """
    for name, value in (("folds", folds), ("inner folds", inner_folds)):
        if value < 2:
            raise ProtoembedError(f"{name} must be at least 2, got {value}")
    protocol = {"folds": folds, "inner_folds": inner_folds, "seed": seed, "C_grid": list(C_GRID)}
    return {
        "protocol": protocol,
        **run_suite(
            "transfer",
            tasks,
            lambda task: load_transfer_task(task, data_dir),
            lambda data: evaluate_task(encode, data, folds, inner_folds, seed),
            lambda r: f"acc {r['acc']:.2f}",
            progress,
        ),
    }


def format_transfer_table(result: dict[str, Any]) -> str:
    """Render an :func:`evaluate_transfer` result: one row per task, then the papers' one-row layout."""
    tasks: dict[str, dict[str, Any]] = result["tasks"]
    title = "SentEval transfer (logistic regression, accuracy x100"
    lines = table_head(title, result, ["Task", "Acc.", "Dev acc.", "n (train/dev/test or all)"], "lrrl")
    for task, r in tasks.items():
        sizes = "/".join(str(r[k]) for k in ("n", "n_train", "n_dev", "n_test") if k in r)
        extra = f" (F1 {r['f1']:.2f})" if "f1" in r else ""
        lines.append(f"| {task} | {fmt(r['acc'])}{extra} | {fmt(r['dev_acc'])} | {sizes} |")
    names = [SHORT_NAMES.get(t, t) for t in tasks]
    values = [r["acc"] for r in tasks.values()]
    lines += papers_row("Accuracy x100 (papers' layout):", names, values, result["avg"])
    return "\n".join(lines) + "\n"
