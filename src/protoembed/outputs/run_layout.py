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

#: ``results.json``'s key of the dev score that selected ``best/`` (the run's evaluator's: STS-B dev
#: Spearman x100 by default, another score when the run gives another evaluator)
DEV_SCORE = "best_dev_score"


#: ``results.json``'s key of who scored the dev set (a key of :data:`DEV_SCORERS`)
DEV_SCORER = "best_dev_scorer"
#: The trainer's dev scorers (``training_log.jsonl``'s ``dev_scorer``) -> what their score is, as the
#: training log line and the model card name it.
#: What an STS score of sentence embeddings is (the dev score of ``embedder``, the STS test average).
EMBEDDING_SCORE = "Spearman x100 of the embeddings' cosine similarities"
DEV_SCORERS = {
    "embedder": f"STS-B dev {EMBEDDING_SCORE}",
    "objective": "STS-B dev Spearman x100 of the cross-encoder's pair scores",
    "evaluator": "the run's own evaluator's score of the embeddings",
}


def dev_score(results: Mapping[str, Any]) -> Any:
    """The dev score that selected a run's ``best/`` (:data:`DEV_SCORE`; ``None`` when the results hold
    none)."""
    return results.get(DEV_SCORE)


def dev_score_name(results: Mapping[str, Any]) -> str:
    """What a run's dev score is: :data:`DEV_SCORERS` of the results' :data:`DEV_SCORER` (results written
    before that key, or by a run that scored nothing: said so)."""
    scorer = results.get(DEV_SCORER)
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
    "EMBEDDING_SCORE",
    "LOG_FILE",
    "RESULTS_FILE",
    "dev_score",
    "dev_score_name",
    "fmt_score",
]
