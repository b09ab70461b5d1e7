"""A saved cross-encoder, found and loaded: the folder check (:func:`find_cross_encoder`,
:func:`cross_encoder_dir`), sentence-transformers' ``CrossEncoder`` of it (:func:`load_cross_encoder`)
and the one-score rule of whatever scores a pair with it (:func:`check_one_output`).

A cross-encoder folder is what a ``cross_encoder`` training run writes in ``best/cross_encoder``
(``objectives/cross_encoder.py``'s ``save_cross_encoder``) or any sentence-transformers ``CrossEncoder``
folder: a ``config.json`` naming a ``*ForSequenceClassification`` model and its classifier's weights.
``evaluation/cross_encoder.py`` (STS scored by the pair) reads it from here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from protoembed.core.errors import ProtoembedError
from protoembed.outputs.run_layout import CROSS_ENCODER_DIR


def find_cross_encoder(path: str | os.PathLike[str]) -> Path | None:
    """The cross-encoder folder of ``path``, or ``None`` when it holds none: ``path/cross_encoder`` when
    ``path`` is a saved run's model (``best/``), else ``path`` itself, if it is a trained cross-encoder
    (:func:`_missing_classifier` finds nothing missing)."""
    path = Path(path).expanduser()
    folder = path / CROSS_ENCODER_DIR if (path / CROSS_ENCODER_DIR).is_dir() else path
    return folder if folder.is_dir() and _missing_classifier(folder) is None else None


def cross_encoder_dir(path: str | os.PathLike[str]) -> Path:
    """The CrossEncoder folder of ``path``: ``path/cross_encoder`` when ``path`` is a saved run's model
    (``best/``), else ``path`` itself.

    Raises:
        ProtoembedError: ``path`` is not a folder, or not a trained cross-encoder (what it lacks named).
    """
    path = Path(path)
    if (path / CROSS_ENCODER_DIR).is_dir():
        path = path / CROSS_ENCODER_DIR
    elif not path.is_dir():
        raise ProtoembedError(f"cross-encoder {path}: no such folder")
    missing = _missing_classifier(path)
    if missing is not None:
        raise ProtoembedError(
            f"{path} is not a trained cross-encoder ({missing}); pass the best/cross_encoder/ folder of a "
            "cross_encoder training run (or a CrossEncoder folder), or drop --cross-encoder to score "
            "embeddings"
        )
    return path


def _missing_classifier(folder: Path) -> str | None:
    """What ``folder`` lacks to be a trained cross-encoder, or ``None``: a ``config.json`` naming a
    ``*ForSequenceClassification`` model and, in ``model.safetensors`` (read from its header, no torch),
    the weights of its classifier head. A bi-encoder's backbone would otherwise be "converted" by
    sentence-transformers into a CrossEncoder with a freshly initialised head, and score noise."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "no readable config.json"
    names = config.get("architectures") or [] if isinstance(config, dict) else []
    if not any(str(name).endswith("ForSequenceClassification") for name in names):
        shown = ", ".join(map(str, names)) or "no architecture"
        return f"its config.json names {shown}, not a *ForSequenceClassification model"
    weights = folder / "model.safetensors"
    if weights.is_file():
        try:
            with open(weights, "rb") as handle:
                header = json.loads(handle.read(int.from_bytes(handle.read(8), "little")))
        except (OSError, ValueError):
            return None  # unreadable weights: the loader reports them
        if not any("classifier" in key or key.startswith("score.") for key in header):
            return "its weights hold no classifier head"
    return None


def load_cross_encoder(path: str | os.PathLike[str], device: str | None = None) -> Any:
    """``sentence_transformers.CrossEncoder`` of :func:`cross_encoder_dir` ``(path)``, with the activation
    saved in the folder, in eval mode.

    Args:
        path: a cross-encoder folder, or a saved run's model folder holding one in ``cross_encoder/``.
        device: torch device (default: CUDA if available, else CPU).
    Raises:
        ProtoembedError: not a cross-encoder folder, or one that cannot be loaded.
    """
    from sentence_transformers import CrossEncoder

    from protoembed.inputs.checks import resolve_device
    from protoembed.model.backbones import loading_errors, quiet_transformers

    folder = cross_encoder_dir(path)
    with quiet_transformers(), loading_errors(folder):
        model = CrossEncoder(str(folder), device=str(resolve_device(device)))
    return model.eval()


def check_one_output(model: Any, folder: str | os.PathLike[str], needs: str) -> None:
    """Refuse a cross-encoder with other than one output: ``needs`` (what reads its score: ``STS``, ``a
    reranker``) takes one score per pair.

    Raises:
        ProtoembedError: the model's outputs counted (an NLI classifier has 3), and which models have one.
    """
    if model.num_labels != 1:
        raise ProtoembedError(
            f"cross-encoder {folder}: has {model.num_labels} outputs; {needs} needs a model with one score "
            "per pair (train it with task: regression, or loss: bce, on STS-B)"
        )
