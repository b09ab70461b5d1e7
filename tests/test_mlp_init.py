"""The training MLP starts as the backbone's own layers do: normal(0, config.initializer_range), zero bias."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import protoembed
from protoembed.model.heads.mlp import MLP, MLPPooling
from protoembed.objectives import build_objective


@pytest.mark.parametrize(
    ("kind", "objective", "head", "initializer_range"),
    [
        ("bert", "simcse", "cls", 0.5),
        ("albert", "promptbert", "mask", 0.3),
        ("roberta", "conpvp", "soft_prompt", 0.8),
    ],
)
def test_mlp_follows_the_backbones_initializer_range(
    tiny_model_dirs, kind, objective, head, initializer_range
):
    embedder = protoembed.load(str(tiny_model_dirs[kind]), head=head, device="cpu")
    embedder.encoder.auto_model.config.initializer_range = initializer_range
    torch.manual_seed(0)
    dense = build_objective(objective, embedder).mlp.dense
    weight = dense.weight.detach().double()
    hidden = weight.shape[0]
    assert weight.shape == (hidden, hidden)
    assert torch.equal(dense.bias, torch.zeros(hidden))  # zero bias (PyTorch's default draws one)
    # std of H*H draws: relative standard error 1/sqrt(2 H^2) = 2.2% at H = 32; PyTorch's default
    # (uniform in +-1/sqrt(H)) would give 1/sqrt(3 H) = 0.10
    assert float(weight.std()) == pytest.approx(initializer_range, rel=0.1)
    assert abs(float(weight.mean())) < 4 * initializer_range / hidden


def test_a_loaded_mlp_keeps_its_saved_weights(tiny_model_dirs, tmp_path):
    embedder = protoembed.load(str(tiny_model_dirs["bert"]), head="cls", device="cpu")
    objective = build_objective("simcse", embedder, mlp="keep")
    objective.eval_embedder().save(str(tmp_path / "kept"))
    loaded = protoembed.load(str(tmp_path / "kept"), device="cpu")
    pooling = next(m for m in loaded.modules() if isinstance(m, MLPPooling))
    torch.testing.assert_close(pooling.mlp.dense.weight, objective.mlp.dense.weight, rtol=0, atol=0)
    assert MLP(8).dense.bias.abs().sum() > 0  # without a backbone: PyTorch's default (weights loaded next)


def test_a_folder_saved_with_the_old_module_path_still_loads(tiny_model_dirs, tmp_path):
    from sentence_transformers import SentenceTransformer

    embedder = protoembed.load(str(tiny_model_dirs["bert"]), head="cls", device="cpu")
    build_objective("simcse", embedder, mlp="keep").eval_embedder().save(str(tmp_path / "kept"))
    modules_file = tmp_path / "kept" / "modules.json"
    modules = json.loads(modules_file.read_text())
    assert [m["type"] for m in modules].count("protoembed.model.heads.mlp.MLPPooling") == 1
    sentences = ["a man is playing a guitar .", "stocks fell sharply ."]
    expected = protoembed.load(str(tmp_path / "kept"), device="cpu").encode(sentences)
    for m in modules:  # as written before MLPPooling moved from objectives/ to heads/
        m["type"] = m["type"].replace("protoembed.model.heads.mlp.", "protoembed.objectives.mlp.")
    modules_file.write_text(json.dumps(modules))
    old = protoembed.load(str(tmp_path / "kept"), device="cpu").encode(sentences)
    st = SentenceTransformer(str(tmp_path / "kept"), device="cpu", trust_remote_code=True).encode(sentences)
    np.testing.assert_allclose(old, expected, rtol=0, atol=1e-6)
    np.testing.assert_allclose(st, expected, rtol=0, atol=1e-5)
