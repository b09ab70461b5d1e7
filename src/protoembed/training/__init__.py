"""Training: the config (:mod:`.config_models`: the pydantic schema; :mod:`.config`: reading YAML files,
``base:`` includes and ``--set`` overrides into a validated config; its YAML schema :mod:`.schema`),
chained stages (:mod:`.stages`), a run's parts (:mod:`.components`: head, objective, dev evaluator,
sampler, optimizer groups), atomic checkpoints (:mod:`.checkpoint`), the run log (:mod:`.runlog`), clean
stops on SIGTERM (:mod:`.stopping`) and the Accelerate loop (:mod:`.trainer`)."""

from __future__ import annotations

from typing import Any

from protoembed.training.config import TrainConfig, load_config


def __getattr__(name: str) -> Any:
    """``train``, imported on first use (the trainer imports torch; the config and its validation do not)."""
    if name == "train":
        from protoembed.training.trainer import train

        return train
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["TrainConfig", "load_config", "train"]
