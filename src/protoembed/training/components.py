"""What one training run is built from: the head, the objective, the epoch sampler and the AdamW groups.

In: a :class:`~protoembed.training.config.TrainConfig` (and the embedder it loads). Out: the pieces
:class:`~protoembed.training.trainer.Trainer` hands to Accelerate.
"""

from __future__ import annotations

from typing import Any

import torch

from protoembed.training.config import TrainConfig

#: Head used when the config names none.
DEFAULT_HEADS = {"simcse": "cls", "promptbert": "mask", "conpvp": "soft_prompt"}


def head_for(cfg: TrainConfig) -> str | None:
    """The embedder head of a run: the config's ``head``, else the objective's natural one.

    ConPVP's ``w/ manual`` ablation (``anchor: manual``) reads a discrete template, so it gets ``mask``.
    """
    if cfg.head is not None:
        return cfg.head
    if cfg.objective.name == "conpvp" and cfg.objective.options.get("anchor") == "manual":
        return "mask"
    return DEFAULT_HEADS.get(cfg.objective.name)


def build_objective_from_config(cfg: TrainConfig, embedder) -> torch.nn.Module:
    """``protoembed.objectives.build_objective(name, embedder, **options)``.

    An objective with a ``seed`` option (ConPVP's template draws) gets ``training.seed`` unless the config
    sets ``objective.seed``, so that the seeds of a study vary every random choice.
    """
    from protoembed.objectives import build_objective, objective_class

    options = dict(cfg.objective.options)
    if "seed" in objective_class(cfg.objective.name).Options.model_fields and "seed" not in options:
        options["seed"] = cfg.training.seed
    return build_objective(cfg.objective.name, embedder, **options)


class EpochShuffleSampler(torch.utils.data.Sampler):
    """A permutation of ``range(n)`` drawn from ``seed + epoch`` (independent of the global RNGs)."""

    def __init__(self, n: int, seed: int) -> None:
        self.n, self.seed, self.epoch = n, seed, 0

    def set_epoch(self, epoch: int) -> None:
        """Select the permutation of ``epoch`` (Accelerate calls this too)."""
        self.epoch = epoch

    def __iter__(self):
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        return iter(torch.randperm(self.n, generator=generator).tolist())

    def __len__(self) -> int:
        return self.n


def sentence_loader(sentences: list[str], batch_size: int, sampler: EpochShuffleSampler):
    """Batches of ``batch_size`` raw sentences in the sampler's order; the last incomplete one dropped."""
    return torch.utils.data.DataLoader(
        sentences,
        batch_size=batch_size,
        sampler=sampler,
        drop_last=True,
        collate_fn=list,
        generator=torch.Generator(),  # keeps DataLoader iterators off the global RNG
    )


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups: no decay for 1-d parameters (biases, LayerNorm weights), as HF Trainer does."""
    decay, no_decay = [], []
    for param in model.parameters():
        if param.requires_grad:
            (no_decay if param.ndim <= 1 else decay).append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
