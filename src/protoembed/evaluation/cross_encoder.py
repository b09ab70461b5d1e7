"""STS with a cross-encoder: each pair read as ONE input and scored by the model, no embeddings.

Table II of the BERT/ALBERT sentence-embedding paper scores the GLUE-fine-tuned cross-encoder itself on
the STS-B test set (Spearman x100; BERT 88.58, ALBERT 90.13). The model is a sentence-transformers
``CrossEncoder`` folder, e.g. ``best/cross_encoder`` of a ``cross_encoder`` training run; its
``predict`` (with the activation saved in the folder: the identity for our regression models) gives one
score per pair, correlated with the gold scores exactly as :func:`protoembed.evaluation.sts.evaluate_sts`
correlates cosines.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from protoembed.core.errors import ProtoembedError
from protoembed.data.benchmarks.sts import check_variant
from protoembed.evaluation.correlation import correlations
from protoembed.evaluation.tasks import get_tasks
from protoembed.inputs.checks import check_batch_size

logger = logging.getLogger(__name__)


def cross_encoder_dir(path: str | os.PathLike[str]) -> Path:
    """The CrossEncoder folder of ``path``: ``path/cross_encoder`` when ``path`` is a saved run's model
    (``best/``), else ``path`` itself.

    Raises:
        ProtoembedError: ``path`` is not a folder.
    """
    path = Path(path)
    if (path / "cross_encoder").is_dir():
        path = path / "cross_encoder"
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


def load_cross_encoder(path: str | os.PathLike[str], device: str | None = None):
    """``sentence_transformers.CrossEncoder`` of :func:`cross_encoder_dir` ``(path)`` with one output.

    Raises:
        ProtoembedError: the folder cannot be loaded, or the model has several outputs (an NLI
            classifier scores no similarity).
    """
    from sentence_transformers import CrossEncoder

    from protoembed.inputs.checks import resolve_device
    from protoembed.model.backbones import loading_errors, quiet_transformers

    folder = cross_encoder_dir(path)
    with quiet_transformers(), loading_errors(folder):
        model = CrossEncoder(str(folder), device=str(resolve_device(device)))
    if model.num_labels != 1:
        raise ProtoembedError(
            f"cross-encoder {folder}: has {model.num_labels} outputs; STS needs a regression model with one "
            "(train it with task: regression on STS-B)"
        )
    return model


def evaluate_cross_encoder_sts(
    path: str | os.PathLike[str],
    data_dir: str | os.PathLike[str] | None,
    tasks: Sequence[str] | None = ("STSBenchmark",),
    split: str = "test",
    batch_size: int = 64,
    variant: str = "senteval",
    device: str | None = None,
) -> dict[str, Any]:
    """Score STS pairs with a cross-encoder (the paper's Table II).

    Args:
        path: a ``CrossEncoder`` folder, or a saved run's model folder holding one in ``cross_encoder/``.
        data_dir: the data directory (``None``: ``$PROTOEMBED_DATA``, else the user data directory).
        tasks: STS task names (``STSBenchmark`` / ``STS-B``, ``SICK-R``, ``STS12``...; ``None``: the sts
            suite's default run for ``split``).
        split: for STSBenchmark / SICKRelatedness (``test``, ``dev``, ``train``).
        batch_size: pairs per forward.
        variant: ``senteval`` or ``raw`` (as the tasks' readers take it).
        device: torch device (default: CUDA if available, else CPU).
    Returns:
        ``{"variant", "split", "tasks": {task: {"spearman", "pearson", "n"}}, "avg"}`` (x100; ``avg`` the
        mean Spearman), the layout of :func:`protoembed.evaluation.sts.evaluate_sts`; the caller adds
        ``"model"``.
    Raises:
        ProtoembedError: unknown task, variant or split, missing data, or an unloadable model.
    """
    check_variant(variant)
    check_batch_size(batch_size)
    entries = get_tasks(tasks, "sts", split)
    names = [entry.name for entry in entries]
    cross_encoder_dir(path)  # a folder that is no cross-encoder fails first
    datasets = [entry.load(data_dir, variant, split) for entry in entries]  # then bad data
    model = load_cross_encoder(path, device)
    results: dict[str, dict[str, Any]] = {}
    for task, pairs in zip(names, datasets):
        predicted = model.predict(
            list(zip(pairs.sentences1, pairs.sentences2)),
            batch_size=batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        spearman, pearson = correlations(np.asarray(predicted, dtype=np.float64), pairs.scores)
        results[task] = {"spearman": spearman, "pearson": pearson, "n": len(pairs)}
        logger.info("cross-encoder %s: Spearman %.2f over %d pairs", task, spearman, len(pairs))
    avg = float(np.mean([r["spearman"] for r in results.values()]))
    return {"variant": variant, "split": split, "tasks": results, "avg": avg}
