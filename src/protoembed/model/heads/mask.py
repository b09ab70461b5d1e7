"""``mask`` head: a discrete template, the sentence embedding is the last-layer state of its mask token.

PromptBERT (Jiang et al. 2022) and ConPVP's prototypes: ``This sentence : "<S>" means [MASK] .`` ->
h_[MASK]. The template is rendered with the backbone's own mask token.

The ``soft_prompt`` head (ConPVP's anchor, ``[CLS] sentence P1..Pk [MASK] . [SEP]``) pools the same
way: k trainable vectors (default 4) overwrite the input embeddings of the k slots right before the
mask token (ConPVP Sec. 3, "continuous prompt"; the authors' code initialises them uniform on
[0, 1)), and the sentence embedding is the last-layer state of the mask token. The vectors live in
the encoder (:class:`protoembed.model.encoder.PromptEncoder`).
"""

from __future__ import annotations

from typing import Any

import torch
from sentence_transformers.base.modules.module import Module


class MaskTokenPooling(Module):
    """Pick the state at ``mask_index``: token_embeddings (B, T, H), mask_index (B,) -> (B, H)."""

    config_keys = ["embedding_dimension"]

    def __init__(self, embedding_dimension: int) -> None:
        super().__init__()
        self.embedding_dimension = int(embedding_dimension)

    def forward(self, features: dict[str, torch.Tensor], **kwargs: Any) -> dict[str, torch.Tensor]:
        """Adds ``sentence_embedding`` = ``token_embeddings[b, mask_index[b]]``."""
        states = features["token_embeddings"]
        rows = torch.arange(states.size(0), device=states.device)
        features["sentence_embedding"] = states[rows, features["mask_index"].to(states.device)]
        return features

    def get_embedding_dimension(self) -> int:
        """Width of the output vectors."""
        return self.embedding_dimension

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        """Write ``config.json`` (no weights)."""
        self.save_config(output_path)


def mask_pooler(hidden: int) -> MaskTokenPooling:
    """Pooling module for every head that reads a mask token (``mask``, ``soft_prompt``)."""
    return MaskTokenPooling(hidden)
