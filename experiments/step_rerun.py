"""A study's records rerun with protoembed's current training step, and the note of what moved.

The committed CPU studies were made with the step of :data:`~experiments.records.LEGACY_SETTINGS` (one
forward of a step's rows padded together, torch's dropout masks), which ``configs/base/records-step.yaml``
pins until a study's records are rerun. Rerunning a study with the current defaults draws other dropout
masks, so its seeded numbers move. Before the new records replace the old ones, the study writes its
headline numbers (a ``{name: value}`` mapping: means over the seeds of its main table) to
:data:`STEP_BEFORE_FILE` beside the records (:func:`write_step_before`); its page then shows them beside
the same numbers of the new records (:func:`step_change_section`).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np

from experiments.records import LEGACY_SETTINGS, write_json
from protoembed import ProtoembedError

#: Beside a rerun study's records: ``{"settings": the old step's settings, "commit": the commit whose
#: records they were, "numbers": {name: value}}``.
STEP_BEFORE_FILE = "step-before.json"


def current_step() -> dict[str, str]:
    """The settings of :data:`~experiments.records.LEGACY_SETTINGS` at their current defaults
    (``{"training.padding": "auto", ...}``), read from protoembed's training config."""
    from protoembed.training.config_models import TrainingConfig

    return {key: str(TrainingConfig.model_fields[key.split(".", 1)[1]].default) for key in LEGACY_SETTINGS}


def _commit(folder: Path) -> str:
    """The checked-out commit of the repository holding ``folder`` (``unknown`` outside one)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, check=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip()


def write_step_before(records_dir: Path, numbers: dict[str, float]) -> Path:
    """Write ``numbers`` (the records' headline numbers, made with the old step) to
    :data:`STEP_BEFORE_FILE` in ``records_dir``, with the old step's settings and the current commit."""
    payload = {"settings": dict(LEGACY_SETTINGS), "commit": _commit(records_dir), "numbers": numbers}
    return write_json(records_dir / STEP_BEFORE_FILE, payload)


def seed_means(row: str, columns: dict[str, list[float]]) -> dict[str, float]:
    """A study's headline numbers of one row: ``"<row>: <column>"`` -> the mean of the column's values
    over the seeds, for each column with any value."""
    return {f"{row}: {column}": float(np.mean(values)) for column, values in columns.items() if values}


def step_change_section(records_dir: Path, numbers: dict[str, float]) -> list[str]:
    """The page's section on the rerun: each number of :data:`STEP_BEFORE_FILE` beside ``numbers`` (the
    same names, from the current records) and the change; no lines when ``records_dir`` has no such file
    (the records were never rerun)."""
    path = records_dir / STEP_BEFORE_FILE
    if not path.is_file():
        return []
    before = json.loads(path.read_text(encoding="utf-8"))
    old = ", ".join(f"`{key}: {value}`" for key, value in before["settings"].items())
    new = ", ".join(f"`{key}: {value}`" for key, value in current_step().items())
    lines = [
        "## Before and after the rerun with the current training step",
        "",
        f"These records were made again with {new} (the defaults); before, they were made with {old} "
        f"(the records of commit `{before['commit'][:12]}`). Each number is a mean over the same seeds; "
        "a seeded run draws other dropout masks with the new step, so a change smaller than the seeds' "
        "spread (the tables above) is noise.",
        "",
        "| Number | before | after | change |",
        "|---|---:|---:|---:|",
    ]
    for name, was in before["numbers"].items():
        now = numbers.get(name)
        after, change = ("n/a", "n/a") if now is None else (f"{now:.2f}", f"{now - was:+.2f}")
        lines.append(f"| {name} | {was:.2f} | {after} | {change} |")
    return lines + [""]


def step_before(records_dir: Path, numbers: dict[str, float], say: Callable[[str], None]) -> int:
    """``--step-before``'s body: :func:`write_step_before`, said in one line; the exit code. A records
    folder without a recorded run is a :class:`~protoembed.ProtoembedError` (nothing is written)."""
    if not numbers:
        raise ProtoembedError(f"{records_dir}: no recorded run, so no numbers to keep")
    say(f"wrote {write_step_before(records_dir, numbers)} ({len(numbers)} numbers)")
    return 0
