"""What one training run is built from: the head, the objective, the epoch sampler and
the AdamW groups.

In: a :class:`~protoembed.training.config_models.TrainConfig` (and the embedder it loads). Out: the pieces
:class:`~protoembed.training.trainer.Trainer` hands to Accelerate. :class:`TrainableObjective` and
:data:`DevScorer` are what the trainer requires of an objective and of a dev metric.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import torch

from protoembed.core.errors import ProtoembedError
from protoembed.core.threads import usable_cores
from protoembed.data.training.examples import Examples
from protoembed.training.config_models import TrainConfig

if TYPE_CHECKING:
    from protoembed.model.embedder import Embedder


class TrainableObjective(Protocol):
    """What the trainer needs from an objective (:class:`protoembed.objectives.Objective` is one).

    It must also be a ``torch.nn.Module`` (Accelerate wraps it, the optimizer reads its parameters, its
    ``state_dict`` goes into checkpoints); training-input truncation is the objective's own business.
    Optionally it has ``dev_pair_scores(sentences1, sentences2, batch_size) -> array | None``: its own
    score of each pair, whose correlation with the gold of the selection's STS-like tasks selects
    ``best/`` instead of the evaluation embedder's whenever it is not ``None`` (the regression
    cross-encoder).
    """

    columns: Sequence[str | tuple[str, ...]]
    """The columns a batch must have (a tuple: one of those alternatives)."""

    def __call__(self, batch: Mapping[str, Sequence[Any]]) -> torch.Tensor:
        """The scalar training loss of one batch of examples (this process's share of its rows)."""
        ...

    def eval_embedder(self) -> Embedder:
        """The model to evaluate (sharing the trained weights)."""
        ...

    def save(self, path: str | os.PathLike[str]) -> None:
        """Save the model a run keeps (``best/``)."""
        ...

    def config(self) -> dict[str, Any]:
        """JSON-serialisable settings (name and options) for the run log."""
        ...

    def parameters(self, recurse: bool = True) -> Iterator[torch.nn.Parameter]:
        """Every trained parameter (``torch.nn.Module.parameters``)."""
        ...


#: ``(config, embedder) -> objective``: how a run builds its objective.
ObjectiveFactory = Callable[[TrainConfig, "Embedder"], TrainableObjective]
#: ``embedder -> dev score`` (higher is better; NaN = no score): selects ``best/`` (an
#: :class:`~protoembed.evaluation.evaluator.Evaluator` is one).
DevScorer = Callable[["Embedder"], float]


def head_for(cfg: TrainConfig) -> str | None:
    """The embedder head of a run: the config's ``head``, else the objective's own from its plan
    (:attr:`protoembed.objectives.plan.ObjectivePlan.head`: e.g. ConPVP's ``w/ manual`` ablation gets
    ``mask``); ``None`` (the model's own) for an objective outside the registry."""
    return cfg.head if cfg.head is not None else cfg.objective.plan.head


def embedder_for(cfg: TrainConfig, device: Any) -> Embedder:
    """The embedder a run trains: the model of the config's model settings
    (:meth:`~protoembed.training.config_models.TrainConfig.model_spec`) with the run's head
    (:func:`head_for`), on ``device``."""
    from protoembed.model.loading import load_model

    return load_model(cfg.model_spec(head=head_for(cfg), device=device))


def build_objective_from_config(cfg: TrainConfig, embedder: Embedder) -> TrainableObjective:
    """The config's objective around ``embedder``, built from its plan
    (:meth:`protoembed.objectives.plan.ObjectivePlan.build`).

    The objective truncates its training inputs to the config's ``max_seq_length``. An objective with a
    ``seed`` option (ConPVP's template draws) gets ``training.seed`` unless the config sets
    ``objective.seed``, so that the seeds of a study vary every random choice.
    """
    return cfg.objective.plan.build(
        embedder, max_seq_length=cfg.max_seq_length, seed=cfg.training.seed, padding=cfg.training.padding
    )


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


#: Most DataLoader workers ``training.num_workers: null`` gives on CUDA.
AUTO_WORKERS_MAX = 4


def loader_workers(setting: int | None, device: torch.device, cores: int | None = None) -> int:
    """The DataLoader worker processes of a run: ``training.num_workers`` as set, or for ``None``
    (the default) 0 off CUDA (on a CPU the workers would take cores from the model's own threads) and on
    CUDA one per usable core but one, at most :data:`AUTO_WORKERS_MAX` (tokenising and padding the next
    batches while the device runs the current one). ``cores``: the usable cores (default
    :func:`protoembed.core.threads.usable_cores`)."""
    if setting is not None:
        return setting
    if device.type != "cuda":
        return 0
    return max(0, min(AUTO_WORKERS_MAX, (len(usable_cores()) if cores is None else cores) - 1))


def example_loader(
    examples: Examples,
    batch_size: int,
    sampler: EpochShuffleSampler,
    collate_fn: Callable[[list[int]], Any] | None = None,
    num_workers: int = 0,
    pin_memory: bool = False,
):
    """Batches of ``batch_size`` examples in the sampler's order, each a dict of column lists
    (``{"sentence1": [...], "sentence2": [...], "score": [...]}``) or what ``collate_fn(indices)`` makes
    of them (:class:`protoembed.training.step.Collator`: tensors), in ``num_workers`` processes (0: this
    one), with ``pin_memory`` their tensors in page-locked memory (CUDA: copied to the device without
    blocking); the last incomplete batch dropped."""
    return torch.utils.data.DataLoader(
        range(len(examples)),
        batch_size=batch_size,
        sampler=sampler,
        drop_last=True,
        collate_fn=collate_fn or examples.select,
        num_workers=num_workers,
        pin_memory=pin_memory,
        generator=torch.Generator(),  # keeps DataLoader iterators off the global RNG
    )


def adamw(groups: list[dict[str, Any]], lr: float, device: torch.device) -> torch.optim.AdamW:
    """The run's AdamW over ``groups`` (:func:`param_groups`): torch's fused kernel on CUDA and the CPU
    (:data:`FUSED_ADAMW`: one kernel for every parameter; on a 2-core CPU the own-pairs run's 56 steps
    took 1.2 s against 3.6 s multi-tensor), the multi-tensor (``foreach``) implementation elsewhere; all
    compute the update of the plain per-parameter loop (to rounding: the order of a few multiplications
    differs)."""
    kind = "fused" if device.type in FUSED_ADAMW else "foreach"
    return torch.optim.AdamW(groups, lr=lr, **{kind: True})


#: The devices where :func:`adamw` takes torch's fused kernel.
FUSED_ADAMW = ("cuda", "cpu")


def param_groups(
    model: torch.nn.Module,
    weight_decay: float,
    lr: float,
    head_lr: float | None = None,
    backbone: torch.nn.Module | None = None,
) -> list[dict[str, Any]]:
    """AdamW groups: no decay for 1-d parameters (biases, LayerNorm weights), as HF Trainer does; with
    ``head_lr``, every parameter outside ``backbone`` (the pretrained transformer) learns at ``head_lr``.

    Returns up to four groups (decay / no decay x backbone / the rest), empty groups left out.
    """
    in_backbone = (
        {id(p) for p in backbone.parameters()} if backbone is not None and head_lr is not None else set()
    )
    groups: dict[tuple[bool, bool], list[torch.nn.Parameter]] = {}
    for param in model.parameters():
        if param.requires_grad:
            fresh = head_lr is not None and id(param) not in in_backbone
            groups.setdefault((param.ndim > 1, fresh), []).append(param)
    return [
        {
            "params": params,
            "weight_decay": weight_decay if decay else 0.0,
            "lr": head_lr if fresh else lr,
        }
        for (decay, fresh), params in sorted(groups.items(), key=lambda item: (not item[0][0], item[0][1]))
    ]


def read_training_examples(cfg: TrainConfig) -> Examples:
    """The examples of ``cfg.data``: each file read by its format's reader, concatenated in order, the
    first ``max_sentences`` kept. Columns are not yet matched to the objective (see :func:`examples_for`).

    Raises:
        ProtoembedError: a missing file, an unknown format or a malformed line (named as ``file:line``).
    """
    from protoembed.data.training.formats import read_examples

    data = cfg.data
    parts = [
        read_examples(f.path, f.format, data.data_dir, f.columns, **data.reader_options(f))
        for f in data.files()
    ]
    examples = Examples.concat(parts) if len(parts) > 1 else parts[0]
    if data.max_sentences is not None and len(examples) > data.max_sentences:
        examples = examples.head(data.max_sentences)
    return examples


def examples_for(examples: Examples, columns: Sequence[str | tuple[str, ...]], cfg: TrainConfig) -> Examples:
    """``examples`` with the ``columns`` the objective needs (converted if a registered conversion
    applies, see :func:`protoembed.data.training.formats.convert`), checked to fill one batch.

    Raises:
        ProtoembedError: the columns cannot be had, or the batch is larger than the examples.
    """
    from protoembed.data.training.formats import convert

    examples = convert(examples, columns, who=f"objective {cfg.objective.name!r}")
    check_batch_fits(cfg.training.batch_size, len(examples), examples.where())
    return examples


def check_batch_fits(batch: int, examples: int, where: str) -> None:
    """One-line error unless a global ``batch`` fits in the ``examples`` read from ``where``."""
    if batch > examples:
        raise ProtoembedError(
            f"training.batch_size {batch} is larger than the training data ({examples} usable "
            f"examples in {where}); lower the batch size or use more data"
        )
