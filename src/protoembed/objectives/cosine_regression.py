"""SBERT's regression objective (STS Benchmark): the cosine of two sentence vectors against the gold score.

Also the base of the siamese objectives here (:class:`SiameseObjective`): both sentences of every pair go
through the same embedder, in one backbone forward, and the batch's columns are checked first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from protoembed.data.examples import ColumnSpec, describe_columns
from protoembed.errors import ProtoembedError
from protoembed.objectives.base import Objective
from protoembed.objectives.option_models import CosineRegressionOptions
from protoembed.objectives.precision import fp32_loss


def check_batch(name: str, batch: Mapping[str, Sequence[Any]], needed: ColumnSpec) -> int:
    """The number of examples in ``batch`` after checking that it has the ``needed`` columns.

    Raises:
        ProtoembedError: ``objective 'cosine_regression': the batch has no column 'score' (it has
            sentence1, sentence2); it needs sentence1, sentence2, score``; or columns of different
            lengths, or an empty batch.
    """
    if not isinstance(batch, Mapping):
        raise ProtoembedError(
            f"objective {name!r}: a batch is a mapping of columns ({describe_columns(needed)}), "
            f"got {type(batch).__name__}"
        )
    for column in needed:
        options = column if isinstance(column, tuple) else (column,)
        if not any(c in batch for c in options):
            raise ProtoembedError(
                f"objective {name!r}: the batch has no column {' or '.join(map(repr, options))} "
                f"(it has {', '.join(batch) or 'none'}); it needs {describe_columns(needed)}"
            )
    lengths = {column: len(values) for column, values in batch.items()}
    if len(set(lengths.values())) != 1 or not next(iter(lengths.values())):
        shown = ", ".join(f"{column} {n}" for column, n in lengths.items())
        raise ProtoembedError(
            f"objective {name!r}: the batch's columns must have the same length > 0 ({shown})"
        )
    return next(iter(lengths.values()))


class SiameseObjective(Objective):
    """Base of the objectives over sentence pairs: ``sentence1`` and ``sentence2`` embedded by the same
    network (SBERT's siamese structure, Reimers & Gurevych 2019, Figure 1), both columns in one forward."""

    columns: ClassVar[ColumnSpec] = ("sentence1", "sentence2")
    default_head = "mean"

    def pair(self, batch: Mapping[str, Sequence[Any]]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(u, v)``: the (N, H) vectors of ``sentence1`` and ``sentence2`` (one backbone forward of 2N
        rows; no normalisation, see :meth:`Objective.embed_features`)."""
        check_batch(self.name, batch, self.columns)
        u, v = self.embed(batch["sentence1"], batch["sentence2"])
        return u, v


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

    Options:
        score_scale (float, 5.0): divisor that maps the gold score into [0, 1].

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

    name = "cosine_regression"
    Options = CosineRegressionOptions
    columns: ClassVar[ColumnSpec] = ("sentence1", "sentence2", "score")
    default_head = "mean"

    def forward(self, batch: Mapping[str, Sequence[Any]]) -> torch.Tensor:
        """Mean squared error between ``cos(u, v)`` and ``score / score_scale`` over the batch."""
        u, v = self.pair(batch)
        dtype = torch.promote_types(u.dtype, torch.float32)  # not below fp32 (float64 in tests)
        gold = torch.as_tensor(batch["score"], dtype=dtype, device=u.device)
        return cosine_mse(u, v, gold / self.options.score_scale)


@fp32_loss
def cosine_mse(u: torch.Tensor, v: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """SBERT's regression loss ``mean (cos(u_i, v_i) - gold_i)^2`` on (N, H) vectors and (N,) targets, in
    fp32 whatever the training precision."""
    return F.mse_loss(F.cosine_similarity(u, v, dim=-1), gold)
