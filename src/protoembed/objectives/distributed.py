"""Cross-process negatives for contrastive objectives (SimCSE's all-gather trick).

With ``W`` processes each holding ``N`` sentences, every process gathers the anchors and candidates of
all processes and computes the loss of the *global* batch (``N·W`` anchor rows, targets ``arange(N·W)``,
i.e. local row ``i`` has target ``rank·N + i``). :func:`gather_with_grad` replaces the process's own
slice of the gathered tensor with the original tensor, so gradients flow through the local slice only.

Gradient bookkeeping. Each process then back-propagates ``dL/d(local slices)``, and the sum over
processes of those terms is exactly ``dL/dθ`` of the global-batch loss ``L``. DDP (and therefore
Accelerate and the Hugging Face Trainer) *averages* gradients over processes, which would give
``dL/dθ / W``. :func:`scale_for_ddp_average` multiplies the gradient (not the value) by ``W`` to undo
that, so that, with dropout off, ``W`` processes with ``N`` sentences each produce the same loss value
and the same averaged gradients as one process on the concatenated ``N·W`` sentences.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import torch
import torch.distributed as dist


def world() -> tuple[int, int]:
    """``(rank, world_size)``; ``(0, 1)`` when torch.distributed is not initialised."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


_equal_sizes = False


@contextlib.contextmanager
def equal_sizes() -> Iterator[None]:
    """Inside the block every process passes :func:`gather_with_grad` tensors of the same first size
    (the trainer's steps: Accelerate splits each batch evenly and the last incomplete one is dropped),
    so the sizes are not exchanged: that exchange is read on the host, a device sync per gather."""
    global _equal_sizes
    before, _equal_sizes = _equal_sizes, True
    try:
        yield
    finally:
        _equal_sizes = before


def gather_with_grad(x: torch.Tensor) -> torch.Tensor:
    """All-gather ``x`` (N, ...) from every process into (N·W, ...), in rank order.

    The slice of this process is ``x`` itself (differentiable); the other slices carry no gradient.
    Identity when torch.distributed is not initialised or has a single process. Processes may hold
    different ``N`` (e.g. a short last batch): sizes are exchanged first and the slices padded, unless
    the caller promises equal sizes (:func:`equal_sizes`).
    """
    rank, size = world()
    if size == 1:
        return x
    if _equal_sizes:
        sizes = [x.size(0)] * size
    else:
        counts = [torch.zeros(1, dtype=torch.long, device=x.device) for _ in range(size)]
        dist.all_gather(counts, torch.tensor([x.size(0)], dtype=torch.long, device=x.device))
        sizes = [int(c.item()) for c in counts]
    longest = max(sizes)
    padded = x.detach()
    if x.size(0) < longest:
        padded = torch.cat([padded, padded.new_zeros((longest - x.size(0), *x.shape[1:]))])
    parts = [torch.empty_like(padded) for _ in range(size)]
    dist.all_gather(parts, padded.contiguous())
    pieces = [part[:n] for part, n in zip(parts, sizes)]
    pieces[rank] = x
    return torch.cat(pieces, dim=0)


def scale_for_ddp_average(loss: torch.Tensor) -> torch.Tensor:
    """Same value as ``loss``, gradient multiplied by the world size (see the module docstring).

    Use on a loss computed over the gathered global batch, when the gradients are then averaged over
    processes (DDP). Identity for a single process.
    """
    _, size = world()
    if size == 1:
        return loss
    return loss + (size - 1) * (loss - loss.detach())


def average_gradients(parameters: Iterable[torch.nn.Parameter], bucket_numel: int = 1 << 24) -> None:
    """Average ``.grad`` over processes in place (what DDP's all-reduce does), in flat buckets.

    For steps that run outside DDP's hooks (a GradCache step, :mod:`protoembed.objectives.cache`); with
    :func:`scale_for_ddp_average` in the loss, the result equals the one-process gradient on the
    concatenated batch. Every process must hold gradients for the same parameters (the same objective
    on every process does). Identity for a single process.

    Args:
        parameters: the trained parameters (those without a gradient are skipped).
        bucket_numel: elements per all-reduce call (bounds the extra memory of the flat copy).
    """
    _, size = world()
    if size == 1:
        return
    grads = [p.grad for p in parameters if p.grad is not None]
    bucket: list[torch.Tensor] = []
    for i, grad in enumerate(grads):
        bucket.append(grad)
        last = i == len(grads) - 1
        if (
            last
            or sum(g.numel() for g in bucket) >= bucket_numel
            or grads[i + 1].dtype != grad.dtype
            or grads[i + 1].device != grad.device
        ):
            flat = torch.cat([g.reshape(-1) for g in bucket])
            dist.all_reduce(flat)
            flat /= size
            offset = 0
            for g in bucket:
                g.copy_(flat[offset : offset + g.numel()].view_as(g))
                offset += g.numel()
            bucket = []
