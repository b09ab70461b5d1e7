"""Supervised SimCSE: NLI entailment pairs as positives, contradictions as hard negatives, InfoNCE."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from protoembed.objectives.base import ContrastiveObjective, check_batch
from protoembed.objectives.registry import SupervisedSimCSEOptions
from protoembed.objectives.views import Rows, ViewBatch


class SupervisedSimCSE(ContrastiveObjective):
    """Supervised SimCSE (Gao et al., 2021, Section 4, Eq. 5): for anchor ``h_i``, its entailment
    hypothesis ``h_i^+`` and its contradiction hypothesis ``h_i^-``::

        l_i = -log( e^{sim(h_i, h_i^+)/tau} / sum_j ( e^{sim(h_i, h_j^+)/tau} + e^{sim(h_i, h_j^-)/tau} ) )

    i.e. cross-entropy over the (N, 2N) logits ``cos(H, [H^+; H^-]) / tau`` with target ``i``; the
    positives and hard negatives of the other examples (of every process, see
    :mod:`protoembed.objectives.distributed`) are negatives too. Without a ``negative`` column the
    logits are (N, N) (the paper's "entailment pairs only" row of Table 4). The three columns go
    through the backbone in one forward of 3N rows. The hard negatives have weight 1 (the authors'
    ``--hard_negative_weight 0``, the log of the weight, their default).

    MLP. The authors' supervised runs use ``--pooler_type cls`` without ``--mlp_only_train``: the
    Linear+Tanh layer over ``[CLS]`` is trained and kept at evaluation (their released supervised
    checkpoints carry it as BERT's pooler, and their evaluation's ``cls`` pooler reads it), whereas
    unsupervised SimCSE drops it. So ``mlp`` defaults to ``keep`` here: :meth:`eval_embedder` and the
    saved model apply it.

    Inputs:
        a batch ``{"anchor": [...], "positive": [...]}`` with an optional ``"negative": [...]`` column:
        SimCSE's ``simcse_nli`` CSV, or NLI pairs (``sentence1, sentence2, label``), which the trainer
        turns into such triplets (premise, entailment, contradiction).

    Requirements:
        any head (SimCSE: ``cls``, the default here); N >= 2 for in-batch negatives to exist.

    Example::

        import protoembed
        from protoembed.objectives import build_objective

        embedder = protoembed.load("default", head="cls")
        objective = build_objective("simcse_sup", embedder).train()
        loss = objective({"anchor": ["a man plays a guitar .", "a dog runs ."],
                          "positive": ["a man plays music .", "an animal moves ."],
                          "negative": ["nobody plays .", "the dog sleeps ."]})
        loss.backward()
        objective.save("out/sup-simcse")  # with the MLP (mlp: keep)

    Citation: Tianyu Gao, Xingcheng Yao, Danqi Chen. "SimCSE: Simple Contrastive Learning of Sentence
    Embeddings." EMNLP 2021. https://arxiv.org/abs/2104.08821
    """

    options: SupervisedSimCSEOptions

    def build_rows(self, batch: Mapping[str, Sequence[Any]]) -> tuple[Rows, int, dict[str, torch.Tensor]]:
        """The anchors, positives and (if any) negatives, N rows each, in the embedder's format."""
        check_batch(self.name, batch, self.columns)
        groups = [batch["anchor"], batch["positive"]] + ([batch["negative"]] if "negative" in batch else [])
        soft = self.embedder.encoder.soft_prompt is not None
        rows = Rows()
        for group in groups:
            rows.extend(
                self.views.wrap(self.views.anchor_template, self.views.sentence_ids(group), soft=soft)
            )
        return rows, len(groups[0]), {}

    def loss(self, states: torch.Tensor, batch: ViewBatch) -> torch.Tensor:
        """Eq. 5 over the (N, 2N) logits, or (N, N) without negatives."""
        return self.infonce(states, batch.n)
