"""LazyEncoder, the library's encode callable behind ``protoembed eval``: the model loads on the first
call and once, the embedding store and the runtime are chosen there, bad input is a one-line error."""

from __future__ import annotations

import numpy as np
import pytest

import protoembed
from protoembed.core.errors import ProtoembedError
from protoembed.evaluation.encoders import LazyEncoder
from tiny_models import specials_only_mean

SENTENCES = ["a man is playing a guitar .", "a woman is slicing an onion ."]


def test_loads_once_on_the_first_call_and_encodes_as_the_model(tiny_model_dirs):
    loads = []

    def load():
        loads.append(1)
        return protoembed.load(str(tiny_model_dirs["bert"]), head="mean", device="cpu")

    encode = LazyEncoder(load, batch_size=1)
    assert encode.model is None and not loads
    vectors = encode(SENTENCES)
    encode(SENTENCES[:1])
    assert len(loads) == 1 and encode.store is None
    # the same batch size as the encoder's: a padded batch of two may differ from single rows in the last bit
    np.testing.assert_array_equal(vectors, encode.model.encode(SENTENCES, batch_size=1))


def test_store_is_keyed_by_runtime_and_reused(tiny_model_dirs, tmp_path, monkeypatch):
    monkeypatch.setenv("PROTOEMBED_CACHE", str(tmp_path))

    model = protoembed.load(str(tiny_model_dirs["bert"]), head="cls", device="cpu")

    def load():  # one model: a bare tiny backbone's pooler (unused, not saved) is drawn anew per load
        return model

    first = LazyEncoder(load, cache_embeddings=True)
    vectors = first(SENTENCES)
    (folder,) = (tmp_path / "embeddings").iterdir()
    assert folder.name.endswith("-torch-fp32") and first.store is not None
    again = LazyEncoder(load, cache_embeddings=True)
    again(SENTENCES[:1])  # loads the model and opens the same store

    def refuse(*args, **kwargs):
        raise AssertionError("a stored sentence was encoded again")

    monkeypatch.setattr(again.model, "encode", refuse)
    np.testing.assert_array_equal(again(SENTENCES), vectors)


def test_unknown_runtime_and_empty_sentences_are_errors(tiny_model_dirs):
    with pytest.raises(ProtoembedError, match="unknown runtime 'tf'"):
        LazyEncoder(lambda: None, runtime="tf")
    encode = LazyEncoder(lambda: protoembed.load(str(tiny_model_dirs["bert"]), head="mean", device="cpu"))
    with pytest.raises(ProtoembedError, match="--allow-empty"):
        encode(["fine", "  "])
    tolerant = LazyEncoder(encode.load, allow_empty=True)
    vectors = tolerant(["fine", "  ", ""])
    # the blank sentences are the bare [CLS] [SEP] (as documented), the others as the model encodes them
    np.testing.assert_allclose(vectors[0], tolerant.model.encode("fine"), atol=1e-6)
    np.testing.assert_allclose(vectors[1:], [specials_only_mean(tiny_model_dirs["bert"])] * 2, atol=1e-5)
