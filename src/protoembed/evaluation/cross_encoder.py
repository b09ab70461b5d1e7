"""STS with a cross-encoder: each pair read as ONE input and scored by the model, no embeddings.

Table II of the BERT/ALBERT sentence-embedding paper scores the GLUE-fine-tuned cross-encoder itself on
the STS-B test set (Spearman x100; BERT 88.58, ALBERT 90.13). The model is a sentence-transformers
``CrossEncoder`` folder, e.g. ``best/cross_encoder`` of a ``cross_encoder`` training run; its
``predict`` (with the activation saved in the folder: the identity for our regression models) gives one
score per pair, correlated with the gold scores exactly as :func:`protoembed.evaluation.sts.evaluate_sts`
correlates cosines.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from protoembed.data.benchmarks.sts import check_variant
from protoembed.evaluation.correlation import correlations
from protoembed.evaluation.tasks import get_tasks
from protoembed.inputs.checks import check_batch_size
from protoembed.model.cross_encoder import check_one_output, cross_encoder_dir, load_cross_encoder

logger = logging.getLogger(__name__)


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
    check_one_output(model, cross_encoder_dir(path), "STS")
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
