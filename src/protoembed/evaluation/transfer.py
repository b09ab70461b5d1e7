"""SentEval transfer tasks: logistic regression on frozen sentence embeddings, accuracy x100.

Two classifiers (``--classifier``). ``sklearn`` (the default), SentEval's scikit-learn protocol
(``usepytorch=False``), described here. ``pytorch``: SentEval's PyTorch logistic regression with the
settings of the ConPVP and SimCSE ``evaluation.py`` (``--mode test``: ``usepytorch: True``, ``kfold: 10``,
classifier ``{nhid: 0, optim: adam, batch_size: 64, tenacity: 5, epoch_size: 4}``), which produced both
papers' transfer tables (:func:`torch_task`, :mod:`protoembed.evaluation.senteval_torch`). The
scikit-learn protocol:

- MR, CR, SUBJ, MPQA: 10-fold stratified cross-validation (shuffled, seed 1111). Inside each training
  fold, the inverse L2 strength ``C`` is chosen by an inner 10-fold cross-validation (best mean
  accuracy, the smallest ``C`` on ties), then refit on the whole training fold and scored on the
  held-out fold; the result is the mean over the 10 folds.
- SST-2: ``C`` chosen on the dev split (fit on train), scored on test.
- TREC, MRPC: ``C`` chosen by inner 10-fold cross-validation on train, scored on test. MRPC's
  features are SentEval's ``[|u - v|, u * v]`` (``mrpc_features="full"``: ``[u, v, |u - v|, u * v]``),
  and it reports F1 of the paraphrase class too.

``C`` grids are SentEval's per task (each task entry's ``c_grid``): ``2^-2 .. 2^3`` for MR, CR, SUBJ,
MPQA and SST-2, ``2^-1 .. 2^5`` for TREC and MRPC. Every fit minimises scikit-learn's ``LogisticRegression``
objective (L2, unpenalised intercept; binomial loss for two classes, multinomial for TREC) and is
solved to convergence (largest gradient entry at most 1e-8 per training example,
:mod:`protoembed.evaluation.logistic`), so the results are those of the objective's unique minimiser:
scikit-learn's default ``lbfgs`` stops at a gradient of 1e-4 (at most 27 iterations per fit in one MR training fold), and
SentEval's fits stop at 100 iterations (its high-``C`` TREC fits stop there unconverged).
All fits of a task (inner folds x grid, plus the refits) are solved together.

Embeddings are used as the encoder returns them (no normalisation), as SentEval does.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import Any, Literal, get_args

import numpy as np
from pydantic import Field

from protoembed.core.pydantic_util import check_options
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
    OVER_SEEDS,
    CommandLine,
    Inputs,
    ReportLayout,
    Suite,
    SuiteOptions,
    extra_protocol,
)
from protoembed.evaluation.tasks import (
    SENTEVAL_C_GRID,
    Task,
    get_task,
    get_tasks,
    table_name,
    table_names,
)

#: SentEval's grid of the inverse L2 regularisation strength (a task entry's ``c_grid`` by default).
C_GRID = SENTEVAL_C_GRID


class TransferOptions(SuiteOptions):
    """The ``transfer`` suite's options (the protocol of the module docstring)."""

    folds: int = Field(10, ge=2, description="outer CV folds (MR, CR, SUBJ, MPQA)")
    inner_folds: int = Field(10, ge=2, description="inner CV folds that choose C (or L2)")
    seed: int = Field(1111, ge=0, description="seed of the fold splits (SentEval's)")
    mrpc_features: Literal["senteval", "full"] = Field(
        "senteval",
        description="classifier inputs of a pair task (MRPC) from its embeddings u, v: SentEval's "
        "[|u-v|, u*v], or [u, v, |u-v|, u*v]",
    )
    classifier: Literal["sklearn", "pytorch"] = Field(
        "sklearn",
        description="sklearn: scikit-learn's logistic regression solved to convergence, C from the task's "
        "grid; pytorch: SentEval's PyTorch logistic regression as the ConPVP and SimCSE evaluation.py run it "
        "(Adam, batch 64, early stopping with tenacity 5, epoch_size 4, L2 1e-5..1e-2)",
    )


#: The options' defaults (every function below defaults to them).
DEFAULT = TransferOptions()
SEED = DEFAULT.seed
#: The values of ``mrpc_features`` and ``classifier``.
MRPC_FEATURES: tuple[str, ...] = get_args(TransferOptions.model_fields["mrpc_features"].annotation)
CLASSIFIERS: tuple[str, ...] = get_args(TransferOptions.model_fields["classifier"].annotation)


def _accuracy(predicted: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(predicted == y))


def nested_selection(
    x: np.ndarray,
    y: np.ndarray,
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    inner_folds: int = DEFAULT.inner_folds,
    seed: int = SEED,
    grid: Sequence[float] = C_GRID,
) -> list[dict[str, Any]]:
    """For each ``(train rows, test rows)`` of ``x``: choose C by an inner cross-validation on the
    training rows, refit on all of them, predict the test rows.

    The inner folds are stratified (shuffled with ``seed``); the chosen C has the best mean inner
    accuracy, the smallest on ties (as ``GridSearchCV``). Every fit of every split (inner folds x grid,
    plus a refit per C) is one problem of a single :func:`~protoembed.evaluation.logistic.fit_many`.
    Out per split: ``{"C", "dev_acc" (mean inner accuracy x100 of that C), "predicted" (test labels)}``.
    """
    from sklearn.model_selection import StratifiedKFold

    from protoembed.evaluation.logistic import fit_many, predict_many

    rows: list[np.ndarray] = []
    cs: list[float] = []
    plans = []
    for train, test in splits:
        splitter = StratifiedKFold(n_splits=inner_folds, shuffle=True, random_state=seed)
        inner = [(train[a], train[b]) for a, b in splitter.split(np.zeros(len(train)), y[train])]
        first = len(rows)
        for c in grid:
            rows += [tr for tr, _ in inner] + [train]
            cs += [float(c)] * (len(inner) + 1)
        plans.append((first, inner, test))
    classes = np.unique(y[np.concatenate(rows)])
    predicted = classes[predict_many(fit_many(x, y, rows, cs), x)]
    out = []
    for first, inner, test in plans:
        scores = []
        for g in range(len(grid)):
            base = first + g * (len(inner) + 1)
            fold_acc = [_accuracy(predicted[base + j][te], y[te]) for j, (_, te) in enumerate(inner)]
            scores.append(float(np.mean(fold_acc)) * 100)
        best = int(np.argmax(scores))
        refit = first + best * (len(inner) + 1) + len(inner)
        out.append({"C": float(grid[best]), "dev_acc": scores[best], "predicted": predicted[refit][test]})
    return out


def kfold_accuracy(
    x: np.ndarray,
    y: np.ndarray,
    folds: int = DEFAULT.folds,
    inner_folds: int = DEFAULT.inner_folds,
    seed: int = SEED,
    grid: Sequence[float] = C_GRID,
) -> dict[str, Any]:
    """Nested cross-validation (MR, CR, SUBJ, MPQA): outer stratified folds (shuffled with ``seed``),
    C chosen inside each training fold (:func:`nested_selection`).

    Out: ``{"acc": mean test accuracy x100 over the outer folds, "dev_acc": mean of the inner
    cross-validation accuracies of the chosen C, "C": the C chosen in each outer fold}``.
    """
    from sklearn.model_selection import StratifiedKFold

    outer = list(StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed).split(x, y))
    chosen = nested_selection(x, y, outer, inner_folds, seed, grid)
    accuracies = [_accuracy(r["predicted"], y[test]) * 100 for r, (_, test) in zip(chosen, outer)]
    return {
        "acc": float(np.mean(accuracies)),
        "dev_acc": float(np.mean([r["dev_acc"] for r in chosen])),
        "C": [r["C"] for r in chosen],
    }


def train_test_accuracy(
    train: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    dev: tuple[np.ndarray, np.ndarray] | None = None,
    inner_folds: int = DEFAULT.inner_folds,
    seed: int = SEED,
    grid: Sequence[float] = C_GRID,
    f1: bool = False,
) -> dict[str, Any]:
    """Fixed splits: C chosen on ``dev`` (SST-2) or by inner cross-validation on ``train`` (TREC, MRPC).

    Out: ``{"acc", "dev_acc", "C"}`` (accuracies x100), plus ``"f1"`` (x100, positive class) if asked.
    """
    from sklearn.metrics import f1_score

    from protoembed.evaluation.logistic import fit_many, predict_many

    (x_train, y_train), (x_test, y_test) = train, test
    n = len(y_train)
    if dev is None:
        x, y = np.concatenate([x_train, x_test]), np.concatenate([y_train, y_test])
        (chosen,) = nested_selection(
            x, y, [(np.arange(n), n + np.arange(len(y_test)))], inner_folds, seed, grid
        )
        c, dev_acc, predicted = chosen["C"], chosen["dev_acc"], chosen["predicted"]
    else:
        weights = fit_many(x_train, y_train, [np.arange(n)] * len(grid), [float(c) for c in grid])
        classes = np.unique(y_train)
        dev_scores = [_accuracy(p, dev[1]) * 100 for p in classes[predict_many(weights, dev[0])]]
        best = int(np.argmax(dev_scores))
        c, dev_acc = float(grid[best]), dev_scores[best]
        predicted = classes[predict_many(weights[best : best + 1], x_test)[0]]
    result: dict[str, Any] = {"acc": _accuracy(predicted, y_test) * 100, "dev_acc": dev_acc, "C": c}
    if f1:
        result["f1"] = float(f1_score(y_test, predicted)) * 100
    return result


def features(
    data: TransferData,
    split: str,
    embeddings: np.ndarray,
    index: dict[str, int],
    mrpc_features: str = DEFAULT.mrpc_features,
) -> np.ndarray:
    """Classifier inputs of a split: the sentence embedding, or for a pair (u, v) SentEval's
    ``[|u-v|, u*v]`` (``mrpc_features="full"``: ``[u, v, |u-v|, u*v]``)."""
    check_options(TransferOptions, {"mrpc_features": mrpc_features})
    part = data.splits[split]
    if not part.pairs:
        return embeddings[[index[t] for t in part.texts]]
    u = embeddings[[index[a] for a, _ in part.pairs]]
    v = embeddings[[index[b] for _, b in part.pairs]]
    pair = [np.abs(u - v), u * v]
    return np.concatenate(pair if mrpc_features == "senteval" else [u, v, *pair], axis=1)


def task_sentences(data: TransferData) -> list[str]:
    """Every sentence of a task (all splits, both sides of MRPC's pairs), with repeats, in order."""
    return [s for part in data.splits.values() for s in part.sentences()]


def evaluate_task(
    encode: Encode | tuple[np.ndarray, dict[str, int]],
    data: TransferData,
    folds: int = DEFAULT.folds,
    inner_folds: int = DEFAULT.inner_folds,
    seed: int = SEED,
    mrpc_features: str = DEFAULT.mrpc_features,
    classifier: str = DEFAULT.classifier,
    task: Task | None = None,
) -> dict[str, Any]:
    """One task: its protocol (module docstring; ``classifier="pytorch"``:
    :func:`torch_task`) on the embeddings of its sentences.

    ``encode`` is an encoder (called once, on the task's distinct sentences) or already computed
    ``(embeddings, sentence -> row)`` that cover every sentence of the task. ``task``: its entry (its C
    grid and whether F1 is reported; ``None``: the registered entry named ``data.name``).
    """
    task = task if task is not None else get_task(data.name, "transfer")
    if callable(encode):
        embeddings, index = sentence_embeddings(encode, task_sentences(data))
    else:
        embeddings, index = encode

    def xy(split: str) -> tuple[np.ndarray, np.ndarray]:
        return features(data, split, embeddings, index, mrpc_features), data.splits[split].labels

    if classifier == "pytorch":
        return torch_task(xy, data, folds, inner_folds, seed, task.f1)
    grid = task.c_grid
    if "all" in data.splits:
        result = kfold_accuracy(*xy("all"), folds=folds, inner_folds=inner_folds, seed=seed, grid=grid)
        sizes = {"n": len(data.splits["all"])}
    else:
        dev = xy("dev") if "dev" in data.splits else None
        result = train_test_accuracy(xy("train"), xy("test"), dev, inner_folds, seed, grid, task.f1)
        sizes = {f"n_{split}": len(part) for split, part in data.splits.items()}
    return {**result, **sizes, "classes": len(data.classes), "skipped_empty": data.skipped_empty}


def torch_task(
    xy: Any,
    data: TransferData,
    folds: int = DEFAULT.folds,
    inner_folds: int = DEFAULT.inner_folds,
    seed: int = SEED,
    f1: bool = False,
) -> dict[str, Any]:
    """One task with SentEval's PyTorch classifier: MR, CR, SUBJ, MPQA by ``folds``-fold stratified CV
    (shuffled with ``seed``) with L2 chosen by inner ``inner_folds``-fold CV in each training fold
    (SentEval's ``InnerKFoldClassifier``); SST-2 with L2 chosen on dev (``SplitClassifier``); TREC and
    MRPC with L2 chosen by ``inner_folds``-fold CV on train (``KFoldClassifier``). ``xy(split)`` gives a
    split's (features, labels); ``f1``: report F1 of class 1 too. Out: ``{"acc", "dev_acc", "l2",
    sizes..., ["f1"]}``, x100; ``acc`` is
    the mean over folds of the unrounded fold accuracies."""
    from sklearn.metrics import f1_score
    from sklearn.model_selection import StratifiedKFold

    from protoembed.evaluation.senteval_torch import dev_selected, select_and_refit

    k = len(data.classes)
    if "all" in data.splits:
        x, y = xy("all")
        outer = list(StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed).split(x, y))
        chosen = select_and_refit(x, y, outer, k, inner_folds, seed)
        accs = [_accuracy(r["predicted"], y[test]) * 100 for r, (_, test) in zip(chosen, outer)]
        result: dict[str, Any] = {
            "acc": float(np.mean(accs)),
            "dev_acc": float(np.mean([r["dev_acc"] for r in chosen])),
            "l2": [r["l2"] for r in chosen],
        }
        sizes = {"n": len(data.splits["all"])}
    else:
        (x_train, y_train), (x_test, y_test) = xy("train"), xy("test")
        if "dev" in data.splits:
            one = dev_selected((x_train, y_train), xy("dev"), x_test, k, seed)
        else:
            n = len(y_train)
            x, y = np.concatenate([x_train, x_test]), np.concatenate([y_train, y_test])
            split = [(np.arange(n), n + np.arange(len(y_test)))]
            (one,) = select_and_refit(x, y, split, k, inner_folds, seed)
        predicted = np.asarray(one["predicted"])
        result = {"acc": _accuracy(predicted, y_test) * 100, "dev_acc": one["dev_acc"], "l2": one["l2"]}
        if f1:
            result["f1"] = float(f1_score(y_test, predicted)) * 100
        sizes = {f"n_{split}": len(part) for split, part in data.splits.items()}
    return {**result, **sizes, "classes": k, "skipped_empty": data.skipped_empty}


def protocol_record(
    classifier: str, folds: int, inner_folds: int, seed: int, tasks: Sequence[Task], mrpc_features: str
) -> dict[str, Any]:
    """A transfer result's ``protocol``: the classifier and what it was run with."""
    record: dict[str, Any] = {
        "classifier": classifier,
        "folds": folds,
        "inner_folds": inner_folds,
        "seed": seed,
    }
    if classifier == "pytorch":
        from protoembed.evaluation.senteval_torch import L2_GRID, TorchClassifier

        record |= {"l2_grid": list(L2_GRID), **TorchClassifier().record()}
    else:
        record["C_grid"] = {task.name: list(task.c_grid) for task in tasks}
    return {**record, "mrpc_features": mrpc_features}


def transfer_protocol(data: dict[str, Any]) -> dict[str, Any]:
    """A transfer results file's protocol record (:func:`protocol_record`: the classifier first, so two
    classifiers never share a table)."""
    return dict(data.get("protocol") or {})


def evaluate_transfer(
    encode: Encode,
    data_dir: str | os.PathLike[str] | None,
    tasks: Sequence[str | Task] | None = None,
    folds: int = DEFAULT.folds,
    inner_folds: int = DEFAULT.inner_folds,
    seed: int = SEED,
    progress: bool = False,
    mrpc_features: str = DEFAULT.mrpc_features,
    classifier: str = DEFAULT.classifier,
) -> dict[str, Any]:
    """Evaluate an encoder on SentEval transfer tasks (``progress``: a line per finished task on stderr).

    In: ``encode(sentences) -> array (len(sentences), dim)`` (called once, on the distinct sentences
    of all the tasks together: one pass of the model, and a sentence shared by tasks is encoded once);
    the data directory (``None``: ``$PROTOEMBED_DATA``, else the user data directory); the tasks; the fold counts and seed; MRPC's
    features (:data:`MRPC_FEATURES`).
    Every task's data is read (and checked) before the encoding.
    Out: ``{"protocol", "tasks": {task: {"acc", "dev_acc", "C", sizes..., ["f1"]}}, "avg"}``, accuracies
    x100 and ``avg`` their mean. The caller adds ``"model"``.
    """
    values = dict(folds=folds, inner_folds=inner_folds, seed=seed, mrpc_features=mrpc_features)
    check_options(TransferOptions, {**values, "classifier": classifier})
    entries = get_tasks(tasks, "transfer")
    protocol = protocol_record(classifier, folds, inner_folds, seed, entries, mrpc_features)
    datasets = {task.name: task.load(data_dir) for task in entries}
    by_name = {task.name: task for task in entries}
    started = time.monotonic()
    encoded = sentence_embeddings(encode, [s for data in datasets.values() for s in task_sentences(data)])
    if progress:
        seconds = time.monotonic() - started
        count = f"{len(encoded[1])} distinct sentences of {len(entries)} task(s)"
        print(f"transfer: encoded {count} ({seconds:.0f} s)", file=sys.stderr, flush=True)
    return {
        "protocol": protocol,
        **evaluate_tasks(
            "transfer",
            list(datasets),
            datasets.__getitem__,
            lambda data: evaluate_task(
                encoded, data, folds, inner_folds, seed, mrpc_features, classifier, by_name[data.name]
            ),
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
    values = [r["acc"] for r in tasks.values()]
    lines += papers_row("Accuracy x100 (papers' layout):", table_names(tasks), values, result["avg"])
    return "\n".join(lines) + "\n"


def evaluate_suite(
    inputs: Inputs,
    tasks: Sequence[str] | None,
    folds: int,
    inner_folds: int,
    seed: int,
    mrpc_features: str,
    classifier: str,
) -> dict[str, Any]:
    """The ``transfer`` suite: :func:`evaluate_transfer` on ``tasks`` (``None``: the suite's default
    run)."""
    options = dict(folds=folds, inner_folds=inner_folds, seed=seed, classifier=classifier)
    return evaluate_transfer(
        inputs.encode,
        inputs.data_dir,
        tasks=tasks,
        progress=inputs.progress,
        mrpc_features=mrpc_features,
        **options,
    )


def c_grids(grid: Any) -> str:
    """``0.25..8`` for one grid; ``0.25..8 (MR, CR), 0.5..32 (TREC)`` for per-task grids."""
    if not grid:
        return "?"
    if not isinstance(grid, dict):
        return f"{min(grid):g}..{max(grid):g}"
    by_grid: dict[str, list[str]] = {}
    for task, values in grid.items():
        by_grid.setdefault(c_grids(values), []).append(table_name(task))
    return ", ".join(f"{g} ({', '.join(tasks)})" for g, tasks in by_grid.items())


def transfer_protocol_line(p: dict[str, Any]) -> str:
    """The report's line under the transfer table (ConPVP Table 5), from the results' protocol record."""
    if p.get("classifier") == "pytorch":
        known = ("classifier", "folds", "inner_folds", "seed", "l2_grid", "optim", "nhid", "batch_size")
        known += ("tenacity", "epoch_size", "max_epoch", "validation_split", "lr", "betas", "eps")
        return (
            "Protocol: SentEval's PyTorch logistic regression (Adam, batch "
            f"{p.get('batch_size', '?')}, early stopping on the validation split with tenacity "
            f"{p.get('tenacity', '?')}, epoch_size {p.get('epoch_size', '?')}) on frozen embeddings; MR, CR, "
            f"SUBJ, MPQA by {p.get('folds', '?')}-fold CV with L2 chosen by inner "
            f"{p.get('inner_folds', '?')}-fold CV, SST-2 with L2 chosen on dev, TREC and MRPC by inner CV on "
            f"train; seed {p.get('seed', '?')}; L2 from {c_grids(p.get('l2_grid'))}"
            f"{extra_protocol(p, known)}; accuracy x100, {OVER_SEEDS}."
        )
    return (
        "Protocol: SentEval logistic regression on frozen embeddings; MR, CR, SUBJ, MPQA by "
        f"{p.get('folds', '?')}-fold CV with C chosen by inner {p.get('inner_folds', '?')}-fold CV, "
        f"SST-2 with C chosen on dev, TREC and MRPC by inner CV on train; seed {p.get('seed', '?')}"
        f"; C from {c_grids(p.get('C_grid'))}{extra_protocol(p, ('classifier', 'folds', 'inner_folds', 'seed', 'C_grid'))}; "
        f"accuracy x100, {OVER_SEEDS}."
    )


SUITE = Suite(
    name="transfer",
    scores=("acc", "dev_acc", "f1"),
    evaluate=evaluate_suite,
    options=TransferOptions,
    format_table=format_transfer_table,
    command=CommandLine(
        help="SentEval MR CR SUBJ MPQA SST2 TREC MRPC: logistic regression on frozen embeddings",
        description="Evaluate on the SentEval transfer tasks (SentEval's scikit-learn protocol: nested "
        "10-fold CV for MR/CR/SUBJ/MPQA, dev-selected C for SST2, inner CV on train for TREC/MRPC).",
    ),
    report=ReportLayout(
        page_order=5,
        title="Transfer (ConPVP Table 5)",
        summary=(("acc", "Transfer (Table 5)"),),
        protocol=transfer_protocol,
        protocol_line=transfer_protocol_line,
    ),
)
