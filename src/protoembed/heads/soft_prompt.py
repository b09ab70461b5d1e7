"""``soft_prompt`` head: ConPVP's anchor, ``[CLS] sentence P1..Pk [MASK] . [SEP]``.

k trainable vectors (default 4) overwrite the input embeddings of k slots right before the mask token
(ConPVP §3, "continuous prompt"; the authors' code initialises them uniform on [0, 1)). The sentence
embedding v_i is the last-layer state of the mask token. The vectors live in the encoder
(:class:`protoembed.encoder.PromptEncoder`), the pooling is :class:`MaskTokenPooling`.
"""

from __future__ import annotations

from protoembed.heads.base import HeadSpec
from protoembed.heads.mask import mask_pooler
from protoembed.prompts import SOFT_PROMPT_TEMPLATE

SOFT_PROMPT = HeadSpec(
    "soft_prompt",
    mask_pooler,
    default_template=SOFT_PROMPT_TEMPLATE,
    n_soft_prompt=4,
    description="k trainable prompt vectors before the mask token, state of the mask (ConPVP anchor)",
)
