"""Embedding-space analyses (Figs. 4-6): each figure's numbers against the STS evaluation path or an
independent count, the pair draw, the CLI and its one-line errors (tiny model, staged STS data)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

import protoembed
from protoembed.cli import main
from protoembed.data.sts import load_sts_task
from protoembed.errors import ProtoembedError
from protoembed.evaluation import analysis
from protoembed.evaluation.sts import evaluate_sts

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def mean_model(tiny_model_dirs):
    return protoembed.load(str(tiny_model_dirs["bert"]), head="mean")


def test_similarity_vs_gold_matches_the_sts_evaluation(mean_model, data_dir, tmp_path):
    result = analysis.similarity_vs_gold(mean_model, data_dir, tmp_path / "fig4.png")
    expected = evaluate_sts(mean_model.encode, data_dir, tasks=["STSBenchmark"])["tasks"]["STSBenchmark"]
    assert result["n"] == 1379 and result["spearman"] == expected["spearman"]
    assert (tmp_path / "fig4.png").read_bytes()[:8] == PNG


def test_frequent_token_removal(mean_model, data_dir, tmp_path):
    result = analysis.frequent_token_removal(
        mean_model, data_dir, tmp_path / "fig5.png", top_k=(0, 3), tasks=["STSBenchmark"]
    )
    plain = evaluate_sts(mean_model.encode, data_dir, tasks=["STSBenchmark"])["avg"]
    assert result["rows"][0]["k"] == 0 and result["rows"][0]["avg"] == pytest.approx(plain, abs=1e-6)
    pairs = load_sts_task("STSBenchmark", data_dir, "senteval", "test")
    sentences = list(dict.fromkeys([*pairs.sentences1, *pairs.sentences2]))
    counts = Counter(
        t for s in sentences for t in mean_model.tokenizer(s, add_special_tokens=False)["input_ids"]
    )
    top3 = [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]]
    assert result["rows"][1]["removed"] == mean_model.tokenizer.convert_ids_to_tokens(top3)
    assert result["rows"][1]["avg"] != result["rows"][0]["avg"]
    assert mean_model.head == "mean" and isinstance(
        mean_model.pooler, type(protoembed.load("default").pooler)
    )


def test_frequent_token_removal_needs_a_mean_head(tiny_model_dirs, data_dir, tmp_path):
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="cls")
    with pytest.raises(ProtoembedError, match="needs a mean-pooling model"):
        analysis.frequent_token_removal(model, data_dir, tmp_path / "x.png", top_k=(0,))


def test_tsne_pairs_draws_similar_pairs_with_a_seed(mean_model, data_dir, tmp_path):
    first = analysis.tsne_pairs(mean_model, data_dir, tmp_path / "a.png", pairs=6, min_score=4.5, seed=3)
    again = analysis.tsne_pairs(mean_model, data_dir, tmp_path / "b.png", pairs=6, min_score=4.5, seed=3)
    assert [p["index"] for p in first["pairs"]] == [p["index"] for p in again["pairs"]]
    assert len(first["pairs"]) == 6 and all(p["gold"] >= 4.5 for p in first["pairs"])
    np.testing.assert_allclose([p["xy"] for p in first["pairs"]], [p["xy"] for p in again["pairs"]])
    with pytest.raises(ProtoembedError, match="need 2 <= pairs"):
        analysis.tsne_pairs(mean_model, data_dir, tmp_path / "c.png", pairs=5000)


def test_cli_analyze(tiny_model_dirs, data_dir, tmp_path, capsys):
    base = ["analyze", "similarity", "--model", str(tiny_model_dirs["albert"]), "--data-dir", str(data_dir)]
    assert main([*base, "--figure", str(tmp_path / "s.png"), "--output", str(tmp_path / "s.json")]) == 0
    saved = json.loads((tmp_path / "s.json").read_text())
    assert saved["analysis"] == "similarity" and saved["n"] == 1379
    assert main(["analyze", "frequent-tokens", "--figure", str(tmp_path / "f.png"), "--top-k", "1,x"]) == 2
    assert "--top-k takes comma-separated non-negative integers, got '1,x'" in capsys.readouterr().err
