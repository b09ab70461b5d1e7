"""Checks of the arguments a user passes to the Python API (the CLI's values go through them too).

Each returns the checked value or raises a one-line :class:`~protoembed.core.errors.ProtoembedError` naming
the value and what was expected.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from protoembed.core.errors import ProtoembedError


def check_count(name: str, value: Any) -> int:
    """``value`` if it is an integer of at least 1; a :class:`ProtoembedError` naming ``name`` and the
    value otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ProtoembedError(f"{name} must be an integer of at least 1, got {value!r}")
    return int(value)


def check_batch_size(batch_size: Any) -> int:
    """``batch_size`` if it is an integer of at least 1; a :class:`ProtoembedError` otherwise."""
    return check_count("batch_size", batch_size)


def check_sentences(sentences: Any) -> list[str]:
    """The sentences as a list; any item that is not a ``str`` is an error naming its index.

    ``None``, NaN (pandas' missing value) and ``bytes`` would otherwise be encoded as the text
    ``"None"``, ``"nan"``, ``"b'...'"``.
    """
    if sentences is None or isinstance(sentences, bytes) or not hasattr(sentences, "__iter__"):
        raise ProtoembedError(f"expected a string or a sequence of strings, got {type(sentences).__name__}")
    texts = list(sentences)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            shown = "NaN" if isinstance(text, float) and math.isnan(text) else repr(text)[:40]
            raise ProtoembedError(f"sentence {i}: expected a string, got {type(text).__name__} {shown}")
    return texts


def resolve_device(device: str | torch.device | None) -> torch.device:
    """The torch device for ``device``, checked before any weight is loaded.

    Args:
        device: ``cpu``, ``cuda``, ``cuda:N``, ``mps``, or ``None`` (CUDA if available, else CPU).
    Returns:
        the device.
    Raises:
        ProtoembedError: an unknown device name, or a device this machine does not have.
    """
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ProtoembedError(f"unknown device {str(device)!r}: expected cpu, cuda, cuda:N or mps") from None
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}"
            raise ProtoembedError(
                f"device {str(device)!r}: no CUDA device is available (torch {torch.__version__}, {build}); "
                "use --device cpu"
            )
        count = torch.cuda.device_count()
        if resolved.index is not None and resolved.index >= count:
            raise ProtoembedError(
                f"device {str(device)!r}: this machine has {count} CUDA device(s) (0..{count - 1})"
            )
    elif resolved.type == "mps":
        if not torch.backends.mps.is_available():
            raise ProtoembedError(
                f"device {str(device)!r}: MPS is not available on this machine; use --device cpu"
            )
    elif resolved.type != "cpu":
        raise ProtoembedError(f"unsupported device {str(device)!r}: expected cpu, cuda, cuda:N or mps")
    return resolved
