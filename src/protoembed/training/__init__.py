"""Training: config files (:mod:`.config`, its YAML schema :mod:`.schema`), the corpus reader
(:mod:`.corpus`), a run's parts (:mod:`.components`: head, objective, dev evaluator, sampler, optimizer
groups), atomic checkpoints (:mod:`.checkpoint`), the run log (:mod:`.runlog`), clean stops on SIGTERM
(:mod:`.stopping`) and the Accelerate loop (:mod:`.trainer`)."""

from __future__ import annotations

from protoembed.training.config import TrainConfig, load_config
from protoembed.training.trainer import train

__all__ = ["TrainConfig", "load_config", "train"]
