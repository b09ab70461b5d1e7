"""Inference precision of the torch forward: ``fp32``, ``bf16`` or ``fp16`` (autocast), and the CPU
features it needs.

Under ``bf16`` the backbone's forward runs in :func:`torch.autocast` with ``torch.bfloat16`` (the
matmuls in bf16 on CUDA and on CPUs with AVX512-BF16 or AMX); pooling and normalisation run in fp32 on
the fp32-cast token embeddings, and the vectors are returned in fp32. On a CPU without native bf16 the
same arithmetic is emulated: correct, but slower than fp32 (logged once). ``fp16`` is the same with
``torch.float16``, on CUDA only (:func:`check_fp16`: the one rule training and inference share).
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from protoembed.core.errors import ProtoembedError

if TYPE_CHECKING:  # torch is imported where used: the CLI reads PRECISIONS without it
    import torch

logger = logging.getLogger(__name__)

#: The precisions a CPU runs (fp16 runs on CUDA only: :func:`check_fp16`).
CPU_PRECISIONS = ("fp32", "bf16")
#: Values of ``precision`` / ``--precision``.
PRECISIONS = (*CPU_PRECISIONS, "fp16")
#: The autocast dtype of each reduced precision (by name: torch is imported where used).
AUTOCAST_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}
#: The CPU flags (``/proc/cpuinfo``) that matter for inference speed, in the order they are reported.
CPU_FEATURES = ("avx2", "avx512_vnni", "avx512_bf16", "amx_bf16")


#: The environment variable whose flags (space- or comma-separated, as ``/proc/cpuinfo`` spells them) replace
#: the host's for every CPU-dependent choice (``--runtime auto``, native or emulated bf16, OpenVINO's
#: precision): the tests simulate each CPU kind with it, whatever machine runs them.
CPU_FLAGS_ENV = "PROTOEMBED_CPU_FLAGS"


def cpu_flags() -> frozenset[str]:
    """The CPU feature flags protoembed's choices read: :data:`CPU_FLAGS_ENV`'s when it is set, else the
    host's (:func:`host_cpu_flags`)."""
    simulated = os.environ.get(CPU_FLAGS_ENV)
    if simulated is not None:
        return frozenset(simulated.replace(",", " ").split())
    return host_cpu_flags()


@functools.lru_cache(maxsize=1)
def host_cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as ``/proc/cpuinfo`` lists them (empty where it cannot be read)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's model name as ``/proc/cpuinfo`` gives it (``"unknown CPU"`` where it cannot be read)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown CPU"
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def cpu_features() -> dict[str, bool]:
    """``{flag: present}`` for each of :data:`CPU_FEATURES`."""
    flags = cpu_flags()
    return {name: name in flags for name in CPU_FEATURES}


def native_bf16(device: torch.device | str = "cpu") -> bool:
    """True where bf16 matmuls run natively: CUDA with bf16 support, a CPU with AVX512-BF16 or AMX."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        flags = cpu_flags()
        return "avx512_bf16" in flags or "amx_bf16" in flags
    return False


def check_precision(precision: str) -> str:
    """``precision`` if it is one of :data:`PRECISIONS`, else a :class:`ProtoembedError`."""
    if precision not in PRECISIONS:
        raise ProtoembedError(f"unknown precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    return precision


def check_fp16(setting: str, device: torch.device | str | None = None) -> None:
    """The rule of ``fp16``, for training (``setting`` ``training.precision``) and inference
    (``precision``): half precision runs on a CUDA GPU only.

    Args:
        setting: the name of the setting, first in the message.
        device: where it would run (``None``: this machine's CUDA GPU, if any).
    Raises:
        ProtoembedError: one line, when this machine has no CUDA GPU or ``device`` is not one.
    """
    import torch

    if not torch.cuda.is_available():
        where = "this machine has none"
    elif device is not None and torch.device(device).type != "cuda":
        where = f"the model runs on {torch.device(device).type}"
    else:
        return
    raise ProtoembedError(f"{setting} fp16 needs a CUDA GPU and {where}; use bf16 (CPU or CUDA) or fp32")


#: What bf16 is on a CPU without native bf16, as the warning and ``train --check`` say it.
EMULATED_BF16 = "emulated (no AVX512-BF16 / AMX)"


@functools.cache
def warn_emulated_bf16(device_type: str) -> None:
    """Log once per device type (a WARNING: the command line says it at its default level) that bf16 is
    emulated there (:data:`EMULATED_BF16`)."""
    logger.warning(
        "bf16 on this %s is %s: correct, but several times slower than fp32; use fp32 here",
        device_type.upper() if device_type == "cpu" else device_type,
        EMULATED_BF16,
    )
