"""Atomic training checkpoints on top of ``Accelerator.save_state`` / ``load_state``.

A checkpoint is ``output_dir/checkpoint/``: Accelerate's state (model, optimizer, scheduler, and one
``random_states_<rank>.pkl`` per process: Python, NumPy and torch RNGs, so dropout continues exactly)
plus our ``trainer_state.json`` (:class:`TrainerState`: step, best dev score, wall time...). Every process
saves its part into one hidden temp folder (:func:`protoembed.io.shared_temp_sibling`), which the main
process then swaps in for the previous checkpoint by renames (:func:`protoembed.io.swap_dir`), so a crash
at any moment leaves one complete checkpoint (:func:`find_checkpoint` falls back to the moved-aside copy
if the crash hit between the two renames); temp folders of a killed run are removed by the next save.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from protoembed.core.errors import ProtoembedError, WriteError
from protoembed.outputs.io import (
    clean_stale_siblings,
    shared_temp_sibling,
    swap_dir,
    write_failure,
    write_json_atomic,
)
from protoembed.outputs.run_layout import CHECKPOINT_DIR, CONFIG_FILE, RESULTS_FILE

STATE_FILE = "trainer_state.json"
#: hidden siblings of ``checkpoint/``: ``replace_dir``'s temp and moved-aside copies (and this
#: module's former fixed names ``.checkpoint.tmp`` / ``.checkpoint.old``).
_SIBLINGS = (f".{CHECKPOINT_DIR}.tmp*", f".{CHECKPOINT_DIR}.old*")


@dataclass
class TrainerState:
    """The progress of a run: what ``trainer_state.json`` holds and a resumed run starts from.

    Attributes:
        step: optimizer steps done.
        best_score: best dev score so far (``None``: none yet, or only NaN scores).
        best_step: step of ``best/`` (``None`` before the first evaluation).
        best_scorer: who scored ``best/``'s dev score (a key of
            :data:`protoembed.run_layout.DEV_SCORERS`; ``None`` before the first evaluation).
        last_score: dev score of the latest evaluation.
        wall_time_s: training wall time up to ``step``, over every (resumed) process.
        world_size: number of processes that wrote the checkpoint.
        total_steps: steps of the whole run.
        tokens: tokens trained up to the last logging step (:mod:`protoembed.training.throughput`).
        train_time_s: seconds the steps took up to then, evaluations and checkpoints excluded.
    """

    step: int = 0
    best_score: float | None = None
    best_step: int | None = None
    best_scorer: str | None = None
    last_score: float | None = None
    wall_time_s: float = 0.0
    world_size: int = 1
    total_steps: int = 0
    tokens: int = 0
    train_time_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainerState:
        """Read :meth:`to_dict` output (keys this version does not know are ignored)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def check_output_dir(output_dir: Path, config: dict[str, Any], resume: bool) -> dict[str, Any] | None:
    """Refuse to overwrite a run; on resume, refuse a changed config and return a finished run's results.

    In: the run folder, the resolved config (:meth:`TrainConfig.to_dict`), whether ``--resume`` was given.
    Out: the ``results.json`` of an already finished run (resume only), else ``None``.
    Raises :class:`ProtoembedError` naming the folder, or the first config key that differs from the
    interrupted run's ``config.yaml``.
    """
    results = output_dir / RESULTS_FILE
    if not resume:
        if results.exists() or find_checkpoint(output_dir) is not None:
            raise ProtoembedError(
                f"{output_dir} already holds a training run; pass --resume to continue or "
                "reuse it, or choose another --output-dir"
            )
        return None
    saved = output_dir / CONFIG_FILE
    if saved.is_file():
        import yaml

        before = yaml.safe_load(saved.read_text(encoding="utf-8")) or {}
        now = dict(config)
        for data in (before, now):
            data.pop("output_dir", None)
        diff = first_difference(with_new_defaults(before), now)
        if diff is not None:
            raise ProtoembedError(
                f"--resume: config key {diff!r} differs from the interrupted run's "
                f"({saved}); resume with the same config"
            )
    if results.exists():
        return json.loads(results.read_text(encoding="utf-8"))
    return None


def with_new_defaults(saved: dict[str, Any]) -> dict[str, Any]:
    """A saved config with the ``training:`` keys it lacks (written before they existed) at their
    defaults, so that a run started by an earlier version resumes as long as the new keys keep them."""
    from protoembed.training.config_models import TrainingConfig

    training = saved.get("training")
    if not isinstance(training, dict):
        return saved
    missing = {
        name: field.get_default(call_default_factory=True)
        for name, field in TrainingConfig.model_fields.items()
        if name not in training
    }
    return {**saved, "training": {**training, **missing}}


def first_difference(a: Any, b: Any, prefix: str = "") -> str | None:
    """Dotted key of the first difference between two nested dicts, or ``None``."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(dict.fromkeys([*a, *b])):
            diff = first_difference(a.get(key), b.get(key), f"{prefix}{key}.")
            if diff is not None:
                return diff
        return None
    return None if a == b else prefix.rstrip(".")


def find_checkpoint(output_dir: Path) -> Path | None:
    """The latest complete checkpoint in ``output_dir`` (or its moved-aside copy), or ``None``."""
    for candidate in [output_dir / CHECKPOINT_DIR, *sorted(output_dir.glob(_SIBLINGS[1]))]:
        if (candidate / STATE_FILE).is_file():
            return candidate
    return None


def read_state(checkpoint: Path) -> TrainerState:
    """The ``trainer_state.json`` of a checkpoint."""
    return TrainerState.from_dict(json.loads((checkpoint / STATE_FILE).read_text(encoding="utf-8")))


def save_checkpoint(accelerator, output_dir: Path, state: TrainerState) -> Path:
    """Save the accelerator state and ``state`` atomically as ``output_dir/checkpoint``.

    Collective: every process must call it (each one writes its own RNG state into the shared temp
    folder, then the main process swaps the complete folder in).
    """
    final = output_dir / CHECKPOINT_DIR
    tmp = shared_temp_sibling(final)
    if accelerator.is_main_process:
        clean_stale_siblings(final)  # a temp folder of a killed save, an unfinished one of ours
    accelerator.wait_for_everyone()
    try:
        # Pickled tensors, not safetensors: an objective may hold the same tensor under two names.
        accelerator.save_state(str(tmp), safe_serialization=False)
        if accelerator.is_main_process:
            write_json_atomic(tmp / STATE_FILE, state.to_dict())
    except Exception as err:  # a full disk: torch's writer raises RuntimeError, not OSError
        reason = err.reason if isinstance(err, WriteError) else write_failure(err, tmp)
        if reason is None:
            raise
        shutil.rmtree(tmp, ignore_errors=True)  # the partial folder, not the previous checkpoint
        message = f"cannot write {final}: {reason}; no partial checkpoint is left"
        raise WriteError(message, final, reason) from None  # the previous one is untouched
    accelerator.wait_for_everyone()  # every part written before the main process renames the folder
    if accelerator.is_main_process:
        swap_dir(tmp, final)
    accelerator.wait_for_everyone()
    return final


def kept_checkpoint(step: int | None, checkpoint: Path | None = None) -> str:
    """What a stopped run leaves for ``--resume``, as a message clause: the checkpoint of ``step`` in the
    folder ``checkpoint``, or (``step`` None) that there is none yet."""
    if step is None:
        return "no checkpoint had been written yet, so a resumed run starts over"
    return f"the checkpoint of step {step} is kept in {checkpoint}"


def remove_checkpoint(output_dir: Path) -> None:
    """Delete the checkpoint folders of a finished run (main process only)."""
    for folder in [output_dir / CHECKPOINT_DIR, *(p for g in _SIBLINGS for p in output_dir.glob(g))]:
        if folder.is_dir():
            shutil.rmtree(folder)
