"""The transfer suite's faster encoding equals the plain one: repeated input rows run once in
``Embedder.encode``, the cached fp32 ONNX export encodes as the torch model, and ``eval transfer
--runtime onnx`` reports what ``--runtime torch`` does."""

from __future__ import annotations

import json

import numpy as np

import protoembed
from protoembed.cli import main
from protoembed.model.export import cache
from transfer_toy import write_toy

SENTENCES = [
    "a man is playing a guitar .",
    "A MAN is playing a guitar.",  # the same tokens for an uncased tokenizer
    "two dogs are running through a field of grass while the cat sat on the mat .",
    "hello",
    "a man is playing a guitar .",
    "stocks fell sharply after the report on monday .",
    "hello",
]


def test_repeated_rows_run_once_and_equal_one_by_one(tiny_model_dirs, monkeypatch):
    embedder = protoembed.load(str(tiny_model_dirs["bert"]), head="mean")
    one_by_one = np.stack([embedder.encode(s) for s in SENTENCES])
    rows: list[int] = []
    embed = type(embedder).embed  # the one forward pass encode runs
    monkeypatch.setattr(
        type(embedder),
        "embed",
        lambda self, f, **kw: rows.append(len(f["input_ids"])) or embed(self, f, **kw),
    )
    vectors = embedder.encode(SENTENCES, batch_size=2)
    distinct = {tuple(ids) for ids in embedder.encoder.tokenize_ids(SENTENCES)[0]}
    assert sum(rows) == len(distinct) < len(SENTENCES)
    np.testing.assert_allclose(vectors, one_by_one, atol=1e-5)
    np.testing.assert_array_equal(vectors[0], vectors[4])
    prompt = protoembed.load(str(tiny_model_dirs["bert"]), head="mask")  # rows with a mask index
    np.testing.assert_allclose(
        prompt.encode(SENTENCES, batch_size=3), np.stack([prompt.encode(s) for s in SENTENCES]), atol=1e-5
    )


def test_cached_onnx_export_equals_torch_and_is_reused(tiny_model_dirs, tmp_path, monkeypatch):
    # A saved model: a bare backbone gets a freshly initialised (unused) pooler layer at every load.
    saved = protoembed.load(str(tiny_model_dirs["bert"]), head="mean").save(tmp_path / "model")
    embedder = protoembed.load(str(saved))
    onnx = cache.onnx_embedder(embedder, tmp_path / "cache")
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [cache.model_digest(embedder)]
    np.testing.assert_allclose(onnx.encode(SENTENCES), embedder.encode(SENTENCES), atol=1e-5)

    def refuse(*args, **kwargs):
        raise AssertionError("exported again")

    monkeypatch.setattr("protoembed.model.export.graph.export_embedder", refuse)
    again = cache.onnx_embedder(protoembed.load(str(saved)), tmp_path / "cache")
    np.testing.assert_array_equal(again.encode(SENTENCES), onnx.encode(SENTENCES))
    other = protoembed.load(str(saved), head="cls")
    assert cache.model_digest(other) != cache.model_digest(embedder)


def test_cli_transfer_onnx_runtime_equals_torch(tmp_path, tiny_model_dirs, monkeypatch):
    write_toy(tmp_path)
    monkeypatch.setenv("PROTOEMBED_CACHE", str(tmp_path / "cache"))
    saved = protoembed.load(str(tiny_model_dirs["bert"]), head="mean").save(tmp_path / "model")
    argv = ["eval", "transfer", "--model", str(saved)]
    argv += [
        "--data-dir",
        str(tmp_path),
        "--tasks",
        "MR",
        "TREC",
        "MRPC",
        "--folds",
        "3",
        "--inner-folds",
        "3",
    ]
    results = {}
    for runtime in ("torch", "onnx"):
        out = tmp_path / f"{runtime}.json"
        assert main([*argv, "--runtime", runtime, "--output", str(out)]) == 0
        results[runtime] = json.loads(out.read_text())
    assert len(list((tmp_path / "cache" / "onnx").iterdir())) == 1
    for task, torch_result in results["torch"]["tasks"].items():
        onnx_result = results["onnx"]["tasks"][task]
        assert onnx_result["C"] == torch_result["C"]
        assert abs(onnx_result["acc"] - torch_result["acc"]) <= 1e-9
