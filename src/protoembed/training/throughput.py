"""A run's training throughput: tokens per second and model FLOPs utilisation (MFU).

In: the tokens each step's backbone reads and the seconds the steps took. Out: ``tokens_per_second`` and
``mfu`` (the names of ``training_log.jsonl``'s ``train`` entries and of ``results.json``).

What is counted:

- **tokens**: the non-padding tokens of every row the backbone reads with gradients in a step, over every
  process: all views of a contrastive step (ConPVP's anchor, positive and negative template rows, 3 per
  sentence; SimCSE's two dropout views; the template-only denoising rows with their full length), both
  sentences of a siamese pair, a cross-encoder's joined pair. A row is counted once per step even when
  GradCache (``training.mini_batch_size``) runs its forward twice, and evaluation forwards are not
  counted. Contrastive batches give the count from their :class:`~protoembed.objectives.views.ViewBatch`
  (on the host, no device sync); other objectives from a hook on the backbone that adds up the attention
  masks of its forwards on the device, read at logging steps only.
- **model FLOPs**: ``6 x N x tokens`` (forward 2, backward 4 FLOPs per parameter and token; Kaplan et
  al., 2020, "Scaling Laws for Neural Language Models", Sec. 2.1), ``N`` the trained parameters of the
  backbone outside its embedding tables (a lookup multiplies nothing). Attention's own ``T x T``
  products, the head, the training MLP and the loss are left out, as are the recomputations of
  GradCache and gradient checkpointing (model FLOPs, not hardware FLOPs; Chowdhery et al., 2022, "PaLM",
  App. B). A backbone that shares its layers (ALBERT) applies its parameters once per layer; its ``N``
  counts them once, so its MFU reads low by that factor.
- **MFU per device**: with several processes (one device each) the tokens of all of them over the
  seconds, over the world size x one device's peak: the mean utilisation of the devices, so N devices
  each at 40% report 40%, not N x 40%. ``tokens_per_second`` is the whole run's (every process).
- **peak**: the dense (no sparsity) peak of the device at the run's precision, from
  :data:`PEAK_TFLOPS` by the CUDA device's name; ``None`` (MFU unknown) for a device not in the table
  and for CPUs, whose peak depends on cores, clocks and vector units the table cannot know.
"""

from __future__ import annotations

import re
from typing import Any

import torch

#: Dense peak TFLOP/s by CUDA device name (a whole word of ``torch.cuda.get_device_name``, the first match
#: in this order: ``NVIDIA H100 PCIe`` is not the SXM part, ``NVIDIA L40S`` not an L4), per precision: ``bf16``/``fp16`` the tensor cores' half-precision peak, ``tf32`` the
#: tensor cores' TF32 peak (fp32 matrix products when ``torch.backends.cuda.matmul.allow_tf32``), ``fp32``
#: the plain fp32 peak. The vendors' data sheets (NVIDIA H100 / H200 / A100 / L4 / A10 / V100).
PEAK_TFLOPS: dict[str, dict[str, float]] = {
    "H100 PCIe": {"bf16": 756.0, "fp16": 756.0, "tf32": 378.0, "fp32": 51.0},
    "H100": {"bf16": 989.0, "fp16": 989.0, "tf32": 494.0, "fp32": 67.0},
    "H200": {"bf16": 989.0, "fp16": 989.0, "tf32": 494.0, "fp32": 67.0},
    "GH200": {"bf16": 989.0, "fp16": 989.0, "tf32": 494.0, "fp32": 67.0},
    "A100": {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5},
    "L4": {"bf16": 121.0, "fp16": 121.0, "tf32": 60.0, "fp32": 30.3},
    "A10": {"bf16": 125.0, "fp16": 125.0, "tf32": 62.5, "fp32": 31.2},
    "V100": {"fp16": 125.0, "fp32": 15.7},
}


def peak_flops(device_name: str | None, precision: str, tf32: bool = False) -> float | None:
    """The dense peak FLOP/s of the device named ``device_name`` (``torch.cuda.get_device_name``;
    ``None``: not a CUDA device) at ``precision`` (``fp32`` | ``bf16`` | ``fp16``; fp32 with ``tf32``
    allowed: the TF32 peak), or ``None`` if unknown."""
    if device_name is None:
        return None
    kind = "tf32" if precision == "fp32" and tf32 else precision
    for name, peaks in PEAK_TFLOPS.items():
        if re.search(rf"\b{re.escape(name)}\b", device_name):
            value = peaks.get(kind)
            return None if value is None else value * 1e12
    return None


def device_peak_flops(device: torch.device, precision: str) -> float | None:
    """:func:`peak_flops` of ``device`` (``None`` off CUDA)."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return peak_flops(name, precision, tf32=bool(torch.backends.cuda.matmul.allow_tf32))


def flop_params(backbone: torch.nn.Module) -> int:
    """``N`` of the ``6 N`` count: the backbone's trained parameters outside its embedding tables."""
    tables = {id(p) for m in backbone.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters()}
    return sum(p.numel() for p in backbone.parameters() if p.requires_grad and id(p) not in tables)


def mfu(params: int, tokens_per_second: float, peak: float | None, devices: int = 1) -> float | None:
    """Model FLOPs utilisation per device: ``6 x params x tokens_per_second / (devices x peak)``, where
    ``tokens_per_second`` is the rate of all ``devices`` together and ``peak`` one device's (``None``
    without a peak)."""
    if peak is None or peak <= 0:
        return None
    return 6.0 * params * tokens_per_second / (max(1, devices) * peak)


class TokenCounter:
    """Counts the tokens of the training steps (see the module docstring) without a device sync per step.

    :meth:`add_batch` takes a step's batch: a :class:`~protoembed.objectives.views.ViewBatch` is counted
    from its row lengths on the host; for any other batch a forward hook on ``backbone`` adds up the
    attention masks (no mask: the positions) of the forwards run with gradients, on the device. :meth:`take` returns the tokens
    counted since the last call (the device part read then: one sync, at a logging step).
    """

    def __init__(self, backbone: torch.nn.Module) -> None:
        self.host = 0
        self.device: torch.Tensor | None = None
        self._hooked = False  # counting with the hook during the current step
        self._handle = backbone.register_forward_pre_hook(self._hook, with_kwargs=True)

    def add_batch(self, batch: Any) -> None:
        """Count one step's batch (call before its forward)."""
        lengths = getattr(batch, "lengths", None)
        if isinstance(lengths, torch.Tensor) and lengths.device.type == "cpu":
            self.host += int(lengths.sum())
            self._hooked = False
        else:
            self._hooked = True

    def _hook(self, module: torch.nn.Module, args: tuple, kwargs: dict[str, Any]) -> None:
        if not (self._hooked and torch.is_grad_enabled()):
            return
        mask = kwargs.get("attention_mask")
        if mask is None:  # every position of the ids (or embeddings) is a token: a host count
            inputs = kwargs.get("input_ids", kwargs.get("inputs_embeds", args[0] if args else None))
            if isinstance(inputs, torch.Tensor):
                self.host += inputs.shape[0] * inputs.shape[1]
            return
        total = mask.sum()
        self.device = total if self.device is None else self.device + total

    def take(self) -> int:
        """The tokens counted since the last call."""
        count = self.host + (int(self.device.item()) if self.device is not None else 0)
        self.host, self.device = 0, None
        return count

    def close(self) -> None:
        """Remove the hook."""
        self._handle.remove()


__all__ = [
    "PEAK_TFLOPS",
    "TokenCounter",
    "device_peak_flops",
    "flop_params",
    "mfu",
    "peak_flops",
]
