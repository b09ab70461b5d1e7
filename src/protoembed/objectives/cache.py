"""GradCache: a contrastive step over a large batch holding the activations of ``M`` rows at a time.

Luyu Gao, Yunyi Zhang, Jiawei Han, Jamie Callan. "Scaling Deep Contrastive Learning Batch Size under
Memory Limited Setup." RepL4NLP 2021. https://arxiv.org/abs/2101.06983

A contrastive loss ``L(s_1, ..., s_R)`` depends on the parameters ``theta`` of the backbone and head only
through the row vectors ``s_r = f(x_r)``, and ``f`` treats rows independently, so (the paper's Sec. 3.2)::

    dL/dtheta = sum_r  dL/ds_r . ds_r/dtheta

:func:`grad_cache_step` computes exactly this in three stages (Sec. 3.3):

1. *graph-less representation*: ``s_r`` for every row of the step (every view: anchors, prototypes c+
   and c-, template-denoising rows) in chunks of ``M`` rows, none crossing a forward of the step
   (:func:`chunks`; each chunk padded to its own longest row; under ``auto`` the rows sorted by length),
   under ``torch.no_grad``, recording the random state before each chunk;
2. *representation gradient*: the objective's loss on the vectors of the WHOLE batch (gathered across
   processes as in a plain step), back-propagated once: this gives ``dL/ds`` (the *cache*) and the
   gradients of what the loss holds itself (the training MLP, the denoising subtraction);
3. *sub-batch gradient accumulation*: each chunk embedded again with a graph, its random state replayed
   so that dropout (SimCSE's augmentation, every ConPVP view) draws the same masks as in stage 1 (as
   sentence-transformers' ``CachedMultipleNegativesRankingLoss`` does), and ``backward(s_chunk,
   dL/ds_chunk)``.

Peak activation memory is that of ``M`` rows instead of ``R`` (plus the ``R x H`` vectors); the price is a
second forward of every row. The objective must offer :class:`CachedObjective`'s three methods (every
:class:`~protoembed.objectives.base.ContrastiveObjective` does). Across processes the trainer averages
the gradients itself (:func:`~protoembed.objectives.distributed.average_gradients`): the passes run on the
unwrapped module, outside DDP's hooks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from protoembed.objectives.views import ViewBatch


@runtime_checkable
class CachedObjective(Protocol):
    """What :func:`grad_cache_step` needs from an objective (see
    :class:`~protoembed.objectives.base.ContrastiveObjective`)."""

    def collate(self, batch: Mapping[str, Sequence[Any]] | Sequence[str]) -> ViewBatch:
        """Every row of one step, padded (CPU tensors)."""
        ...

    def embed_features(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """(rows, H) vectors of some rows; rows are independent of each other."""
        ...

    def loss(self, states: torch.Tensor, batch: ViewBatch) -> torch.Tensor:
        """The scalar loss from the (R, H) vectors of all rows."""
        ...


@dataclass
class RandomState:
    """The CPU random state and, for a CUDA device, that device's, captured before a chunk's first pass."""

    cpu: torch.Tensor
    device: torch.device
    cuda: torch.Tensor | None = None

    @classmethod
    def capture(cls, device: torch.device) -> RandomState:
        """The current state of the generators a forward on ``device`` draws from."""
        cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        return cls(torch.get_rng_state(), device, cuda)

    @contextmanager
    def replay(self) -> Iterator[None]:
        """Run the block from this state; the global generators are left as they were before it."""
        devices = [self.device] if self.cuda is not None else []
        with torch.random.fork_rng(devices=devices):
            torch.set_rng_state(self.cpu)
            if self.cuda is not None:
                torch.cuda.set_rng_state(self.cuda, self.device)
            yield


def chunks(rows: int, size: int, forwards: list[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
    """``(start, end)`` of consecutive chunks of at most ``size`` rows covering ``range(rows)``, none
    crossing the end of one of ``forwards`` (a step's forwards, ``ViewBatch.forwards``: with
    ``training.padding`` ``column`` no chunk holds rows of two columns, with ``auto`` rows of two length
    buckets, so each is padded to rows like its own)."""
    spans = forwards or [(0, rows)]
    return [(lo, min(lo + size, end)) for start, end in spans for lo in range(start, end, size)]


def grad_cache_step(
    objective: CachedObjective,
    batch: ViewBatch | Mapping[str, Sequence[Any]] | Sequence[str],
    mini_batch_size: int,
    backward: Callable[[torch.Tensor], None] | None = None,
    autocast: Callable[[], AbstractContextManager[Any]] = nullcontext,
    device: torch.device | None = None,
) -> torch.Tensor:
    """One GradCache step (see the module docstring): gradients accumulated in ``.grad``, loss returned.

    Args:
        objective: the (unwrapped) objective, in train mode for dropout.
        batch: a collated :class:`ViewBatch` (or a raw batch, collated here).
        mini_batch_size: ``M``, rows per chunk of the backbone.
        backward: how to back-propagate the loss (``accelerator.backward``, which scales it for fp16);
            default ``loss.backward()``. The cached gradients carry that scale into stage 3.
        autocast: context of every forward (``accelerator.autocast`` under mixed precision), the same
            for both passes of a chunk.
        device: where the rows go (default: the first parameter's device).
    Returns:
        the detached loss, equal to the plain step's on the same rows and random state.
    """
    if device is None:
        device = next(iter(objective.parameters())).device  # type: ignore[attr-defined]
    views = batch if isinstance(batch, ViewBatch) else objective.collate(batch)
    views = views.to(device)
    spans = chunks(len(views), mini_batch_size, views.forwards())
    states, randomness = [], []
    with torch.no_grad():
        for start, end in spans:
            randomness.append(RandomState.capture(device))
            with autocast():
                states.append(objective.embed_features(views.rows(start, end)))
    cached = torch.cat(states).detach().requires_grad_()
    del states
    with autocast():
        loss = objective.loss(views.in_step_order(cached), views)
    (backward or torch.Tensor.backward)(loss)
    grads = cached.grad
    if grads is None:  # the loss does not depend on the vectors (cannot happen for InfoNCE)
        return loss.detach()
    for (start, end), state in zip(spans, randomness):
        with state.replay(), autocast():
            vectors = objective.embed_features(views.rows(start, end))
        torch.autograd.backward(vectors, grads[start:end].to(vectors.dtype))
    return loss.detach()


__all__ = ["CachedObjective", "RandomState", "chunks", "grad_cache_step"]
