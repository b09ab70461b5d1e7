"""Losses in fp32 under mixed precision.

With ``training.precision: bf16 | fp16`` the objective's ``forward`` runs under ``torch.autocast``
(Accelerate wraps it), so the backbone's matrix products run in half precision. The similarities, the
temperature scaling (the contrastive logits are ``cos / 0.05``: an error of 1e-3 in a cosine is 2e-2 in
a logit), the log-softmax and every loss are computed in fp32 instead, as mixed-precision training
prescribes (Micikevicius et al., 2018, "Mixed Precision Training", Sec. 3.3: reductions, softmax and losses in
fp32): :func:`fp32_loss` decorates a loss function so that it runs with autocast off on float32 copies
of its half-precision tensor arguments; :func:`autocast_off` is the same as a ``with`` block. Without
autocast (fp32 training, evaluation, float64 tests) both change nothing.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch

F = TypeVar("F", bound=Callable[..., Any])


def fp32(value: Any) -> Any:
    """A half-precision tensor (fp16, bf16) as float32 (differentiable); float32 and float64 tensors and
    anything else unchanged."""
    if isinstance(value, torch.Tensor) and value.is_floating_point() and value.element_size() < 4:
        return value.float()
    return value


@contextlib.contextmanager
def autocast_off(device: torch.device | str | None = None) -> Iterator[None]:
    """Disable autocast on ``device``'s type (default cpu) inside the block: ops run in their inputs'
    dtype, so give them float32 tensors (:func:`fp32`)."""
    kind = torch.device(device).type if device is not None else "cpu"
    with torch.autocast(device_type=kind, enabled=False):
        yield


def fp32_loss(fn: F) -> F:
    """Decorate a loss: every half-precision tensor argument is cast to float32 (:func:`fp32`) and ``fn``
    runs with autocast off (on the device of its first tensor argument). Returns what ``fn`` returns (fp32)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        args = tuple(fp32(a) for a in args)
        kwargs = {k: fp32(v) for k, v in kwargs.items()}
        device = next((a.device for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), None)
        with autocast_off(device):
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
