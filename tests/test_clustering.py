"""Short-text clustering: readers against the staged files' counts and quirks, Hungarian accuracy against brute
force over all matchings, the k-means protocol, the CLI on a tiny model, bad input."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.metrics import normalized_mutual_info_score

from protoembed.cli import main
from protoembed.core.errors import ProtoembedError
from protoembed.evaluation.clustering import (
    cluster_runs,
    evaluate_clustering,
    format_clustering_table,
    hungarian_accuracy,
)
from protoembed.evaluation.tasks import TASKS, default_tasks

# texts and classes per dataset (counted on the staged files; Biomedical has no final newline, GoogleNews T/S 11108)
EXPECTED = {
    "AgNews": (8000, 4),
    "SearchSnippets": (12340, 8),
    "StackOverflow": (20000, 20),
    "Biomedical": (20000, 20),
    "Tweet": (2472, 89),
    "GoogleNews-TS": (11109, 152),
    "GoogleNews-T": (11108, 152),
    "GoogleNews-S": (11108, 152),
}


CLUSTERING_TASKS = default_tasks("clustering")


def read_clustering(task, data_dir):
    return TASKS[task].load(data_dir)


@pytest.mark.parametrize("task", CLUSTERING_TASKS)
def test_readers_match_the_staged_counts(task, data_dir):
    data = read_clustering(task, data_dir)
    assert (len(data.texts), data.n_classes) == EXPECTED[task]
    assert sorted(set(data.labels.tolist())) == list(range(data.n_classes))
    assert all(t and "\t" not in t and "\r" not in t and t == " ".join(t.split()) for t in data.texts)


def test_stackoverflow_tab_inside_a_text_is_kept_as_a_space(data_dir):
    data = read_clustering("StackOverflow", data_dir)
    assert 'error: "the video widget could not be initialized correctly"' in data.texts[10343]


def _brute_force_accuracy(labels: np.ndarray, clusters: np.ndarray) -> float:
    k = int(max(labels.max(), clusters.max())) + 1
    return max(np.mean(np.array(perm)[clusters] == labels) for perm in itertools.permutations(range(k)))


@pytest.mark.parametrize("seed", range(5))
def test_hungarian_accuracy_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 5, 60)
    clusters = np.where(rng.random(60) < 0.6, (labels + seed) % 5, rng.integers(0, 5, 60))
    assert hungarian_accuracy(labels, clusters) == pytest.approx(_brute_force_accuracy(labels, clusters))


def test_cluster_runs_are_seeded_kmeans_runs():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 4)) * 3
    labels = np.repeat(np.arange(3), 30)
    x = centres[labels] + rng.normal(size=(90, 4))
    result = cluster_runs(x, labels, 3, runs=4)
    expected_acc, expected_nmi = [], []
    for seed in range(4):
        clusters = KMeans(n_clusters=3, n_init=1, random_state=seed).fit_predict(x)
        expected_acc.append(_brute_force_accuracy(labels, clusters) * 100)
        expected_nmi.append(normalized_mutual_info_score(labels, clusters) * 100)
    np.testing.assert_allclose(result["runs_acc"], expected_acc)
    np.testing.assert_allclose(result["runs_nmi"], expected_nmi)
    assert result["acc"] == pytest.approx(np.mean(expected_acc))
    assert result["acc_std"] == pytest.approx(np.std(expected_acc, ddof=1))


def _write_toy(root, name="tweet/tweet-original-order.txt"):
    path = root / "clustering" / name
    path.parent.mkdir(parents=True)
    rows = [
        f"{1 + i % 2}\t{'cats purr softly' if i % 2 == 0 else 'stocks fell sharply'} {i}" for i in range(12)
    ]
    path.write_bytes(("\r\n".join(rows)).encode("utf-8"))  # CRLF, no final newline
    return path


def test_evaluate_clustering_with_a_fake_encoder(tmp_path):
    _write_toy(tmp_path)
    calls = []

    def encode(texts):
        calls.append(texts)
        return np.array([[1.0, 0.0] if "cats" in t else [0.0, 1.0] for t in texts])

    result = evaluate_clustering(encode, tmp_path, tasks=["Tweet"], runs=3)
    r = result["tasks"]["Tweet"]
    assert (r["acc"], r["nmi"], r["acc_std"], r["n"], r["classes"]) == (100.0, 100.0, 0.0, 12, 2)
    assert len(calls) == 1 and len(calls[0]) == 12
    table = format_clustering_table({**result, "model": "toy"})
    assert "| Tweet | 100.00 ± 0.00 | 100.00 ± 0.00 | 12 | 2 |" in table


def test_cli_clustering_with_a_tiny_model(tmp_path, tiny_model_dirs, capsys):
    _write_toy(tmp_path)
    out = tmp_path / "c.json"
    argv = ["eval", "clustering", "--model", str(tiny_model_dirs["albert"]), "--data-dir", str(tmp_path)]
    assert main([*argv, "--tasks", "Tweet", "--runs", "2", "--output", str(out)]) == 0
    saved = json.loads(out.read_text())
    assert saved["protocol"]["runs"] == 2 and len(saved["tasks"]["Tweet"]["runs_acc"]) == 2
    captured = capsys.readouterr()
    assert "| Tweet | Avg. |" in captured.out and "clustering: Tweet: acc " in captured.err


def test_bad_input_is_one_line(tmp_path, capsys):
    path = _write_toy(tmp_path)
    path.write_text("1\tfine\nnot-a-label text\n", encoding="utf-8")
    with pytest.raises(ProtoembedError, match=rf"{path}:2: expected 'label<TAB>text'"):
        read_clustering("Tweet", tmp_path)
    with pytest.raises(
        ProtoembedError, match="task AgNews: .* not found .*`protoembed data download agnews`"
    ):
        read_clustering("AgNews", tmp_path)
    with pytest.raises(ProtoembedError, match="runs must be at least 1"):
        evaluate_clustering(lambda t: np.zeros((len(t), 2)), tmp_path, tasks=["Tweet"], runs=0)
    assert main(["eval", "clustering", "--data-dir", str(tmp_path), "--tasks", "Tweet"]) == 2
    assert f"{path}:2" in capsys.readouterr().err


def test_cli_clustering_onnx_runtime_equals_torch(tmp_path, tiny_model_dirs, monkeypatch):
    _write_toy(tmp_path)
    monkeypatch.setenv("PROTOEMBED_CACHE", str(tmp_path / "cache"))
    argv = ["eval", "clustering", "--model", str(tiny_model_dirs["bert"]), "--data-dir", str(tmp_path)]
    results = {}
    for runtime in ("torch", "onnx"):
        out = tmp_path / f"{runtime}.json"
        assert (
            main([*argv, "--tasks", "Tweet", "--runs", "3", "--runtime", runtime, "--output", str(out)]) == 0
        )
        results[runtime] = json.loads(out.read_text())["tasks"]["Tweet"]
    assert len(list((tmp_path / "cache" / "onnx").iterdir())) == 1
    for key in ("runs_acc", "runs_nmi"):
        assert results["onnx"][key] == pytest.approx(results["torch"][key], abs=1e-9)
