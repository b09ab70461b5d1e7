"""SentEval transfer tasks: readers against SOURCES.md counts and quirks, the protocol against
scikit-learn's own nested cross-validation, MRPC features, the CLI on a tiny model, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score

from protoembed.cli import main
from protoembed.data.transfer import TRANSFER_TASKS, load_transfer_task
from protoembed.errors import ProtoembedError
from protoembed.evaluation.transfer import (
    C_GRID,
    evaluate_transfer,
    features,
    format_transfer_table,
    kfold_accuracy,
    train_test_accuracy,
)
from transfer_toy import bag_of_words, write_toy

# Examples per split and per class, counted on the staged files (SOURCES.md; empty lines skipped).
EXPECTED = {
    "MR": ({"all": 10662}, 0),
    "CR": ({"all": 3771}, 4),
    "SUBJ": ({"all": 10000}, 0),
    "MPQA": ({"all": 10603}, 3),
    "SST2": ({"train": 67349, "dev": 872, "test": 1821}, 0),
    "TREC": ({"train": 5452, "test": 500}, 0),
    "MRPC": ({"train": 4076, "test": 1725}, 0),
}


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


def _synthetic(n: int = 120, d: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    y = (x[:, 0] + 0.8 * rng.standard_normal(n) > 0).astype(int)  # noisy: C matters
    return x, y


def test_kfold_equals_sklearn_nested_cross_validation():
    """Our nested CV against GridSearchCV inside cross_val_score (the same folds and grid)."""
    x, y = _synthetic()
    ours = kfold_accuracy(x, y, folds=5, inner_folds=4, seed=7)
    inner = StratifiedKFold(n_splits=4, shuffle=True, random_state=7)
    search = GridSearchCV(
        LogisticRegression(max_iter=1000, random_state=7), {"C": list(C_GRID)}, cv=inner, scoring="accuracy"
    )
    outer = StratifiedKFold(n_splits=5, shuffle=True, random_state=7)
    reference = cross_val_score(search, x, y, cv=outer, scoring="accuracy")
    assert ours["acc"] == pytest.approx(reference.mean() * 100, abs=1e-9)
    chosen = [search.fit(x[tr], y[tr]).best_params_["C"] for tr, _ in outer.split(x, y)]
    assert ours["C"] == chosen


def test_fixed_splits_choose_c_on_dev_and_report_f1():
    x, y = _synthetic(150, seed=1)
    train, dev, test = (x[:90], y[:90]), (x[90:120], y[90:120]), (x[120:], y[120:])
    ours = train_test_accuracy(train, test, dev, f1=True)
    dev_scores = [
        LogisticRegression(C=c, max_iter=1000, random_state=1111).fit(*train).score(*dev) for c in C_GRID
    ]
    best = C_GRID[int(np.argmax(dev_scores))]
    model = LogisticRegression(C=best, max_iter=1000, random_state=1111).fit(*train)
    predicted = model.predict(test[0])
    tp = int(((predicted == 1) & (test[1] == 1)).sum())
    f1 = 2 * tp / (int((predicted == 1).sum()) + int((test[1] == 1).sum()))
    assert ours["C"] == best and ours["dev_acc"] == pytest.approx(max(dev_scores) * 100)
    assert ours["acc"] == pytest.approx(np.mean(predicted == test[1]) * 100)
    assert ours["f1"] == pytest.approx(f1 * 100)


def test_mrpc_features_are_u_v_absdiff_product(tmp_path):
    write_toy(tmp_path)
    data = load_transfer_task("MRPC", tmp_path)
    sentences = list(dict.fromkeys(data.splits["train"].sentences()))
    embeddings, index = bag_of_words(sentences), {s: i for i, s in enumerate(sentences)}
    x = features(data, "train", embeddings, index)
    a, b = data.splits["train"].pairs[3]
    u, v = embeddings[index[a]], embeddings[index[b]]
    np.testing.assert_array_equal(x[3], np.concatenate([u, v, np.abs(u - v), u * v]))


def test_evaluate_transfer_end_to_end_on_toy_data(tmp_path):
    write_toy(tmp_path)
    calls: list[list[str]] = []

    def encode(sentences: list[str]) -> np.ndarray:
        calls.append(sentences)
        return bag_of_words(sentences)

    result = evaluate_transfer(encode, tmp_path, folds=3, inner_folds=3)
    assert list(result["tasks"]) == list(TRANSFER_TASKS) and len(calls) == len(TRANSFER_TASKS)
    assert all(len(set(c)) == len(c) for c in calls)  # each distinct sentence encoded once per task
    assert result["tasks"]["MR"]["acc"] == 100.0 and result["tasks"]["MR"]["skipped_empty"] == 1
    assert result["tasks"]["TREC"]["n_train"] == 60 and result["tasks"]["TREC"]["classes"] == 2
    assert result["avg"] == pytest.approx(np.mean([r["acc"] for r in result["tasks"].values()]))
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
    assert saved["protocol"] == {"folds": 2, "inner_folds": 2, "seed": 1111, "C_grid": list(C_GRID)}
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
    assert main(["eval", "transfer", "--data-dir", str(tmp_path), "--tasks", "SST2"]) == 2
    assert f"{bad}:2" in capsys.readouterr().err
