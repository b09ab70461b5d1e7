"""Shared helpers of the trainer tests: a tiny corpus, a tiny config, a stand-in objective."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from protoembed.objectives.registry import ObjectiveOptions
from protoembed.training.config import config_from_dict

SENTENCES = [
    "a man is playing a guitar .",
    "a woman is slicing an onion .",
    "the quick brown fox jumps over the lazy dog .",
    "two dogs are running through a field of grass .",
    "a child is riding a horse while people watch the game .",
    "stocks fell sharply after the report on monday .",
    "the cat sat on the mat and looked out of the window .",
    "this sentence means something .",
]


class Interrupt(Exception):
    """Raised by :func:`stop_after`'s callback: stands for a run stopped from outside."""


def stop_after(step: int):
    """A trainer ``callback`` raising :class:`Interrupt` after optimizer step ``step``."""

    def callback(event: dict[str, Any]) -> None:
        if event["step"] == step:
            raise Interrupt

    return callback


def write_corpus(path: Path, lines: list[str] | None = None, repeat: int = 4) -> Path:
    """A small corpus file (with one empty line) ending in a newline."""
    lines = lines if lines is not None else [f"{s} {i}" for i in range(repeat) for s in SENTENCES]
    path.write_text("\n".join(lines[:3] + [""] + lines[3:]) + "\n", encoding="utf-8")
    return path


#: The papers' model selection (configs/base/sts-eval.yaml), for the tests' configs.
STSB_SELECTION = {"tasks": ["STSBenchmark"], "metric": "spearman", "split": "dev"}


def tiny_config(
    model_dir: Path,
    corpus: Path,
    output_dir: Path,
    objective: str = "standin",
    head: str = "mean",
    **training: Any,
):
    """A config for the tiny BERT: batch 8, a handful of steps, STS-B dev selection every 2 steps, STS-B
    test only."""
    settings = {
        "selection": STSB_SELECTION,
        "batch_size": 8,
        "lr": 1e-3,
        "max_steps": 5,
        "eval_steps": 2,
        "log_steps": 1,
        "seed": 3,
        "eval_batch_size": 256,
        "test_tasks": ["STSBenchmark"],
        **training,
    }
    return config_from_dict(
        {
            "model": str(model_dir),
            "head": head,
            "max_seq_length": 16,
            "objective": {"name": objective},
            "data": {"corpus": str(corpus)},
            "training": settings,
            "output_dir": str(output_dir),
        },
        objectives={"standin": ObjectiveOptions},  # an objective without options, outside the registry
    )


class StandInObjective(torch.nn.Module):
    """SimCSE-like stand-in: InfoNCE between two dropout views of the batch (tau 0.05).

    ``nan_at``: return a NaN loss at that (1-based) call, to test the non-finite-loss stop.
    """

    def __init__(self, embedder, nan_at: int | None = None) -> None:
        super().__init__()
        self.embedder = embedder
        self.nan_at = nan_at
        self.calls = 0

    columns = ("text",)

    def forward(self, batch: dict[str, list[str]]) -> torch.Tensor:
        sentences = batch["text"]
        self.calls += 1
        features = self.embedder.features(sentences)
        a = self.embedder(dict(features))
        b = self.embedder(dict(features))
        logits = F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T / 0.05
        loss = F.cross_entropy(logits, torch.arange(len(sentences), device=logits.device))
        if self.nan_at is not None and self.calls >= self.nan_at:
            loss = loss * float("nan")
        return loss

    def eval_embedder(self):
        return self.embedder

    def save(self, path) -> None:
        self.embedder.save(path)

    def config(self) -> dict[str, Any]:
        return {"objective": "standin"}


def standin_factory(nan_at: int | None = None):
    """An ``objective_factory`` building :class:`StandInObjective`."""
    return lambda cfg, embedder: StandInObjective(embedder, nan_at=nan_at)
