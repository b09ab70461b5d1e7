"""What a head is: how token states become one vector, and what input format it needs.

A :class:`HeadSpec` tells :func:`protoembed.load` how to build a head: whether the input is wrapped in a
template (and its default), how many soft-prompt slots the encoder adds, and which pooling module turns
``token_embeddings`` (B, T, H) into ``sentence_embedding`` (B, D). Pooling modules are
sentence-transformers ``Module`` subclasses, so a saved model runs in ``SentenceTransformer`` unchanged.
The spec names its pooling factory by import path, so the registry (and ``--help``) loads no torch.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sentence_transformers.base.modules.module import Module


@dataclass(frozen=True)
class HeadSpec:
    """Recipe for one head.

    Attributes:
        name: registry name (its key in :data:`protoembed.model.heads.HEADS`).
        pooler: ``"module:function"`` of the factory ``(hidden_size) -> Module`` producing
            ``sentence_embedding``.
        description: one line, shown by ``--help``.
        default_template: template used when the caller gives none (``None``: no template).
        n_soft_prompt: default number of soft-prompt vectors before the mask token (0: none).
    """

    name: str
    pooler: str
    description: str
    default_template: str | None = None
    n_soft_prompt: int = 0

    @property
    def uses_template(self) -> bool:
        """True for heads that read the state of a mask token inside a template."""
        return self.default_template is not None

    def make_pooler(self, hidden_size: int) -> Module:
        """The pooling module of this head for a backbone of width ``hidden_size``."""
        module, _, function = self.pooler.partition(":")
        return getattr(importlib.import_module(module), function)(hidden_size)
