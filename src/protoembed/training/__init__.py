"""Training: config files (:mod:`.config`), the corpus reader (:mod:`.corpus`), atomic checkpoints
(:mod:`.checkpoint`), the Accelerate loop (:mod:`.trainer`) and the CPU study runner (:mod:`.study`)."""

from __future__ import annotations

from protoembed.training.config import TrainConfig, load_config
from protoembed.training.trainer import train

__all__ = ["TrainConfig", "load_config", "train"]
