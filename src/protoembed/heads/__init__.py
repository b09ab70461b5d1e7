"""Head registry: name -> :class:`HeadSpec`. A new head is one file plus one line here."""

from __future__ import annotations

from protoembed.errors import ProtoembedError
from protoembed.heads.base import HeadSpec
from protoembed.heads.cnn import CNN, CNNHead
from protoembed.heads.mask import MASK, MaskTokenPooling
from protoembed.heads.pooling import CLS, MAX, MEAN
from protoembed.heads.soft_prompt import SOFT_PROMPT

HEADS: dict[str, HeadSpec] = {spec.name: spec for spec in (CLS, MEAN, MAX, MASK, SOFT_PROMPT, CNN)}


def get_head(name: str) -> HeadSpec:
    """The registered head ``name``; a one-line error lists the known ones otherwise."""
    try:
        return HEADS[name]
    except KeyError:
        raise ProtoembedError(f"unknown head {name!r}: expected one of {', '.join(HEADS)}") from None


__all__ = ["HEADS", "CNNHead", "HeadSpec", "MaskTokenPooling", "get_head"]
