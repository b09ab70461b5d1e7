"""The base of the siamese objectives over sentence pairs (SBERT's regression and classification).

Both sentences of every pair go through the same embedder, in one backbone forward, and the batch's
columns are checked first (:func:`~protoembed.objectives.base.check_batch`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from protoembed.objectives.base import Objective, check_batch


class SiameseObjective(Objective):
    """Base of the objectives over sentence pairs: ``sentence1`` and ``sentence2`` embedded by the same
    network (SBERT's siamese structure, Reimers & Gurevych 2019, Figure 1), the columns through the
    backbone as ``training.padding`` says (:meth:`~protoembed.objectives.base.Objective.embed_views`).

    A subclass's options (its registry entry) declare its columns and its default head (SBERT's ``mean``)."""

    def pair(self, batch: Mapping[str, Sequence[Any]]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(u, v)``: the (N, H) vectors of ``sentence1`` and ``sentence2`` (no normalisation, see
        :meth:`Objective.embed_features`)."""
        check_batch(self.name, batch, self.columns)
        u, v = self.embed(batch["sentence1"], batch["sentence2"])
        return u, v


__all__ = ["SiameseObjective"]
