"""The embeddings server's FastAPI app: :func:`create_app` (a loaded model and :class:`ServeSettings` ->
the app), in text-embeddings-inference's layout: one router per dialect, over one
:class:`~protoembed.serving.infer.Infer` (the tokenizer pool, the batcher's queue and the model).

- :mod:`protoembed.serving.openai_api`: OpenAI's ``/v1/embeddings`` (and ``/embeddings``), ``/v1/models``;
- :mod:`protoembed.serving.tei_api`: text-embeddings-inference's ``/embed`` (``POST /``,
  ``/invocations``), ``/embed_all``, ``/similarity``, ``/tokenize``, ``/decode``, ``/rerank``, ``/info``;
- here, without the API key: ``GET /health`` (``/ping``, ``GET /``: 200 once the model has run one warm-up
  batch, before that TEI's 503 ``Unhealthy``) and ``GET /metrics`` (Prometheus text:
  :class:`~protoembed.serving.metrics.Metrics`).

Each router answers its errors in its dialect's shape (:mod:`protoembed.serving.errors`); a path or
method that does not exist is a 404 or 405 in OpenAI's shape; 500 only for a failure of the server itself.
With :attr:`ServeSettings.api_key` every route of the two routers needs ``Authorization: Bearer KEY``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from protoembed.core.version import __version__
from protoembed.model.protocol import SentenceEmbedder
from protoembed.serving.errors import APIError
from protoembed.serving.infer import Infer
from protoembed.serving.openai_api import openai_router
from protoembed.serving.settings import ServeSettings
from protoembed.serving.tei_api import tei_router

logger = logging.getLogger(__name__)

#: The routes open without the API key (health: TEI's three paths of it).
HEALTH_PATHS = ("/health", "/ping", "/")


def create_app(
    model: SentenceEmbedder, settings: ServeSettings | None = None, tokenizer_workers: int | None = None
) -> FastAPI:
    """The embeddings server of ``model`` (see the module docstring).

    Args:
        model: a loaded model (:func:`protoembed.load`: the torch :class:`~protoembed.Embedder` at its
            precision, or an export on ONNX Runtime or OpenVINO).
        settings: names, limits and batching (default: :class:`ServeSettings`'s defaults;
            ``served_model_name`` ``None``: ``default``). ``host`` and ``port`` are for the caller that
            runs the app.
        tokenizer_workers: the threads that tokenise the requests (the pool of
            :mod:`protoembed.model.batching`; ``None``: :func:`~protoembed.model.batching.default_tokenizer_workers`
            for the model's device): neither the event loop nor the inference thread tokenises.
    Returns:
        the app; its lifespan starts the inference thread and runs one warm-up batch (``/health``: 200
        from then on), and on shutdown runs the rows still queued before the thread ends.
    Raises:
        ProtoembedError: ``max_batch_tokens`` below the longest row the model makes.
    """
    settings = settings or ServeSettings()
    name = settings.served_model_name or "default"
    infer = Infer(model, settings, tokenizer_workers)
    metrics = infer.metrics

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await infer.start()
        logger.info("serving %s (%s runtime, %s)", name, model.runtime, model.precision)
        try:
            yield
        finally:
            await run_in_threadpool(infer.stop)

    app = FastAPI(title="protoembed", version=__version__, lifespan=lifespan)
    app.state.settings = settings
    app.state.infer = infer
    app.state.batcher = infer.batcher
    app.state.metrics = metrics
    routers = [openai_router(infer, name), tei_router(infer, name)]
    for router in routers:
        app.include_router(router)
    served = [route.path for router in routers for route in router.routes] + [*HEALTH_PATHS, "/metrics"]
    #: the metrics' endpoint names, longest first ("/v1/models/{model_name}" counts as /v1/models)
    paths = sorted({path.split("{")[0].rstrip("/") or "/" for path in served}, key=len, reverse=True)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, err: StarletteHTTPException) -> JSONResponse:
        code = "not_found" if err.status_code == 404 else None
        response = APIError(
            "invalid", f"{request.method} {request.url.path}: {err.detail}", code=code
        ).openai()
        response.status_code = err.status_code
        return response

    @app.exception_handler(Exception)
    async def server_error(request: Request, err: Exception) -> JSONResponse:
        return APIError("backend", f"the server failed: {type(err).__name__}: {err}").openai()

    @app.middleware("http")
    async def observe(request: Request, call_next: Any) -> Response:
        """The metrics of each answer, by route."""
        path = request.url.path
        endpoint = next((p for p in paths if path == p or (p != "/" and path.startswith(p + "/"))), "other")
        start = time.perf_counter()
        response: Response | None = None
        try:
            response = await call_next(request)
        finally:
            status = 500 if response is None else response.status_code
            metrics.observe_request(endpoint, status, time.perf_counter() - start)
        return response

    async def health() -> Response:
        """200 once the model has run its warm-up batch; before, TEI's 503 ``Unhealthy``."""
        if not infer.ready:
            return APIError("unhealthy", "the model is not ready yet").tei()
        return JSONResponse({"status": "ok"})

    for path in HEALTH_PATHS:
        app.add_api_route(path, health, methods=["GET"])

    @app.get("/metrics")
    async def metrics_text() -> Response:
        return Response(metrics.exposition(), media_type=metrics.content_type)

    return app
