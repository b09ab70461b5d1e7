"""Every runtime's model satisfies the one ``SentenceEmbedder`` protocol the callers type against."""

from __future__ import annotations

import protoembed
from protoembed.model.export import export_embedder
from protoembed.model.protocol import SentenceEmbedder


def test_every_runtime_is_a_sentence_embedder(tiny_model_dirs, tmp_path):
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mask", max_seq_length=12)
    onnx_folder = export_embedder(model, tmp_path / "onnx")
    openvino_folder = export_embedder(model, tmp_path / "ov", format="openvino")
    models = {
        "torch": model,
        "onnx": protoembed.load(str(onnx_folder), runtime="onnx"),
        "openvino": protoembed.load(str(openvino_folder), precision="fp32"),
    }
    for runtime, loaded in models.items():
        assert isinstance(loaded, SentenceEmbedder)
        assert (loaded.runtime, loaded.head, loaded.dimension) == (runtime, "mask", model.dimension)
        assert loaded.max_seq_length == 12 and loaded.encoder.template == model.encoder.template
        assert loaded.encode(["a man is playing a guitar ."]).shape == (1, model.dimension)
    assert not isinstance(object(), SentenceEmbedder)
