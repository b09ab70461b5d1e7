"""``training.batch_sampler: no_duplicates``: batches without a repeated text, deterministic, resumable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from protoembed.core.errors import ProtoembedError
from protoembed.data.training.examples import Examples
from protoembed.training import train
from protoembed.training.components import EpochShuffleSampler
from protoembed.training.samplers import EpochPlan, NoDuplicatesSampler, build_sampler, duplicate_counts
from training_helpers import SENTENCES, Interrupt, StandInObjective, stop_after, tiny_config, write_corpus

#: 24 distinct sentences and one more repeated 8 times: a batch of 8 holds at most one copy of it, so an
#: epoch has 3 full batches without duplicates (3 copies + 21 others) where shuffle has 4.
DISTINCT = [f"{s} {i}" for i in range(3) for s in SENTENCES]
REPEATED = "the same sentence again ."
LINES = DISTINCT[:5] + [REPEATED] * 3 + DISTINCT[5:14] + [REPEATED] * 5 + DISTINCT[14:]


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (see conftest)."""


def texts_of(examples: Examples, batch: list[int]) -> list[str]:
    return [examples.columns[c][i] for i in batch for c in examples.names if c != "label"]


def test_no_batch_holds_a_text_twice_and_the_batches_are_seeded() -> None:
    examples = Examples({"text": list(LINES)})
    sampler = NoDuplicatesSampler(examples, 8, seed=5)
    for epoch in range(6):
        batches = sampler.batches(epoch)
        assert len(batches) == 3 and all(len(b) == 8 for b in batches)
        for batch in batches:
            texts = texts_of(examples, batch)
            assert len(set(texts)) == len(texts) == 8
        assert len({i for b in batches for i in b}) == 24  # an example at most once per epoch
    again = NoDuplicatesSampler(examples, 8, seed=5)
    assert [again.batches(e) for e in (3, 0)] == [sampler.batches(3), sampler.batches(0)]
    assert sampler.batches(0) != sampler.batches(1)  # each epoch its own order (seed + epoch)
    sampler.set_epoch(2)
    assert list(sampler) == [i for b in sampler.batches(2) for i in b] and len(sampler) == 24
    # without duplicates it is shuffle's order exactly
    plain = Examples({"text": DISTINCT})
    assert list(NoDuplicatesSampler(plain, 8, seed=5)) == list(EpochShuffleSampler(24, 5))


def test_pairs_share_no_text_across_the_batch_columns() -> None:
    """NLI-like pairs: every premise has three hypotheses and hypotheses repeat across premises."""
    premises = [f"premise {i} ." for i in range(12) for _ in range(3)]
    hypotheses = [f"hypothesis {i % 10} ." for i in range(36)]
    examples = Examples({"sentence1": premises, "sentence2": hypotheses, "label": [i % 3 for i in range(36)]})
    assert duplicate_counts(examples) == {
        "examples": 36,
        "texts": 72,
        "distinct_texts": 22,
        "repeated_texts": 50,
        "duplicate_rows": 0,
        "sharing_examples": 36,
    }
    sampler, plan = build_sampler(examples, 4, seed=1, kind="no_duplicates")
    batches = sampler.batches(0)
    assert 0 < len(batches) <= 9 and plan.batches_in(0) == len(batches)
    for batch in batches:
        texts = texts_of(examples, batch)
        assert len(set(texts)) == len(texts) == 8  # 4 premises and 4 hypotheses, all different


def test_epoch_plan_places_steps_in_epochs_of_different_lengths() -> None:
    plan = EpochPlan(lambda epoch: [3, 2, 4][epoch % 3])
    assert [plan.locate(s) for s in (0, 2, 3, 4, 5, 8, 9)] == [
        (0, 0), (0, 2), (1, 0), (1, 1), (2, 0), (2, 3), (3, 0),
    ]  # fmt: skip
    assert plan.steps(2) == 5 and plan.steps(3) == 9


def test_accelerate_splits_the_same_batches_over_processes() -> None:
    """split_batches: process k of 2 gets the k-th half of every batch, as with shuffle."""
    from accelerate.data_loader import BatchSamplerShard

    examples = Examples({"text": list(LINES)})
    sampler = NoDuplicatesSampler(examples, 8, seed=5)
    whole = list(torch.utils.data.BatchSampler(sampler, 8, drop_last=True))
    shards = [
        list(BatchSamplerShard(torch.utils.data.BatchSampler(sampler, 8, True), 2, k, split_batches=True))
        for k in range(2)
    ]
    assert whole == sampler.batches(0)
    assert [a + b for a, b in zip(*shards)] == whole and all(len(s) == 4 for s in shards[0])


def test_fewer_distinct_texts_than_a_batch_is_a_one_line_error(tiny_model_dirs, tmp_path: Path) -> None:
    lines = ["a ."] * 10 + ["b ."] * 10 + [f"c {i} ." for i in range(5)]
    corpus = write_corpus(tmp_path / "few.txt", lines)
    cfg = tiny_config(tiny_model_dirs["bert"], corpus, tmp_path / "run", batch_sampler="no_duplicates")
    steps: list[int] = []
    with pytest.raises(
        ProtoembedError, match=r"^training.batch_sampler no_duplicates: [^\n]* 7 distinct texts"
    ):
        train(cfg, objective_factory=lambda c, e: StandInObjective(e), callback=lambda e: steps.append(1))
    assert steps == [] and not (tmp_path / "run" / "training_log.jsonl").exists()  # before step 1
    examples = Examples({"text": lines})
    with pytest.raises(
        ProtoembedError,
        match=r"^training.batch_sampler no_duplicates: .* 7 distinct texts, fewer than training.batch_size 8",
    ):
        NoDuplicatesSampler(examples, 8, seed=0)
    one_premise = Examples({"sentence1": ["p ."] * 4, "sentence2": ["h1 .", "h2 .", "h3 .", "h4 ."]})
    with pytest.raises(ProtoembedError, match=r"cannot fill one batch of 2 examples without a repeated text"):
        NoDuplicatesSampler(one_premise, 2, seed=0)  # 5 distinct texts, but every pair has the premise


class Recording(StandInObjective):
    """The stand-in objective, keeping the texts of every batch it sees."""

    seen: list[list[str]] = []

    def forward(self, batch):
        Recording.seen.append(list(batch["text"]))
        return super().forward(batch)


def test_a_run_sees_no_duplicates_and_resumes_with_the_same_batches(
    tiny_model_dirs, tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """8 steps of 3-batch epochs (shuffle would have 4 per epoch); stopped after step 4 (checkpoint at 3,
    inside epoch 2), resumed: the same batches as the uninterrupted run, none with a text twice."""
    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))
    corpus = write_corpus(tmp_path / "dups.txt", LINES)
    settings = {"max_steps": 8, "eval_steps": 3, "batch_sampler": "no_duplicates", "keep_checkpoint": True}

    def factory(cfg, embedder):
        return Recording(embedder)

    Recording.seen = []
    train(
        tiny_config(tiny_model_dirs["bert"], corpus, tmp_path / "straight", **settings),
        objective_factory=factory,
    )
    straight = Recording.seen
    assert len(straight) == 8
    for texts in straight:
        assert len(set(texts)) == len(texts) == 8
    log = [json.loads(x) for x in (tmp_path / "straight" / "training_log.jsonl").read_text().splitlines()]
    assert log[0]["steps_per_epoch"] == 3
    assert [e["epoch"] for e in log if e["event"] == "train"] == [0, 0, 0, 1, 1, 1, 2, 2]

    Recording.seen = []
    broken = tiny_config(tiny_model_dirs["bert"], corpus, tmp_path / "broken", **settings)
    with pytest.raises(Interrupt):
        train(broken, objective_factory=factory, callback=stop_after(4))
    train(broken, resume=True, objective_factory=factory)
    assert Recording.seen[:3] + Recording.seen[4:] == straight  # step 4 is done again after the resume
