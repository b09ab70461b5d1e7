"""The order of the training examples: ``training.batch_sampler: shuffle | no_duplicates``.

In: the training :class:`~protoembed.data.training.examples.Examples`, the global batch size, the seed. Out: a
``torch.utils.data.Sampler`` of example indices whose consecutive runs of ``batch_size`` are the batches
of an epoch (the loader cuts them, Accelerate splits each one over the processes), and the number of
batches of every epoch, from which the trainer places a step (:class:`EpochPlan`).

``shuffle`` (:class:`~protoembed.training.components.EpochShuffleSampler`): a permutation drawn from
``seed + epoch``; ``n // batch_size`` batches per epoch.

``no_duplicates`` (:class:`NoDuplicatesSampler`): in-batch negatives are false negatives when a text occurs
twice in a batch (SimCSE, Gao et al. 2021, Eq. 4: every other sentence of the batch is a negative; a
repeated sentence is its own negative). The same permutation is walked, each example going into the
current batch unless one of its texts (any sentence column: ``text``; ``sentence1``/``sentence2``;
``anchor``/``positive``/``negative``) is already in it; a deferred example is tried first for the next
batch (sentence-transformers' ``NoDuplicatesBatchSampler`` idea). Two examples of a batch thus never share
a text; one example's own columns may (a pair of identical sentences). Only full batches are kept: an
epoch may have fewer of them than ``n // batch_size`` when duplicates are left at its end; the count is
that of the epoch's own batches, deterministic from ``seed + epoch``, so a resumed run skips exactly the
batches done and every process sees the same ones.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import torch

from protoembed.core.errors import ProtoembedError
from protoembed.data.training.examples import SENTENCE_COLUMNS, Examples

logger = logging.getLogger(__name__)


def text_ids(examples: Examples) -> tuple[list[tuple[int, ...]], int]:
    """``(ids, distinct)``: for each example the ids of its texts (one id per distinct string over every
    sentence column), and the number of distinct texts."""
    columns = [examples.columns[name] for name in examples.names if name in SENTENCE_COLUMNS]
    index: dict[str, int] = {}
    ids = [tuple(index.setdefault(str(text), len(index)) for text in row) for row in zip(*columns)]
    return ids, len(index)


def _occurrences(ids: list[tuple[int, ...]], distinct: int) -> list[int]:
    """For each text id, the number of examples holding it."""
    counts = [0] * distinct
    for row in ids:
        for i in set(row):
            counts[i] += 1
    return counts


def duplicate_counts(examples: Examples) -> dict[str, int]:
    """How much ``examples`` repeat themselves: ``examples``, ``texts`` (every sentence cell),
    ``distinct_texts``, ``repeated_texts`` (cells repeating an earlier cell: ``texts - distinct_texts``),
    ``duplicate_rows`` (examples equal to an earlier one in every sentence column) and
    ``sharing_examples`` (examples with a text that another example also has)."""
    ids, distinct = text_ids(examples)
    occurrences = _occurrences(ids, distinct)
    cells = sum(len(row) for row in ids)
    return {
        "examples": len(ids),
        "texts": cells,
        "distinct_texts": distinct,
        "repeated_texts": cells - distinct,
        "duplicate_rows": len(ids) - len(set(ids)),
        "sharing_examples": sum(any(occurrences[i] > 1 for i in row) for row in ids),
    }


class NoDuplicatesSampler(torch.utils.data.Sampler):
    """Example indices in batches of ``batch_size`` examples that share no text (see the module docstring).

    Args:
        examples: the training examples (their sentence columns are compared as exact strings).
        batch_size: the global batch.
        seed: the permutation of epoch ``e`` is drawn from ``seed + e`` (as ``shuffle``).
    Raises:
        ProtoembedError: fewer distinct texts than a batch, or not one full batch without duplicates.
    """

    def __init__(self, examples: Examples, batch_size: int, seed: int) -> None:
        self.batch_size, self.seed, self.epoch = batch_size, seed, 0
        self.ids, distinct = text_ids(examples)
        counts = _occurrences(self.ids, distinct)
        #: examples with a text that occurs in another example: only these can clash
        self.shared = [any(counts[i] > 1 for i in row) for row in self.ids]
        where = examples.where()
        if distinct < batch_size:
            raise ProtoembedError(
                f"training.batch_sampler no_duplicates: {where} holds {distinct} distinct texts, fewer than "
                f"training.batch_size {batch_size}; lower the batch size or use batch_sampler: shuffle"
            )
        self._cache: tuple[int, list[list[int]]] | None = None
        if not self.batches(0):
            raise ProtoembedError(
                f"training.batch_sampler no_duplicates: {where} cannot fill one batch of "
                f"{batch_size} examples without a repeated text; lower training.batch_size or use "
                "batch_sampler: shuffle"
            )

    def batches(self, epoch: int) -> list[list[int]]:
        """The batches of ``epoch`` (lists of example indices; the latest epoch's are kept)."""
        if self._cache is not None and self._cache[0] == epoch:
            return self._cache[1]
        generator = torch.Generator().manual_seed(self.seed + epoch)
        order = iter(torch.randperm(len(self.ids), generator=generator).tolist())
        batches: list[list[int]] = []
        deferred: list[int] = []
        while True:
            batch: list[int] = []
            used: set[int] = set()
            waiting, deferred = deferred, []
            for i in waiting:  # examples deferred by earlier batches come first
                if len(batch) < self.batch_size and self._add(i, batch, used):
                    continue
                deferred.append(i)
            while len(batch) < self.batch_size:
                i = next(order, None)
                if i is None:
                    break
                if not self._add(i, batch, used):
                    deferred.append(i)
            if len(batch) < self.batch_size:  # the permutation is used up
                break
            batches.append(batch)
        self._cache = (epoch, batches)
        return batches

    def _add(self, i: int, batch: list[int], used: set[int]) -> bool:
        """Put example ``i`` into ``batch`` if none of its texts is in ``used`` (the batch's texts)."""
        if self.shared[i] and not used.isdisjoint(self.ids[i]):
            return False
        batch.append(i)
        if self.shared[i]:
            used.update(self.ids[i])
        return True

    def num_batches(self, epoch: int) -> int:
        """Full batches of ``epoch``."""
        return len(self.batches(epoch))

    def set_epoch(self, epoch: int) -> None:
        """Select the batches of ``epoch`` (Accelerate calls this too)."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        return (i for batch in self.batches(self.epoch) for i in batch)

    def __len__(self) -> int:
        return self.num_batches(self.epoch) * self.batch_size


class EpochPlan:
    """Where a step falls when epochs may have different numbers of batches.

    ``batches_in(epoch)`` is the number of batches of an epoch (constant for ``shuffle``).
    """

    def __init__(self, batches_in: Callable[[int], int]) -> None:
        self.batches_in = batches_in
        self._starts = [0]  # first step of epoch e, for the epochs counted so far

    def _start(self, epoch: int) -> int:
        while len(self._starts) <= epoch:
            e = len(self._starts) - 1
            self._starts.append(self._starts[-1] + self.batches_in(e))
        return self._starts[epoch]

    def locate(self, step: int) -> tuple[int, int]:
        """``(epoch, batches done in it)`` before step ``step + 1`` (``step`` steps done)."""
        epoch = 0
        while self._start(epoch + 1) <= step:
            epoch += 1
        return epoch, step - self._start(epoch)

    def steps(self, epochs: int) -> int:
        """Steps of ``epochs`` whole epochs."""
        return self._start(epochs)


def build_sampler(
    examples: Examples, batch_size: int, seed: int, kind: str = "shuffle"
) -> tuple[torch.utils.data.Sampler, EpochPlan]:
    """The sampler of ``training.batch_sampler`` ``kind`` and its :class:`EpochPlan` (see the module
    docstring); logs how many examples an epoch of ``no_duplicates`` leaves out."""
    from protoembed.training.components import EpochShuffleSampler

    n = len(examples)
    if kind == "shuffle":
        return EpochShuffleSampler(n, seed), EpochPlan(lambda epoch: n // batch_size)
    if kind != "no_duplicates":
        raise ValueError(f"unknown batch sampler {kind!r}")
    sampler = NoDuplicatesSampler(examples, batch_size, seed)
    full = sampler.num_batches(0)
    if full < n // batch_size:
        logger.info(
            "batch_sampler no_duplicates: %d batches of %d in epoch 1 (shuffle: %d); %d examples wait for "
            "a batch without their texts",
            full,
            batch_size,
            n // batch_size,
            n - full * batch_size,
        )
    return sampler, EpochPlan(sampler.num_batches)
