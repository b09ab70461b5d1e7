"""Few-shot transfer: the draws, every seed's accuracy against a direct computation, what gets encoded,
the table, the violin plot and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from protoembed.cli import main
from protoembed.core.errors import ProtoembedError
from protoembed.evaluation.fewshot import draw_shots, evaluate_fewshot, format_fewshot_table
from protoembed.evaluation.tasks import TASKS
from transfer_toy import bag_of_words, write_toy


def test_draw_shots_per_class_without_replacement():
    labels = np.array([0] * 20 + [1] * 30 + [2] * 17)
    rows = draw_shots(labels, 16, seed=3)
    assert np.bincount(labels[rows]).tolist() == [16, 16, 16] and len(set(rows.tolist())) == 48
    np.testing.assert_array_equal(rows, draw_shots(labels, 16, seed=3))
    assert not np.array_equal(rows, draw_shots(labels, 16, seed=4))
    with pytest.raises(ProtoembedError, match="class 2 has 17 examples, fewer than --shots 18"):
        draw_shots(labels, 18, seed=0)


def _direct(x_pool, y_pool, x_test, y_test, rows, rest):
    model = LogisticRegression(C=1.0, max_iter=1000, random_state=0).fit(x_pool[rows], y_pool[rows])
    if rest:
        keep = np.setdiff1d(np.arange(len(y_pool)), rows)
        return float(np.mean(model.predict(x_pool[keep]) == y_pool[keep])) * 100
    return float(np.mean(model.predict(x_test) == y_test)) * 100


def test_each_seed_equals_a_direct_computation(tmp_path):
    write_toy(tmp_path)
    encoded: list[str] = []

    def encode(sentences):
        encoded.extend(sentences)
        return bag_of_words(sentences)

    result = evaluate_fewshot(encode, tmp_path, tasks=["TREC", "MR"], shots=4, seeds=3)
    trec, mr = TASKS["TREC"].load(tmp_path), TASKS["MR"].load(tmp_path)
    x_train, x_test = bag_of_words(trec.splits["train"].texts), bag_of_words(trec.splits["test"].texts)
    expected = [
        _direct(
            x_train,
            trec.splits["train"].labels,
            x_test,
            trec.splits["test"].labels,
            draw_shots(trec.splits["train"].labels, 4, s),
            rest=False,
        )
        for s in range(3)
    ]
    np.testing.assert_allclose(result["tasks"]["TREC"]["seeds_acc"], expected)
    x_all, y_all = bag_of_words(mr.splits["all"].texts), mr.splits["all"].labels
    expected = [_direct(x_all, y_all, None, None, draw_shots(y_all, 4, s), rest=True) for s in range(3)]
    np.testing.assert_allclose(result["tasks"]["MR"]["seeds_acc"], expected)
    r = result["tasks"]["MR"]
    assert r["acc"] == pytest.approx(np.mean(expected)) and r["acc_std"] == pytest.approx(
        np.std(expected, ddof=1)
    )
    # TREC: only the drawn training questions (at most 3 seeds x 8) and the 20 test questions are encoded
    drawn = {
        trec.splits["train"].texts[i] for s in range(3) for i in draw_shots(trec.splits["train"].labels, 4, s)
    }
    trec_encoded = [s for s in encoded if "?" in s]
    assert sorted(trec_encoded) == sorted(drawn | set(trec.splits["test"].texts))
    assert "| TREC | MR | Avg. |" in format_fewshot_table(result)


def test_cli_fewshot_writes_json_and_violin_plot(tmp_path, tiny_model_dirs):
    write_toy(tmp_path)
    out, figure = tmp_path / "f.json", tmp_path / "f.png"
    argv = ["eval", "fewshot", "--model", str(tiny_model_dirs["bert"]), "--data-dir", str(tmp_path)]
    argv += [
        "--tasks",
        "SST2",
        "MRPC",
        "--shots",
        "3",
        "--seeds",
        "2",
        "--output",
        str(out),
        "--figure",
        str(figure),
    ]
    assert main(argv) == 0
    saved = json.loads(out.read_text())
    assert saved["protocol"] == {"shots_per_class": 3, "seeds": 2, "C": 1.0}
    assert len(saved["tasks"]["MRPC"]["seeds_acc"]) == 2
    assert figure.read_bytes()[:4] == b"\x89PNG"
    assert main([*argv[:-4], "--shots", "0"]) == 2  # bad value: one-line error, exit 2


def test_cli_fewshot_onnx_runtime_equals_torch(tmp_path, tiny_model_dirs, monkeypatch):
    write_toy(tmp_path)
    monkeypatch.setenv("PROTOEMBED_CACHE", str(tmp_path / "cache"))
    argv = ["eval", "fewshot", "--model", str(tiny_model_dirs["bert"]), "--data-dir", str(tmp_path)]
    argv += ["--tasks", "MR", "MRPC", "--shots", "3", "--seeds", "2"]
    results = {}
    for runtime in ("torch", "onnx"):
        out = tmp_path / f"{runtime}.json"
        assert main([*argv, "--runtime", runtime, "--output", str(out)]) == 0
        results[runtime] = json.loads(out.read_text())["tasks"]
    assert len(list((tmp_path / "cache" / "onnx").iterdir())) == 1
    for task, torch_result in results["torch"].items():
        assert results["onnx"][task]["seeds_acc"] == pytest.approx(torch_result["seeds_acc"], abs=1e-9)
