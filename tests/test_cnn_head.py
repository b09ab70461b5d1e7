"""The cnn head against a direct loop computation of its reading of Choi et al. Fig. 2, against the
layer-by-layer implementation it replaced, which graph export runs (outputs and gradients), padding invariance, one-token inputs,
gradients, the parameters of saved models, and the model-level round trip through a saved folder."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import protoembed
from protoembed.model.heads.cnn import CNNHead


def _direct(head: CNNHead, states: np.ndarray) -> np.ndarray:
    """The head on ONE unpadded sentence (T, H), written as plain loops over numpy arrays."""
    maps = states[None]  # (channels=1, T, H)
    for conv in head.convs:
        w = conv.weight.detach().double().numpy()  # (out, in, k, 1)
        b = conv.bias.detach().double().numpy()
        k = w.shape[2]
        length = maps.shape[1]
        padded = np.zeros((maps.shape[0], length + k - 1, maps.shape[2]))
        padded[:, k // 2 : k // 2 + length] = maps
        out = np.zeros((w.shape[0], length, maps.shape[2]))
        for o in range(w.shape[0]):
            for t in range(length):
                out[o, t] = b[o] + sum(
                    w[o, i, j, 0] * padded[i, t + j] for i in range(w.shape[1]) for j in range(k)
                )
        out = np.tanh(out)
        pooled = [
            out[:, t : t + 2].max(axis=1) for t in range(0, length, 2)
        ]  # last odd token: its own window
        maps = np.stack(pooled, axis=1)
    w = head.project.weight.detach().double().numpy()[0, :, 0, 0]
    b = float(head.project.bias.detach().double().numpy()[0])
    final = np.tanh(np.tensordot(w, maps, axes=1) + b)  # (T', H)
    return final.mean(axis=0)


@pytest.mark.parametrize("lengths", [(5,), (7, 4, 1), (2, 9, 3)])
def test_cnn_head_equals_direct_computation_with_padding(lengths):
    torch.manual_seed(0)
    head = CNNHead(6, channels=3, blocks=2).double()
    width = max(lengths)
    states = torch.randn(len(lengths), width, 6, dtype=torch.float64)
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
        states[row, n:] = 100.0  # garbage in the padding must not reach the result
    with torch.no_grad():
        out = head({"token_embeddings": states, "attention_mask": mask})["sentence_embedding"]
    assert out.shape == (len(lengths), 6)
    for row, n in enumerate(lengths):
        np.testing.assert_allclose(out[row].numpy(), _direct(head, states[row, :n].numpy()), atol=1e-12)


@pytest.mark.parametrize(
    ("lengths", "blocks", "kernel_size"),
    [((11, 4, 1, 7), 2, 3), ((12, 12, 5), 2, 3), ((9, 2, 6), 3, 5), ((1, 1), 1, 3), ((10, 3), 4, 3)],
)
def test_cnn_head_equals_the_layer_by_layer_head(lengths, blocks, kernel_size):
    # float32, the training dtype: same vectors and same gradients (input states and every parameter)
    torch.manual_seed(0)
    head = CNNHead(24, channels=16, blocks=blocks, kernel_size=kernel_size)
    width = max(lengths)
    states = torch.randn(len(lengths), width, 24)
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
        states[row, n:] = 50.0  # padding garbage
    upstream = torch.randn(len(lengths), 24)
    results = []
    for forward in (
        lambda x: head({"token_embeddings": x, "attention_mask": mask})["sentence_embedding"],
        lambda x: head._forward_layers({"token_embeddings": x, "attention_mask": mask})["sentence_embedding"],
    ):
        x = states.clone().requires_grad_(True)
        head.zero_grad()
        out = forward(x)
        (out * upstream).sum().backward()
        results.append([out.detach(), x.grad, *(p.grad.clone() for p in head.parameters())])
    for new, old in zip(*results):
        torch.testing.assert_close(new, old, rtol=0, atol=1e-5)


def test_saved_heads_keep_their_parameters():
    # models saved before the time-major implementation load as they are: same names and shapes
    head = CNNHead(10, channels=7, blocks=2, kernel_size=3)
    shapes = {name: tuple(p.shape) for name, p in head.state_dict().items()}
    assert shapes == {
        "convs.0.weight": (7, 1, 3, 1),
        "convs.0.bias": (7,),
        "convs.1.weight": (7, 7, 3, 1),
        "convs.1.bias": (7,),
        "project.weight": (1, 7, 1, 1),
        "project.bias": (1,),
    }


def test_cnn_head_trains_and_keeps_the_backbone_width():
    head = CNNHead(8)
    states = torch.randn(3, 5, 8, requires_grad=True)
    out = head({"token_embeddings": states, "attention_mask": torch.ones(3, 5)})["sentence_embedding"]
    out.sum().backward()
    assert out.shape == (3, 8) and head.get_embedding_dimension() == 8
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in head.parameters())
    assert states.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="odd kernel_size"):
        CNNHead(8, kernel_size=2)


def test_cnn_model_gives_the_same_vector_alone_and_in_a_batch(tiny_model_dirs, tmp_path):
    torch.manual_seed(1)
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="cnn")
    sentences = ["a", "a man is playing a guitar on the stage tonight .", "short one ."]
    batched = model.encode(sentences, batch_size=3)
    alone = np.stack([model.encode([s])[0] for s in sentences])
    np.testing.assert_allclose(batched, alone, atol=1e-5)
    reloaded = protoembed.load(str(model.save(tmp_path / "cnn")))
    assert reloaded.head == "cnn" and isinstance(reloaded.pooler, CNNHead)
    np.testing.assert_array_equal(reloaded.encode(sentences, batch_size=3), batched)
