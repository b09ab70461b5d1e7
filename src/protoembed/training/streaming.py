"""The streamed training path (``data.streaming: true``): batches drawn from files read as they come.

In: the config's ``data`` (files in the streamed formats, :func:`protoembed.data.training.formats.open_stream`),
the global batch size, the seed, this process's rank among ``world`` processes, the trainer's collate
function. Out: per epoch, this process's share of each global batch, collated and on the device.

How it counts and orders (the in-memory path's rules, :mod:`protoembed.training.samplers`, kept):

- **Epochs and steps.** A first pass over the files (:meth:`StreamedExamples.count
  <protoembed.data.training.streaming.StreamedExamples.count>`, streamed, every row checked) counts the
  ``n`` examples (at most ``data.max_sentences``); an epoch is ``n // batch_size`` batches, the last
  incomplete one dropped, so ``training.epochs``, ``max_steps`` and the learning-rate schedule work as
  in memory.
- **Order.** Epoch ``e`` reads the files in order and draws the examples through a shuffle buffer of
  ``data.shuffle_buffer`` examples seeded by ``seed + e``
  (:func:`~protoembed.data.training.streaming.shuffled`): a local shuffle (an example comes out no
  earlier than a buffer's length before its place in the files, possibly much later); with a buffer at
  least as large as the corpus the order is a uniformly random permutation. Consecutive runs of ``batch_size`` examples are the batches.
- **Processes.** Every process reads the files and draws the same batches; process ``r`` of ``W`` keeps
  rows ``r * b / W .. (r + 1) * b / W`` of each global batch of ``b``, exactly the share Accelerate's
  ``split_batches`` gives it in memory; each process collates its share (the loader is not Accelerate's).
- **Workers.** With ``training.num_workers`` ``K``, worker ``k`` reads the stream too and collates the
  batches ``k, k + K, ...``; the DataLoader takes them round-robin, so the order is that of 0 workers.
- **Resume.** The batches of an epoch are deterministic from the seed: a resumed run reads past the
  batches already done in the epoch (without collating them) and continues with the next one.
- ``batch_sampler: no_duplicates`` needs the whole corpus and is refused with streaming (config error);
  so are conversions between column layouts (the files must have the objective's columns).

Each example carries its position in the file order (its key for keyed template draws, as an index is
in memory: :class:`protoembed.training.step.Collator`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from protoembed.data.training.streaming import StreamedExamples, shuffled
from protoembed.training.config_models import TrainConfig


def streamed_examples(cfg: TrainConfig) -> StreamedExamples:
    """The streamed examples of ``cfg.data`` (nothing read yet; :meth:`StreamedExamples.count` is the
    first pass).

    Raises:
        ProtoembedError: an unknown or unstreamable format, a missing file.
    """
    from protoembed.data.training.formats import open_stream

    data = cfg.data
    streams = [
        open_stream(f.path, f.format, data.data_dir, f.columns, **data.reader_options(f))
        for f in data.files()
    ]
    return StreamedExamples(streams, data.max_sentences)


class StreamedBatches(torch.utils.data.IterableDataset):
    """One epoch of this process's collated batch shares (see the module docstring); set the epoch and
    the batches to skip with :meth:`set_epoch` before iterating."""

    def __init__(
        self,
        examples: StreamedExamples,
        batch_size: int,
        shuffle_buffer: int,
        seed: int,
        collate: Callable[[list[tuple[int, dict[str, Any]]]], Any],
        rank: int = 0,
        world: int = 1,
    ) -> None:
        super().__init__()
        self.examples, self.batch_size, self.shuffle_buffer = examples, batch_size, shuffle_buffer
        self.seed, self.collate, self.rank, self.world = seed, collate, rank, world
        self.epoch = self.skip = 0

    def set_epoch(self, epoch: int, skip: int = 0) -> None:
        """Iterate epoch ``epoch``, from its batch ``skip`` on."""
        self.epoch, self.skip = epoch, skip

    def global_batches(self) -> Iterator[list[tuple[int, dict[str, Any]]]]:
        """The epoch's global batches of ``(position, example)`` pairs, the last incomplete one dropped."""
        order = shuffled(enumerate(self.examples), self.shuffle_buffer, self.seed + self.epoch)
        while len(batch := list(itertools.islice(order, self.batch_size))) == self.batch_size:
            yield batch

    def __iter__(self) -> Iterator[Any]:
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        share = self.batch_size // self.world
        for b, batch in enumerate(self.global_batches()):
            if b < self.skip or (b - self.skip) % workers != worker:
                continue
            yield self.collate(batch[self.rank * share : (self.rank + 1) * share])


def stream_loader(
    batches: StreamedBatches, num_workers: int = 0, pin_memory: bool = False
) -> torch.utils.data.DataLoader:
    """The loader of ``batches`` (already batched and collated: ``batch_size=None``), ``num_workers``
    processes (0: this one), with ``pin_memory`` in page-locked memory (CUDA)."""
    return torch.utils.data.DataLoader(
        batches, batch_size=None, num_workers=num_workers, pin_memory=pin_memory
    )


def streamed_for(
    examples: StreamedExamples, columns: Sequence[str | tuple[str, ...]], cfg: TrainConfig
) -> StreamedExamples:
    """``examples`` counted (the first pass) and checked to have the objective's ``columns`` and to fill one
    batch (as :func:`protoembed.training.components.examples_for` checks examples in memory).

    Raises:
        ProtoembedError: a malformed row, missing columns, or a batch larger than the examples.
    """
    from protoembed.data.training.formats import check_streamed_columns
    from protoembed.training.components import check_batch_fits

    n = examples.count()
    check_streamed_columns(examples.where(), examples.names, columns, who=f"objective {cfg.objective.name!r}")
    check_batch_fits(cfg.training.batch_size, n, examples.where())
    return examples
