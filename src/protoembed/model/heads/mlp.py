"""SimCSE's Linear+Tanh projection on top of a sentence vector, and the pooling module that keeps it.

A saved-model module (``mlp: keep``), so it lives with the heads: loading a model never imports the
training layer.

During training SimCSE (and ConPVP's released code) pass every sentence vector through
``tanh(W h + b)`` before the similarity; by default the MLP is dropped at evaluation ("MLP only in
training"). The projection is initialised with the backbone's own rule, as SimCSE's, PromptBERT's and the
ConPVP authors' code create it inside the model and call the backbone's ``init_weights`` on it (BERT,
RoBERTa, ALBERT: normal with std = ``config.initializer_range``, 0.02, zero bias), not with PyTorch's
``Linear`` default (uniform in +-1/sqrt(H), bias too). With ``mlp: keep`` the evaluated/saved model keeps it: :class:`MLPPooling` wraps the head's
pooling module and applies the projection to its ``sentence_embedding``, and saves both in the
sentence-transformers layout (``SentenceTransformer(path)`` imports it by dotted path).
"""

from __future__ import annotations

import importlib
import json
import os
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from sentence_transformers.base.modules.module import Module

_WEIGHTS = "mlp.safetensors"
_INNER = "pooler"


def init_like_backbone(module: torch.nn.Module, backbone: torch.nn.Module) -> None:
    """Initialise ``module``'s layers in place with ``backbone``'s own rule: Hugging Face's
    ``PreTrainedModel._init_weights`` (for a ``Linear``: normal with mean 0 and std =
    ``config.initializer_range``, zero bias), what ``init_weights`` applies to SimCSE's ``MLPLayer``.

    Raises:
        TypeError: ``backbone`` has no ``_init_weights`` (not a Hugging Face model).
    """
    init = getattr(backbone, "_init_weights", None)
    if init is None:
        raise TypeError(f"{type(backbone).__name__} has no _init_weights: not a Hugging Face model")
    with torch.no_grad():
        module.apply(init)


class MLP(torch.nn.Module):
    """``tanh(Linear(h))`` with a square (H, H) weight (SimCSE's ``MLPLayer``).

    Args:
        hidden: H.
        backbone: initialise the layer with this Hugging Face model's rule (:func:`init_like_backbone`);
            ``None`` keeps PyTorch's default (a module whose weights are loaded next).
    """

    def __init__(self, hidden: int, backbone: torch.nn.Module | None = None) -> None:
        super().__init__()
        self.dense = torch.nn.Linear(hidden, hidden)
        if backbone is not None:
            init_like_backbone(self, backbone)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., H)."""
        return torch.tanh(self.dense(x))


class MLPPooling(Module):
    """A head's pooling module followed by the training MLP: ``sentence_embedding <- mlp(pooled)``.

    Args:
        pooler: the head's pooling module (e.g. ``Pooling`` or ``MaskTokenPooling``).
        mlp: the projection (a fresh one is created when ``None``).
    """

    config_keys: list[str] = []

    def __init__(self, pooler: Module, mlp: MLP | None = None) -> None:
        super().__init__()
        self.pooler = pooler
        self.mlp = mlp if mlp is not None else MLP(int(pooler.get_embedding_dimension()))

    def forward(self, features: dict[str, torch.Tensor], **kwargs: Any) -> dict[str, torch.Tensor]:
        """Pool, then project ``sentence_embedding``."""
        features = self.pooler(features, **kwargs)
        features["sentence_embedding"] = self.mlp(features["sentence_embedding"])
        return features

    def get_embedding_dimension(self) -> int:
        """Width of the output vectors (same as the pooled vectors)."""
        return int(self.pooler.get_embedding_dimension())

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        """Write ``config.json`` (the inner pooler's class), ``mlp.safetensors`` and ``pooler/``."""
        inner = os.path.join(output_path, _INNER)
        os.makedirs(inner, exist_ok=True)
        self.pooler.save(inner)
        kind = f"{type(self.pooler).__module__}.{type(self.pooler).__name__}"
        with open(os.path.join(output_path, self.config_file_name), "w", encoding="utf-8") as handle:
            json.dump({"pooler_type": kind}, handle, indent=2)
        state = {k: v.detach().cpu().contiguous() for k, v in self.mlp.state_dict().items()}
        save_file(state, os.path.join(output_path, _WEIGHTS))

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", **kwargs: Any) -> MLPPooling:
        """Load what :meth:`save` wrote (a local folder)."""
        root = os.path.join(model_name_or_path, subfolder)
        with open(os.path.join(root, cls.config_file_name), encoding="utf-8") as handle:
            kind = json.load(handle)["pooler_type"]
        module_name, _, class_name = kind.rpartition(".")
        pooler_cls = getattr(importlib.import_module(module_name), class_name)
        pooler = pooler_cls.load(model_name_or_path, subfolder=os.path.join(subfolder, _INNER))
        module = cls(pooler)
        module.mlp.load_state_dict(load_file(os.path.join(root, _WEIGHTS)))
        return module
