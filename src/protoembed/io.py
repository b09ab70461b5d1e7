"""Atomic file output: write to a temp file beside the target, then ``os.replace`` (never half-written)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from protoembed.errors import ProtoembedError


def write_atomic(path: str | os.PathLike, write: Callable[[str], None], suffix: str = "") -> Path:
    """Call ``write(temp_path)`` on a temp file in ``path``'s folder, then rename it to ``path``.

    Raises:
        ProtoembedError: the target's folder does not exist.
    """
    target = Path(path)
    if not target.parent.is_dir():
        raise ProtoembedError(f"cannot write {target}: directory {target.parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix or ".tmp", dir=target.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def json_safe(value: Any) -> Any:
    """Copy of ``value`` for strict JSON: NaN / inf become ``None``, numpy scalars Python numbers."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json_atomic(path: str | os.PathLike, data: Any) -> Path:
    """Write ``data`` as indented strict JSON to ``path`` atomically (parent folders are created)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(json_safe(data), indent=2, allow_nan=False) + "\n"
    return write_atomic(target, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (figures are only written to files)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str | os.PathLike, dpi: int = 110) -> Path:
    """Write a matplotlib figure as PNG to ``path`` atomically, then close it; returns the path."""
    try:
        return write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", dpi=dpi), suffix=".png")
    finally:
        pyplot().close(fig)
