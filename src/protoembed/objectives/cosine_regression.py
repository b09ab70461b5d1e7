"""SBERT's regression objective (STS Benchmark): the cosine of two sentence vectors against the gold score."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from protoembed.objectives.fp32_losses import fp32_loss
from protoembed.objectives.matryoshka import cut, matryoshka_loss
from protoembed.objectives.registry import CosineRegressionOptions
from protoembed.objectives.siamese import SiameseObjective


class CosineRegression(SiameseObjective):
    """SBERT's regression objective (Reimers & Gurevych, 2019, Section 3, "Regression Objective Function",
    Figure 2): the cosine similarity of ``u`` and ``v`` regressed onto the gold score with mean squared
    error::

        loss = 1/N sum_i ( cos(u_i, v_i) - score_i / score_scale )^2

    The same loss as sentence-transformers' ``CosineSimilarityLoss`` on scores divided by 5 (its STS-B
    training example); ``u`` and ``v`` come from one forward over both columns instead of one per
    column (the same vectors up to padding).

    Inputs:
        a batch ``{"sentence1": [...], "sentence2": [...], "score": [...]}`` (N pairs, gold scores as
        floats in ``[0, score_scale]``): the ``stsb`` and ``sick`` data formats.

    Requirements:
        any head (SBERT: ``mean``, the default here); N >= 1.

    Example::

        import protoembed
        from protoembed.objectives import build_objective

        embedder = protoembed.load("default")  # head "mean"
        objective = build_objective("cosine_regression", embedder).train()
        loss = objective({"sentence1": ["a man plays a guitar ."], "sentence2": ["a man plays music ."],
                          "score": [3.8]})
        loss.backward()
        objective.save("out/sbert-stsb")

    Citation: Nils Reimers, Iryna Gurevych. "Sentence-BERT: Sentence Embeddings using Siamese
    BERT-Networks." EMNLP-IJCNLP 2019. https://arxiv.org/abs/1908.10084
    """

    options: CosineRegressionOptions

    def forward(self, batch: Mapping[str, Sequence[Any]]) -> torch.Tensor:
        """Mean squared error between ``cos(u, v)`` and ``score / score_scale`` over the batch (with
        ``matryoshka``: the weighted sum of it on ``u`` and ``v`` cut to each size)."""
        u, v = self.pair(batch)
        dtype = torch.promote_types(u.dtype, torch.float32)  # not below fp32 (float64 in tests)
        gold = torch.as_tensor(batch["score"], dtype=dtype, device=u.device) / self.options.score_scale
        return matryoshka_loss(self.matryoshka, lambda dim: cosine_mse(cut(u, dim), cut(v, dim), gold))


@fp32_loss
def cosine_mse(u: torch.Tensor, v: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """SBERT's regression loss ``mean (cos(u_i, v_i) - gold_i)^2`` on (N, H) vectors and (N,) targets, in
    fp32 whatever the training precision."""
    return F.mse_loss(F.cosine_similarity(u, v, dim=-1), gold)
