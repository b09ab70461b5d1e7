"""Training objectives: name -> :class:`Objective` class. A new objective is one file plus one line here.

``build_objective(name, embedder, **options)`` validates the options (an unknown key is an error naming
it) and returns an :class:`Objective` whose ``forward(batch)`` is the training loss of a batch of examples
(a dict of named columns, :attr:`Objective.columns`) and whose ``eval_embedder()`` is the model to
evaluate and save.
"""

from __future__ import annotations

from typing import Any

from protoembed.embedder import Embedder
from protoembed.errors import ProtoembedError
from protoembed.objectives.base import ContrastiveObjective, Objective, contrastive_loss
from protoembed.objectives.conpvp import ConPVP
from protoembed.objectives.cosine_regression import CosineRegression
from protoembed.objectives.cross_encoder import CrossEncoderObjective
from protoembed.objectives.distributed import gather_with_grad, scale_for_ddp_average
from protoembed.objectives.mlp import MLPPooling
from protoembed.objectives.nli_softmax import NLISoftmax
from protoembed.objectives.promptbert import PromptBERT
from protoembed.objectives.simcse import SimCSE
from protoembed.objectives.simcse_sup import SupervisedSimCSE

OBJECTIVES: dict[str, type[Objective]] = {
    cls.name: cls
    for cls in (
        SimCSE,
        PromptBERT,
        ConPVP,
        CrossEncoderObjective,
        CosineRegression,  # SBERT, STS-B regression
        NLISoftmax,  # SBERT, NLI classification
        SupervisedSimCSE,  # supervised SimCSE
    )
}


def objective_class(name: str) -> type[Objective]:
    """The registered objective ``name``; a one-line error lists the known ones otherwise."""
    try:
        return OBJECTIVES[name]
    except KeyError:
        raise ProtoembedError(
            f"unknown objective {name!r}: expected one of {', '.join(OBJECTIVES)}"
        ) from None


def build_objective(
    name: str, embedder: Embedder, *, max_seq_length: int | None = None, **options: Any
) -> Objective:
    """Build the objective ``name`` around ``embedder``.

    Args:
        name: a key of :data:`OBJECTIVES` (``simcse``, ``promptbert``, ``conpvp``).
        embedder: the model to train (its head must suit the objective).
        max_seq_length: truncation of the training inputs (default: the embedder's own).
        **options: the objective's options (see each class); unknown keys raise.
    Raises:
        ProtoembedError: unknown objective, unknown option, bad option value, or an unsuitable head.
    """
    return objective_class(name)(embedder, max_seq_length=max_seq_length, **options)


__all__ = [
    "OBJECTIVES",
    "ConPVP",
    "ContrastiveObjective",
    "MLPPooling",
    "Objective",
    "PromptBERT",
    "SimCSE",
    "build_objective",
    "objective_class",
    "contrastive_loss",
    "gather_with_grad",
    "scale_for_ddp_average",
]
