"""What a head is: how token states become one vector, and what input format it needs.

A :class:`HeadSpec` tells :func:`protoembed.load` how to build a head: whether the input is wrapped in a
template (and its default), how many soft-prompt slots the encoder adds, and which pooling module turns
``token_embeddings`` (B, T, H) into ``sentence_embedding`` (B, D). Pooling modules are
sentence-transformers ``Module`` subclasses, so a saved model runs in ``SentenceTransformer`` unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sentence_transformers.base.modules.module import Module


@dataclass(frozen=True)
class HeadSpec:
    """Recipe for one head.

    Attributes:
        name: registry name (``cls``, ``mean``, ``max``, ``mask``, ``soft_prompt``, ...).
        make_pooler: ``(hidden_size, options) -> Module`` producing ``sentence_embedding``.
        default_template: template used when the caller gives none (``None``: no template).
        n_soft_prompt: default number of soft-prompt vectors before the mask token (0: none).
        options: names of extra keyword options ``make_pooler`` accepts.
        description: one line for ``--help`` and the README.
    """

    name: str
    make_pooler: Callable[[int, dict[str, Any]], Module]
    default_template: str | None = None
    n_soft_prompt: int = 0
    options: tuple[str, ...] = field(default=())
    description: str = ""

    @property
    def uses_template(self) -> bool:
        """True for heads that read the state of a mask token inside a template."""
        return self.default_template is not None
