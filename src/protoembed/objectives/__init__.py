"""Training objectives: name -> :class:`Objective` class (the registry, one line per objective naming its
class and options model: :data:`protoembed.objectives.option_models.REGISTRY`).

``plan_objective(name, options)`` parses the options (an unknown key is an error naming it) into an
:class:`ObjectivePlan` (options, head, columns) without torch; ``plan.build(embedder)`` returns an
:class:`Objective` whose ``forward(batch)`` is the training loss of a batch of examples (a dict of named
columns, :attr:`Objective.columns`) and whose ``eval_embedder()`` is the model to evaluate and save.
``build_objective(name, embedder, **options)`` does both.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from protoembed.objectives.plan import CLASSES, ObjectivePlan, objective_class, plan_objective

if TYPE_CHECKING:
    from protoembed.embedder import Embedder
    from protoembed.objectives.base import Objective

#: the other public names, from their modules on first access
_NAMES = {
    "ContrastiveObjective": "protoembed.objectives.base",
    "Objective": "protoembed.objectives.base",
    "contrastive_loss": "protoembed.objectives.base",
    "gather_with_grad": "protoembed.objectives.distributed",
    "scale_for_ddp_average": "protoembed.objectives.distributed",
    "MLPPooling": "protoembed.heads.mlp",
    **{cls: module for module, cls in CLASSES.values()},
}


def __getattr__(name: str) -> Any:
    """``OBJECTIVES`` and the classes, imported when first asked for (PEP 562)."""
    if name == "OBJECTIVES":
        value: Any = {key: objective_class(key) for key in CLASSES}
    elif name in _NAMES:
        value = getattr(importlib.import_module(_NAMES[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


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
    return plan_objective(name, options).build(embedder, max_seq_length=max_seq_length)


__all__ = [
    "OBJECTIVES",
    "ConPVP",
    "ContrastiveObjective",
    "MLPPooling",
    "Objective",
    "ObjectivePlan",
    "PromptBERT",
    "SimCSE",
    "build_objective",
    "objective_class",
    "plan_objective",
    "contrastive_loss",
    "gather_with_grad",
    "scale_for_ddp_average",
]
