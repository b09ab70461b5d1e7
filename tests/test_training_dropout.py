"""``training.dropout``: the CPU step's masks drawn as 16-bit numbers cut from torch's 64-bit draws.

The kept share and the scale against the binomial and ``2**16 / K`` computed here; the gradient; the
attention equal to torch's ``scaled_dot_product_attention`` where no dropout is drawn; what the mode takes
over (every dropout of a tiny BERT's forward, nothing in eval mode, on a CUDA device or with ``torch``);
a seeded step repeats itself; the trainer's setting reaches the step.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from protoembed.training import dropout as kernels
from protoembed.training.dropout import dropout_kernel, fast_dropout, keep_threshold, math_attention

CPU = torch.device("cpu")


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.9])
def test_kept_share_and_scale(p: float) -> None:
    torch.manual_seed(0)
    n = 1 << 21
    x = torch.rand(n) + 0.5  # no zero among the inputs
    y = fast_dropout(x, p)
    keep = round((1 - p) * 65536)
    assert keep_threshold(p) == keep
    kept = y != 0
    share = kept.double().mean().item()
    sigma = math.sqrt(keep / 65536 * (1 - keep / 65536) / n)
    assert abs(share - keep / 65536) < 5 * sigma
    # the kept elements scaled by 2**16 / K exactly (inverted dropout: the expectation is x)
    torch.testing.assert_close(y[kept], x[kept] * (65536 / keep), rtol=0, atol=0)
    assert y.dtype == x.dtype and y.shape == x.shape


def test_bf16_input_and_the_gradient() -> None:
    torch.manual_seed(1)
    x = torch.randn(64, 34, 48, dtype=torch.bfloat16, requires_grad=True)
    y = fast_dropout(x, 0.1)
    assert y.dtype == torch.bfloat16
    y.float().sum().backward()
    scale = torch.tensor(65536 / keep_threshold(0.1), dtype=torch.bfloat16)
    expected = torch.where(y != 0, scale, torch.zeros((), dtype=torch.bfloat16))
    assert torch.equal(x.grad, expected)


def test_a_seed_repeats_the_mask_and_another_does_not() -> None:
    x = torch.ones(4096)
    torch.manual_seed(5)
    a = fast_dropout(x, 0.2)
    torch.manual_seed(5)
    assert torch.equal(fast_dropout(x, 0.2), a)
    assert not torch.equal(fast_dropout(x, 0.2), a)


@pytest.mark.parametrize("mask", ["none", "float", "bool", "causal"])
def test_attention_equals_torch_s_without_dropout(mask: str) -> None:
    torch.manual_seed(2)
    q, k, v = (torch.randn(3, 4, 9, 8) for _ in range(3))
    attn_mask = None
    if mask == "float":
        attn_mask = torch.zeros(3, 1, 9, 9)
        attn_mask[0, ..., 6:] = float("-inf")
    elif mask == "bool":
        attn_mask = torch.ones(3, 1, 9, 9, dtype=torch.bool)
        attn_mask[1, ..., 4:] = False
    causal = mask == "causal"
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask, is_causal=causal, scale=0.2)
    # p below 2**-17 keeps every element: the arithmetic alone
    got = math_attention(q, k, v, attn_mask, 1e-9, causal, 0.2)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def test_attention_drops_probabilities_at_the_rate() -> None:
    torch.manual_seed(3)
    q, k = torch.randn(2, 4, 64, 8), torch.randn(2, 4, 64, 8)
    v = torch.eye(64).expand(2, 4, 64, 64)  # the output is the dropped probabilities themselves
    probabilities = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1)
    got = math_attention(q, k, v, None, 0.25, False, None)
    kept = got != 0
    assert abs(kept.double().mean().item() - keep_threshold(0.25) / 65536) < 0.01
    torch.testing.assert_close(got[kept], probabilities[kept] * (65536 / keep_threshold(0.25)))


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    calls: list[float] = []
    real = kernels.fast_dropout

    def counted(x: torch.Tensor, p: float) -> torch.Tensor:
        calls.append(p)
        return real(x, p)

    monkeypatch.setattr(kernels, "fast_dropout", counted)
    return calls


def test_every_dropout_of_a_bert_forward_is_taken_over(tiny_model_dirs, monkeypatch) -> None:
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(tiny_model_dirs["bert"])).train()
    layers, p = model.config.num_hidden_layers, model.config.hidden_dropout_prob
    ids = torch.tensor([[101, 7, 8, 9, 102], [101, 7, 102, 0, 0]])
    mask = (ids != 0).long()
    calls = _counting(monkeypatch)
    with dropout_kernel("fast", CPU):
        torch.manual_seed(4)
        model(input_ids=ids, attention_mask=mask).last_hidden_state.sum().backward()
    # the embeddings', and per layer the attention probabilities' and two hidden states'
    assert len(calls) == 1 + 3 * layers and set(calls) == {p, model.config.attention_probs_dropout_prob}
    calls.clear()
    with dropout_kernel("fast", CPU), torch.no_grad():
        model.eval()(input_ids=ids, attention_mask=mask)
    assert calls == []  # eval mode: no dropout
    model.train()
    for kind, device in (("torch", CPU), ("fast", torch.device("cuda"))):
        with dropout_kernel(kind, device):
            model(input_ids=ids, attention_mask=mask)
        assert calls == [], (kind, device)


def test_the_mode_equals_the_function_and_torch_s_kernel_stays_torch_s() -> None:
    x = torch.randn(32, 40)
    layer = torch.nn.Dropout(0.1).train()
    with dropout_kernel("fast", CPU):
        torch.manual_seed(6)
        got = layer(x)
    torch.manual_seed(6)
    assert torch.equal(got, fast_dropout(x, 0.1))
    with dropout_kernel("torch", CPU):
        torch.manual_seed(6)
        got = layer(x)
    torch.manual_seed(6)
    assert torch.equal(got, F.dropout(x, 0.1))


def test_a_ctrl_c_that_took_the_mode_off_the_stack_stays_a_ctrl_c() -> None:
    """A SIGINT that lands while a call runs through the mode (torch holds the mode off the stack then,
    and the interrupt skips putting it back): the block ends with the ``KeyboardInterrupt``, not
    torch's error about popping an empty mode stack, and the stack is as it was before the block."""
    from torch.overrides import _get_current_function_mode_stack, _pop_mode

    before = list(_get_current_function_mode_stack())
    with pytest.raises(KeyboardInterrupt), dropout_kernel("fast", CPU):
        _pop_mode()  # what the interrupted dispatch leaves
        raise KeyboardInterrupt
    assert list(_get_current_function_mode_stack()) == before
    with pytest.raises(KeyboardInterrupt), dropout_kernel("fast", CPU):
        raise KeyboardInterrupt  # a Ctrl-C between calls: the mode is left as usual
    assert list(_get_current_function_mode_stack()) == before


def test_the_config_s_dropout_reaches_the_step(tiny_model_dirs, tmp_path, monkeypatch, data_dir) -> None:
    from protoembed.training.trainer import train
    from training_helpers import tiny_config, write_corpus

    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))  # the STS-B dev set of the selection
    corpus = write_corpus(tmp_path / "corpus.txt")
    counts = {}
    for kind, recompute in (("fast", False), ("torch", False), ("fast", True)):
        calls = _counting(monkeypatch)
        out = tmp_path / f"{kind}-{recompute}"
        cfg = tiny_config(tiny_model_dirs["bert"], corpus, out, "simcse", "cls", dropout=kind)
        cfg.training.max_steps, cfg.training.eval_steps = 2, 2
        cfg.training.gradient_checkpointing = recompute
        train(cfg, progress=False)
        counts[kind, recompute] = len(calls)
    # recomputing activations in backward keeps torch's kernel: the recomputation runs outside the step's
    # mode, and its masks must be the forward's
    assert counts["fast", False] > 0 and counts["torch", False] == 0 and counts["fast", True] == 0
