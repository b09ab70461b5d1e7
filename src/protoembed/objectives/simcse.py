"""Unsupervised SimCSE: two dropout views of each sentence, InfoNCE over in-batch negatives."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from protoembed.objectives.base import ContrastiveObjective, batch_sentences
from protoembed.objectives.views import Rows, ViewBatch


class SimCSE(ContrastiveObjective):
    """Unsupervised SimCSE (Gao et al., 2021, Eq. 4 with dropout as the only augmentation).

    Each sentence is encoded twice in one forward (the batch ``[x; x]``, train mode, so the two copies
    see different dropout masks), giving ``h_i`` and ``h_i'``; with ``sim`` the cosine similarity::

        l_i = -log( e^{sim(h_i, h_i')/tau} / sum_j e^{sim(h_i, h_j')/tau} )

    i.e. cross-entropy over the (N, N) logits ``cos(H, H')/tau`` with target ``i``. The other sentences
    of the batch (of every process, see :mod:`protoembed.objectives.distributed`) are the negatives.

    Inputs:
        a list of N raw sentences (no labels, no pairs); N >= 2 for the loss to be meaningful.

    Requirements:
        any head: ``cls`` (SimCSE's choice), ``mean``, ``mask``, ...; dropout must be on in the backbone
        (``objective.train()``), otherwise both views are identical.

    Example::

        import protoembed
        from protoembed.objectives import build_objective

        embedder = protoembed.load("default", head="cls")
        objective = build_objective("simcse", embedder).train()
        loss = objective(["a man plays a guitar .", "a woman slices an onion ."])
        loss.backward()
        objective.eval_embedder().save("out/simcse")

    Citation: Tianyu Gao, Xingcheng Yao, Danqi Chen. "SimCSE: Simple Contrastive Learning of Sentence
    Embeddings." EMNLP 2021. https://arxiv.org/abs/2104.08821
    """

    def build_rows(
        self, batch: Mapping[str, Sequence[str]] | Sequence[str]
    ) -> tuple[Rows, int, dict[str, torch.Tensor]]:
        """Both dropout views: the N sentences twice (2N rows)."""
        ids = self.views.sentence_ids(batch_sentences(batch))
        soft = self.embedder.encoder.soft_prompt is not None
        rows = self.views.wrap(self.views.anchor_template, ids, soft=soft)
        return rows.extend(self.views.wrap(self.views.anchor_template, ids, soft=soft)), len(ids), {}

    def loss(self, states: torch.Tensor, batch: ViewBatch) -> torch.Tensor:
        """Eq. 4 between the two views (rows ``:n`` and ``n:``)."""
        return self.infonce(states, batch.n)
