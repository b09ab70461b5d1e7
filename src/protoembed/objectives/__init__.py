"""Training objectives: name -> :class:`Objective` class (the registry, one line per objective naming its
class and options model: :data:`protoembed.objectives.registry.REGISTRY`; :func:`objective_class`).

``plan_objective(name, options)`` parses the options (an unknown key is an error naming it) into an
:class:`ObjectivePlan` (options, head, columns) without torch; ``plan.build(embedder)`` returns an
:class:`Objective` whose ``forward(batch)`` is the training loss of a batch of examples (a dict of named
columns, :attr:`Objective.columns`) and whose ``eval_embedder()`` is the model to evaluate and save.
``build_objective(name, embedder, **options)`` does both.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from protoembed.objectives.plan import ObjectivePlan, plan_objective
from protoembed.objectives.registry import REGISTRY, objective_class

if TYPE_CHECKING:
    from protoembed.model.embedder import Embedder
    from protoembed.objectives.base import Objective

#: the other public names, from their modules on first access
_NAMES = {
    "ContrastiveObjective": "protoembed.objectives.base",
    "Objective": "protoembed.objectives.base",
    "contrastive_loss": "protoembed.objectives.base",
    "gather_with_grad": "protoembed.objectives.distributed",
    "scale_for_ddp_average": "protoembed.objectives.distributed",
    "MLPPooling": "protoembed.model.heads.mlp",
    **{entry.class_name: entry.module for entry in REGISTRY.values()},
}


def __getattr__(name: str) -> Any:
    """The classes, imported when first asked for (PEP 562)."""
    if name in _NAMES:
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
        name: a registered objective (``simcse``, ``promptbert``, ``conpvp``, ...; see
            :data:`~protoembed.objectives.registry.REGISTRY`).
        embedder: the model to train (its head must suit the objective).
        max_seq_length: truncation of the training inputs (default: the embedder's own).
        **options: the objective's options (see each class); unknown keys raise.
    Raises:
        ProtoembedError: unknown objective, unknown option, bad option value, or an unsuitable head.
    """
    return plan_objective(name, options).build(embedder, max_seq_length=max_seq_length)


__all__ = [  # noqa: RUF022 - the registered classes follow the registry
    "REGISTRY",
    "ContrastiveObjective",
    "MLPPooling",
    "Objective",
    "ObjectivePlan",
    *(entry.class_name for entry in REGISTRY.values()),
    "build_objective",
    "objective_class",
    "plan_objective",
    "contrastive_loss",
    "gather_with_grad",
    "scale_for_ddp_average",
]
