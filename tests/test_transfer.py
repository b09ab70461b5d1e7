"""SentEval transfer tasks: readers against the staged files' counts and quirks, the batched probe and
the protocol against scikit-learn's own logistic regression and nested cross-validation, SentEval's
grids and MRPC features, the CLI on a tiny model, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_validate

from protoembed.cli import main
from protoembed.core.errors import ProtoembedError
from protoembed.evaluation.logistic import fit_many, predict_many
from protoembed.evaluation.tasks import SENTEVAL_C_GRID, TASKS, WIDE_C_GRID, default_tasks
from protoembed.evaluation.transfer import (
    C_GRID,
    evaluate_transfer,
    features,
    format_transfer_table,
    kfold_accuracy,
    task_sentences,
    train_test_accuracy,
)
from transfer_toy import bag_of_words, write_toy

# Examples per split and per class, counted on the staged files (empty lines skipped).
EXPECTED = {
    "MR": ({"all": 10662}, 0),
    "CR": ({"all": 3771}, 4),
    "SUBJ": ({"all": 10000}, 0),
    "MPQA": ({"all": 10603}, 3),
    "SST2": ({"train": 67349, "dev": 872, "test": 1821}, 0),
    "TREC": ({"train": 5452, "test": 500}, 0),
    "MRPC": ({"train": 4076, "test": 1725}, 0),
}


TRANSFER_TASKS = default_tasks("transfer")


def load_transfer_task(task, data_dir):
    return TASKS[task].load(data_dir)


@pytest.mark.parametrize("task", TRANSFER_TASKS)
def test_readers_match_the_staged_counts(task, data_dir):
    data = load_transfer_task(task, data_dir)
    sizes, skipped = EXPECTED[task]
    assert {split: len(part) for split, part in data.splits.items()} == sizes
    assert data.skipped_empty == skipped
    for part in data.splits.values():
        assert all(s and s == " ".join(s.split()) for s in part.sentences())
        assert set(np.unique(part.labels)) <= set(range(len(data.classes)))


def test_reader_quirks(data_dir):
    trec = load_transfer_task("TREC", data_dir)  # latin-1 training file, 6 coarse classes
    assert trec.classes == ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"]
    assert trec.splits["train"].texts[0] == "How did serfdom develop in and then leave Russia ?"
    assert any("\u00f0" in t for t in trec.splits["train"].texts)  # the byte 0xf0 read as latin-1
    mrpc = load_transfer_task("MRPC", data_dir)  # BOM + header skipped, label 1 = paraphrase
    assert mrpc.splits["train"].pairs[0][0].startswith("Amrozi accused his brother")
    assert np.bincount(mrpc.splits["test"].labels).tolist() == [578, 1147]
    mr = load_transfer_task("MR", data_dir)  # SentEval's order: the positive file first, label 1
    assert mr.splits["all"].labels[0] == 1 and mr.classes[1] == "positive"


def _synthetic(n: int = 120, d: int = 6, seed: int = 0, classes: int = 2) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    noisy = x[:, :classes] + 0.8 * rng.standard_normal((n, classes))  # noisy: C matters
    y = (noisy[:, 0] > 0).astype(int) if classes == 2 else noisy.argmax(1)
    return x, y


def _converged(c: float = 1.0) -> LogisticRegression:
    """scikit-learn's classifier run to convergence: the objective's minimiser, whatever the solver."""
    return LogisticRegression(C=c, tol=1e-10, max_iter=100_000)


@pytest.mark.parametrize("classes", [2, 3])
def test_fit_many_equals_sklearn_coefficients(classes):
    """Each batched fit (row subsets x C) against scikit-learn's on the same rows and C."""
    x, y = _synthetic(200, 5, seed=3, classes=classes)
    rng = np.random.default_rng(0)
    rows = [np.sort(rng.choice(200, 150, replace=False)) for _ in range(4)] + [np.arange(200)]
    cs = [0.5, 8.0, 32.0, 2.0, 0.25]
    weights = fit_many(x, y, rows, cs)
    for p, (r, c) in enumerate(zip(rows, cs)):
        model = _converged(c).fit(x[r], y[r])
        coef = np.vstack([model.coef_.T, model.intercept_[None]])  # (d + 1, 1 or classes)
        ours = weights[p].copy()
        if classes > 2:  # the multinomial intercepts are defined up to a common constant
            ours[-1] -= ours[-1].mean()
            coef[-1] -= coef[-1].mean()
        np.testing.assert_allclose(ours, coef, atol=1e-6)
        np.testing.assert_array_equal(predict_many(weights[p : p + 1], x)[0], model.predict(x))


@pytest.mark.parametrize(("classes", "grid"), [(2, SENTEVAL_C_GRID), (3, WIDE_C_GRID)])
def test_kfold_equals_sklearn_nested_cross_validation(classes, grid):
    """Our nested CV against GridSearchCV inside cross_validate (= cross_val_score, keeping the fitted
    searches), on the same folds and grid."""
    x, y = _synthetic(classes=classes)
    ours = kfold_accuracy(x, y, folds=5, inner_folds=4, seed=7, grid=grid)
    inner = StratifiedKFold(n_splits=4, shuffle=True, random_state=7)
    search = GridSearchCV(_converged(), {"C": list(grid)}, cv=inner, scoring="accuracy")
    outer = StratifiedKFold(n_splits=5, shuffle=True, random_state=7)
    reference = cross_validate(search, x, y, cv=outer, scoring="accuracy", return_estimator=True)
    assert ours["acc"] == pytest.approx(reference["test_score"].mean() * 100, abs=1e-9)
    fitted = reference["estimator"]
    assert ours["C"] == [f.best_params_["C"] for f in fitted]
    assert ours["dev_acc"] == pytest.approx(np.mean([f.best_score_ for f in fitted]) * 100, abs=1e-9)
    assert len(set(ours["C"])) > 1  # the data make the choice matter


def test_senteval_grids():
    assert TASKS["MR"].c_grid == C_GRID == (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
    assert TASKS["TREC"].c_grid == TASKS["MRPC"].c_grid == (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
    assert all(TASKS[t].c_grid == C_GRID for t in ("CR", "SUBJ", "MPQA", "SST2"))
    assert [t for t in TRANSFER_TASKS if TASKS[t].f1] == ["MRPC"]  # F1 beside accuracy, as SentEval


def test_fixed_splits_choose_c_on_dev_and_report_f1():
    x, y = _synthetic(150, seed=1)
    train, dev, test = (x[:90], y[:90]), (x[90:120], y[90:120]), (x[120:], y[120:])
    ours = train_test_accuracy(train, test, dev, f1=True)
    dev_scores = [_converged(c).fit(*train).score(*dev) for c in C_GRID]
    best = C_GRID[int(np.argmax(dev_scores))]
    model = _converged(best).fit(*train)
    predicted = model.predict(test[0])
    tp = int(((predicted == 1) & (test[1] == 1)).sum())
    f1 = 2 * tp / (int((predicted == 1).sum()) + int((test[1] == 1).sum()))
    assert ours["C"] == best and ours["dev_acc"] == pytest.approx(max(dev_scores) * 100)
    assert ours["acc"] == pytest.approx(np.mean(predicted == test[1]) * 100)
    assert ours["f1"] == pytest.approx(f1 * 100)


def test_mrpc_features_are_sentevals_absdiff_product(tmp_path):
    write_toy(tmp_path)
    data = load_transfer_task("MRPC", tmp_path)
    sentences = list(dict.fromkeys(data.splits["train"].sentences()))
    embeddings, index = bag_of_words(sentences), {s: i for i, s in enumerate(sentences)}
    a, b = data.splits["train"].pairs[3]
    u, v = embeddings[index[a]], embeddings[index[b]]
    x = features(data, "train", embeddings, index)
    np.testing.assert_array_equal(x[3], np.concatenate([np.abs(u - v), u * v]))
    x = features(data, "train", embeddings, index, mrpc_features="full")
    np.testing.assert_array_equal(x[3], np.concatenate([u, v, np.abs(u - v), u * v]))
    mr = load_transfer_task("MR", tmp_path)  # single sentences: the embedding itself
    texts = mr.splits["all"].texts
    embeddings = bag_of_words(texts)
    index = {s: i for i, s in enumerate(texts)}
    np.testing.assert_array_equal(features(mr, "all", embeddings, index), embeddings)


def test_evaluate_transfer_end_to_end_on_toy_data(tmp_path):
    write_toy(tmp_path)
    calls: list[list[str]] = []

    def encode(sentences: list[str]) -> np.ndarray:
        calls.append(sentences)
        return bag_of_words(sentences)

    result = evaluate_transfer(encode, tmp_path, folds=3, inner_folds=3)
    assert list(result["tasks"]) == list(TRANSFER_TASKS) and len(calls) == 1  # one pass for all tasks
    everything = [s for t in TRANSFER_TASKS for s in task_sentences(load_transfer_task(t, tmp_path))]
    assert calls[0] == list(dict.fromkeys(everything))  # each distinct sentence once, first-seen order
    assert result["tasks"]["MR"]["acc"] == 100.0 and result["tasks"]["MR"]["skipped_empty"] == 1
    assert result["tasks"]["TREC"]["n_train"] == 60 and result["tasks"]["TREC"]["classes"] == 2
    # the toy classes are separable by a word: every task is solved, so the average is exactly 100
    assert {t: r["acc"] for t, r in result["tasks"].items()} == dict.fromkeys(TRANSFER_TASKS, 100.0)
    assert result["avg"] == 100.0
    table = format_transfer_table({**result, "model": "toy"})
    assert "| MR | CR | SUBJ | MPQA | SST | TREC | MRPC | Avg. |" in table and "(F1 " in table


def test_cli_transfer_with_a_tiny_model(tmp_path, tiny_model_dirs, capsys):
    write_toy(tmp_path)
    out = tmp_path / "r.json"
    argv = ["eval", "transfer", "--model", str(tiny_model_dirs["bert"]), "--head", "mean"]
    argv += ["--data-dir", str(tmp_path), "--tasks", "MR", "MRPC", "--folds", "2", "--inner-folds", "2"]
    assert main([*argv, "--output", str(out)]) == 0
    saved = json.loads(out.read_text())
    assert saved["head"] == "mean" and set(saved["tasks"]) == {"MR", "MRPC"}
    grids = {"MR": list(C_GRID), "MRPC": [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0]}
    assert saved["protocol"] == {
        "classifier": "sklearn",
        "folds": 2,
        "inner_folds": 2,
        "seed": 1111,
        "C_grid": grids,
        "mrpc_features": "senteval",
    }
    captured = capsys.readouterr()
    assert "| MR | MRPC | Avg. |" in captured.out and "transfer: MRPC: acc " in captured.err


def test_bad_input_is_one_line(tmp_path, capsys):
    write_toy(tmp_path)
    bad = tmp_path / "senteval" / "SST" / "binary" / "sentiment-dev"
    bad.write_text("fine sentence\t1\nno label here\n", encoding="utf-8")
    with pytest.raises(ProtoembedError, match=rf"{bad}:2: expected 'sentence<TAB>0\|1'"):
        load_transfer_task("SST2", tmp_path)
    with pytest.raises(ProtoembedError, match="protoembed data download"):
        load_transfer_task("MR", tmp_path / "nowhere")
    with pytest.raises(ProtoembedError, match="folds must be at least 2"):
        evaluate_transfer(bag_of_words, tmp_path, tasks=["MR"], folds=1)
    with pytest.raises(ProtoembedError, match="mrpc_features expected senteval or full, got 'uv'"):
        evaluate_transfer(bag_of_words, tmp_path, tasks=["MRPC"], mrpc_features="uv")
    assert main(["eval", "transfer", "--data-dir", str(tmp_path), "--tasks", "SST2"]) == 2
    assert f"{bad}:2" in capsys.readouterr().err
