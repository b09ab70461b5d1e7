"""Embedding-space analyses (Figs. 4-7) comparing models: each figure's numbers against the STS evaluation
path or an independent count, one panel / line / violin per model (checked on the saved figure's axes and
its JSON), Fig. 6's pairs (exact gold scores, the same for every model), the CLI and its one-line errors
(tiny models, staged STS data)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

import protoembed
from protoembed.cli import main
from protoembed.core.errors import ProtoembedError
from protoembed.evaluation import analysis, fewshot_figure
from protoembed.evaluation.sts import evaluate_sts
from protoembed.outputs.io import save_figure

PNG = b"\x89PNG\r\n\x1a\n"


def load_sts_task(task, data_dir, variant="senteval", split="test"):
    """An STS task's pairs, read through its entry."""
    from protoembed.evaluation.tasks import get_task

    return get_task(task, "sts").load(data_dir, variant, split)


@pytest.fixture(scope="module")
def models(tiny_model_dirs):
    """Two different tiny mean-pooling models, labelled."""
    return [(kind, protoembed.load(str(tiny_model_dirs[kind]), head="mean")) for kind in ("bert", "albert")]


@pytest.fixture()
def drawn(monkeypatch):
    """The figures saved during a test: for each, [(panel title, lines, collections) per axes]."""
    figures: list[list[tuple[str, int, int]]] = []

    def spy(fig, path, dpi=110):
        figures.append([(ax.get_title(), len(ax.get_lines()), len(ax.collections)) for ax in fig.axes])
        return save_figure(fig, path, dpi)

    monkeypatch.setattr(analysis, "save_figure", spy)
    monkeypatch.setattr(fewshot_figure, "save_figure", spy)
    return figures


def test_similarity_one_panel_per_model_matches_the_sts_evaluation(models, data_dir, tmp_path, drawn):
    result = analysis.similarity_vs_gold(models, data_dir, tmp_path / "fig4.png")
    assert drawn == [[("bert", 0, 1), ("albert", 0, 1)]]  # two panels, one scatter each
    assert (tmp_path / "fig4.png").read_bytes()[:8] == PNG
    assert [m["label"] for m in result["models"]] == ["bert", "albert"] and result["n"] == 1379
    gold = load_sts_task("STSBenchmark", data_dir, "senteval", "test").scores
    np.testing.assert_array_equal(result["gold"], gold)
    expected = evaluate_sts(models[1][1].encode, data_dir, tasks=["STSBenchmark"])["tasks"]["STSBenchmark"]
    assert result["models"][1]["spearman"] == expected["spearman"]
    assert result["models"][1]["pearson"] == expected["pearson"]
    for entry in result["models"]:
        scaled = np.array(entry["scaled"])
        assert len(scaled) == 1379 and scaled.min() == 0.0 and scaled.max() == 1.0
    assert result["models"][0]["scaled"] != result["models"][1]["scaled"]


def test_frequent_token_removal_one_line_per_model(models, data_dir, tmp_path, drawn):
    result = analysis.frequent_token_removal(
        models, data_dir, tmp_path / "fig5.png", top_k=(0, 3), tasks=["STSBenchmark"]
    )
    assert len(drawn[0]) == 1 and drawn[0][0][1] == 2  # one axes, two lines
    pairs = load_sts_task("STSBenchmark", data_dir, "senteval", "test")
    sentences = list(dict.fromkeys([*pairs.sentences1, *pairs.sentences2]))
    for (label, model), entry in zip(models, result["models"]):
        rows = entry["rows"]
        assert entry["label"] == label and [r["k"] for r in rows] == [0, 3]
        if label == "bert":  # k = 0 is plain mean pooling (one model suffices: the same code runs for both)
            plain = evaluate_sts(model.encode, data_dir, tasks=["STSBenchmark"])["avg"]
            assert rows[0]["avg"] == pytest.approx(plain, abs=1e-6)
        counts = Counter(
            t for s in sentences for t in model.tokenizer(s, add_special_tokens=False)["input_ids"]
        )
        top3 = [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]]
        assert rows[1]["removed"] == model.tokenizer.convert_ids_to_tokens(top3)
        # to 1e-3: pairs of equal vectors are ranked by float32 rounding there, float64 rounding here
        assert rows[1]["avg"] == pytest.approx(_spearman_without(model, pairs, set(top3)), abs=1e-3)
        assert model.head == "mean" and type(model.pooler).__name__ != "_MeansWithoutTopK"  # pooler restored


def _spearman_without(model, pairs, removed: set[int]) -> float:
    """Fig. 5's score from its definition, by hand: each sentence's token states from the Hugging Face
    model, averaged over its tokens (special tokens included, as mean pooling does) except those in
    ``removed``; Spearman x100 of the pairs' cosines (float64) against gold, a pair of one sentence twice
    a tie at 1."""
    import torch
    from scipy.stats import spearmanr

    assert not model.encoder.do_lower_case
    sentences = list(dict.fromkeys([*pairs.sentences1, *pairs.sentences2]))
    vectors = {}
    for start in range(0, len(sentences), 256):
        chunk = sentences[start : start + 256]
        batch = model.tokenizer(
            chunk,
            padding=True,
            truncation=True,
            max_length=model.encoder.position_budget,
            return_tensors="pt",
        )
        with torch.no_grad():
            states = model.encoder.auto_model(**batch).last_hidden_state.double()
        keep = batch["attention_mask"].bool() & ~torch.isin(batch["input_ids"], torch.tensor(sorted(removed)))
        weights = keep.unsqueeze(-1).double()
        means = (states * weights).sum(1) / weights.sum(1)
        vectors.update(zip(chunk, means.numpy()))
    u = np.stack([vectors[x] for x in pairs.sentences1])
    v = np.stack([vectors[x] for x in pairs.sentences2])
    cosines = (u * v).sum(1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1))
    cosines[[a == b for a, b in zip(pairs.sentences1, pairs.sentences2)]] = 1.0
    return float(spearmanr(cosines, pairs.scores)[0]) * 100


def test_frequent_token_removal_needs_a_mean_head(tiny_model_dirs, data_dir, tmp_path):
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="cls")
    with pytest.raises(ProtoembedError, match="model 'cls-bert' has head 'cls'"):
        analysis.frequent_token_removal([("cls-bert", model)], data_dir, tmp_path / "x.png", top_k=(0,))


def test_tsne_pairs_have_gold_0_3_5_and_are_the_same_for_every_model(models, data_dir, tmp_path, drawn):
    result = analysis.tsne_pairs(models, data_dir, tmp_path / "a.png", per_score=10, seed=3)
    assert [(title, lines) for title, lines, _ in drawn[0]] == [("bert", 30), ("albert", 30)]
    data = load_sts_task("STSBenchmark", data_dir, "senteval", "test")
    pairs = result["pairs"]
    assert Counter(p["gold"] for p in pairs) == {0.0: 10, 3.0: 10, 5.0: 10}
    assert [p["id"] for p in pairs] == list(range(1, 11)) * 3
    for p in pairs:
        assert data.scores[p["index"]] == p["gold"]
        assert (data.sentences1[p["index"]], data.sentences2[p["index"]]) == (p["sentence1"], p["sentence2"])
    # the draw depends on the data and the seed only: one model alone gets the same pairs
    alone = analysis.tsne_pairs(models[1:], data_dir, tmp_path / "b.png", per_score=10, seed=3)
    assert alone["pairs"] == pairs
    np.testing.assert_allclose(alone["models"][0]["xy"], result["models"][1]["xy"])
    assert len(result["models"]) == 2 and all(len(m["xy"]) == 30 for m in result["models"])
    assert not np.allclose(result["models"][0]["xy"], result["models"][1]["xy"])
    other = analysis.draw_tsne_pairs(data.scores, 10, seed=4)
    assert [i for _, idx in other for i in idx] != [p["index"] for p in pairs]
    with pytest.raises(ProtoembedError, match="gold exactly 3"):
        analysis.draw_tsne_pairs(data.scores, 88, seed=0)


def _fewshot_result(rng, tasks=("MR", "TREC"), seeds=4, model="m"):
    return {
        "model": model,
        "suite": "fewshot",
        "protocol": {"shots_per_class": 16, "seeds": seeds, "C": 1.0},
        "tasks": {t: {"acc": 0.0, "seeds_acc": rng.uniform(50, 90, seeds).tolist()} for t in tasks},
    }


def test_fewshot_figure_models_side_by_side(tmp_path, drawn):
    rng = np.random.default_rng(0)
    a1, a2, b = (_fewshot_result(rng) for _ in range(3))
    result = fewshot_figure.plot_fewshot_comparison([("A", [a1, a2]), ("B", [b])], tmp_path / "f7.png")
    assert [m["label"] for m in result["models"]] == ["A", "B"] and result["tasks"] == ["MR", "TREC"]
    assert (
        result["models"][0]["values"]["MR"] == a1["tasks"]["MR"]["seeds_acc"] + a2["tasks"]["MR"]["seeds_acc"]
    )
    assert result["models"][1]["values"]["TREC"] == b["tasks"]["TREC"]["seeds_acc"]
    # per model: 2 violin bodies + 4 line collections (means, mins, maxes, bars) + 2 dot sets + 1 legend entry
    assert drawn[0][0][2] == 2 * (2 + 4 + 2 + 1)
    with pytest.raises(ProtoembedError, match="model 'C' has no few-shot result for TREC"):
        fewshot_figure.plot_fewshot_comparison(
            [("A", [a1]), ("C", [_fewshot_result(rng, ("MR",))])], tmp_path / "x.png"
        )


def test_cli_analyze_two_models(tiny_model_dirs, data_dir, tmp_path, capsys):
    bert, albert = str(tiny_model_dirs["bert"]), str(tiny_model_dirs["albert"])
    base = [
        "analyze",
        "tsne",
        "--model",
        bert,
        "--model",
        albert,
        "--data-dir",
        str(data_dir),
        "--pairs",
        "2",
    ]
    assert main([*base, "--figure", str(tmp_path / "s.png")]) == 0
    saved = json.loads((tmp_path / "s.json").read_text())  # the JSON goes beside the figure by default
    assert saved["analysis"] == "tsne" and len(saved["pairs"]) == 6
    assert [(m["label"], m["model"]) for m in saved["models"]] == [("bert", bert), ("albert", albert)]
    labelled = [*base, "--label", "B", "--label", "A", "--figure", str(tmp_path / "t.png")]
    assert main([*labelled, "--output", str(tmp_path / "t.json")]) == 0
    assert [m["label"] for m in json.loads((tmp_path / "t.json").read_text())["models"]] == ["B", "A"]


def test_cli_analyze_fewshot_reads_results(tmp_path):
    rng = np.random.default_rng(1)
    files = []
    for name, model in (("a-seed1", "runs/a-seed1/best"), ("a-seed2", "runs/a-seed2/best"), ("b", "b")):
        files.append(tmp_path / f"{name}.json")
        files[-1].write_text(json.dumps(_fewshot_result(rng, model=model)))
    assert main(["analyze", "fewshot", *map(str, files), "--figure", str(tmp_path / "f7.png")]) == 0
    saved = json.loads((tmp_path / "f7.json").read_text())
    assert [(m["label"], m["runs"]) for m in saved["models"]] == [("a", 2), ("b", 1)]


def test_cli_analyze_errors(tiny_model_dirs, tmp_path, capsys):
    bert = str(tiny_model_dirs["bert"])
    cases = [
        (
            ["compare", "--model", bert, "--out-dir", str(tmp_path)],
            "compare draws models side by side and needs at least two --model; got only",
        ),
        (
            ["similarity", "--model", bert, "--model", bert, "--figure", "x.png"],
            "two models share the label 'bert'",
        ),
        (
            ["tsne", "--model", bert, "--label", "a", "--label", "b", "--figure", "x.png"],
            "--label given 2 times for 1 --model",
        ),
        (
            ["frequent-tokens", "--figure", "f.png", "--top-k", "1,x"],
            "--top-k takes comma-separated non-negative integers, got '1,x'",
        ),
        (
            ["tsne", "--model", str(tmp_path / "nope"), "--figure", str(tmp_path / "x.png")],
            f"model '{tmp_path / 'nope'}': no such directory",
        ),
        (
            ["fewshot", str(tmp_path / "missing.json"), "--figure", "f.png"],
            f"{tmp_path / 'missing.json'}: no such results file",
        ),
    ]
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{")
    cases.append(
        (
            ["similarity", "--model", str(tmp_path / "broken"), "--figure", str(tmp_path / "x.png")],
            f"cannot load the model in {tmp_path / 'broken'}",
        )
    )
    for argv, message in cases:
        assert main(["analyze", *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


def test_cli_analyze_compare(tiny_model_dirs, data_dir, tmp_path, capsys):
    bert, albert = str(tiny_model_dirs["bert"]), str(tiny_model_dirs["albert"])
    argv = ["analyze", "compare", "--model", bert, "--model", albert, "--data-dir", str(data_dir)]
    assert main([*argv, "--out-dir", str(tmp_path), "--top-k", "0,2", "--pairs", "3", "--head", "cls"]) == 0
    assert "skipped frequent-tokens: model 'bert' has head 'cls'" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "analysis-similarity.json",
        "analysis-similarity.png",
        "analysis-tsne.json",
        "analysis-tsne.png",
    ]
    tsne = json.loads((tmp_path / "analysis-tsne.json").read_text())
    assert [m["label"] for m in tsne["models"]] == ["bert", "albert"] and len(tsne["pairs"]) == 9


def test_cli_frequent_tokens_without_tasks(tiny_model_dirs, data_dir, tmp_path, monkeypatch):
    """Without ``--tasks`` the figure asks for the STS suite's default run (``tasks=None``) and its JSON
    names the tasks it read (the default run narrowed to STS-B here, to stay small); k = 0 is plain mean
    pooling, the STS evaluation's average."""
    from protoembed.evaluation.tasks import get_tasks

    asked = []

    def default_narrowed(tasks, suite, split):
        asked.append(tasks)
        return get_tasks(["STSBenchmark"] if tasks is None else tasks, suite, split)

    monkeypatch.setattr(analysis, "get_tasks", default_narrowed)
    bert = str(tiny_model_dirs["bert"])
    figure = tmp_path / "f5.png"
    argv = ["analyze", "frequent-tokens", "--model", bert, "--head", "mean", "--top-k", "0"]
    assert main([*argv, "--data-dir", str(data_dir), "--figure", str(figure)]) == 0
    saved = json.loads(figure.with_suffix(".json").read_text())
    assert asked == [None] and saved["tasks"] == ["STSBenchmark"]
    plain = evaluate_sts(protoembed.load(bert, head="mean").encode, data_dir, tasks=["STSBenchmark"])["avg"]
    assert saved["models"][0]["rows"][0]["avg"] == pytest.approx(plain, abs=1e-6)
