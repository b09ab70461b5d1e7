"""``cnn`` head: a small convolutional network over the token states (Choi et al., Fig. 2).

Our reading of the figure (the paper's drawing is damaged, so this is a documented interpretation):

    token states (B, T, H) -> image (B, 1, T, H)
    repeat ``blocks`` times (default 2):
        conv 3x1 along the token axis (``channels`` = 128 out, zero "same" padding), tanh
        max pool 2x1 along the token axis (stride 2; a last odd token keeps a window of its own)
    conv 1x1 back to 1 channel, tanh                      -> (B, 1, T', H)
    average over the remaining token positions            -> (B, H)

The output keeps the backbone's width H. All pooling is max except the final average.

Padding never leaks: before every convolution the padded positions are set to zero (so a sentence
padded in a batch sees exactly the zeros it would see at its own edge alone), max pooling treats
them as ``-inf``, the mask is pooled alongside (a window with one real token is real), and the final
average counts real positions only. So a sentence gets the same vector alone or in any batch, and
inputs of a single token work (every pool keeps at least one position).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from sentence_transformers.base.modules.module import Module
from torch import nn


class CNNHead(Module):
    """token_embeddings (B, T, H) + attention_mask (B, T) -> sentence_embedding (B, H).

    Args:
        embedding_dimension: H, the backbone's hidden size (also the output width).
        channels: feature maps of each 3x1 convolution (128 in the paper's figure).
        blocks: number of (convolution, tanh, max pool) blocks.
        kernel_size: height of the convolutions along the token axis (odd).
    """

    config_keys = ["embedding_dimension", "channels", "blocks", "kernel_size"]

    def __init__(
        self, embedding_dimension: int, channels: int = 128, blocks: int = 2, kernel_size: int = 3
    ) -> None:
        super().__init__()
        if kernel_size % 2 == 0 or blocks < 1 or channels < 1:
            raise ValueError(
                f"cnn head: need an odd kernel_size, blocks >= 1, channels >= 1; got {kernel_size}, {blocks}, {channels}"
            )
        self.embedding_dimension = int(embedding_dimension)
        self.channels, self.blocks, self.kernel_size = int(channels), int(blocks), int(kernel_size)
        self.convs = nn.ModuleList(
            nn.Conv2d(1 if i == 0 else channels, channels, (kernel_size, 1), padding=(kernel_size // 2, 0))
            for i in range(blocks)
        )
        self.project = nn.Conv2d(channels, 1, kernel_size=1)

    def forward(self, features: dict[str, torch.Tensor], **kwargs: Any) -> dict[str, torch.Tensor]:
        """Adds ``sentence_embedding`` (see the module docstring)."""
        states = features["token_embeddings"]
        x = states.unsqueeze(1)  # (B, 1, T, H)
        mask = features["attention_mask"].to(states.device, states.dtype)[:, None, :, None]  # (B, 1, T, 1)
        for conv in self.convs:
            x = torch.tanh(conv(x * mask))
            x = F.max_pool2d(x.masked_fill(mask == 0, float("-inf")), (2, 1), (2, 1), ceil_mode=True)
            mask = F.max_pool2d(mask, (2, 1), (2, 1), ceil_mode=True)
            x = x.masked_fill(mask == 0, 0.0)
        x = torch.tanh(self.project(x)) * mask  # (B, 1, T', H)
        features["sentence_embedding"] = x.sum(dim=(1, 2)) / mask.sum(dim=(1, 2)).clamp(min=1)
        return features

    def get_embedding_dimension(self) -> int:
        """Width of the output vectors (the backbone's hidden size)."""
        return self.embedding_dimension

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        """Write ``config.json`` and the weights (``model.safetensors``)."""
        self.save_config(output_path)
        self.save_torch_weights(output_path, safe_serialization=safe_serialization)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", **kwargs: Any) -> CNNHead:
        """Rebuild from :meth:`save`'s folder (config, then weights)."""
        hub = {k: kwargs[k] for k in ("token", "cache_folder", "revision", "local_files_only") if k in kwargs}
        config = cls.load_config(model_name_or_path, subfolder=subfolder, **hub)
        model = cls(**config)
        return cls.load_torch_weights(model_name_or_path, subfolder=subfolder, model=model, **hub)


def cnn_pooler(hidden: int) -> CNNHead:
    """A freshly initialised :class:`CNNHead` keeping the backbone's width."""
    return CNNHead(hidden)
