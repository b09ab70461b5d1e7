"""The embedding store and ``runtime="onnx"`` on an opened export: keyed on the export's own files."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import protoembed
from protoembed.evaluation.encoders import LazyEncoder
from protoembed.model.export import OnnxEmbedder, export_embedder
from protoembed.model.export.cache import export_digest, model_digest

SENTENCES = ["a man is playing a guitar .", "a woman is slicing an onion .", "hello"]


@pytest.fixture(scope="module")
def export_dir(tiny_model_dirs, tmp_path_factory):
    """(torch model, its fp32 ONNX export folder): the tiny BERT, mean head."""
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean", max_seq_length=12)
    return model, export_embedder(model, tmp_path_factory.mktemp("export") / "mean")


@pytest.mark.parametrize("runtime", ["auto", "onnx"])
def test_store_on_an_export_is_keyed_on_its_files_and_reused(export_dir, runtime, tmp_path, monkeypatch):
    monkeypatch.setenv("PROTOEMBED_CACHE", str(tmp_path))
    model, folder = export_dir
    first = LazyEncoder(
        lambda: protoembed.load(str(folder), runtime="onnx"), runtime=runtime, cache_embeddings=True
    )
    vectors = first(SENTENCES)
    assert isinstance(first.model, OnnxEmbedder)
    np.testing.assert_allclose(vectors, model.encode(SENTENCES), atol=1e-4)
    (store,) = (tmp_path / "embeddings").iterdir()
    assert store.name == f"{export_digest(folder, 12)}-onnx-fp32"  # what ran it: ONNX Runtime, fp32
    again = LazyEncoder(
        lambda: protoembed.load(str(folder), runtime="onnx"), runtime=runtime, cache_embeddings=True
    )
    again(SENTENCES[:1])

    def refuse(*args, **kwargs):
        raise AssertionError("a stored sentence was encoded again")

    monkeypatch.setattr(again.model, "encode", refuse)
    np.testing.assert_array_equal(again(SENTENCES), vectors)


def test_export_digest_follows_the_files_and_the_length(export_dir, tmp_path):
    _, folder = export_dir
    copy = shutil.copytree(folder, tmp_path / "copy")
    opened = protoembed.load(str(copy))
    assert model_digest(opened) == export_digest(folder, 12) == export_digest(copy, 12)
    assert export_digest(copy, 8) != export_digest(copy, 12)
    config = copy / "protoembed_export.json"
    config.write_text(config.read_text() + " ")
    assert export_digest(copy, 12) != export_digest(folder, 12)
