"""The encode pipeline shared by every runtime: tokenise in a pool of threads while the forward runs.

:class:`BatchEncoder` holds what the loop needs from a model (its :class:`~protoembed.model.encoder.PromptEncoder`
for tokenisation and padding, and a *forward* callable from padded features to vectors), so the torch
:class:`~protoembed.model.embedder.Embedder` and the exported models
(:class:`~protoembed.model.export.runtime.ExportedEmbedder`) encode alike by composition: same input rows, same
batches, same order. :class:`Encodes` is the one ``encode`` method (its signature and its
documentation) that both offer on top of it.

:meth:`BatchEncoder.encode`, step by step:

1. blank texts are refused up front (their indexes named); identical texts are kept once;
2. the distinct texts are ordered longest first by their length in characters (a cheap stand-in for
   their token length) and cut into chunks of :data:`CHUNK_BATCHES` batches (one chunk: tokenised on
   the calling thread, as there is nothing to overlap);
3. a pool of ``tokenizer_workers`` threads tokenises the chunks (the fast tokenizer's Rust call releases
   the GIL; threads, not processes: nothing is forked), ahead of the one the forward is on (a bounded
   queue: at most ``prefetch`` chunks, and at most ``prefetch_bytes`` of padded features, each chunk
   counted at its rows x the model's position budget x :data:`FEATURE_BYTES`; one chunk ahead
   whatever its size), so the next batches are tokenised while the current ones run. Each
   worker sorts its chunk's rows by token length, runs identical rows once, cuts batches of at most
   ``batch_size`` rows and at most ``max_tokens_per_batch`` padded tokens (rows x longest row), and pads
   them (vectorised; pinned host memory when the model is on CUDA, copied without blocking);
4. this thread runs the forward on the batches, chunk after chunk in order, moves each batch's vectors
   to the host once (:meth:`BatchEncoder.to_host`; on CUDA a copy queued behind the forward, waited for
   after the next batch's forward is queued) and puts each vector at its text's place in a host array:
   the device holds the vectors of a batch or two, never those of the whole call; the vectors come back
   in the input order (``convert_to_tensor``: moved to the model's device at the end).

A row's vector does not depend on the rows it shares a batch with (to float rounding: padding), so the
vectors are the same whatever the pool size, the queue depth, the chunking or the token budget. The
truncation warning is logged once per call, for all chunks together.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from protoembed.core.errors import EmptySentenceError, ProtoembedError
from protoembed.core.progress import Progress
from protoembed.core.threads import single_threaded_tokenizers, usable_cores
from protoembed.inputs.checks import check_batch_size, check_count, check_sentences
from protoembed.inputs.prompts import apply_prompt, resolved_prompt
from protoembed.model.encoder import PromptEncoder, pad_rows
from protoembed.model.quantize import FLOAT32, check_vectors, quantize

logger = logging.getLogger(__name__)

#: Padded batch features (``input_ids``, ``attention_mask`` [, ``mask_index``]) -> vectors (B, D).
Forward = Callable[[dict[str, torch.Tensor]], torch.Tensor]

#: Batches per chunk (one task of the tokenizer pool; rows sorted by token length within it: the default
#: model on STS-B test at batch 64 pads 4.0% of its tokens at 32 batches, 3.5% when sorted whole), and the
#: fewest texts in a chunk.
CHUNK_BATCHES = 64
MIN_CHUNK_ROWS = 256
#: Most tokenizer threads by default (beyond that the forward, not the tokenizer, bounds a GPU's rate).
MAX_DEFAULT_WORKERS = 8
#: On the CPU the forward costs many times the tokenisation of a sentence (the default model: ~1.5k
#: sentences/s on 2 cores against ~25k/s for the tokenizer on one): one worker per this many cores.
CPU_CORES_PER_WORKER = 16
#: Bytes of padded features per token: the int64 ids and attention mask.
FEATURE_BYTES = 16
#: Padded features the tokenizer pool holds ahead of the forward, at most (bytes; pinned host memory on
#: CUDA): 256 MiB, where two chunks per worker held up to 1 GiB at batch 128 x 512 tokens on 16 cores.
PREFETCH_BYTES = 256 * 2**20
#: The name of the tokenizer threads (``protoembed-tokenize_0``, ...).
TOKENIZER_THREADS = "protoembed-tokenize"


def default_tokenizer_workers(device: torch.device | str) -> int:
    """Tokenizer threads for a model on ``device``: the cores the forward does not need.

    On the CPU the forward needs the cores (one worker per :data:`CPU_CORES_PER_WORKER`, at least one:
    1 on a 2-core host); on an accelerator the host's cores are free but one, which runs the forward
    (at most :data:`MAX_DEFAULT_WORKERS`)."""
    cores = len(usable_cores())
    if torch.device(device).type == "cpu":
        return max(1, min(MAX_DEFAULT_WORKERS, cores // CPU_CORES_PER_WORKER))
    return max(1, min(MAX_DEFAULT_WORKERS, cores - 1))


def tokenizer_pool(workers: int) -> ThreadPoolExecutor:
    """The pool of ``workers`` tokenizer threads (named ``protoembed-tokenize_N``) that
    :meth:`BatchEncoder.encode` runs chunks on and the server runs its requests' tokenisation on (the
    tokenizers' own threads off: :func:`single_threaded_tokenizers`)."""
    single_threaded_tokenizers()
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix=TOKENIZER_THREADS)


@functools.cache
def _warn_capped(requested: int, cores: int) -> None:
    """Log, once per process and value, that ``requested`` tokenizer threads were capped to ``cores``."""
    logger.warning(
        "tokenizer_workers %d is more than the %d usable cores: %d tokenizer threads run",
        requested,
        cores,
        cores,
    )


def check_pipeline_options(
    tokenizer_workers: Any, max_tokens_per_batch: Any
) -> tuple[int | None, int | None]:
    """``tokenizer_workers`` and ``max_tokens_per_batch``, each ``None`` or an integer of at least 1; the
    API's, the command line's (``--tokenizer-workers``) and the server's workers alike capped to the
    usable cores (:func:`~protoembed.core.threads.usable_cores`), with a warning logged once: more
    threads than cores only queue on them, and a setting written for a large machine still runs on a
    small one (as sentence-transformers and TEI run whatever count their host allows, never refusing it).

    Raises:
        ProtoembedError: one line naming the value."""
    workers = None if tokenizer_workers is None else check_count("tokenizer_workers", tokenizer_workers)
    cores = len(usable_cores())
    if workers is not None and workers > cores:
        _warn_capped(workers, cores)
        workers = cores
    budget = (
        None if max_tokens_per_batch is None else check_count("max_tokens_per_batch", max_tokens_per_batch)
    )
    return workers, budget


def check_truncate_dim(truncate_dim: Any, width: int) -> int | None:
    """``truncate_dim`` if it is ``None`` or an integer from 1 to ``width`` (the vectors' full width).

    Raises:
        ProtoembedError: one line naming the value and the range."""
    if truncate_dim is None:
        return None
    if isinstance(truncate_dim, bool) or not isinstance(truncate_dim, int) or not 1 <= truncate_dim <= width:
        raise ProtoembedError(
            f"truncate_dim must be from 1 to this model's {width} dimensions, got {truncate_dim!r}"
        )
    return truncate_dim


def truncate(vectors: torch.Tensor, truncate_dim: int | None, normalize: bool) -> torch.Tensor:
    """The cut of every runtime, the export's graph and the server: the first ``truncate_dim`` dimensions of
    each vector (``None``: all), then L2-normalised if ``normalize``, in that order, as
    text-embeddings-inference's ``core/src/infer.rs`` cuts the pooled vector before normalising and
    sentence-transformers' ``encode(truncate_dim=d, normalize_embeddings=True)`` does."""
    if truncate_dim is not None:
        vectors = vectors[..., :truncate_dim]
    return torch.nn.functional.normalize(vectors, dim=-1) if normalize else vectors


def budget_error(budget: int, length: int, where: str) -> ProtoembedError:
    """The one line of a token budget below a row's length (``where``: which row)."""
    return ProtoembedError(
        f"max_tokens_per_batch {budget} is below the length of {where} ({length} tokens after truncation): a "
        f"batch must hold one row; pass at least {length}"
    )


#: How :func:`budget_error` names the longest row a model may be sent (``serve`` and the commands' check
#: before the model loads; ``encode`` names the text it met).
LONGEST_ROW = "the longest row this model makes"


def longest_row(encoder: PromptEncoder) -> int:
    """The most tokens one of ``encoder``'s input rows holds: the sentence tokens it keeps
    (:meth:`~protoembed.model.encoder.PromptEncoder.sentence_budget`) and the special tokens or the
    template around them."""
    template = encoder.template_ids
    head, tail = encoder.specials if template is None else (template.head, template.tail)
    return encoder.sentence_budget(template, encoder.max_seq_length) + len(head) + len(tail)


def check_budget_holds_a_row(budget: int, encoder: PromptEncoder) -> None:
    """Refuse a token budget below :func:`longest_row`: a batch could not hold a row the model may be sent.

    Raises:
        ProtoembedError: :func:`budget_error`'s line."""
    longest = longest_row(encoder)
    if budget < longest:
        raise budget_error(budget, longest, LONGEST_ROW)


@dataclass
class _Batch:
    """One padded batch: ``rows`` (indexes of distinct texts: where its vectors go) and its features on
    the host (pinned when the model is on CUDA, so that they are copied without blocking)."""

    rows: np.ndarray
    features: dict[str, torch.Tensor]


@dataclass
class _Moved:
    """A batch's vectors on their way to the host: ``host`` (float32, pinned on CUDA) is complete once
    ``ready`` (a CUDA event recorded after the copy; ``None``: a synchronous copy) has happened."""

    host: torch.Tensor
    ready: Any = None

    def wait(self) -> np.ndarray:
        """The vectors as a numpy array, once the copy is done."""
        if self.ready is not None:
            self.ready.synchronize()
        return self.host.numpy()


@dataclass
class _Chunk:
    """A tokenised chunk: its batches; ``copies`` (distinct texts whose rows equal an earlier text's in
    the chunk: ``(copy, original)`` index arrays); the texts cut by truncation and the longest one's
    sentence tokens."""

    batches: list[_Batch]
    copies: tuple[np.ndarray, np.ndarray]
    truncated: np.ndarray
    longest: int


@dataclass
class BatchEncoder:
    """Sentences -> vectors through ``forward``, batch by batch (see the module docstring).

    Args:
        encoder: tokenisation (template, truncation, soft-prompt slots) and padding.
        forward: padded features on ``device`` -> vectors (B, ``dimension``), called in inference mode.
        dimension: width of ``forward``'s vectors (a ``truncate_dim`` keeps at most this many).
        device: where the features are moved and the output is gathered.
        normalized: ``forward`` already L2-normalises (then ``normalize=False`` is refused).
        chunk_rows: texts per chunk (``None``: :data:`CHUNK_BATCHES` batches, at least
            :data:`MIN_CHUNK_ROWS` texts).
        prefetch: chunks tokenised ahead of the forward, at most (``None``: two per worker).
        prefetch_bytes: padded features tokenised ahead of the forward, at most, counted as the module
            docstring says (:data:`PREFETCH_BYTES`); one chunk ahead whatever its size.
    """

    encoder: PromptEncoder
    forward: Forward
    dimension: int
    device: torch.device
    normalized: bool = False
    chunk_rows: int | None = None
    prefetch: int | None = None
    prefetch_bytes: int = PREFETCH_BYTES
    _pin: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self._pin = torch.device(self.device).type == "cuda"

    def encode(
        self,
        sentences: Sequence[str] | str,
        batch_size: int = 64,
        normalize: bool | None = None,
        show_progress_bar: bool | None = None,
        convert_to_tensor: bool = False,
        allow_empty: bool = False,
        *,
        tokenizer_workers: int | None = None,
        max_tokens_per_batch: int | None = None,
        progress: Callable[[int], Any] | None = None,
        truncate_dim: int | None = None,
    ) -> np.ndarray | torch.Tensor:
        """Encode sentences to vectors (arguments and result as :meth:`Encodes.encode`).

        ``progress``: called with the number of sentences done after each batch, instead of a bar.
        """
        extra_normalize = self.extra_normalize(normalize)
        truncate_dim = check_truncate_dim(truncate_dim, self.dimension)
        width = self.dimension if truncate_dim is None else truncate_dim
        single_threaded_tokenizers()  # a single chunk is tokenised on this thread, without the pool
        check_batch_size(batch_size)
        workers, budget = check_pipeline_options(tokenizer_workers, max_tokens_per_batch)
        workers = workers or default_tokenizer_workers(self.device)
        single = isinstance(sentences, str)
        texts = [sentences] if single else check_sentences(sentences)
        if not texts:
            empty = np.zeros((0, width), dtype=np.float32)
            return torch.from_numpy(empty).to(self.device) if convert_to_tensor else empty
        if not allow_empty:
            blank = [i for i, text in enumerate(texts) if not text.strip()]
            if blank:
                raise EmptySentenceError(blank)
        # identical texts run once: ``distinct`` in first-seen order, ``inverse`` maps every text to it
        first_seen: dict[str, int] = {}
        inverse = np.fromiter(
            (first_seen.setdefault(text, len(first_seen)) for text in texts), dtype=np.int64, count=len(texts)
        )
        distinct = list(first_seen)
        counts = np.bincount(inverse, minlength=len(distinct))
        order = np.argsort(
            -np.fromiter(map(len, distinct), dtype=np.int64, count=len(distinct)), kind="stable"
        )
        chunks = [order[lo:hi] for lo, hi in self._chunk_bounds(len(order), batch_size)]
        out = np.empty((len(distinct), width), dtype=np.float32)  # on the host, filled batch by batch
        if show_progress_bar is None:
            show_progress_bar = len(texts) > 1000
        truncated, longest = 0, 0
        bar = Progress(len(texts), show=bool(show_progress_bar) and progress is None)
        tick = progress or bar.update
        with bar, torch.inference_mode():
            job = functools.partial(self._tokenize_chunk, distinct, batch_size, budget, allow_empty)
            moving: deque[tuple[_Batch, _Moved]] = deque()  # batches on their way to the host

            def land(keep: int) -> None:
                """Put the vectors of all but the last ``keep`` moving batches in ``out``."""
                while len(moving) > keep:
                    done, vectors = moving.popleft()
                    out[done.rows] = vectors.wait()
                    tick(int(counts[done.rows].sum()))

            for chunk in self._pipeline(chunks, job, workers, texts, inverse, allow_empty):
                for batch in chunk.batches:
                    batch_vectors = self._run(batch.features, extra_normalize, truncate_dim)
                    moving.append((batch, self.to_host(batch_vectors)))
                    land(1)  # the batch before, whose copy was queued before this batch's forward
                land(0)  # the chunk's originals are on the host before its copies are made
                copy, original = chunk.copies
                if len(copy):
                    out[copy] = out[original]
                    tick(int(counts[copy].sum()))
                truncated += int(counts[chunk.truncated].sum())
                longest = max(longest, chunk.longest)
        self.encoder.log_truncation(truncated, len(texts), longest)
        if len(distinct) < len(texts):
            out = out[inverse]
        result = torch.from_numpy(out).to(self.device) if convert_to_tensor else out
        return result[0] if single else result

    # ------------------------------------------------------------------ the pipeline
    def _chunk_bounds(self, rows: int, batch_size: int) -> list[tuple[int, int]]:
        """``(start, stop)`` of each chunk of ``rows`` texts: :attr:`chunk_rows` each when set; else
        :data:`CHUNK_BATCHES` batches (at least :data:`MIN_CHUNK_ROWS` texts) each, on an accelerator
        growing to that from two batches (doubling), so the forward starts after a small chunk while
        the later ones sort their rows by token length over many batches (less padding). On the CPU the
        forward takes far longer than the first chunk's tokenisation, so the chunks are whole from the
        start."""
        cap = self.chunk_rows or max(MIN_CHUNK_ROWS, CHUNK_BATCHES * batch_size)
        size = cap if self.chunk_rows or torch.device(self.device).type == "cpu" else min(cap, 2 * batch_size)
        bounds, start = [], 0
        while start < rows:
            bounds.append((start, min(rows, start + size)))
            start, size = start + size, min(cap, 2 * size)
        return bounds

    def _pipeline(
        self,
        chunks: list[np.ndarray],
        job: Callable[[np.ndarray], _Chunk],
        workers: int,
        texts: list[str],
        inverse: np.ndarray,
        allow_empty: bool,
    ) -> Iterator[_Chunk]:
        """The tokenised ``chunks`` in order: ``job`` run by ``workers`` threads, at most ``prefetch``
        chunks and ``prefetch_bytes`` (:meth:`chunk_bytes`) ahead of the one handed out, at least one
        (one chunk alone is tokenised on this thread: nothing to
        overlap). A worker's failure ends the pipeline with one line naming the chunk (see
        :meth:`_failed`); the pool is shut down whatever happens (queued chunks cancelled)."""
        if len(chunks) == 1:
            try:
                yield job(chunks[0])
            except Exception as err:
                raise self._failed(err, 0, chunks, texts, inverse, allow_empty) from err
            return
        most = max(1, self.prefetch or 2 * workers)
        sizes = [self.chunk_bytes(len(rows)) for rows in chunks]
        pool = tokenizer_pool(workers)
        pending: deque[Future] = deque()
        try:
            submitted = held = 0  # held: the bytes of the chunks submitted ahead of the one handed out
            for number in range(len(chunks)):
                if number < submitted:
                    held -= sizes[number]  # handed out now, no longer ahead
                while submitted < len(chunks) and (  # this one, then one more, then what the bounds allow
                    submitted <= number + 1
                    or (submitted - number <= most and held + sizes[submitted] <= self.prefetch_bytes)
                ):
                    pending.append(pool.submit(job, chunks[submitted]))
                    held += sizes[submitted] if submitted > number else 0
                    submitted += 1
                future = pending.popleft()
                try:
                    chunk = future.result()
                except Exception as err:
                    raise self._failed(err, number, chunks, texts, inverse, allow_empty) from err
                yield chunk
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def chunk_bytes(self, rows: int) -> int:
        """The most bytes of padded features a chunk of ``rows`` texts can hold: every row at the model's
        position budget (:data:`FEATURE_BYTES` per token)."""
        return rows * self.encoder.position_budget * FEATURE_BYTES

    def _failed(
        self,
        err: Exception,
        number: int,
        chunks: list[np.ndarray],
        texts: list[str],
        inverse: np.ndarray,
        allow_empty: bool,
    ) -> ProtoembedError:
        """The one-line error of chunk ``number``'s tokenisation failing with ``err``: a user error as it
        is (a tokenless text: :class:`EmptySentenceError` naming every such text of the input), any other
        naming the chunk and its texts' input indexes."""
        if isinstance(err, EmptySentenceError):
            empty = self.encoder.raw_ids(texts)
            return EmptySentenceError([i for i, ids in enumerate(empty) if not ids])
        if isinstance(err, ProtoembedError):
            return err
        inputs = np.flatnonzero(np.isin(inverse, chunks[number]))
        detail = " ".join(str(err).split()) or "no message"
        return ProtoembedError(
            f"tokenizing chunk {number + 1} of {len(chunks)} failed (sentences {inputs.min()} to {inputs.max()}"
            f" of the input, {len(inputs)} in the chunk): {type(err).__name__}: {detail}"
        )

    def _tokenize_chunk(
        self, distinct: list[str], batch_size: int, budget: int | None, allow_empty: bool, rows: np.ndarray
    ) -> _Chunk:
        """One chunk (indexes of ``distinct`` texts) -> its padded batches (a pool worker's task; see the
        module docstring). Raises :class:`EmptySentenceError` (indexes within the chunk) for a text without
        tokens unless ``allow_empty``, and the :func:`budget_error` of a row longer than ``budget``."""
        encoder = self.encoder
        sentence_ids = encoder.raw_ids([distinct[i] for i in rows])
        lengths = np.fromiter(map(len, sentence_ids), dtype=np.int64, count=len(sentence_ids))
        if not allow_empty and not lengths.all():
            raise EmptySentenceError(np.flatnonzero(lengths == 0).tolist())
        limit = encoder.sentence_budget(encoder.template_ids, encoder.max_seq_length)
        cut = lengths > limit
        ids, masks = encoder.rows(sentence_ids)
        # identical rows (texts that differ only in case for an uncased tokenizer...) run once
        seen: dict[tuple[int, ...], int] = {}
        keep: list[int] = []
        copy: list[int] = []
        original: list[int] = []
        for k, row in enumerate(ids):
            key = (*row, -1 if masks is None else masks[k])
            first = seen.setdefault(key, k)
            if first == k:
                keep.append(k)
            else:
                copy.append(int(rows[k]))
                original.append(int(rows[first]))
        sizes = np.fromiter((len(ids[k]) for k in keep), dtype=np.int64, count=len(keep))
        keep_arr = np.asarray(keep, dtype=np.int64)[np.argsort(-sizes, kind="stable")]
        sizes = -np.sort(-sizes, kind="stable")
        batches: list[_Batch] = []
        start = 0
        pad = encoder.pad_id
        while start < len(keep_arr):
            width = int(sizes[start])  # the batch's longest row: its padded length
            if budget is not None and width > budget:
                text = int(rows[keep_arr[start]])
                raise budget_error(budget, width, f"text {distinct[text][:40]!r}")
            count = batch_size if budget is None else min(batch_size, budget // width)
            members = keep_arr[start : start + count]
            input_ids, attention = pad_rows([ids[k] for k in members], pad)
            features = {
                "input_ids": torch.from_numpy(input_ids),
                "attention_mask": torch.from_numpy(attention),
            }
            if masks is not None:
                features["mask_index"] = torch.tensor([masks[k] for k in members], dtype=torch.long)
            features = {name: self._host(value) for name, value in features.items()}
            batches.append(_Batch(rows[members], features))
            start += len(members)
        longest = int(lengths[cut].max()) if cut.any() else 0
        return _Chunk(
            batches, (np.asarray(copy, np.int64), np.asarray(original, np.int64)), rows[cut], longest
        )

    def _host(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` as the host side of a copy to :attr:`device`: pinned for CUDA (copied without
        blocking), as it is otherwise."""
        return tensor.pin_memory() if self._pin else tensor

    def to_host(self, vectors: torch.Tensor) -> _Moved:
        """One batch's vectors (B, D) moved to the host, the one move of each batch in :meth:`encode`:
        on CUDA queued into pinned memory behind the forward (the host waits for it only after queuing
        the next batch's forward), elsewhere a plain copy (none on the CPU). The device thus holds a
        batch's vectors, never the call's."""
        if vectors.device.type != "cuda":
            return _Moved(vectors.detach().to("cpu", torch.float32))
        host = torch.empty(vectors.shape, dtype=torch.float32, pin_memory=True)
        host.copy_(vectors, non_blocking=True)
        ready = torch.cuda.Event()
        ready.record()
        return _Moved(host, ready)

    def _run(
        self, features: dict[str, torch.Tensor], extra_normalize: bool, truncate_dim: int | None = None
    ) -> torch.Tensor:
        """One padded batch on the host -> its vectors (B, D) fp32 on :attr:`device` (features copied
        without blocking: from pinned memory on CUDA), cut to ``truncate_dim`` (:func:`truncate`;
        normalised again after a cut when ``forward`` normalises)."""
        vectors = self.forward({k: v.to(self.device, non_blocking=True) for k, v in features.items()}).float()
        cut = truncate_dim is not None and truncate_dim < vectors.shape[-1]
        # forward already normalises when the model itself does: again only after a cut
        return truncate(vectors, truncate_dim, extra_normalize or (cut and self.normalized))

    # ------------------------------------------------------------------ pieces others use
    def extra_normalize(self, normalize: bool | None) -> bool:
        """Whether :meth:`encode` L2-normalises ``forward``'s vectors for its ``normalize`` argument: only
        for ``True`` on a model whose forward does not already (``None``: the model's own setting).

        Raises:
            ProtoembedError: ``normalize=False`` on a model whose forward normalises.
        """
        if normalize is False and self.normalized:
            raise ProtoembedError("this model normalises its vectors; normalize=False cannot undo it")
        return bool(normalize) and not self.normalized

    def tokenize(
        self, texts: list[str], allow_empty: bool = False
    ) -> tuple[list[list[int]], list[int] | None]:
        """The encoder's input rows of ``texts`` (:meth:`~protoembed.model.encoder.PromptEncoder.tokenize_ids`:
        template, truncation to ``max_seq_length``), unpadded.

        Raises:
            EmptySentenceError: sentences with no token (their indexes), unless ``allow_empty``.
        """
        return self.encoder.tokenize_ids(texts, allow_empty)

    def pad(self, ids: list[list[int]], masks: list[int] | None = None) -> dict[str, torch.Tensor]:
        """One batch of input rows (from :meth:`tokenize`) padded into features on the host
        (:meth:`~protoembed.model.encoder.PromptEncoder.collate`; pinned when the model is on CUDA)."""
        return {name: self._host(value) for name, value in self.encoder.collate(ids, masks).items()}

    def vectors(
        self,
        ids: list[list[int]] | dict[str, torch.Tensor],
        masks: list[int] | None = None,
        extra_normalize: bool = False,
    ) -> torch.Tensor:
        """One batch -> its vectors (B, D), fp32 on :attr:`device`: input rows (from :meth:`tokenize`,
        padded by :meth:`pad`) or features :meth:`pad` made already, run through ``forward`` in inference
        mode, L2-normalised if ``extra_normalize`` (:meth:`extra_normalize`)."""
        features = ids if isinstance(ids, dict) else self.pad(ids, masks)
        with torch.inference_mode():
            return self._run(features, extra_normalize)


class Encodes:
    """The ``encode`` of every model type (the torch :class:`~protoembed.model.embedder.Embedder` and the
    exports), written once: the class provides ``prompts``, :meth:`batch_encoder` and
    :meth:`encoding`."""

    prompts: dict[str, str]
    #: the prompt :meth:`encode` puts before every input when neither ``prompt_name`` nor ``prompt`` is
    #: given (a name of :attr:`prompts`; ``None``: none), as sentence-transformers applies its
    #: ``default_prompt_name``
    default_prompt_name: str | None = None
    #: the width :meth:`encode` cuts the vectors to when the call names none (``None``: the full vector),
    #: as sentence-transformers' ``truncate_dim``; a saved model's is read from its
    #: ``config_sentence_transformers.json``
    truncate_dim: int | None = None

    @property
    def pooled_dimension(self) -> int:
        """Width of the model's vectors, before any cut."""
        raise NotImplementedError

    @property
    def dimension(self) -> int:
        """Width of the vectors :meth:`encode` gives by default: :attr:`truncate_dim`, else
        :attr:`pooled_dimension`."""
        return self.pooled_dimension if self.truncate_dim is None else self.truncate_dim

    def batch_encoder(self) -> BatchEncoder:
        """The encode pipeline over this model's tokenisation and forward."""
        raise NotImplementedError

    def encoding(self, precision: str | None) -> contextlib.AbstractContextManager[None]:
        """The state :meth:`encode` runs in (eval mode, ``precision`` for this call; ``None``: the
        model's own), restored afterwards.

        Raises:
            ProtoembedError: a precision this model cannot run (before anything is tokenised)."""
        raise NotImplementedError

    def encode(
        self,
        sentences: Sequence[str] | str,
        batch_size: int = 64,
        normalize: bool | None = None,
        show_progress_bar: bool | None = None,
        convert_to_tensor: bool = False,
        allow_empty: bool = False,
        precision: str | None = None,
        prompt_name: str | None = None,
        prompt: str | None = None,
        *,
        tokenizer_workers: int | None = None,
        max_tokens_per_batch: int | None = None,
        progress: Callable[[int], Any] | None = None,
        truncate_dim: int | None = None,
        vectors: str = FLOAT32,
        ranges: np.ndarray | None = None,
    ) -> np.ndarray | torch.Tensor:
        """Encode sentences to vectors.

        Identical texts run once (and rows that tokenise alike, within a chunk); a pool of threads
        tokenises the next chunks while the forward runs; batches are formed from rows of similar token
        length (longest first) and padded to the batch's own length; the forward runs in inference mode
        (see :mod:`protoembed.model.batching`). The vectors do not depend on ``tokenizer_workers`` nor on
        ``max_tokens_per_batch`` (to float rounding).

        Args:
            sentences: the sentences (a single string gives a single vector).
            batch_size: sentences per forward pass, at most.
            normalize: L2-normalise the vectors (default: the model's own setting).
            show_progress_bar: report progress on stderr (:class:`~protoembed.core.progress.Progress`: a bar
                with sentences/s on a terminal, a line every 10 s elsewhere; default: for more than 1000
                sentences).
            convert_to_tensor: return a torch tensor on the model's device instead of numpy.
            allow_empty: encode empty sentences as the bare template instead of raising an error.
            precision: ``fp32``, ``bf16`` or ``fp16`` (CUDA only) for this call (default: the model's
                own); an export runs in its own precision only.
            prompt_name: put the model's prompt of that name (``prompts``) before each sentence
                (``query`` / ``document`` when the model has none: no prompt, not the default prompt;
                ``None`` with no ``prompt``: :attr:`default_prompt_name`'s), the one prompt applied
                (:func:`~protoembed.inputs.prompts.resolved_prompt`).
            prompt: put this text before each sentence instead (``""``: no prompt at all).
            tokenizer_workers: threads that tokenise, at most the usable cores (more: capped, with a
                warning; :func:`check_pipeline_options`) (default: the cores the forward does not need,
                :func:`default_tokenizer_workers`: 1 on a CPU of up to 31 cores; on CUDA, the cores but
                one, at most 8).
            max_tokens_per_batch: padded tokens (rows x longest row) per forward pass, at most, besides
                ``batch_size`` (default: no token budget), so that a batch of long passages costs what
                a batch of short queries does.
            progress: called with the number of sentences done after each batch (then no bar is shown).
        Raises:
            ProtoembedError: a non-string input (named by its index), a ``truncate_dim`` outside 1 to the
                model's width, ``batch_size``,
                ``tokenizer_workers`` or ``max_tokens_per_batch`` below 1, a token budget below a row's
                length (named), an unknown ``prompt_name`` or both prompt arguments, a precision the model
                cannot run here (fp16 without CUDA), a tokenizer worker's failure (the chunk and its
                sentences named), or (:class:`~protoembed.core.errors.EmptySentenceError`) empty sentences
                without ``allow_empty``.
        """
        check_vectors(vectors)
        sentences = apply_prompt(sentences, resolved_prompt(self, prompt_name, prompt))
        with self.encoding(precision):
            embeddings = self.batch_encoder().encode(
                sentences,
                batch_size,
                normalize,
                show_progress_bar,
                convert_to_tensor,
                allow_empty,
                tokenizer_workers=tokenizer_workers,
                max_tokens_per_batch=max_tokens_per_batch,
                progress=progress,
                truncate_dim=self.truncate_dim if truncate_dim is None else truncate_dim,
            )
        if vectors == FLOAT32:
            return embeddings
        stored = quantize(embeddings.cpu().numpy() if convert_to_tensor else embeddings, vectors, ranges)
        return torch.from_numpy(stored).to(embeddings.device) if convert_to_tensor else stored
