"""SBERT's classification objective (NLI): softmax over ``W [u; v; |u - v|] + b``, a training-only classifier."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from protoembed.core.errors import ProtoembedError
from protoembed.data.training.examples import NLI_LABELS
from protoembed.model.embedder import Embedder
from protoembed.objectives.base import check_batch
from protoembed.objectives.fp32_losses import autocast_off, fp32
from protoembed.objectives.matryoshka import cut, matryoshka_loss
from protoembed.objectives.registry import NLISoftmaxOptions
from protoembed.objectives.siamese import SiameseObjective


class NLISoftmax(SiameseObjective):
    """SBERT's classification objective (Reimers & Gurevych, 2019, Section 3, "Classification Objective
    Function", Figure 1)::

        o = softmax( W_t [u; v; |u - v|] + b ),   W_t in R^{3 x 3n}

    trained with cross-entropy against the NLI label (``contradiction``, ``entailment``, ``neutral``,
    :data:`~protoembed.data.training.examples.NLI_LABELS`, sentence-transformers' ``SoftmaxLoss`` order). The
    classifier ``W_t, b`` (``self.classifier``, a ``Linear(3n, 3)``) is a submodule of the objective, so
    the optimizer trains it (at ``training.head_lr`` if set) and checkpoints keep it, but it is not part
    of the model: :meth:`save` writes the embedder only. When the embedder L2-normalises its output (the
    default model does) the classifier sees the normalised ``u`` and ``v``, as ``SoftmaxLoss`` does on
    such a model. Same loss as ``SoftmaxLoss`` (the two columns in one forward instead of two).

    Inputs:
        a batch ``{"sentence1": [premises], "sentence2": [hypotheses], "label": [int, ...]}`` (labels are
        indexes into ``NLI_LABELS``): the ``snli_jsonl``, ``nli_txt``, ``senteval_nli``, ``allnli`` and
        ``sick`` data formats.

    Requirements:
        any head (SBERT: ``mean``, the default here).

    Example::

        import protoembed
        from protoembed.objectives import build_objective

        embedder = protoembed.load("default")  # head "mean"
        objective = build_objective("nli_softmax", embedder).train()
        loss = objective({"sentence1": ["a man plays a guitar ."], "sentence2": ["a man sleeps ."],
                          "label": [0]})
        loss.backward()
        objective.save("out/sbert-nli")  # the embedder, without the classifier

    Citation: Nils Reimers, Iryna Gurevych. "Sentence-BERT: Sentence Embeddings using Siamese
    BERT-Networks." EMNLP-IJCNLP 2019. https://arxiv.org/abs/1908.10084
    """

    options: NLISoftmaxOptions

    def __init__(
        self,
        embedder: Embedder,
        options: NLISoftmaxOptions | None = None,
        *,
        max_seq_length: int | None = None,
    ) -> None:
        super().__init__(embedder, options, max_seq_length=max_seq_length)
        hidden = int(embedder.pooler.get_embedding_dimension())
        parts = 4 if self.options.multiplication else 3
        self.classifier = torch.nn.Linear(parts * hidden, len(NLI_LABELS)).to(embedder.device)

    def features(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The classifier input ``[u; v; |u - v|]`` (``; u * v`` with ``multiplication``), (N, 3n or 4n)."""
        if self.embedder.normalize:
            u, v = F.normalize(u, dim=-1), F.normalize(v, dim=-1)
        parts = [u, v, (u - v).abs()] + ([u * v] if self.options.multiplication else [])
        return torch.cat(parts, dim=-1)

    def logits(self, batch: Mapping[str, Sequence[Any]]) -> torch.Tensor:
        """(N, 3) classifier logits of the pairs of ``batch``, in :data:`NLI_LABELS` order; the
        classifier (and the loss on its logits) in fp32 whatever the training precision."""
        return self.classify(*self.pair(batch))

    def classify(self, u: torch.Tensor, v: torch.Tensor, dim: int | None = None) -> torch.Tensor:
        """(N, 3) logits of the pairs ``(u, v)``; with ``dim`` (Matryoshka) of ``u`` and ``v`` cut to
        ``dim`` (normalised after the cut when the embedder normalises), read by the classifier's first
        ``dim`` columns of each block of its input, so that one classifier serves every size."""
        with autocast_off(u.device):
            x = self.features(cut(fp32(u), dim), cut(fp32(v), dim))
            x = x.to(self.classifier.weight.dtype)
            hidden = u.size(-1)
            if dim is None or dim == hidden:
                return self.classifier(x)
            weight = self.classifier.weight
            blocks = weight.view(weight.size(0), -1, hidden)[..., :dim].reshape(weight.size(0), -1)
            return F.linear(x, blocks, self.classifier.bias)

    def forward(self, batch: Mapping[str, Sequence[Any]]) -> torch.Tensor:
        """Mean cross-entropy of the classifier over the batch (with ``matryoshka``: the weighted sum
        of it at each size, :meth:`classify`)."""
        check_batch(self.name, batch, self.columns)
        n = len(NLI_LABELS)
        try:
            labels = torch.as_tensor(batch["label"])
        except (TypeError, ValueError):
            labels = torch.tensor([0.5])  # not numbers: reported below
        if (
            labels.dtype.is_floating_point
            or labels.dtype == torch.bool
            or ((labels < 0) | (labels >= n)).any()
        ):
            bad = next(
                (
                    x
                    for x in batch["label"]
                    if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x < n
                ),
                batch["label"][0],
            )
            raise ProtoembedError(
                f"objective {self.name!r}: label {bad!r} is not an index into {', '.join(NLI_LABELS)} "
                f"(expected an integer from 0 to {n - 1})"
            )
        u, v = self.pair(batch)
        labels = labels.to(device=u.device, dtype=torch.long)

        def loss_at(dim: int | None) -> torch.Tensor:
            logits = self.classify(u, v, dim)
            with autocast_off(logits.device):
                return F.cross_entropy(fp32(logits), labels)

        return matryoshka_loss(self.matryoshka, loss_at)
