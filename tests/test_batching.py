"""The shared encode loop (batching.BatchEncoder): identical rows run once, batches longest first, input
order restored; the torch embedder and the ONNX export both encode through it, by composition."""

from __future__ import annotations

import numpy as np
import torch

import protoembed
from protoembed.batching import BatchEncoder
from protoembed.embedder import Embedder
from protoembed.export import export_embedder
from protoembed.export.onnx import OnnxEmbedder

SENTENCES = [
    "hello",
    "a man is playing a guitar .",
    "HELLO",  # same rows as "hello" for the uncased tiny BERT
    "two dogs are running through a field of grass .",
    "a man is playing a guitar .",
    "the cat sat .",
]


def _id_stats(features: dict[str, torch.Tensor]) -> torch.Tensor:
    """A forward an independent computation can check: (sum of the row's ids, its token count) per row."""
    mask = features["attention_mask"]
    return torch.stack([(features["input_ids"] * mask).sum(1), mask.sum(1)], dim=1).float()


def test_rows_run_once_longest_first_and_come_back_in_order(tiny_model_dirs) -> None:
    encoder = protoembed.load(str(tiny_model_dirs["bert"]), head="mean", device="cpu").encoder
    seen: list[torch.Tensor] = []

    def forward(features: dict[str, torch.Tensor]) -> torch.Tensor:
        seen.append(features["attention_mask"].sum(1))
        return _id_stats(features)

    loop = BatchEncoder(encoder, forward, dimension=2, device=torch.device("cpu"))
    vectors = loop.encode(SENTENCES, batch_size=2)
    rows = [encoder.tokenizer(s)["input_ids"] for s in SENTENCES]  # [CLS] ... [SEP], independently
    np.testing.assert_array_equal(vectors, [[sum(r), len(r)] for r in rows])
    lengths = torch.cat(seen).tolist()
    distinct = {tuple(r) for r in rows}
    assert len(lengths) == len(distinct) == 4  # "HELLO" and the repeated sentence run once
    assert lengths == sorted((len(r) for r in distinct), reverse=True)  # longest first
    assert [len(b) for b in seen] == [2, 2]
    single = loop.encode("the cat sat .")
    np.testing.assert_array_equal(single, vectors[-1])
    assert loop.encode([]).shape == (0, 2)


def test_torch_and_onnx_embedders_share_the_loop(tiny_model_dirs, tmp_path) -> None:
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean", device="cpu")
    exported = protoembed.load(str(export_embedder(model, tmp_path / "onnx")), runtime="onnx")
    assert isinstance(exported, OnnxEmbedder) and not isinstance(exported, (Embedder, torch.nn.Module))
    assert not model.training  # exporting left the model in its eval mode
    # the mean head by hand: each sentence alone through the Hugging Face model, its token states averaged
    expected = []
    for sentence in SENTENCES:
        ids = torch.tensor([model.tokenizer(sentence)["input_ids"]])
        with torch.no_grad():
            expected.append(model.encoder.auto_model(input_ids=ids).last_hidden_state[0].mean(0).numpy())
    assert not model.normalize
    for embedder, atol in ((model, 1e-6), (exported, 1e-5)):
        loop = embedder.batch_encoder()
        assert isinstance(loop, BatchEncoder) and loop.encoder is embedder.encoder
        np.testing.assert_allclose(embedder.encode(SENTENCES, batch_size=2), expected, rtol=0, atol=atol)
