"""Experiment trackers (``training.report_to: [tensorboard, wandb, ...]``) through Accelerate's.

In: the tracker names of the config, the run's ``Accelerator`` (built with ``log_with`` and
``project_dir=OUTPUT_DIR/trackers``). Out: what ``training_log.jsonl`` logs, also sent to every tracker
(:class:`TrackedLog`): ``train/loss``, ``train/lr``, ``train/tokens_per_second`` and ``train/mfu`` (where
known) at each logged step, ``eval/dev_score`` (the dev score of the run's evaluator: STS-B dev Spearman x100 by default) at
each evaluation, ``test/sts_avg`` at the end, each at its optimizer step; the resolved config as the run's
hyper-parameters. TensorBoard writes ``OUTPUT_DIR/trackers/protoembed/events.out.tfevents.*``; a resumed
run hides the steps logged after its checkpoint (they are trained again). Only the main process logs.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from protoembed.core.errors import ProtoembedError

#: The project name given to Accelerate's ``init_trackers`` (TensorBoard's sub-folder, wandb's project).
PROJECT = "protoembed"
#: ``OUTPUT_DIR/TRACKER_DIR``: Accelerate's ``project_dir`` (local trackers write there).
TRACKER_DIR = "trackers"
#: The package(s) each tracker needs (any one of them).
PACKAGES: dict[str, tuple[str, ...]] = {
    "aim": ("aim",),
    "comet_ml": ("comet_ml",),
    "mlflow": ("mlflow",),
    "tensorboard": ("tensorboard", "tensorboardX"),
    "wandb": ("wandb",),
    "clearml": ("clearml",),
    "dvclive": ("dvclive",),
    "swanlab": ("swanlab",),
    "trackio": ("trackio",),
}


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # a module set to None, a broken package
        return False


def check_trackers(names: list[str]) -> None:
    """Raise a one-line :class:`ProtoembedError` naming ``training.report_to`` if a tracker's package is
    missing (Accelerate itself would silently leave that tracker out)."""
    for name in names:
        packages = PACKAGES[name]
        if not any(_installed(p) for p in packages):
            raise ProtoembedError(
                f"training.report_to: tracker {name!r} needs the package {' or '.join(packages)}, which is "
                f"not installed (pip install {packages[0]}), or leave {name} out"
            )


def hyperparameters(config: dict[str, Any], prefix: str = "") -> dict[str, bool | int | float | str]:
    """The config flattened to ``{"training.lr": 3e-05, ...}`` (lists, ``None``: JSON text), which every
    tracker accepts (TensorBoard's hparams take scalars and strings only)."""
    flat: dict[str, bool | int | float | str] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(hyperparameters(value, f"{prefix}{key}."))
        elif isinstance(value, (bool, int, float, str)):
            flat[f"{prefix}{key}"] = value
        else:
            flat[f"{prefix}{key}"] = json.dumps(value)
    return flat


def metrics(entry: dict[str, Any]) -> dict[str, float]:
    """The tracker values of a ``training_log.jsonl`` entry (``{}`` for other events; no dev score yet,
    or NaN, is left out)."""
    event = entry.get("event")
    if event == "train":
        values = {
            "train/loss": entry.get("loss"),
            "train/lr": entry.get("lr"),
            "train/tokens_per_second": entry.get("tokens_per_second"),
            "train/mfu": entry.get("mfu"),  # left out where the device's peak is unknown
        }
    elif event == "eval":
        values = {"eval/dev_score": entry.get("dev_score", entry.get("stsb_dev_spearman"))}
    elif event == "end":
        values = {"test/sts_avg": entry.get("test_avg")}
    else:
        return {}
    return {k: float(v) for k, v in values.items() if v is not None}


def start_trackers(accelerator, output_dir: Path, config: dict[str, Any], step: int) -> None:
    """``init_trackers`` for the run in ``output_dir``; ``step``: the step it starts from. TensorBoard
    hides what an earlier attempt in the same folder logged from step ``step + 1`` on (those steps are
    trained again: a resume, or a fresh start after a run stopped before its first checkpoint)."""
    kwargs: dict[str, dict[str, Any]] = {
        "wandb": {"name": output_dir.name},
        "tensorboard": {"purge_step": step + 1},
    }
    accelerator.init_trackers(PROJECT, config=hyperparameters(config), init_kwargs=kwargs)


def finish_trackers(accelerator) -> None:
    """Close every tracker (flush TensorBoard's file, finish the wandb run). Accelerate's
    ``end_training`` would also destroy the process group, which a staged run still needs."""
    for tracker in accelerator.trackers:
        tracker.finish()
    accelerator.trackers = []


class TrackedLog:
    """A :class:`~protoembed.training.runlog.RunLog` whose every entry also goes to the trackers
    (:func:`metrics`, at the entry's ``step``); every other attribute is the log's."""

    def __init__(self, log: Any, accelerator: Any) -> None:
        self.log, self.accelerator = log, accelerator

    def write(self, entry: dict[str, Any]) -> None:
        """``log.write(entry)``, then ``accelerator.log(metrics(entry), step=entry["step"])``."""
        self.log.write(entry)
        values = metrics(entry)
        if values and self.accelerator.trackers:
            self.accelerator.log(values, step=entry.get("step"))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.log, name)
