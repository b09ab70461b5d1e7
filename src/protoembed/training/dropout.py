"""Dropout masks drawn faster on the CPU (``training.dropout``).

torch's CPU dropout draws one Bernoulli number per element from its Mersenne Twister, serially: on a
2-core CPU it was 15% of a training step's time (the own-pairs GoogleNews step in bf16; 19 dropouts per
forward of a 6-layer BERT: the embeddings', and per layer the attention probabilities' and two hidden
states'). ``training.dropout`` says how a step's masks are drawn:

- ``torch``: torch's own kernels (``F.dropout``, and the scaled dot-product attention's dropout);
- ``fast`` (the default; on the CPU only: a CUDA step keeps torch's kernels, which draw in parallel, as do
  a compiled backbone and gradient checkpointing, :func:`step_kernel`):
  every ``F.dropout`` in training (what ``nn.Dropout`` calls) and every ``F.scaled_dot_product_attention``
  with ``dropout_p > 0`` on a CPU tensor is taken over inside the step (a
  :class:`~torch.overrides.TorchFunctionMode`, :func:`dropout_kernel`): the mask comes from 64-bit draws
  of the same generator (``torch.randint``), each cut into four 16-bit numbers, an element kept when
  its number falls below ``K = round((1 - p) * 2**16)`` and scaled by ``2**16 / K``, so that the
  expectation is the input's exactly (inverted dropout) and the keep rate is ``1 - p`` to 2**-17
  (0.9 -> 58982 / 65536 = 0.8999939). The attention is computed as torch's math kernel computes it
  (``softmax(q k^T * scale + mask)``, dropout, ``@ v``), the dropout drawn that way.

Either way the draws come from torch's global CPU generator, so a seeded run repeats itself, resumes
from a checkpoint's random state, and GradCache's replay of a chunk draws the same masks
(:mod:`protoembed.objectives.cache`). The masks differ between the two kernels, so a seeded run moves with
the setting. On the 2-core CPU a (64, 34, 384) bf16 dropout took 1.7 ms against torch's 5.2 ms.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack

#: the numbers a 64-bit draw is cut into, and their range
_BITS = 16
_RANGE = 1 << _BITS


def keep_threshold(p: float) -> int:
    """``K``: an element is kept when its 16-bit number (``0 .. 2**16 - 1``) is below ``K``."""
    return round((1.0 - p) * _RANGE)


def fast_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """``x`` with each element zeroed with probability ``1 - K / 2**16`` (``K``: :func:`keep_threshold`
    of ``p``) and the others scaled by ``2**16 / K``; differentiable (the mask is a constant of the
    graph). ``p`` in ``(0, 1)``."""
    keep = keep_threshold(p)
    if keep == _RANGE:  # p below 2**-17: every element kept
        return x
    if keep == 0:
        return x * 0.0
    n = x.numel()
    words = torch.randint(-(1 << 63), (1 << 63) - 1, ((n + 3) // 4,), dtype=torch.int64, device=x.device)
    # int16 view: the 16-bit numbers as -2**15 .. 2**15 - 1, so "below K" is "below K - 2**15"
    numbers = words.view(torch.int16)[:n].view(x.shape)
    return torch.where(numbers < keep - (_RANGE >> 1), x * (_RANGE / keep), x.new_zeros(()))


def math_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` as torch's math kernel computes it, the attention
    probabilities' dropout drawn by :func:`fast_dropout`. A boolean ``attn_mask`` keeps the ``True``
    positions, a float one is added to the scores; ``is_causal`` masks the future."""
    scale = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = torch.matmul(query, key.transpose(-2, -1)) * scale
    if is_causal:
        causal = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    probabilities = torch.softmax(scores, dim=-1)
    # a query whose every key is masked (a padding row) gets zeros, as torch's math kernel gives it
    probabilities = torch.nan_to_num(probabilities, nan=0.0)
    return torch.matmul(fast_dropout(probabilities, dropout_p).to(value.dtype), value)


class _FastCpuDropout(TorchFunctionMode):
    """Takes over ``F.dropout`` in training and ``F.scaled_dot_product_attention`` with dropout, on CPU
    tensors (see the module docstring); every other call goes through unchanged."""

    def __torch_function__(
        self, func: Callable[..., Any], types: Any, args: tuple[Any, ...] = (), kwargs: dict | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if func is F.dropout:
            x, p, training, inplace = _dropout_args(*args, **kwargs)
            if training and 0.0 < p < 1.0 and x.device.type == "cpu" and not inplace:
                return fast_dropout(x, p)
        elif func is F.scaled_dot_product_attention:
            call = _attention_args(*args, **kwargs)
            if call is not None and call["query"].device.type == "cpu":
                return math_attention(**call)
        return func(*args, **kwargs)

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        """Leave the mode; one that a signal already took off the stack (a Ctrl-C while a call ran
        through :meth:`__torch_function__`, which holds the mode off the stack) is left as it is, so the
        ``KeyboardInterrupt`` propagates rather than torch's error about popping an empty mode stack."""
        if any(mode is self for mode in _get_current_function_mode_stack()):
            super().__exit__(exc_type, exc_value, traceback)


def _dropout_args(
    input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> tuple[torch.Tensor, float, bool, bool]:
    return input, p, training, inplace


def _attention_args(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> dict[str, Any] | None:
    """The call's arguments when :func:`math_attention` computes it (dropout on, no grouped heads)."""
    if not 0.0 < dropout_p < 1.0 or enable_gqa:
        return None
    return {
        "query": query,
        "key": key,
        "value": value,
        "attn_mask": attn_mask,
        "dropout_p": dropout_p,
        "is_causal": is_causal,
        "scale": scale,
    }


def step_kernel(kind: str, compile: bool, gradient_checkpointing: bool) -> str:
    """The kernel a run's steps draw their masks with: ``kind`` (``training.dropout``), but torch's for
    a compiled backbone (its kernels draw the masks, ``training.compile``) and for one that recomputes
    its activations in backward (``training.gradient_checkpointing``: the recomputation runs outside
    the step's :class:`~torch.overrides.TorchFunctionMode`, so it would draw torch's masks)."""
    return "torch" if compile or gradient_checkpointing else kind


@contextmanager
def dropout_kernel(kind: str, device: torch.device) -> Iterator[None]:
    """The block's dropout masks drawn as ``kind`` says (``training.dropout``:
    :data:`~protoembed.training.config_models.DROPOUT_KERNELS`) on ``device``:
    ``fast`` on a CPU device takes over torch's dropout (:class:`_FastCpuDropout`); otherwise nothing
    changes."""
    with _FastCpuDropout() if kind == "fast" and device.type == "cpu" else nullcontext():
        yield
