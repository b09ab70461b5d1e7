"""Training examples read as they come (``data.streaming: true``): the corpus is never one Python list.

:class:`StreamedExamples` chains the :class:`~protoembed.data.training.tables.ExampleStream` of each
``data.corpus`` file (every iteration reads the files again), keeps the columns every file has (as
:meth:`Examples.concat <protoembed.data.training.examples.Examples.concat>` does) and stops after
``max_examples`` (``data.max_sentences``: the first N in file order, as the in-memory path keeps them).
:meth:`StreamedExamples.count` is a first pass over the files, streamed too, that checks every row and
counts the examples, so that steps per epoch, ``epochs`` and the learning-rate schedule are known before
step one. :func:`shuffled` is the seeded shuffle buffer the training batches are drawn through
(:mod:`protoembed.training.streaming`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from protoembed.core.errors import ProtoembedError
from protoembed.data.training.examples import SENTENCE_COLUMNS
from protoembed.data.training.tables import ExampleStream

T = TypeVar("T")

#: ``data.shuffle_buffer`` when the config sets none.
DEFAULT_SHUFFLE_BUFFER = 10_000


def shuffled(items: Iterable[T], buffer_size: int, seed: int) -> Iterator[T]:
    """``items`` in a random order drawn through a buffer of ``buffer_size`` items (seeded by ``seed``).

    The buffer is filled with the first ``buffer_size`` items; then each next item takes the place of a
    buffered one drawn at random, which is yielded; at the end the rest of the buffer is yielded in a
    random order. At most ``buffer_size`` items are held; with ``buffer_size >= len(items)`` the order is
    a uniformly random permutation (the whole input is buffered and shuffled); with 1 it is the input's.
    """
    rng = random.Random(seed)
    buffer: list[T] = []
    for item in items:
        if len(buffer) < buffer_size:
            buffer.append(item)
            continue
        j = rng.randrange(buffer_size)
        yield buffer[j]
        buffer[j] = item
    rng.shuffle(buffer)
    yield from buffer


class StreamedExamples:
    """The examples of several files, read each time they are iterated (see the module docstring).

    Args:
        streams: one :class:`ExampleStream` per file, in ``data.corpus`` order.
        max_examples: keep the first N examples (``None``: all).
    """

    def __init__(self, streams: Sequence[ExampleStream], max_examples: int | None = None) -> None:
        if not streams:
            raise ValueError("no files to stream")
        self.streams = list(streams)
        self.max_examples = max_examples
        self._count: int | None = None
        self._names: tuple[str, ...] | None = None

    def count(self) -> int:
        """The number of examples: a first pass over every file (streamed: nothing is kept), which checks
        every row and fixes :attr:`names`. Cached.

        Raises:
            ProtoembedError: a malformed row or cell (file, line, column), a file without any example,
                files sharing no sentence column.
        """
        if self._count is None:
            total = 0
            for stream in self.streams:
                n = sum(1 for _ in stream)
                if not n:
                    raise ProtoembedError(f"{stream.path}: no usable example ({stream.format} format)")
                total += n
            names = [name for name in self.streams[0].names if all(name in s.names for s in self.streams)]
            if not set(names) & SENTENCE_COLUMNS:
                described = "; ".join(f"{s.path} has {', '.join(s.names)}" for s in self.streams)
                raise ProtoembedError(
                    f"the files of one training corpus share no sentence column ({described}); "
                    "combine files with the same kind of examples"
                )
            self._names = tuple(names)
            self._count = total if self.max_examples is None else min(total, self.max_examples)
        return self._count

    def __len__(self) -> int:
        return self.count()

    @property
    def names(self) -> tuple[str, ...]:
        """The columns every file has (after :meth:`count`)."""
        self.count()
        assert self._names is not None
        return self._names

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """The examples in file order, each a ``{column: value}`` dict of :attr:`names`."""
        names = self.names
        left = len(self)
        for stream in self.streams:
            for example in stream:
                if not left:
                    return
                left -= 1
                yield {name: example[name] for name in names}

    def where(self) -> str:
        """The files, for messages."""
        return ", ".join(str(s.path) for s in self.streams)

    def summary(self) -> dict[str, Any]:
        """What ``training_log.jsonl`` records (as :meth:`Examples.summary`), with ``streamed: true``."""
        files = []
        for stream in self.streams:
            dropped = [name for name in stream.names if name not in self.names]
            files.append({**stream.source, **({"dropped_columns": dropped} if dropped else {})})
        return {"examples": len(self), "columns": list(self.names), "files": files, "streamed": True}
