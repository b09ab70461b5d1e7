"""Dynamic batching: the input rows of concurrent requests run together, on one inference thread.

A request's sentences are tokenised by the model's :class:`~protoembed.model.batching.BatchEncoder` (its
:meth:`~protoembed.model.batching.BatchEncoder.tokenize`: the template and the truncation of ``encode``) on a
thread of the tokenizer pool (:func:`~protoembed.model.batching.tokenizer_pool`; never on the inference
thread) and handed to :meth:`DynamicBatcher.submit` as rows; it gets a :class:`concurrent.futures.Future` of their
vectors, in its order. The inference thread waits until rows are queued, then up to ``max_wait_ms`` after
the oldest one arrived (less once the queued rows hold ``max_batch_tokens`` tokens), and cuts a batch:

- rows of similar length, as ``encode`` sorts them: the oldest queued rows (:data:`CANDIDATES` at most)
  sorted longest first, and of those a run of neighbours that holds the oldest queued row (so none waits
  for ever) and stays within ``max_batch_tokens`` padded tokens (longest row x rows; a row longer than
  that runs alone);
- run by :meth:`~protoembed.model.batching.BatchEncoder.vectors` (padding: one vectorised numpy step, a few
  microseconds against the forward's milliseconds, so it stays here; the model's forward; the
  normalisation ``encode`` applies), so a row's vector is the one ``encode`` gives it, whatever rows it
  shared the batch with (to float rounding);
- each vector written to its request; a request whose rows are all done gets its result. A failed
  forward fails the requests of that batch.

The rows may also be a cross-encoder's (query, text) pairs
(:class:`~protoembed.model.cross_encoder.Reranker`: one logit per row, its first segment's length as the
row's extra number): the batcher runs whatever offers :class:`Rows`.

What needs the model besides a batch of rows (the token vectors of ``/embed_all``) is a job
(:meth:`DynamicBatcher.call`), run on the same thread between two batches: one thread runs the model.

:meth:`DynamicBatcher.close` stops taking rows, runs those queued and ends the thread.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

logger = logging.getLogger(__name__)

#: How many of the oldest queued rows a batch is cut from (sorted by length each time).
CANDIDATES = 4096


class Rows(Protocol):
    """What the batcher runs (:class:`~protoembed.model.batching.BatchEncoder`,
    :class:`~protoembed.model.cross_encoder.Reranker`): ``dimension`` outputs per row, and ``vectors``
    of a batch of rows with their extra numbers (``masks``) -> (B, ``dimension``) on the model's device."""

    dimension: int

    def extra_normalize(self, normalize: bool | None) -> bool: ...

    def vectors(
        self, ids: list[list[int]], masks: list[int] | None = None, extra_normalize: bool = False
    ) -> Any: ...


@dataclass
class BatchStats:
    """What one forward pass held: ``rows``, ``requests`` (whose rows they were), ``tokens`` (real),
    ``padded_tokens`` (longest row x rows) and ``seconds`` (padding, forward and copying out)."""

    rows: int
    requests: int
    tokens: int
    padded_tokens: int
    seconds: float


@dataclass(eq=False)
class _Request:
    """One submitted request: its vectors so far and how many rows are left."""

    vectors: np.ndarray
    left: int
    future: Future = field(default_factory=Future)


@dataclass(eq=False)
class _Row:
    request: _Request
    index: int  # in the request
    ids: list[int]
    mask: int | None
    arrival: float
    order: int  # arrival rank: ties of length keep arrival order
    taken: bool = False  # in a batch already


class QueueFull(Exception):
    """A request refused because the queue holds too many tokens (``queued``: how many)."""

    def __init__(self, queued: int) -> None:
        super().__init__(f"{queued} tokens queued")
        self.queued = queued


class DynamicBatcher:
    """The inference thread and its queue of rows (see the module docstring).

    Args:
        encoder: the model's encode loop (:meth:`protoembed.Embedder.batch_encoder`) or a
            :class:`~protoembed.model.cross_encoder.Reranker`: its ``vectors`` runs a batch.
        max_batch_tokens: padded tokens (longest row x rows) of one batch at most.
        max_wait_ms: how long the oldest queued row waits for more rows before its batch runs.
        normalize: as ``encode``'s argument (``None``: the model's own setting).
        observe: called on the inference thread after each batch with its :class:`BatchStats`.
    """

    def __init__(
        self,
        encoder: Rows,
        max_batch_tokens: int,
        max_wait_ms: float,
        normalize: bool | None = None,
        observe: Callable[[BatchStats], None] | None = None,
    ) -> None:
        self.encoder = encoder
        self.max_batch_tokens = int(max_batch_tokens)
        self.max_wait = float(max_wait_ms) / 1000.0
        self.extra_normalize = encoder.extra_normalize(normalize)
        self.observe = observe
        self._queue: deque[_Row] = deque()  # arrival order; rows already in a batch leave it lazily
        self._queued = 0  # rows waiting for a batch
        self._tokens = 0  # and their tokens
        self._cond = threading.Condition()
        self._closing = False
        self._counter = itertools.count()
        self._thread: threading.Thread | None = None
        self._jobs: deque[tuple[Callable[[], object], Future]] = deque()

    @property
    def depth(self) -> int:
        """Rows queued, not yet in a batch."""
        return self._queued

    def start(self) -> None:
        """Start the inference thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="protoembed-batcher", daemon=True)
            self._thread.start()

    @property
    def queued_tokens(self) -> int:
        """Tokens of the rows queued, not yet in a batch."""
        return self._tokens

    def submit(
        self, ids: list[list[int]], masks: list[int] | None = None, max_queued_tokens: int | None = None
    ) -> Future:
        """Queue one request's input rows (from :meth:`BatchEncoder.tokenize`); returns the future of its
        vectors, a float32 array (len(ids), D) in the order of ``ids``.

        Raises:
            QueueFull: the rows would take the queued tokens over ``max_queued_tokens`` (an empty queue
                takes any request, so one larger than the limit still runs).
            RuntimeError: the batcher is closing.
        """
        request = _Request(np.empty((len(ids), self.encoder.dimension), dtype=np.float32), len(ids))
        if not ids:
            request.future.set_result(request.vectors)
            return request.future
        now = time.monotonic()
        with self._cond:
            if self._closing:
                raise RuntimeError("the server is shutting down")
            tokens = sum(map(len, ids))
            if max_queued_tokens is not None and self._tokens and self._tokens + tokens > max_queued_tokens:
                raise QueueFull(self._tokens)
            for i, row in enumerate(ids):
                mask = None if masks is None else masks[i]
                self._queue.append(_Row(request, i, row, mask, now, next(self._counter)))
            self._queued += len(ids)
            self._tokens += tokens
            self._cond.notify()
        return request.future

    def call(self, job: Callable[[], object]) -> Future:
        """Run ``job`` on the inference thread between two batches; returns the future of its result.

        Raises:
            RuntimeError: the batcher is closing.
        """
        future: Future = Future()
        with self._cond:
            if self._closing:
                raise RuntimeError("the server is shutting down")
            self._jobs.append((job, future))
            self._cond.notify()
        return future

    def close(self) -> None:
        """Take no more rows, run those queued, and wait for the inference thread to end."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()

    # ------------------------------------------------------------ the inference thread
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queued and not self._jobs and not self._closing:
                    self._cond.wait()
                job = self._jobs.popleft() if self._jobs else None
            if job is not None:
                _run_job(*job)
                continue
            with self._cond:
                if not self._queued:
                    if self._jobs:
                        continue
                    return  # closing, nothing left
                deadline = self._queue[0].arrival + self.max_wait
                while not self._closing and self._tokens < self.max_batch_tokens:  # not a full batch yet
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                batch = self._cut()
            self._run_batch(batch)

    def _cut(self) -> list[_Row]:
        """Take the next batch off the queue (longest first, of the oldest :data:`CANDIDATES` rows; see
        the module docstring)."""
        candidates = list(itertools.islice((row for row in self._queue if not row.taken), CANDIDATES))
        ranked = sorted(candidates, key=lambda row: (-len(row.ids), row.order))
        oldest = ranked.index(candidates[0])
        lo, hi = oldest, oldest + 1
        budget = self.max_batch_tokens
        while hi < len(ranked) and len(ranked[lo].ids) * (hi + 1 - lo) <= budget:
            hi += 1  # shorter rows: the padded length stays
        while lo > 0 and len(ranked[lo - 1].ids) * (hi - lo + 1) <= budget:
            lo -= 1  # a longer row: the batch pads to it
        batch = ranked[lo:hi]
        for row in batch:
            row.taken = True
        self._queued -= len(batch)
        self._tokens -= sum(len(row.ids) for row in batch)
        while self._queue and self._queue[0].taken:
            self._queue.popleft()
        return batch

    def _run_batch(self, batch: list[_Row]) -> None:
        batch = [row for row in batch if not row.request.future.done()]  # cancelled or failed already
        if not batch:
            return
        requests = {id(row.request): row.request for row in batch}
        start = time.perf_counter()
        try:
            masks = None if batch[0].mask is None else [row.mask for row in batch]
            vectors = self.encoder.vectors([row.ids for row in batch], masks, self.extra_normalize)
            vectors = vectors.cpu().numpy()
        except Exception as err:  # the requests of this batch fail, the server goes on
            logger.exception("a batch of %d rows failed", len(batch))
            for request in requests.values():
                _settle(request.future, error=err)
            return
        for row, vector in zip(batch, vectors):
            row.request.vectors[row.index] = vector
            row.request.left -= 1
            if row.request.left == 0:
                _settle(row.request.future, result=row.request.vectors)
        if self.observe is not None:
            tokens = sum(len(row.ids) for row in batch)
            padded = len(batch[0].ids) * len(batch)
            try:
                self.observe(
                    BatchStats(len(batch), len(requests), tokens, padded, time.perf_counter() - start)
                )
            except Exception:  # a failing observer must not stop the inference thread
                logger.exception("observing a batch failed")


def _run_job(job: Callable[[], object], future: Future) -> None:
    """Run one job of :meth:`DynamicBatcher.call` into its future (its error too)."""
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = job()
    except Exception as err:  # the job's request fails, the server goes on
        _settle(future, error=err)
    else:
        _settle(future, result=result)


def _settle(future: Future, result: object = None, error: BaseException | None = None) -> None:
    """Set a future's result or error unless it is done already (cancelled by a client that left)."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
    except InvalidStateError:
        pass
