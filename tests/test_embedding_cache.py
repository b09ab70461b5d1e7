"""The on-disk sentence-vector store (``--cache-embeddings``): only new sentences are encoded, looked-up
vectors are the encoder's own, a second suite of the same model reuses the first one's vectors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from protoembed.cli import main
from protoembed.core.errors import ProtoembedError
from protoembed.evaluation.embedding_cache import STORE_FILE, EmbeddingStore, store_folder
from transfer_toy import write_toy


class CountingEncoder:
    """A deterministic encoder (vector = a hash of the text) that records what it was asked."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, sentences: list[str]) -> np.ndarray:
        self.calls.append(list(sentences))
        return np.array([[len(s), sum(map(ord, s)) % 97, s.count("a")] for s in sentences], dtype=np.float32)


def test_only_new_sentences_are_encoded_and_the_store_survives_a_reload(tmp_path) -> None:
    encode = CountingEncoder()
    store = EmbeddingStore(encode, tmp_path / "m")
    first = store(["a cat", "a dog", "a cat"])
    np.testing.assert_array_equal(first, encode(["a cat", "a dog", "a cat"]))
    second = store(["a dog", "an emu", "a cat"])
    assert encode.calls[0] == ["a cat", "a dog"] and encode.calls[2] == ["an emu"]
    np.testing.assert_array_equal(second, encode(["a dog", "an emu", "a cat"]))
    assert (store.encoded, store.looked_up) == (3, 3)

    again = CountingEncoder()
    reloaded = EmbeddingStore(again, tmp_path / "m")
    np.testing.assert_array_equal(reloaded(["an emu", "a cat", "a dog"]), second[[1, 2, 0]])
    assert again.calls == []  # everything came from disk
    assert not [p for p in (tmp_path / "m").iterdir() if p.name != STORE_FILE]  # no temp file left


def test_a_damaged_store_is_a_one_line_error(tmp_path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / STORE_FILE).write_bytes(b"not a zip")
    with pytest.raises(ProtoembedError, match=rf"{tmp_path / 'm' / STORE_FILE}: not an embedding store"):
        EmbeddingStore(CountingEncoder(), tmp_path / "m")


def test_store_folder_is_keyed_by_model_and_runtime(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PROTOEMBED_CACHE", str(tmp_path))
    assert store_folder("abc", "onnx") == tmp_path / "embeddings" / "abc-onnx"
    assert store_folder("abc", "torch", tmp_path / "x") == tmp_path / "x" / "abc-torch"


def test_few_shot_after_transfer_encodes_nothing_and_scores_the_same(tmp_path, tiny_model_dirs, monkeypatch):
    write_toy(tmp_path)
    monkeypatch.setenv("PROTOEMBED_CACHE", str(tmp_path / "cache"))
    model = ["--model", str(tiny_model_dirs["bert"]), "--data-dir", str(tmp_path), "--tasks", "MR", "MRPC"]
    transfer = ["eval", "transfer", *model, "--folds", "3", "--inner-folds", "3"]
    fewshot = ["eval", "fewshot", *model, "--shots", "3", "--seeds", "2"]
    assert main([*fewshot, "--output", str(tmp_path / "plain.json")]) == 0
    assert not (tmp_path / "cache").exists()  # no store without the option

    assert main([*transfer, "--cache-embeddings"]) == 0
    (folder,) = (tmp_path / "cache" / "embeddings").iterdir()
    assert folder.name.endswith("-torch-fp32")  # the store is keyed by runtime and precision
    stored = (folder / STORE_FILE).read_bytes()
    assert main([*fewshot, "--cache-embeddings", "--output", str(tmp_path / "cached.json")]) == 0
    assert (folder / STORE_FILE).read_bytes() == stored  # every few-shot sentence was looked up

    plain = json.loads((tmp_path / "plain.json").read_text())["tasks"]
    cached = json.loads((tmp_path / "cached.json").read_text())["tasks"]
    for task in ("MR", "MRPC"):
        assert cached[task]["seeds_acc"] == pytest.approx(plain[task]["seeds_acc"], abs=1e-9)
