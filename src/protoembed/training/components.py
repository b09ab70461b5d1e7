"""What one training run is built from: the head, the objective, the dev evaluator, the epoch sampler and
the AdamW groups.

In: a :class:`~protoembed.training.config.TrainConfig` (and the embedder it loads). Out: the pieces
:class:`~protoembed.training.trainer.Trainer` hands to Accelerate. :class:`TrainableObjective` and
:data:`Evaluator` are what the trainer requires of an objective and of a dev metric.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import torch

from protoembed.training.config import TrainConfig

if TYPE_CHECKING:
    from protoembed.embedder import Embedder


class TrainableObjective(Protocol):
    """What the trainer needs from an objective (:class:`protoembed.objectives.Objective` is one).

    It must also be a ``torch.nn.Module`` (Accelerate wraps it, the optimizer reads its parameters, its
    ``state_dict`` goes into checkpoints); training-input truncation is the objective's own business.
    """

    def __call__(self, sentences: Sequence[str]) -> torch.Tensor:
        """The scalar training loss of one batch of raw sentences (this process's share)."""
        ...

    def eval_embedder(self) -> Embedder:
        """The model to evaluate and save (sharing the trained weights)."""
        ...

    def config(self) -> dict[str, Any]:
        """JSON-serialisable settings (name and options) for the run log."""
        ...

    def parameters(self, recurse: bool = True) -> Iterator[torch.nn.Parameter]:
        """Every trained parameter (``torch.nn.Module.parameters``)."""
        ...


#: ``(config, embedder) -> objective``: how a run builds its objective.
ObjectiveFactory = Callable[[TrainConfig, "Embedder"], TrainableObjective]
#: ``embedder -> dev score`` (higher is better; NaN = no score): selects ``best/``.
Evaluator = Callable[["Embedder"], float]


def stsb_dev_evaluator(
    data_dir: str | os.PathLike[str] | None, variant: str = "senteval", batch_size: int = 128
) -> Evaluator:
    """The default dev metric: Spearman x100 on the STS Benchmark dev split (SimCSE's and ConPVP's
    model selection), whole sentences, ``batch_size`` sentences per forward."""
    from protoembed.evaluation.sts import stsb_dev_spearman

    def evaluate(embedder: Embedder) -> float:
        return stsb_dev_spearman(
            lambda s: embedder.encode(s, batch_size=batch_size, show_progress_bar=False),
            data_dir,
            variant=variant,
        )

    return evaluate


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


def build_objective_from_config(cfg: TrainConfig, embedder: Embedder) -> TrainableObjective:
    """``protoembed.objectives.build_objective(name, embedder, max_seq_length=..., **options)``.

    The objective truncates its training inputs to the config's ``max_seq_length``. An objective with a
    ``seed`` option (ConPVP's template draws) gets ``training.seed`` unless the config sets
    ``objective.seed``, so that the seeds of a study vary every random choice.
    """
    from protoembed.objectives import build_objective, objective_class

    options = dict(cfg.objective.options)
    if "seed" in objective_class(cfg.objective.name).Options.model_fields and "seed" not in options:
        options["seed"] = cfg.training.seed
    return build_objective(cfg.objective.name, embedder, max_seq_length=cfg.max_seq_length, **options)


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
