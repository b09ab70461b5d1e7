"""Matryoshka training: an objective's loss on its embeddings cut to several sizes, weighted and summed.

Aditya Kusupati, Gantavya Bhatt, Aniket Rege, et al. "Matryoshka Representation Learning." NeurIPS 2022.
https://arxiv.org/abs/2205.13147

With ``objective.matryoshka: {dims: [d_1, ..., d_k], weights: [w_1, ..., w_k]}`` (parsed by
:class:`~protoembed.objectives.registry.MatryoshkaOptions`, largest first) the loss of a batch is::

    L = sum_j  w_j * L_obj( e[:, :d_j] )

where ``e`` are the embeddings the objective compares (the vectors the saved model outputs, before its
normalisation) and ``L_obj`` the objective's own loss on them: sentence-transformers' ``MatryoshkaLoss``,
whose cut is re-normalised (the cosine losses here normalise anyway). The embeddings are computed once per
step and cut ``k`` times (no second forward); under GradCache the cached vectors are cut, so each
dimension's loss back-propagates into the one cache (:mod:`protoembed.objectives.cache`). With
``n_dims_per_step: m`` a random ``m`` of the ``k`` sizes (drawn from torch's generator, kept largest
first) make each step's loss, as ``MatryoshkaLoss``'s ``n_dims_per_step`` does.

Each objective says where its embedding is (:func:`matryoshka_loss` calls its loss with each size):
the contrastive objectives cut the vector evaluation reads (after denoising; after the MLP with ``mlp:
keep``; with ``mlp: train`` the MLP, which evaluation drops, reads the cut padded with zeros: its first
``d`` input columns), the pair objectives cut ``u`` and ``v`` (NLI softmax: its classifier reads the
first ``d`` columns of each of its ``[u; v; |u - v|]`` blocks, as one nested classifier).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from protoembed.objectives.registry import MatryoshkaOptions


def cut(x: torch.Tensor, dim: int | None) -> torch.Tensor:
    """The first ``dim`` features of each vector of ``x`` (..., D); ``None``: ``x`` itself."""
    return x if dim is None else x[..., :dim]


def cut_padded(x: torch.Tensor, dim: int | None) -> torch.Tensor:
    """The cut of :func:`cut` with zeros in place of the features past ``dim`` (same width as ``x``): what a
    module reading the full width (a training-only MLP) sees of the cut vector."""
    if dim is None or dim >= x.size(-1):
        return x
    return F.pad(x[..., :dim], (0, x.size(-1) - dim))


def step_dims(options: MatryoshkaOptions) -> list[tuple[int, float]]:
    """``(dim, weight)`` of each size of this step, largest first: all of them, or a random
    ``n_dims_per_step`` of them (torch's global generator)."""
    pairs = list(zip(options.dims, options.weights or [1.0] * len(options.dims)))
    k = options.n_dims_per_step
    if k is None or k >= len(pairs):
        return pairs
    return [pairs[i] for i in sorted(torch.randperm(len(pairs))[:k].tolist())]


def matryoshka_loss(
    options: MatryoshkaOptions | None, loss_at: Callable[[int | None], torch.Tensor]
) -> torch.Tensor:
    """``sum_j w_j * loss_at(d_j)`` over the sizes of this step (:func:`step_dims`); ``loss_at(None)`` (the
    objective's plain loss) without Matryoshka.

    Args:
        options: the objective's ``matryoshka`` option (``None``: off).
        loss_at: the objective's loss on its embeddings cut to a size (``None``: uncut), computed from
            vectors the caller embedded once.
    """
    if options is None:
        return loss_at(None)
    terms = [weight * loss_at(dim) for dim, weight in step_dims(options)]
    return torch.stack(terms).sum()


__all__ = ["cut", "cut_padded", "matryoshka_loss", "step_dims"]
