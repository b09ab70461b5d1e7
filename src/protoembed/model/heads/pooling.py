"""``cls``, ``mean`` and ``max`` heads: sentence-transformers' own ``Pooling`` module.

- ``cls``: the first token's state (SBERT "CLS"; SimCSE's pooler without the MLP);
- ``mean``: average of token states over the attention mask (SBERT's default);
- ``max``: element-wise max over non-padding token states.
"""

from __future__ import annotations

from sentence_transformers.sentence_transformer.modules.pooling import Pooling


def cls_pooler(hidden: int) -> Pooling:
    """State of the first token."""
    return Pooling(hidden, pooling_mode="cls")


def mean_pooler(hidden: int) -> Pooling:
    """Attention-masked mean of the token states."""
    return Pooling(hidden, pooling_mode="mean")


def max_pooler(hidden: int) -> Pooling:
    """Element-wise max of the non-padding token states."""
    return Pooling(hidden, pooling_mode="max")
