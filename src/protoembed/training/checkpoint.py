"""Atomic training checkpoints on top of ``Accelerator.save_state`` / ``load_state``.

A checkpoint is ``output_dir/checkpoint/``: Accelerate's state (model, optimizer, scheduler, and one
``random_states_<rank>.pkl`` per process: Python, NumPy and torch RNGs, so dropout continues exactly)
plus our ``trainer_state.json`` (step, best dev score, wall time...). Every process writes into
``output_dir/.checkpoint.tmp``; then the main process swaps it in with ``os.replace`` (the previous one
is moved aside first and deleted last), so a crash at any moment leaves one complete checkpoint:
:func:`find_checkpoint` falls back to the moved-aside copy if the crash hit between the two renames.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from protoembed.io import write_json_atomic

CHECKPOINT = "checkpoint"
STATE_FILE = "trainer_state.json"
_TMP = ".checkpoint.tmp"
_OLD = ".checkpoint.old"


def find_checkpoint(output_dir: Path) -> Path | None:
    """The latest complete checkpoint in ``output_dir``, or ``None``."""
    for name in (CHECKPOINT, _OLD):
        candidate = output_dir / name
        if (candidate / STATE_FILE).is_file():
            return candidate
    return None


def read_state(checkpoint: Path) -> dict[str, Any]:
    """The ``trainer_state.json`` of a checkpoint."""
    return json.loads((checkpoint / STATE_FILE).read_text(encoding="utf-8"))


def save_checkpoint(accelerator, output_dir: Path, state: dict[str, Any]) -> Path:
    """Save the accelerator state and ``state`` atomically as ``output_dir/checkpoint``.

    Collective: every process must call it (each one writes its own RNG state).
    """
    tmp, final, old = output_dir / _TMP, output_dir / CHECKPOINT, output_dir / _OLD
    if accelerator.is_main_process and tmp.exists():
        shutil.rmtree(tmp)
    accelerator.wait_for_everyone()
    # Pickled tensors, not safetensors: an objective may hold the same tensor under two names.
    accelerator.save_state(str(tmp), safe_serialization=False)
    if accelerator.is_main_process:
        write_json_atomic(tmp / STATE_FILE, state)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        if old.exists():
            shutil.rmtree(old)
        if final.exists():
            os.replace(final, old)
        os.replace(tmp, final)
        if old.exists():
            shutil.rmtree(old)
    accelerator.wait_for_everyone()
    return final


def remove_checkpoint(output_dir: Path) -> None:
    """Delete the checkpoint folders of a finished run (main process only)."""
    for name in (CHECKPOINT, _OLD, _TMP):
        if (output_dir / name).exists():
            shutil.rmtree(output_dir / name)
