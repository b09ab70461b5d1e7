"""Head registry: name -> :class:`HeadSpec` (a :class:`~protoembed.core.registry.Registry`). A new head is
one module (its pooling) plus one entry here (or ``HEADS.register(spec)``).

The registry imports no torch: each spec names its pooling factory by import path.
"""

from __future__ import annotations

from typing import Any

from protoembed.core.registry import Registry
from protoembed.inputs.templates import PROMPTBERT_TEMPLATE, SOFT_PROMPT_TEMPLATE
from protoembed.model.heads.base import HeadSpec

HEADS: Registry[HeadSpec] = Registry(
    "head",
    [
        HeadSpec(
            "cls", "protoembed.model.heads.pooling:cls_pooler", "state of the first token ([CLS] / <s>)"
        ),
        HeadSpec(
            "mean", "protoembed.model.heads.pooling:mean_pooler", "attention-masked mean of the token states"
        ),
        HeadSpec("max", "protoembed.model.heads.pooling:max_pooler", "element-wise max of the token states"),
        HeadSpec(
            "mask",
            "protoembed.model.heads.mask:mask_pooler",
            "discrete template, state of its mask token (PromptBERT)",
            default_template=PROMPTBERT_TEMPLATE,
        ),
        HeadSpec(
            "soft_prompt",
            "protoembed.model.heads.mask:mask_pooler",
            "k trainable vectors before the mask token, state of the mask (ConPVP anchor)",
            default_template=SOFT_PROMPT_TEMPLATE,
            n_soft_prompt=4,
        ),
        HeadSpec(
            "cnn",
            "protoembed.model.heads.cnn:cnn_pooler",
            "small CNN over the token states, freshly initialised (Choi et al.)",
        ),
    ],
)


def get_head(name: str) -> HeadSpec:
    """The registered head ``name``; a one-line error lists the known ones otherwise."""
    return HEADS.lookup(name)


def heads_help() -> str:
    """One line per head for ``--help``: ``name: description``."""
    return "; ".join(f"{name}: {spec.description}" for name, spec in HEADS.items())


def __getattr__(name: str) -> Any:
    """The pooling classes, imported (with torch) only when asked for."""
    if name == "MaskTokenPooling":
        from protoembed.model.heads.mask import MaskTokenPooling

        return MaskTokenPooling
    if name == "CNNHead":
        from protoembed.model.heads.cnn import CNNHead

        return CNNHead
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["HEADS", "CNNHead", "HeadSpec", "MaskTokenPooling", "get_head", "heads_help"]
