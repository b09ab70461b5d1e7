"""What the own-pairs study runs: its methods, the learning-rate grid, the seeds, the evaluations per epoch,
the runs' names, and how a learning rate is chosen. Each is defined here once; the driver
(:mod:`experiments.own_pairs`), the anchor (:mod:`experiments.own_pairs_st`) and the page
(:mod:`experiments.own_pairs_report`) read them from here.

The budget itself (one epoch at batch 64, 32 tokens, no warm-up, no weight decay, bf16 autocast, no text
twice in a batch) is in the configs, ``configs/cpu/own-pairs/base/supervised.yaml``, which both libraries
read. A supervised method is trained at every learning rate of :data:`LR_GRID` with :data:`SELECTION_SEED`
(each run keeps its checkpoint with the best dev nDCG@10), the learning rate whose kept checkpoint scores
best on the dev split is chosen (:func:`choose_lr`), and the other seeds of :data:`SEEDS` are trained at it:
``len(LR_GRID) + len(SEEDS) - 1`` runs per (set, method) (:func:`planned_runs`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

PROTOEMBED = "protoembed"
SENTENCE_TRANSFORMERS = "sentence-transformers"


@dataclass(frozen=True)
class Method:
    """A row of the study: its label on the page, the library that trains it, the config it reads
    (``configs/cpu/own-pairs/<config>-<set>.yaml``) and whether this study trains it (``False``: the
    unsupervised rows, recorded by the 30-step study and kept as they are)."""

    label: str
    library: str
    config: str
    trained: bool = True


#: Method (run-name prefix) -> its definition, in the page's order.
METHODS: dict[str, Method] = {
    "simcse": Method("unsupervised SimCSE on the texts", PROTOEMBED, "simcse", trained=False),
    "conpvp": Method("ConPVP on the texts", PROTOEMBED, "conpvp", trained=False),
    "sup": Method("supervised SimCSE, in-batch negatives", PROTOEMBED, "sup"),
    "sup-mined": Method("supervised SimCSE, + 1 mined hard negative", PROTOEMBED, "sup-mined"),
    "st-mnrl": Method("sentence-transformers MNRL, in-batch negatives", SENTENCE_TRANSFORMERS, "sup"),
    "st-mnrl-mined": Method(
        "sentence-transformers MNRL, + 1 mined hard negative", SENTENCE_TRANSFORMERS, "sup-mined"
    ),
}
#: The supervised methods this study trains, in the page's order.
TRAINED = [name for name, method in METHODS.items() if method.trained]
#: protoembed's supervised method -> the sentence-transformers run of the same config (its anchor).
ANCHORS = {
    pe: st
    for pe in TRAINED
    for st in TRAINED
    if METHODS[pe].library == PROTOEMBED
    and METHODS[st].library == SENTENCE_TRANSFORMERS
    and METHODS[pe].config == METHODS[st].config
}
#: The methods that need the set's mined hard negatives (their config reads ``mined.jsonl``).
MINED_CONFIG = "sup-mined"

#: The learning rates tried on :data:`SELECTION_SEED`.
LR_GRID = (2e-5, 5e-5, 1e-4)
SELECTION_SEED = 1
SEEDS = (1, 2, 3)
#: Dev evaluations per epoch (every ``ceil(steps / EVALS_PER_EPOCH)`` steps, and after the last step).
EVALS_PER_EPOCH = 8

_RUN = re.compile(r"^(?P<method>.+)-(?P<set>[a-z0-9]+)-lr(?P<lr>[0-9.e+-]+)-seed(?P<seed>\d+)$")


def lr_text(lr: float) -> str:
    """A learning rate as run names and the page write it (``5e-05``, ``0.0001``)."""
    return f"{lr:g}"


def run_name(method: str, name: str, lr: float, seed: int) -> str:
    """The run folder (and record) name of ``method`` on set ``name`` at ``lr`` with ``seed``."""
    return f"{method}-{name}-lr{lr_text(lr)}-seed{seed}"


def parse_run_name(run: str) -> tuple[str, str, float, int] | None:
    """``(method, set, lr, seed)`` of a :func:`run_name`, or ``None`` for another name (e.g. the 30-step
    study's ``sup-snli-seed1``)."""
    match = _RUN.match(run)
    if match is None:
        return None
    return match["method"], match["set"], float(match["lr"]), int(match["seed"])


def epoch_steps(pairs: int, batch_size: int) -> int:
    """Optimizer steps of one epoch: the last incomplete batch is dropped (both libraries)."""
    return pairs // batch_size


def eval_steps(steps: int) -> int:
    """Steps between two dev evaluations: about an epoch's :data:`EVALS_PER_EPOCH`-th (at least 1)."""
    return max(1, math.ceil(steps / EVALS_PER_EPOCH))


def choose_lr(dev: dict[float, float | None]) -> float | None:
    """The learning rate of :data:`LR_GRID` whose selection run scored the best dev nDCG@10 (``dev``:
    lr -> that score, ``None`` while a run is missing); ``None`` until every lr of the grid has its score.
    A tie goes to the smaller learning rate (the smaller change to the model)."""
    if any(dev.get(lr) is None for lr in LR_GRID):
        return None
    return max(sorted(LR_GRID), key=lambda lr: (dev[lr], -lr))


def planned_runs(chosen: float | None) -> list[tuple[float, int]]:
    """The ``(lr, seed)`` runs of one (set, method): every lr of the grid with :data:`SELECTION_SEED`, then,
    once ``chosen`` is known, the other seeds at it."""
    runs = [(lr, SELECTION_SEED) for lr in LR_GRID]
    if chosen is not None:
        runs += [(chosen, seed) for seed in SEEDS if seed != SELECTION_SEED]
    return runs
