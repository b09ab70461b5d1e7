"""The embeddings server's FastAPI app: :func:`create_app` (a loaded model and :class:`ServeSettings` ->
the app).

Endpoints (the OpenAI embeddings API, so its clients work unchanged):

- ``POST /v1/embeddings``: ``{"input": str | [str, ...], "model": NAME, "encoding_format": "float" |
  "base64", "dimensions": D, "user": ...}`` -> ``{"object": "list", "data": [{"object": "embedding",
  "index": i, "embedding": [...] | "<base64 of little-endian float32>"}], "model": NAME, "usage":
  {"prompt_tokens": n, "total_tokens": n}}``. The vectors are those of ``model.encode(inputs)`` (float
  rounding apart): the same tokenisation (inputs longer than the model's ``max_seq_length`` tokens are
  truncated to it, as ``encode`` does; ``usage`` counts the tokens after truncation, the template's and
  the special tokens included) and the same forward, run by the
  :class:`~protoembed.serving.batcher.DynamicBatcher` with the rows of other requests. ``model`` may be
  left out; ``dimensions`` must be the model's width (the vectors cannot be shortened); ``user`` is
  ignored.
- ``GET /v1/models`` (and ``/v1/models/NAME``): the served model, in OpenAI's list shape.
- ``GET /health``: 503 until the model has run one warm-up batch, then 200.
- ``GET /metrics``: Prometheus text (:class:`~protoembed.serving.metrics.Metrics`).

With :attr:`ServeSettings.api_key`, ``/v1/*`` needs ``Authorization: Bearer KEY``. Every error is
OpenAI's JSON shape ``{"error": {"message", "type", "param", "code"}}``: 400 for a malformed or invalid
request (never 422), 401 without the key, 404 for another model's name (``model_not_found``), 413 for too
many or too long inputs, 429 above ``max_concurrent_requests`` requests in flight, 503 while starting or
stopping, 500 only for a failure of the server itself.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import json
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

from protoembed.batching import check_pipeline_options, default_tokenizer_workers, tokenizer_pool
from protoembed.errors import EmptySentenceError
from protoembed.protocol import SentenceEmbedder
from protoembed.pydantic_util import problem
from protoembed.serving.batcher import DynamicBatcher
from protoembed.serving.metrics import Metrics
from protoembed.serving.settings import ServeSettings
from protoembed.version import __version__

logger = logging.getLogger(__name__)

EMBEDDINGS = "/v1/embeddings"
#: The endpoints counted by name in the metrics (any other path counts as ``other``).
ENDPOINTS = (EMBEDDINGS, "/v1/models", "/health", "/metrics")


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

    def response(self) -> JSONResponse:
        """The JSON response ``{"error": {"message", "type", "param", "code"}}``."""
        body = {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}
        return JSONResponse({"error": body}, status_code=self.status)


class EmbeddingRequest(BaseModel):
    """The body of ``POST /v1/embeddings`` (OpenAI's fields; others are ignored)."""

    input: Any = Field(description="a string or a list of strings (not token arrays)")
    model: str | None = Field(None, description="the served model's name (default: it)")
    encoding_format: Literal["float", "base64"] = Field(
        "float", description="float: lists of numbers; base64: little-endian float32 bytes in base64"
    )
    dimensions: int | None = Field(None, description="the model's width, if given (no truncation)")
    user: Any = Field(None, description="ignored")


def check_inputs(value: Any, settings: ServeSettings) -> list[str]:
    """The request's ``input`` as a list of strings.

    Raises:
        APIError: 400 for another type (token arrays included), an empty list or an empty or blank
            string (named by its index); 413 for more than ``max_inputs_per_request`` inputs or an input
            longer than ``max_input_chars`` characters (named by its index).
    """
    only = "input must be a string or a list of strings"
    if isinstance(value, str):
        texts, names = [value], ["input"]
    elif isinstance(value, list):
        if not value:
            raise APIError(400, "input must not be an empty list", "input")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                tokens = isinstance(item, (int, list)) and not isinstance(item, bool)
                what = (
                    "a token array: only strings are accepted, send the text" if tokens else _json_type(item)
                )
                raise APIError(400, f"{only}; input[{i}] is {what}", "input")
        texts, names = value, [f"input[{i}]" for i in range(len(value))]
    else:
        raise APIError(400, f"{only}, got {_json_type(value)}", "input")
    if len(texts) > settings.max_inputs_per_request:
        raise APIError(
            413,
            f"{len(texts)} inputs in one request; this server takes at most {settings.max_inputs_per_request}",
            "input",
            "too_many_inputs",
        )
    for name, text in zip(names, texts):
        if len(text) > settings.max_input_chars:
            raise APIError(
                413,
                f"{name} has {len(text)} characters; this server takes at most {settings.max_input_chars} per input",
                "input",
                "input_too_long",
            )
        if not text.strip():
            raise APIError(400, f"{name} is empty or blank: every input needs text to encode", "input")
    return texts


def _json_type(value: Any) -> str:
    """How JSON names ``value``'s type (``a number``, ``an object``, ``null``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return "a string"


def _read_body(raw: bytes) -> EmbeddingRequest:
    """The JSON body of an embeddings request, whatever its content type says (``curl -d`` sends a form's).

    Raises:
        APIError: 400 for text that is not JSON, JSON that is not an object, or a field of the wrong type.
    """
    try:
        data = json.loads(raw)
    except ValueError as err:  # UnicodeDecodeError included
        raise APIError(400, f"could not parse the JSON body of the request: {err}") from None
    if not isinstance(data, dict):
        raise APIError(400, f"the request body must be a JSON object, got {_json_type(data)}")
    try:
        return EmbeddingRequest.model_validate(data)
    except ValidationError as err:
        raise _validation_error(err.errors(include_url=False)) from None


_SCHEMA = EmbeddingRequest.model_json_schema()


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
        return APIError(400, f"the request body must be a JSON object, got {_json_type(error.get('input'))}")
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
            :mod:`protoembed.batching`; ``None``: :func:`~protoembed.batching.default_tokenizer_workers`
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
    pool = tokenizer_pool(workers or default_tokenizer_workers(model.device))

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

    @app.exception_handler(APIError)
    async def api_error(request: Request, err: APIError) -> JSONResponse:
        return err.response()

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, err: RequestValidationError) -> JSONResponse:
        return _validation_error(err.errors()).response()

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, err: StarletteHTTPException) -> JSONResponse:
        code = "not_found" if err.status_code == 404 else None
        return APIError(
            err.status_code, f"{request.method} {request.url.path}: {err.detail}", code=code
        ).response()

    @app.exception_handler(Exception)
    async def server_error(request: Request, err: Exception) -> JSONResponse:
        return APIError(
            500, f"the server failed: {type(err).__name__}: {err}", kind="server_error"
        ).response()

    @app.middleware("http")
    async def guard(request: Request, call_next: Any) -> Response:
        """Authentication and the in-flight limit before the body is read; the metrics of the answer."""
        path = request.url.path
        endpoint = next((e for e in ENDPOINTS if path == e or path.startswith(e + "/")), "other")
        start = time.perf_counter()
        response: Response | None = None
        limited = path == EMBEDDINGS
        try:
            if settings.api_key is not None and path.startswith("/v1/"):
                response = _authorize(request.headers.get("authorization"), settings.api_key)
            if response is None and limited and app.state.in_flight >= settings.max_concurrent_requests:
                response = APIError(
                    429,
                    f"{settings.max_concurrent_requests} requests are in flight, the most this server takes; retry later",
                    code="rate_limit_exceeded",
                    kind="rate_limit_error",
                ).response()
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

    @app.post(
        EMBEDDINGS, openapi_extra={"requestBody": {"content": {"application/json": {"schema": _SCHEMA}}}}
    )
    async def embeddings(request: Request) -> JSONResponse:
        body = _read_body(await request.body())
        if not app.state.ready:
            raise APIError(
                503, "the model is not ready yet (see /health)", code="not_ready", kind="server_error"
            )
        if body.model is not None:
            _check_model(body.model, name)
        if body.dimensions is not None and body.dimensions != model.dimension:
            raise APIError(
                400,
                f"dimensions {body.dimensions}: this model's vectors have {model.dimension} dimensions and cannot "
                f"be shortened; leave dimensions out or pass {model.dimension}",
                "dimensions",
            )
        texts = check_inputs(body.input, settings)
        try:
            ids, masks = await tokenize(texts)
        except EmptySentenceError as err:
            raise APIError(
                400, f"input[{err.indexes[0]}] has no tokens: every input needs text to encode", "input"
            ) from None
        try:
            future = batcher.submit(ids, masks)
        except RuntimeError as err:
            raise APIError(503, str(err), code="shutting_down", kind="server_error") from None
        vectors = await asyncio.wrap_future(future)
        tokens = sum(len(row) for row in ids)
        content = _response_body(vectors, body.encoding_format, name, tokens)
        return Response(content, media_type="application/json")

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


def _authorize(header: str | None, key: str) -> Response | None:
    """``None`` when ``header`` is ``Bearer KEY``, else the 401 response (OpenAI's ``invalid_api_key``)."""
    scheme, _, token = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        message = "no API key: send the header 'Authorization: Bearer KEY'"
    elif not hmac.compare_digest(token.strip().encode(), key.encode()):
        message = "incorrect API key provided"
    else:
        return None
    return APIError(401, message, code="invalid_api_key").response()


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
