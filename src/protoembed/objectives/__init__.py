"""Training objectives: name -> :class:`Objective` class. A new objective is one file plus one line here.

``build_objective(name, embedder, **options)`` validates the options (an unknown key is an error naming
it) and returns an :class:`Objective` whose ``forward(batch)`` is the training loss of a batch of examples
(a dict of named columns, :attr:`Objective.columns`) and whose ``eval_embedder()`` is the model to
evaluate and save.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from protoembed.errors import ProtoembedError

if TYPE_CHECKING:
    from protoembed.embedder import Embedder
    from protoembed.objectives.base import Objective

#: registry name -> module of the objective class; imported on first use (torch), so that
#: :mod:`protoembed.objectives.option_models` (the options, for config validation) loads without torch.
_CLASSES = {
    "simcse": ("protoembed.objectives.simcse", "SimCSE"),
    "promptbert": ("protoembed.objectives.promptbert", "PromptBERT"),
    "conpvp": ("protoembed.objectives.conpvp", "ConPVP"),
    "cross_encoder": ("protoembed.objectives.cross_encoder", "CrossEncoderObjective"),
    "cosine_regression": ("protoembed.objectives.cosine_regression", "CosineRegression"),  # SBERT, STS-B
    "nli_softmax": ("protoembed.objectives.nli_softmax", "NLISoftmax"),  # SBERT, NLI classification
    "simcse_sup": ("protoembed.objectives.simcse_sup", "SupervisedSimCSE"),  # supervised SimCSE
}
#: the other public names, from their modules on first access
_NAMES = {
    "ContrastiveObjective": "protoembed.objectives.base",
    "Objective": "protoembed.objectives.base",
    "contrastive_loss": "protoembed.objectives.base",
    "gather_with_grad": "protoembed.objectives.distributed",
    "scale_for_ddp_average": "protoembed.objectives.distributed",
    "MLPPooling": "protoembed.heads.mlp",
    **{cls: module for module, cls in _CLASSES.values()},
}


def __getattr__(name: str) -> Any:
    """``OBJECTIVES`` and the classes, imported when first asked for (PEP 562)."""
    if name == "OBJECTIVES":
        value: Any = {key: objective_class(key) for key in _CLASSES}
    elif name in _NAMES:
        value = getattr(importlib.import_module(_NAMES[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def objective_class(name: str) -> type[Objective]:
    """The registered objective ``name``; a one-line error lists the known ones otherwise."""
    try:
        module, cls = _CLASSES[name]
    except KeyError:
        raise ProtoembedError(f"unknown objective {name!r}: expected one of {', '.join(_CLASSES)}") from None
    return getattr(importlib.import_module(module), cls)


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
