"""The embeddings server's FastAPI app: :func:`create_app` (a loaded model and :class:`ServeSettings` ->
the app).

Endpoints (the OpenAI embeddings API, so its clients work unchanged):

- ``POST /v1/embeddings``: ``{"input": str | [str, ...] | [int, ...] | [[int, ...], ...], "model": NAME, "encoding_format": "float" |
  "base64", "dimensions": D, "user": ...}`` -> ``{"object": "list", "data": [{"object": "embedding",
  "index": i, "embedding": [...] | "<base64 of little-endian float32>"}], "model": NAME, "usage":
  {"prompt_tokens": n, "total_tokens": n}}``. The vectors are those of ``model.encode(inputs)`` (float
  rounding apart): the same tokenisation (inputs longer than the model's ``max_seq_length`` tokens are
  truncated to it, as ``encode`` does; ``usage`` counts the tokens after truncation, the template's and
  the special tokens included) and the same forward, run by the
  :class:`~protoembed.serving.batcher.DynamicBatcher` with the rows of other requests. ``model`` may be
  left out; ``dimensions`` must be the model's width (the vectors cannot be shortened); ``user`` is
  ignored.
  Token ids are the served model's ids of a text alone (:mod:`protoembed.serving.inputs`).
- ``POST /embed`` and ``GET /info``: text-embeddings-inference's routes (``inputs``, ``normalize``,
  ``truncate``, ``prompt_name``) and its error shape ``{"error", "error_type"}``.
- ``GET /v1/models`` (and ``/v1/models/NAME``): the served model, in OpenAI's list shape.
- ``GET /health``: 503 until the model has run one warm-up batch, then 200.
- ``GET /metrics``: Prometheus text (:class:`~protoembed.serving.metrics.Metrics`).

With :attr:`ServeSettings.api_key`, ``/v1/*`` needs ``Authorization: Bearer KEY``. Every error is
OpenAI's JSON shape ``{"error": {"message", "type", "param", "code"}}``: 400 for a malformed or invalid
request (never 422), 401 without the key, 404 for another model's name (``model_not_found``), 413 for too
many or too long inputs or a body over ``max_request_bytes``, 429 (with ``Retry-After``) above
``max_concurrent_requests`` requests in flight or ``max_queued_tokens`` tokens queued, 503 while starting
or stopping, 500 only for a failure of the server itself.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import numpy as np
import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from protoembed.core.errors import EmptySentenceError, ProtoembedError
from protoembed.core.pydantic_util import problem
from protoembed.core.version import __version__
from protoembed.inputs.prompts import prompt_text
from protoembed.model.batching import check_pipeline_options, default_tokenizer_workers, tokenizer_pool
from protoembed.model.protocol import SentenceEmbedder
from protoembed.serving.batcher import DynamicBatcher, QueueFull
from protoembed.serving.inputs import InputError, id_rows, json_type, parse_inputs, too_long
from protoembed.serving.metrics import Metrics
from protoembed.serving.settings import ServeSettings

logger = logging.getLogger(__name__)

EMBEDDINGS = "/v1/embeddings"
#: text-embeddings-inference's routes (its clients' ``/embed`` and ``/info``).
TEI_EMBED, TEI_INFO = "/embed", "/info"
#: The endpoints counted by name in the metrics (any other path counts as ``other``).
ENDPOINTS = (EMBEDDINGS, TEI_EMBED, TEI_INFO, "/v1/models", "/health", "/metrics")
#: The routes that queue rows for the model: the in-flight and queued-token limits apply to them.
EMBEDDING_ROUTES = (EMBEDDINGS, TEI_EMBED)
#: text-embeddings-inference's ``error_type`` of each status it answers with.
TEI_ERROR_TYPES = {400: "empty", 413: "validation", 422: "tokenizer", 429: "overloaded", 503: "unhealthy"}
#: Seconds a 429 asks the client to wait (``Retry-After``): about one batch's time.
RETRY_AFTER_S = 1
#: Bodies larger than this are parsed on a worker thread, not the event loop.
PARSE_INLINE_BYTES = 256 * 1024


class APIError(Exception):
    """A request answered with an error: its HTTP ``status`` and OpenAI's error fields."""

    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        code: str | None = None,
        kind: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind

    def response(self, tei: bool = False) -> JSONResponse:
        """The JSON response ``{"error": {"message", "type", "param", "code"}}`` (with ``tei``,
        text-embeddings-inference's ``{"error", "error_type"}``); a 429 says when to retry
        (``Retry-After``)."""
        if tei:
            content: dict[str, Any] = {
                "error": self.message,
                "error_type": TEI_ERROR_TYPES.get(self.status, "validation"),
            }
        else:
            body = {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}
            content = {"error": body}
        headers = {"Retry-After": str(RETRY_AFTER_S)} if self.status == 429 else None
        return JSONResponse(content, status_code=self.status, headers=headers)


class EmbeddingRequest(BaseModel):
    """The body of ``POST /v1/embeddings`` (OpenAI's fields; others are ignored)."""

    input: Any = Field(
        description="a string, a list of strings, a token array or a list of token arrays (the served model's "
        "token ids)"
    )
    model: str | None = Field(None, description="the served model's name (default: it)")
    encoding_format: Literal["float", "base64"] = Field(
        "float", description="float: lists of numbers; base64: little-endian float32 bytes in base64"
    )
    dimensions: int | None = Field(None, description="the model's width, if given (no truncation)")
    user: Any = Field(None, description="ignored")


class EmbedRequest(BaseModel):
    """The body of text-embeddings-inference's ``POST /embed`` (its fields; others are ignored)."""

    inputs: Any = Field(description="a string, a list of strings, a token array or a list of token arrays")
    normalize: bool = Field(True, description="L2-normalise the vectors")
    truncate: bool | None = Field(False, description="cut inputs longer than the model takes (else 413)")
    truncation_direction: Literal["Right", "right"] = Field("Right", description="only Right: the end is cut")
    prompt_name: str | None = Field(None, description="the model's prompt of that name before each input")
    dimensions: int | None = Field(None, description="the model's width, if given (no truncation)")


def _read_body(raw: bytes, kind: type[BaseModel] = EmbeddingRequest) -> Any:
    """The JSON body of an embeddings request as ``kind``, whatever its content type says (``curl -d``
    sends a form's).

    Raises:
        APIError: 400 for text that is not JSON, JSON that is not an object, or a field of the wrong type.
    """
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as err:  # invalid UTF-8 included
        raise APIError(400, f"could not parse the JSON body of the request: {err}") from None
    if not isinstance(data, dict):
        raise APIError(400, f"the request body must be a JSON object, got {json_type(data)}")
    try:
        return kind.model_validate(data)
    except ValidationError as err:
        raise _validation_error(err.errors(include_url=False)) from None


_SCHEMA = EmbeddingRequest.model_json_schema()
_TEI_SCHEMA = EmbedRequest.model_json_schema()


def _validation_error(errors: Sequence[Any]) -> APIError:
    """A request validation error (pydantic's or FastAPI's list of errors) as a 400 in OpenAI's shape,
    naming the field."""
    error = errors[0]
    if error["type"] == "json_invalid":
        return APIError(
            400,
            f"could not parse the JSON body of the request: {error.get('ctx', {}).get('error', error['msg'])}",
        )
    loc = [str(part) for part in error["loc"] if part != "body"]
    if not loc:
        return APIError(400, f"the request body must be a JSON object, got {json_type(error.get('input'))}")
    return APIError(400, f"{'.'.join(loc)} {problem(error)}", loc[0])


def create_app(
    model: SentenceEmbedder, settings: ServeSettings | None = None, tokenizer_workers: int | None = None
) -> FastAPI:
    """The embeddings server of ``model`` (see the module docstring).

    Args:
        model: a loaded model (:func:`protoembed.load`: the torch :class:`~protoembed.Embedder` at its
            precision, or an export on ONNX Runtime or OpenVINO); its ``batch_encoder`` runs the batches.
        settings: names, limits and batching (default: :class:`ServeSettings`'s defaults;
            ``served_model_name`` ``None``: ``default``). ``host`` and ``port`` are for the caller that
            runs the app.
        tokenizer_workers: the threads that tokenise the requests (the pool of
            :mod:`protoembed.model.batching`; ``None``: :func:`~protoembed.model.batching.default_tokenizer_workers`
            for the model's device): neither the event loop nor the inference thread tokenises.
    Returns:
        the app; its lifespan starts the inference thread and runs one warm-up batch (``/health``: 200
        from then on), and on shutdown runs the rows still queued before the thread ends.
    """
    settings = settings or ServeSettings()
    name = settings.served_model_name or "default"
    if hasattr(model, "eval"):  # as encode runs it (no dropout), whatever mode it was given in
        model.eval()
    encoder = model.batch_encoder()
    created = int(time.time())
    metrics: Metrics
    batcher = DynamicBatcher(
        encoder,
        settings.max_batch_tokens,
        settings.max_wait_ms,
        observe=lambda stats: metrics.observe_batch(stats),
    )
    metrics = Metrics(lambda: batcher.depth, lambda: app.state.in_flight)
    workers, _ = check_pipeline_options(tokenizer_workers, None)
    tokenizer_threads = workers or default_tokenizer_workers(model.device)
    pool = tokenizer_pool(tokenizer_threads)

    async def tokenize(texts: list[str]) -> tuple[list[list[int]], list[int] | None]:
        """The input rows of ``texts``, tokenised on a thread of the pool."""
        return await asyncio.wrap_future(pool.submit(encoder.tokenize, texts))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        batcher.start()
        await asyncio.wrap_future(batcher.submit(*await tokenize(["warm up"])))
        app.state.ready = True
        logger.info("serving %s (%s runtime, %s)", name, model.runtime, model.precision)
        try:
            yield
        finally:
            app.state.ready = False
            await run_in_threadpool(batcher.close)
            pool.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="protoembed", version=__version__, lifespan=lifespan)
    app.state.ready = False
    app.state.settings = settings
    app.state.batcher = batcher
    app.state.metrics = metrics
    app.state.in_flight = 0

    def tei(request: Request) -> bool:
        return request.url.path in (TEI_EMBED, TEI_INFO)

    @app.exception_handler(APIError)
    async def api_error(request: Request, err: APIError) -> JSONResponse:
        return err.response(tei(request))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, err: RequestValidationError) -> JSONResponse:
        return _validation_error(err.errors()).response(tei(request))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, err: StarletteHTTPException) -> JSONResponse:
        code = "not_found" if err.status_code == 404 else None
        return APIError(
            err.status_code, f"{request.method} {request.url.path}: {err.detail}", code=code
        ).response(tei(request))

    @app.exception_handler(Exception)
    async def server_error(request: Request, err: Exception) -> JSONResponse:
        return APIError(500, f"the server failed: {type(err).__name__}: {err}", kind="server_error").response(
            tei(request)
        )

    @app.middleware("http")
    async def guard(request: Request, call_next: Any) -> Response:
        """Authentication and the in-flight limit before the body is read; the metrics of the answer."""
        path = request.url.path
        endpoint = next((e for e in ENDPOINTS if path == e or path.startswith(e + "/")), "other")
        start = time.perf_counter()
        response: Response | None = None
        limited = path in EMBEDDING_ROUTES
        tei_route = path in (TEI_EMBED, TEI_INFO)
        try:
            if settings.api_key is not None and (path.startswith("/v1/") or tei_route):
                response = _authorize(request.headers.get("authorization"), settings.api_key, tei_route)
            if response is None and limited and app.state.in_flight >= settings.max_concurrent_requests:
                response = APIError(
                    429,
                    f"{settings.max_concurrent_requests} requests are in flight, the most this server takes; retry later",
                    code="rate_limit_exceeded",
                    kind="rate_limit_error",
                ).response(tei_route)
            declared = request.headers.get("content-length", "")
            if (
                response is None
                and limited
                and declared.isdigit()
                and int(declared) > settings.max_request_bytes
            ):
                response = _too_large(int(declared), settings.max_request_bytes).response(tei_route)
            if response is None:
                if limited:
                    app.state.in_flight += 1
                try:
                    response = await call_next(request)
                finally:
                    if limited:
                        app.state.in_flight -= 1
        finally:
            status = 500 if response is None else response.status_code
            metrics.observe_request(endpoint, status, time.perf_counter() - start)
        return response

    @app.get("/health")
    async def health() -> JSONResponse:
        ready = app.state.ready
        return JSONResponse({"status": "ok" if ready else "starting"}, status_code=200 if ready else 503)

    @app.get("/metrics")
    async def metrics_text() -> Response:
        return Response(metrics.exposition(), media_type=metrics.content_type)

    def model_card() -> dict[str, Any]:
        return {"id": name, "object": "model", "created": created, "owned_by": "protoembed"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card()]}

    @app.get("/v1/models/{model_name:path}")
    async def one_model(model_name: str) -> dict[str, Any]:
        _check_model(model_name, name)
        return model_card()

    async def read_body(request: Request, kind: type[BaseModel]) -> Any:
        """The request's JSON body as ``kind``: at most ``max_request_bytes`` bytes (413 as soon as more
        arrive, before anything is parsed), parsed on a worker thread when large."""
        limit, size, chunks = settings.max_request_bytes, 0, []
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(size, limit, exact=False)
            chunks.append(chunk)
        raw = b"".join(chunks)
        if len(raw) > PARSE_INLINE_BYTES:
            return await run_in_threadpool(_read_body, raw, kind)
        return _read_body(raw, kind)

    def check_request(model_name: str | None, dimensions: int | None) -> None:
        if not app.state.ready:
            raise APIError(
                503, "the model is not ready yet (see /health)", code="not_ready", kind="server_error"
            )
        if model_name is not None:
            _check_model(model_name, name)
        if dimensions is not None and dimensions != model.dimension:
            raise APIError(
                400,
                f"dimensions {dimensions}: this model's vectors have {model.dimension} dimensions and cannot "
                f"be shortened; leave dimensions out or pass {model.dimension}",
                "dimensions",
            )

    async def embed(
        value: Any, field: str, prompt_name: str | None = None, truncate: bool = True
    ) -> tuple[np.ndarray, int]:
        """``(vectors, tokens)`` of a request's inputs (:mod:`protoembed.serving.inputs`): rows built on a
        tokenizer thread, with the model's prompt ``prompt_name`` (``None``: its default prompt, as
        ``encode`` applies it) and, without
        ``truncate``, texts longer than the model takes refused; queued for the batcher within the
        queued-token limit."""
        try:
            inputs = parse_inputs(value, field, settings.max_inputs_per_request, settings.max_input_chars)
            prompt = prompt_text(
                model.prompts, model.default_prompt_name if prompt_name is None else prompt_name
            )
        except InputError as err:
            raise APIError(err.status, err.message, field, err.code) from None
        except ProtoembedError as err:  # an unknown prompt name
            raise APIError(400, str(err), "prompt_name") from None

        def rows() -> tuple[list[list[int]], list[int] | None]:
            if inputs.ids is not None:
                return id_rows(encoder.encoder, inputs, prompt)
            texts = [prompt + text for text in inputs.texts] if prompt else inputs.texts
            if not truncate:
                too_long(encoder.encoder, texts, inputs.names)
            return encoder.tokenize(texts)

        try:
            ids, masks = await asyncio.wrap_future(pool.submit(rows))  # a tokenizer thread
        except InputError as err:
            raise APIError(err.status, err.message, field, err.code) from None
        except EmptySentenceError as err:
            raise APIError(
                400, f"{inputs.names[err.indexes[0]]} has no tokens: every input needs text to encode", field
            ) from None
        tokens = sum(len(row) for row in ids)
        try:
            future = batcher.submit(ids, masks, max_queued_tokens=settings.max_queued_tokens)
        except QueueFull as err:
            raise APIError(
                429,
                f"{err.queued} tokens are queued and this request adds {tokens}; the server queues at most "
                f"{settings.max_queued_tokens}: retry later",
                code="rate_limit_exceeded",
                kind="rate_limit_error",
            ) from None
        except RuntimeError as err:
            raise APIError(503, str(err), code="shutting_down", kind="server_error") from None
        return await asyncio.wrap_future(future), tokens

    @app.post(
        EMBEDDINGS, openapi_extra={"requestBody": {"content": {"application/json": {"schema": _SCHEMA}}}}
    )
    async def embeddings(request: Request) -> Response:
        body: EmbeddingRequest = await read_body(request, EmbeddingRequest)
        check_request(body.model, body.dimensions)
        vectors, tokens = await embed(body.input, "input")
        content = _response_body(vectors, body.encoding_format, name, tokens)
        return Response(content, media_type="application/json")

    @app.post(
        TEI_EMBED,
        openapi_extra={"requestBody": {"content": {"application/json": {"schema": _TEI_SCHEMA}}}},
    )
    async def tei_embed(request: Request) -> Response:
        """text-embeddings-inference's ``/embed``: a JSON array of vectors, one per input."""
        body: EmbedRequest = await read_body(request, EmbedRequest)
        check_request(None, body.dimensions)
        vectors, _ = await embed(body.inputs, "inputs", body.prompt_name, truncate=bool(body.truncate))
        if body.normalize and not encoder.normalized:
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        content = orjson.dumps(
            list(np.ascontiguousarray(vectors, dtype=np.float32)), option=orjson.OPT_SERIALIZE_NUMPY
        )
        return Response(content, media_type="application/json")

    @app.get(TEI_INFO)
    async def tei_info() -> dict[str, Any]:
        """text-embeddings-inference's ``/info``: the model and the server's limits."""
        return {
            "model_id": name,
            "model_sha": None,
            "model_dtype": {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}.get(
                model.precision, model.precision
            ),
            "model_type": {"embedding": {"pooling": getattr(model, "head", "unknown")}},
            "max_concurrent_requests": settings.max_concurrent_requests,
            "max_input_length": encoder.encoder.sentence_budget(
                encoder.encoder.template_ids, encoder.encoder.max_seq_length
            ),
            "max_batch_tokens": settings.max_batch_tokens,
            "max_batch_requests": None,
            "max_client_batch_size": settings.max_inputs_per_request,
            "tokenization_workers": tokenizer_threads,
            "version": __version__,
        }

    return app


def _check_model(requested: str, served: str) -> None:
    """Raise a 404 ``model_not_found`` (as OpenAI does) unless ``requested`` is the served model."""
    if requested != served:
        raise APIError(
            404,
            f"The model `{requested}` does not exist; this server serves `{served}`",
            "model",
            "model_not_found",
        )


def _too_large(size: int, limit: int, exact: bool = True) -> APIError:
    """The 413 for a request body of ``size`` bytes (``exact``: its declared length; else: at least) over
    ``limit``."""
    got = f"{size} bytes" if exact else f"over {limit} bytes"
    return APIError(
        413,
        f"the request body has {got}; this server takes at most {limit} (--max-request-bytes)",
        code="request_too_large",
    )


def _authorize(header: str | None, key: str, tei: bool = False) -> Response | None:
    """``None`` when ``header`` is ``Bearer KEY``, else the 401 response (OpenAI's ``invalid_api_key``;
    with ``tei``, text-embeddings-inference's error shape)."""
    scheme, _, token = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        message = "no API key: send the header 'Authorization: Bearer KEY'"
    elif not hmac.compare_digest(token.strip().encode(), key.encode()):
        message = "incorrect API key provided"
    else:
        return None
    return APIError(401, message, code="invalid_api_key").response(tei)


def _response_body(vectors: np.ndarray, encoding_format: str, name: str, tokens: int) -> bytes:
    """The JSON body of an embeddings response (OpenAI's shape; see the module docstring), by orjson:
    float32 vectors as their shortest decimal form (read back as float32, each is the vector's own
    value), written in C: on the event loop, where :mod:`json`'s float lists would hold it many times
    longer."""
    data = [
        {"object": "embedding", "index": i, "embedding": vector}
        for i, vector in enumerate(_encoded(vectors, encoding_format))
    ]
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    body = {"object": "list", "data": data, "model": name, "usage": usage}
    return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)


def _encoded(vectors: np.ndarray, encoding_format: str) -> list[Any]:
    """Each vector as a float32 array (written as a list of numbers), or with ``base64`` as the base64
    text of its little-endian float32 bytes (what OpenAI's clients decode)."""
    if encoding_format == "base64":
        data = np.ascontiguousarray(vectors, dtype="<f4")
        return [base64.b64encode(row.tobytes()).decode("ascii") for row in data]
    return list(np.ascontiguousarray(vectors, dtype=np.float32))
