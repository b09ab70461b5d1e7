"""``cls``, ``mean`` and ``max`` heads: sentence-transformers' own ``Pooling`` module.

- ``cls``: the first token's state (SBERT "CLS"; SimCSE's pooler without the MLP);
- ``mean``: average of token states over the attention mask (SBERT's default);
- ``max``: element-wise max over non-padding token states.
"""

from __future__ import annotations

from sentence_transformers.sentence_transformer.modules.pooling import Pooling

from protoembed.heads.base import HeadSpec


def _pooler(mode: str):
    return lambda hidden, options: Pooling(hidden, pooling_mode=mode)


CLS = HeadSpec("cls", _pooler("cls"), description="state of the first token ([CLS] / <s>)")
MEAN = HeadSpec("mean", _pooler("mean"), description="mean of the token states (attention-masked)")
MAX = HeadSpec("max", _pooler("max"), description="element-wise max of the token states")
