"""A run's arithmetic and activation memory: ``training.precision`` and ``training.gradient_checkpointing``.

Mixed precision (Micikevicius et al., 2018, "Mixed Precision Training") is Accelerate's
``mixed_precision``: the objective's ``forward`` runs under ``torch.autocast`` (fp16 on CUDA with a
dynamic loss scale, Sec. 3.2; bf16 on CUDA or CPU, no scaling needed), the weights, the optimizer and the
saved model stay fp32, and the objectives compute similarities and losses in fp32
(:mod:`protoembed.objectives.fp32_losses`). The grad scaler's state is part of Accelerate's checkpoint, so
an exact resume keeps working. Gradient checkpointing (Chen et al., 2016, "Training Deep Nets with
Sublinear Memory Cost") is the backbone's own Hugging Face implementation, with PyTorch's non-reentrant
checkpoint, which restores the RNG state for the recomputation: the dropout masks of the second forward
are those of the first, so the gradients are the same as without it.
"""

from __future__ import annotations

import logging

import torch

from protoembed.core.errors import ProtoembedError
from protoembed.model.precision import EMULATED_BF16, check_fp16, native_bf16, warn_emulated_bf16

logger = logging.getLogger(__name__)

#: ``training.precision`` -> Accelerate's ``mixed_precision``.
MIXED_PRECISION = {"fp32": "no", "bf16": "bf16", "fp16": "fp16"}


def check_precision_here(precision: str) -> str:
    """``training.precision`` checked against this machine; returns how it runs here (``bf16 on CUDA
    (NAME)``, ``bf16 on the CPU, emulated: ...``). ``bf16`` on a CPU without native bf16 is logged once
    (:func:`protoembed.precision.warn_emulated_bf16`).

    Raises:
        ProtoembedError: ``fp16`` without a CUDA GPU, ``bf16`` on a GPU without bf16 (one line, before
            step 1).
    """
    cuda = torch.cuda.is_available()
    if precision == "fp16":
        check_fp16("training.precision")
    if precision == "bf16" and cuda and not torch.cuda.is_bf16_supported():
        raise ProtoembedError(
            f"training.precision bf16: the GPU {torch.cuda.get_device_name()} has no bf16; use fp16 or fp32"
        )
    if cuda:
        return f"{precision} on CUDA ({torch.cuda.get_device_name()})"
    if precision == "bf16" and not native_bf16("cpu"):
        warn_emulated_bf16("cpu")
        return f"bf16 on the CPU, {EMULATED_BF16}: several times slower than fp32"
    return f"{precision} on the CPU" + (" (native bf16)" if precision == "bf16" else "")


def accelerate_precision(precision: str) -> str:
    """Accelerate's ``mixed_precision`` for ``training.precision``, checked against this machine
    (:func:`check_precision_here`).

    Accelerate keeps one process-wide state that refuses a second ``Accelerator`` with another mixed
    precision; a run with a different precision from the previous run in this process (a staged run, a
    test session) resets that state first (the process group, if any, is kept).
    """
    check_precision_here(precision)
    mixed = MIXED_PRECISION[precision]
    from accelerate.state import AcceleratorState

    before = AcceleratorState._shared_state.get("_mixed_precision")
    if before is not None and before != mixed:
        AcceleratorState._reset_state()
    return mixed


def enable_gradient_checkpointing(backbone: torch.nn.Module) -> None:
    """Turn on the Hugging Face backbone's activation (gradient) checkpointing, non-reentrant.

    ``activation_checkpointing_enable`` where transformers has it (``gradient_checkpointing_enable``,
    its older name, otherwise). Objectives that wrap the same backbone (the cross-encoder's
    sequence-classification model) share its layers, hence the setting.

    Raises:
        ProtoembedError: the backbone does not support it.
    """
    if not getattr(backbone, "supports_gradient_checkpointing", False):
        raise ProtoembedError(
            f"training.gradient_checkpointing: the backbone {type(backbone).__name__} does not support "
            "gradient checkpointing; set it to false"
        )
    kwargs = {"use_reentrant": False}
    if getattr(backbone.config, "use_cache", False):
        backbone.config.use_cache = False  # no key/value cache to keep in training (HF would warn)
    enable = getattr(backbone, "activation_checkpointing_enable", None)
    if enable is not None:
        enable(activation_checkpointing_kwargs=kwargs)
    else:
        backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    logger.debug("gradient checkpointing on for %s", type(backbone).__name__)


def compile_backbone(backbone: torch.nn.Module) -> None:
    """``training.compile``: compile the backbone's ``forward`` with ``torch.compile`` (in place).

    Only ``forward`` is replaced, so the module keeps its parameters, ``state_dict`` keys (checkpoints
    and the saved model are those of an eager run) and hooks, which run eagerly around the compiled
    forward. Shapes are dynamic (``dynamic=True``): a batch's width follows its longest row, so a fixed
    shape would recompile at every new width. The arithmetic is the eager forward's up to the
    compiler's fused kernels' rounding; dropout draws its masks from the compiled kernels' own random
    streams (same probability, other masks than an eager run from the same seed).
    """
    backbone.forward = torch.compile(backbone.forward, dynamic=True)
    logger.debug("torch.compile on %s", type(backbone).__name__)
