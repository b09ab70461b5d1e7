"""One optimisation step's forward and backward, plain or cached (GradCache), and the training collator.

In: the Accelerate-prepared objective, one batch from the training loader and ``training.mini_batch_size``.
Out: the gradients in every parameter's ``.grad`` (averaged over processes) and the detached loss. The
trainer calls :func:`forward_backward` once per step whatever the setting, so there is one loop:

- plain (``mini_batch_size: null``): ``loss = model(batch)``, ``accelerator.backward(loss)`` (DDP
  averages the gradients);
- cached: :func:`protoembed.objectives.cache.grad_cache_step` on the unwrapped objective, every forward
  under ``accelerator.autocast()`` (the precision of a plain step, whose forward Accelerate wraps),
  the loss back-propagated by ``accelerator.backward`` (fp16 loss scaling), then the gradients averaged
  over processes here (:func:`~protoembed.objectives.distributed.average_gradients`), since the passes
  bypass DDP's hooks.

:class:`Collator` is the loader's ``collate_fn``: the examples of a batch, and for an objective with a
``collate`` method (:class:`~protoembed.objectives.base.ContrastiveObjective`) their tokenised, padded
views, so that the step receives tensors and ``training.num_workers`` processes can prepare them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import torch

from protoembed.core.errors import ProtoembedError
from protoembed.data.training.examples import Examples
from protoembed.training.config_models import DROPOUT_KERNELS


def supports_cache(objective: Any) -> bool:
    """Whether ``objective`` offers the GradCache split (``collate``, ``embed_features``, ``loss``)."""
    from protoembed.objectives.cache import CachedObjective

    return isinstance(objective, CachedObjective)


def check_mini_batch(objective: Any, mini_batch_size: int | None, batch_size: int, processes: int) -> None:
    """One-line error unless ``mini_batch_size`` is off or suits the objective and the per-process batch.

    Raises:
        ProtoembedError: the objective has no cached step, or ``M`` does not divide ``batch_size /
            processes``.
    """
    if mini_batch_size is None:
        return
    name = getattr(objective, "name", type(objective).__name__)
    if not supports_cache(objective):
        from protoembed.objectives.registry import grad_cache_objectives

        raise ProtoembedError(
            f"training.mini_batch_size: objective {name!r} has no cached step; it is for the contrastive "
            f"objectives ({', '.join(grad_cache_objectives())}); remove the key"
        )
    local = batch_size // processes
    if mini_batch_size > local or local % mini_batch_size:
        raise ProtoembedError(
            f"training.mini_batch_size {mini_batch_size} does not divide the per-process batch {local} "
            f"(training.batch_size {batch_size} over {processes} process(es)); expected a divisor of {local}"
        )


def forward_backward(
    accelerator: Any,
    model: torch.nn.Module,
    batch: Any,
    mini_batch_size: int | None,
    dropout: str = DROPOUT_KERNELS[0],
) -> torch.Tensor:
    """Forward and backward of one batch (see the module docstring); returns the detached loss, still
    on the device (reading it is the caller's sync). Every process holds an equal share of the batch, so
    the objectives' cross-process gathers skip their size exchange
    (:func:`~protoembed.objectives.distributed.equal_sizes`); the dropout masks are drawn as ``dropout``
    (``training.dropout``) says (:func:`~protoembed.training.dropout.dropout_kernel`)."""
    from protoembed.objectives.distributed import average_gradients, equal_sizes
    from protoembed.training.dropout import dropout_kernel

    with equal_sizes(), dropout_kernel(dropout, accelerator.device):
        if mini_batch_size is None:
            loss = model(batch)
            accelerator.backward(loss)
            return loss.detach()
        from protoembed.objectives.cache import grad_cache_step

        objective = accelerator.unwrap_model(model)
        loss = grad_cache_step(
            objective,
            batch,
            mini_batch_size,
            backward=accelerator.backward,
            autocast=accelerator.autocast,
            device=accelerator.device,
        )
    if accelerator.num_processes > 1:
        average_gradients(p for p in objective.parameters() if p.requires_grad)
    return loss


def draw_key(seed: int, rank: int, indices: Sequence[int]) -> int:
    """A 63-bit seed from a batch's example indices (stable across processes and runs)."""
    digest = hashlib.blake2b(repr((seed, rank, list(indices))).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


class Collator:
    """The training loader's ``collate_fn``: example indices -> the batch the objective's step reads.

    Args:
        examples: the training examples, the loader handing example indices; ``None``: the streamed path
            (:mod:`protoembed.training.streaming`), the loader handing ``(position, example)`` pairs
            (the position stands for the index).
        objective: the objective; with a ``collate`` method its views are built here (tensors), otherwise
            the batch is the dict of column lists (``Examples.select``).
        workers: ``training.num_workers``. With workers, an objective drawing templates (ConPVP) cannot
            share one running generator across processes; its draws for a batch then come from a
            generator seeded by ``seed``, the process ``rank`` and the batch's example indices
            (reproducible and resumable, but other draws than with 0 workers).
    """

    def __init__(
        self, examples: Examples | None, objective: Any, workers: int = 0, seed: int = 0, rank: int = 0
    ) -> None:
        self.examples, self.workers, self.seed, self.rank = examples, workers, seed, rank
        self.collate = getattr(objective, "collate", None)
        self.keyed = bool(getattr(objective, "keyed_draws", False))

    def __call__(self, items: list[int] | list[tuple[int, dict[str, Any]]]) -> Any:
        if self.examples is None:  # streamed: (position, example) pairs
            indices = [position for position, _ in items]  # type: ignore[misc]
            batch = {name: [example[name] for _, example in items] for name in items[0][1]}  # type: ignore[index]
        else:
            indices = items  # type: ignore[assignment]
            batch = self.examples.select(indices)
        if self.collate is None:
            return batch
        if self.workers and self.keyed:
            return self.collate(batch, draw_key=draw_key(self.seed, self.rank, indices))
        return self.collate(batch)


__all__ = ["Collator", "check_mini_batch", "draw_key", "forward_backward", "supports_cache"]
