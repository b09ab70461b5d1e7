"""The names inside a training run's folder: one home for every module that writes or reads them.

A run folder ``<output_dir>/`` holds the best model (``best/``, a sentence-transformers folder; a
``cross_encoder`` run's also holds the cross-encoder, ``best/cross_encoder/``), the resumable checkpoint (``checkpoint/``), the resolved config (``config.yaml``), the run log
(``training_log.jsonl``, one JSON object a line) and the final scores (``results.json``). A staged run
writes one such folder per stage under its own, and its own ``config.yaml`` / ``results.json`` on top.

This module imports nothing heavy, so the trainer, the report, the model card and the studies in
``experiments/`` can all share it without pulling in torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the best model's folder (saved at each improvement on the dev set, reloaded for the final scores)
BEST_DIR = "best"
#: the resumable checkpoint's folder (model, optimizer, scheduler, sampler and trainer state)
CHECKPOINT_DIR = "checkpoint"
#: the run's resolved config, as YAML
CONFIG_FILE = "config.yaml"
#: the run log, one JSON object a line
LOG_FILE = "training_log.jsonl"
#: the run's final scores
RESULTS_FILE = "results.json"
#: the cross-encoder's folder inside ``best/`` (a ``cross_encoder`` run's)
CROSS_ENCODER_DIR = "cross_encoder"

#: ``results.json``'s key of the dev score that selected ``best/`` (the score of the run's selection:
#: ``training.selection``, or the evaluator the run was given; ``None`` when nothing selected)
DEV_SCORE = "best_dev_score"
#: ``results.json``'s key of who scored the dev set (a key of :data:`DEV_SCORERS`)
DEV_SCORER = "best_dev_scorer"
#: ``results.json``'s key of what the selection scored: ``{"tasks", "metric", "split"}``
#: (:meth:`protoembed.evaluation.evaluator.Evaluator.describe`; ``None``: no selection evaluator)
SELECTION = "selection"
#: The scorer of a run without selection: ``best/`` is the last step's model.
LAST_STEP = "last"
#: The trainer's dev scorers (``training_log.jsonl``'s ``dev_scorer``) -> what scored, as the training
#: log line and the model card name it.
DEV_SCORERS = {
    "embedder": "the embeddings",
    "objective": "the model's own pair scores (a cross-encoder)",
    "evaluator": "the run's own evaluator, on the embeddings",
    LAST_STEP: "none: no selection, best/ is the last step's model",
}
#: What the scorers of a results file written before :data:`SELECTION` was recorded scored: STS-B dev.
_STSB_DEV = {
    "embedder": "STS-B dev Spearman x100 of the embeddings' cosine similarities",
    "objective": "STS-B dev Spearman x100 of the cross-encoder's pair scores",
}


def dev_score(results: Mapping[str, Any]) -> Any:
    """The dev score that selected a run's ``best/`` (:data:`DEV_SCORE`; ``None`` when the results hold
    none)."""
    return results.get(DEV_SCORE)


def selection_text(selection: Mapping[str, Any]) -> str:
    """``spearman x100 on STSBenchmark (dev split)`` for a :data:`SELECTION` record (several tasks: their
    mean; a task's own metric where they differ)."""
    metric, tasks = selection.get("metric"), list(selection.get("tasks") or [])
    if isinstance(metric, Mapping):
        scored = ", ".join(f"{metric.get(t)} of {t}" for t in tasks)
    else:
        scored = f"{metric} x100 on {', '.join(tasks)}"
    mean = "mean " if len(tasks) > 1 else ""
    split = selection.get("split")
    return f"{mean}{scored}" + (f" ({split} split)" if split else "")


def dev_score_name(results: Mapping[str, Any]) -> str:
    """What a run's dev score is: who scored (:data:`DEV_SCORERS`) and what (:func:`selection_text` of
    the results' :data:`SELECTION`); results written before the selection was recorded scored STS-B dev
    (said so), results without a scorer say that too."""
    scorer = results.get(DEV_SCORER)
    selection = results.get(SELECTION)
    if scorer == LAST_STEP:
        return DEV_SCORERS[LAST_STEP]
    if isinstance(selection, Mapping) and scorer in DEV_SCORERS:
        return f"{selection_text(selection)}, scored by {DEV_SCORERS[scorer]}"
    if SELECTION not in results and scorer in _STSB_DEV:
        return _STSB_DEV[scorer]
    if scorer in DEV_SCORERS:
        return DEV_SCORERS[scorer]
    return "scorer not recorded: STS-B dev Spearman x100 unless the run was given another"


def fmt_score(value: float | None) -> str:
    """A x100 score as the logs and prints show it: two decimals (``-`` for none); the JSON files keep
    every digit."""
    return "-" if value is None else f"{value:.2f}"


__all__ = [
    "BEST_DIR",
    "CHECKPOINT_DIR",
    "CONFIG_FILE",
    "CROSS_ENCODER_DIR",
    "DEV_SCORE",
    "DEV_SCORER",
    "DEV_SCORERS",
    "LAST_STEP",
    "SELECTION",
    "LOG_FILE",
    "RESULTS_FILE",
    "dev_score",
    "dev_score_name",
    "selection_text",
    "fmt_score",
]
