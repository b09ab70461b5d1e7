"""The model behind every route (text-embeddings-inference's ``core/src/infer.rs``): one tokenizer pool,
one :class:`~protoembed.serving.batcher.DynamicBatcher` and the model's pooled forward, which each
dialect's routes (:mod:`protoembed.serving.openai_api`, :mod:`protoembed.serving.tei_api`) call.

The batcher runs the model's pooled vectors before the model's own normalisation; :meth:`Infer.embed`
normalises them as the request asks (``None``: as ``encode`` does, the model's own setting), so
``normalize: false`` on ``/embed`` is the pooled vector of a model whose modules end in ``Normalize``, as
text-embeddings-inference answers it (an export whose graph normalises cannot give it).

A cross-encoder (:class:`~protoembed.model.cross_encoder.Reranker`) is served as text-embeddings-inference
serves a reranker: :meth:`Infer.rerank` queues each (query, text) pair as one row on the same batcher,
within the same limits, and the embedding answers are refused (TEI's Backend error "Model is not an
embedding model").
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
import torch

from protoembed.core.errors import EmptySentenceError, ProtoembedError
from protoembed.inputs.prompts import resolved_prompt
from protoembed.model.batching import (
    BatchEncoder,
    budget_error,
    check_budget_holds_a_row,
    check_pipeline_options,
    default_tokenizer_workers,
    longest_row,
    tokenizer_pool,
)
from protoembed.model.batching import truncate as cut_vectors  # embed's parameter is named truncate
from protoembed.model.cross_encoder import Reranker
from protoembed.model.encoder import PromptEncoder
from protoembed.model.export.runtime import ExportedEmbedder
from protoembed.model.protocol import SentenceEmbedder
from protoembed.serving.batcher import DynamicBatcher, QueueFull
from protoembed.serving.errors import APIError
from protoembed.serving.inputs import (
    Inputs,
    check_chars,
    check_length,
    parse_inputs,
    sentence_ids_of,
    too_long,
)
from protoembed.serving.metrics import Metrics
from protoembed.serving.settings import ServeSettings

logger = logging.getLogger(__name__)

T = TypeVar("T")


def pooled_encoder(model: SentenceEmbedder) -> BatchEncoder:
    """``model``'s encode loop giving its pooled vectors before its own normalisation (its ``normalized``:
    the forward normalises all the same, an export whose graph ends in the normalisation)."""
    raw = copy.copy(model)  # shares the weights; its forward reads ``normalize``
    raw.normalize = False
    encoder = raw.batch_encoder()
    encoder.normalized = isinstance(model, ExportedEmbedder) and bool(model.config["normalize"])
    return encoder


def cut_start(encoder: PromptEncoder, sentence_ids: list[list[int]]) -> list[list[int]]:
    """``sentence_ids`` cut at their start to the sentence tokens a row of ``encoder`` holds
    (:meth:`~protoembed.model.encoder.PromptEncoder.sentence_budget`): the last ones are kept, as
    text-embeddings-inference's ``truncation_direction: Left`` keeps them."""
    budget = encoder.sentence_budget(encoder.template_ids, encoder.max_seq_length)
    return [ids[len(ids) - budget :] if len(ids) > budget else ids for ids in sentence_ids]


class Infer:
    """Tokenisation on a pool of threads, the rows of every request batched on one inference thread.

    Args:
        model: a loaded model (:func:`protoembed.load`; an export included), or a cross-encoder
            (:func:`~protoembed.model.cross_encoder.load_reranker`: :attr:`reranker` true).
        settings: the server's limits and batching.
        tokenizer_workers: the pool's threads (``None``:
            :func:`~protoembed.model.batching.default_tokenizer_workers` for the model's device).
    Raises:
        ProtoembedError: ``settings.max_batch_tokens`` below the longest row the model makes
            (:func:`~protoembed.model.batching.check_budget_holds_a_row`; a reranker's: its
            ``max_length``).

    Attributes: ``reranker`` (the model is a cross-encoder: :meth:`rerank` answers, the embedding answers
    are refused) and ``longest`` (the most tokens of a row the model makes, special tokens included:
    ``/info``'s ``max_input_length``), besides the arguments.
    """

    def __init__(
        self,
        model: SentenceEmbedder | Reranker,
        settings: ServeSettings,
        tokenizer_workers: int | None = None,
    ) -> None:
        if hasattr(model, "eval"):  # as encode runs it (no dropout), whatever mode it was given in
            model.eval()
        self.model, self.settings = model, settings
        #: the model is a cross-encoder: :meth:`rerank` answers, the embedding answers are refused
        self.reranker = isinstance(model, Reranker)
        self.encoder: BatchEncoder | Reranker
        if isinstance(model, Reranker):
            self.encoder, self.longest = model, model.max_length
            if settings.max_batch_tokens < model.max_length:
                raise budget_error(
                    settings.max_batch_tokens, model.max_length, "the longest row this model makes"
                )
        else:
            self.encoder = pooled_encoder(model)
            self.prompt_encoder = self.encoder.encoder
            check_budget_holds_a_row(settings.max_batch_tokens, self.prompt_encoder)
            self.longest = longest_row(self.prompt_encoder)
        self.in_flight = 0
        self.ready = False
        self.metrics = Metrics(lambda: self.batcher.depth, lambda: self.in_flight)
        self.batcher = DynamicBatcher(
            self.encoder, settings.max_batch_tokens, settings.max_wait_ms, observe=self.metrics.observe_batch
        )
        workers, _ = check_pipeline_options(tokenizer_workers, None)
        self.tokenizer_workers = workers or default_tokenizer_workers(model.device)
        self.pool = tokenizer_pool(self.tokenizer_workers)

    # ------------------------------------------------------------------ life
    async def start(self) -> None:
        """Start the inference thread and run one warm-up batch; ready from then on."""
        self.batcher.start()
        if isinstance(self.encoder, Reranker):
            rows = await self.on_pool(self.encoder.tokenize, "warm up", ["warm up"])
        else:
            rows = await self.on_pool(self.encoder.tokenize, ["warm up"])
        await asyncio.wrap_future(self.batcher.submit(*rows))
        self.ready = True

    def stop(self) -> None:
        """Not ready; the queued rows run, then the inference thread and the pool end."""
        self.ready = False
        self.batcher.close()
        self.pool.shutdown(wait=False, cancel_futures=True)

    def check_ready(self) -> None:
        """Raise ``unhealthy`` (503) until the warm-up batch ran, and after shutdown began."""
        if not self.ready:
            raise APIError("unhealthy", "the model is not ready yet (see /health)", code="not_ready")

    def check_embedding(self) -> None:
        """Refuse an embedding answer of a reranker (``model_type``: TEI's Backend 424 and its message)."""
        if self.reranker:
            raise APIError("model_type", "Model is not an embedding model")

    @contextmanager
    def admit(self) -> Iterator[None]:
        """One request that queues rows, within ``max_concurrent_requests``.

        Raises:
            APIError: ``overloaded`` (429) when that many are in flight already."""
        limit = self.settings.max_concurrent_requests
        if self.in_flight >= limit:
            raise APIError(
                "overloaded",
                f"{limit} requests are in flight, the most this server takes; retry later",
                code="rate_limit_exceeded",
            )
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1

    # ------------------------------------------------------------------ inputs
    async def on_pool(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` on a tokenizer thread."""
        return await asyncio.wrap_future(self.pool.submit(function, *args))

    def prompt(self, prompt_name: str | None) -> str:
        """The text put before each input: the model's prompt ``prompt_name`` (``None``: its default
        prompt, as ``encode`` and text-embeddings-inference apply it).

        Raises:
            APIError: ``invalid``: a name the model has no prompt for."""
        try:
            return resolved_prompt(self.model, prompt_name)
        except ProtoembedError as err:
            raise APIError("invalid", str(err), "prompt_name") from None

    def parse(self, value: Any, field: str) -> Inputs:
        """A request's inputs (:func:`~protoembed.serving.inputs.parse_inputs` within the server's limits)."""
        return parse_inputs(value, field, self.settings.max_inputs_per_request, self.settings.max_input_chars)

    def rows(
        self, inputs: Inputs, field: str, prompt: str, truncate: bool, left: bool = False
    ) -> tuple[list[list[int]], list[int] | None]:
        """The model's input rows of ``inputs`` (run on a tokenizer thread): texts with ``prompt`` before
        each, tokenised as ``encode`` tokenises them; token arrays read by
        :func:`~protoembed.serving.inputs.sentence_ids_of`; cut to what a row holds (at the end, or with
        ``left`` at the start: text-embeddings-inference's ``truncation_direction``), or without
        ``truncate`` refused when longer.

        Raises:
            APIError: an input too long without ``truncate``, a bad token array, an input without tokens.
        """
        encoder = self.prompt_encoder
        if inputs.ids is not None:
            sentence_ids = sentence_ids_of(encoder, inputs, field, prompt)
            if not truncate:
                check_length(encoder, sentence_ids, inputs.names, field)
            return encoder.rows(cut_start(encoder, sentence_ids) if left else sentence_ids)
        assert inputs.texts is not None
        texts = [prompt + text for text in inputs.texts] if prompt else inputs.texts
        try:
            if not truncate:  # every input fits or is refused here: no cut, at either end
                check_length(encoder, encoder.sentence_ids(texts, allow_empty=True), inputs.names, field)
            elif left:
                return encoder.rows(cut_start(encoder, encoder.sentence_ids(texts)))
            return self.encoder.tokenize(texts)
        except EmptySentenceError as err:
            raise APIError(
                "empty",
                f"{inputs.names[err.indexes[0]]} has no tokens: every input needs text to encode",
                field,
            ) from None

    async def queue(self, ids: list[list[int]], masks: list[int] | None) -> np.ndarray:
        """The pooled vectors of input rows, queued for the batcher within ``max_queued_tokens``.

        Raises:
            APIError: ``overloaded`` (the queue is full), ``unhealthy`` (shutting down), ``backend`` (the
                forward failed)."""
        tokens = sum(len(row) for row in ids)
        limit = self.settings.max_queued_tokens
        try:
            future = self.batcher.submit(ids, masks, max_queued_tokens=limit)
        except QueueFull as err:
            raise APIError(
                "overloaded",
                f"{err.queued} tokens are queued and this request adds {tokens}; the server queues at most "
                f"{limit}: retry later",
                code="rate_limit_exceeded",
            ) from None
        except RuntimeError as err:
            raise APIError("unhealthy", str(err), code="shutting_down") from None
        return await self.backend(future)

    async def backend(self, future: Any) -> Any:
        """The result of an inference thread's future; its failure a ``backend`` error (424, as
        text-embeddings-inference answers a failed inference)."""
        try:
            return await asyncio.wrap_future(future)
        except Exception as err:
            raise APIError("backend", f"inference failed: {type(err).__name__}: {err}") from None

    # ------------------------------------------------------------------ answers
    async def embed(
        self,
        value: Any,
        field: str,
        prompt_name: str | None = None,
        truncate: bool = True,
        normalize: bool | None = None,
        dimensions: int | None = None,
        *,
        left: bool = False,
    ) -> tuple[np.ndarray, int]:
        """``(vectors, tokens)`` of a request's inputs: float32 (N, D), cut to ``dimensions`` (``None``:
        the model's ``truncate_dim``, else the whole vector), then L2-normalised if ``normalize`` (``None``:
        the model's own setting, as ``encode``): text-embeddings-inference's order, and
        ``encode(truncate_dim=dimensions)``'s vectors (:func:`~protoembed.model.batching.truncate`); and
        the tokens of their rows. A long input is cut at its end, with ``left`` at its start (:meth:`rows`).

        Raises:
            APIError: any problem of the inputs, the queue or the forward; ``normalize: false`` on an
                export whose graph normalises, or ``dimensions`` outside 1 to the model's width
                (``invalid``).
        """
        self.check_ready()
        self.check_embedding()
        width = self.check_dimensions(dimensions)
        if normalize is False and self.encoder.normalized:
            raise APIError(
                "invalid",
                "this export's graph normalises its vectors, so normalize: false cannot be answered; serve "
                "the torch model for the pooled vectors",
                "normalize",
            )
        inputs = self.parse(value, field)
        prompt = self.prompt(prompt_name)
        with self.admit():
            ids, masks = await self.on_pool(self.rows, inputs, field, prompt, truncate, left)
            vectors = await self.queue(ids, masks)
        normalized = self.model.normalize if normalize is None else normalize
        vectors = cut_vectors(torch.from_numpy(vectors), width, bool(normalized)).numpy()
        return vectors, sum(len(row) for row in ids)

    async def token_vectors(
        self,
        value: Any,
        field: str,
        prompt_name: str | None = None,
        truncate: bool = True,
        *,
        left: bool = False,
    ) -> list[np.ndarray]:
        """Each input's token vectors (the backbone's last hidden states of its row, special tokens and
        template included: (T, H) float32), run on the inference thread; text-embeddings-inference's
        ``/embed_all``.

        Raises:
            APIError: as :meth:`embed`; a model whose runtime gives pooled vectors only (an export:
                ``backend``, as text-embeddings-inference answers a model without them).
        """
        self.check_ready()
        self.check_embedding()
        embed = getattr(self.model, "embed", None)
        if embed is None:
            raise APIError(
                "backend",
                f"this model runs on {self.model.runtime}, whose graph gives pooled vectors only; serve the "
                "torch model for token vectors",
            )
        inputs = self.parse(value, field)
        prompt = self.prompt(prompt_name)
        with self.admit():
            ids, masks = await self.on_pool(self.rows, inputs, field, prompt, truncate, left)
            features = self.encoder.pad(ids, masks)

            def job() -> list[np.ndarray]:
                with torch.inference_mode():
                    device = self.model.device
                    out = embed(
                        {k: v.to(device) for k, v in features.items()}, precision=self.model.precision
                    )
                states = out["token_embeddings"].float().cpu().numpy()
                return [states[i, : len(row)] for i, row in enumerate(ids)]

            try:
                future = self.batcher.call(job)
            except RuntimeError as err:
                raise APIError("unhealthy", str(err), code="shutting_down") from None
            return await self.backend(future)

    def check_dimensions(self, dimensions: int | None) -> int | None:
        """The width a request's vectors are cut to: ``dimensions`` when given (OpenAI's and
        text-embeddings-inference's field), else the model's ``truncate_dim`` (``None``: no cut).

        Raises:
            APIError: ``invalid``: ``dimensions`` outside 1 to the model's whole width (text-embeddings-
                inference's validation error)."""
        if dimensions is None:
            return self.model.truncate_dim
        width = self.model.pooled_dimension
        if isinstance(dimensions, bool) or not 1 <= dimensions <= width:
            raise APIError(
                "invalid",
                f"dimensions {dimensions}: this model's vectors have {width} dimensions; pass 1 to {width}",
                "dimensions",
            )
        return dimensions

    async def rerank(
        self,
        query: str,
        texts: list[str],
        truncate: bool = True,
        raw_scores: bool = False,
        *,
        left: bool = False,
    ) -> np.ndarray:
        """Each text's score against ``query`` (float32 (N,)), as text-embeddings-inference's reranker
        scores it (``core/src/infer.rs``): the model's one logit of the pair with ``raw_scores``, else its
        sigmoid, whatever activation the folder saved for ``CrossEncoder.predict``. A long pair is cut
        longest side first, at that side's end or with ``left`` at its start.

        Raises:
            APIError: a text or the query over ``max_input_chars``, a
                pair over the model's ``max_length`` tokens without ``truncate`` (``too_many``); the queue
                or the forward's problems (as :meth:`embed`).
        """
        self.check_ready()
        assert isinstance(self.model, Reranker), "the caller refuses /rerank on an embedding model"
        names = [f"texts[{i}]" for i in range(len(texts))]
        check_chars([query, *texts], ["query", *names], self.settings.max_input_chars, "texts")
        model = self.model
        with self.admit():
            ids, firsts = await self.on_pool(model.tokenize, query, texts, truncate, left)
            if not truncate:
                for name, row in zip(names, ids):
                    if len(row) > model.max_length:
                        raise too_long(f"the query with {name}", len(row), model.max_length, "texts")
            logits = (await self.queue(ids, firsts))[:, 0]
        if raw_scores:
            return logits
        return (1.0 / (1.0 + np.exp(-logits))).astype(np.float32)
