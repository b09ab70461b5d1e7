"""What every dialect's routes share over HTTP: a route class per dialect that answers a refused request in
that dialect's error shape (:class:`DialectRoute`), the guard of a router's routes (the API key, the
body's declared size: :func:`guard`), and the JSON body read within ``max_request_bytes``
(:func:`read_body`)."""

from __future__ import annotations

import hmac
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

import orjson
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool

from protoembed.core.pydantic_util import problem
from protoembed.serving.errors import APIError
from protoembed.serving.inputs import json_type
from protoembed.serving.settings import ServeSettings

#: Bodies larger than this are parsed on a worker thread, not the event loop.
PARSE_INLINE_BYTES = 256 * 1024

M = TypeVar("M", bound=BaseModel)


class DialectRoute(APIRoute):
    """A route whose refusals (:class:`APIError`, FastAPI's request validation) are answered by
    :meth:`render`: each dialect's subclass names its error shape."""

    @staticmethod
    def render(err: APIError) -> JSONResponse:
        raise NotImplementedError

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        render = self.render

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except APIError as err:
                return render(err)
            except RequestValidationError as err:
                return render(validation_error(err.errors()))

        return route


class OpenAIRoute(DialectRoute):
    """A route answering in OpenAI's error shape."""

    render = staticmethod(APIError.openai)


class TEIRoute(DialectRoute):
    """A route answering in text-embeddings-inference's error shape."""

    render = staticmethod(APIError.tei)


def validation_error(errors: Sequence[Any]) -> APIError:
    """A request validation error (pydantic's or FastAPI's list of errors) as an ``invalid`` error
    naming the field."""
    error = errors[0]
    if error["type"] == "json_invalid":
        detail = error.get("ctx", {}).get("error", error["msg"])
        return APIError("invalid", f"could not parse the JSON body of the request: {detail}")
    loc = [str(part) for part in error["loc"] if part != "body"]
    if not loc:
        return APIError(
            "invalid", f"the request body must be a JSON object, got {json_type(error.get('input'))}"
        )
    return APIError("invalid", f"{'.'.join(loc)} {problem(error)}", loc[0])


def parse_json(raw: bytes) -> dict[str, Any]:
    """The JSON object of a request body, whatever its content type says (``curl -d`` sends a form's).

    Raises:
        APIError: ``invalid``: text that is not JSON, JSON that is not an object.
    """
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as err:  # invalid UTF-8 included
        raise APIError("invalid", f"could not parse the JSON body of the request: {err}") from None
    if not isinstance(data, dict):
        raise APIError("invalid", f"the request body must be a JSON object, got {json_type(data)}")
    return data


def validate(data: dict[str, Any], kind: type[M]) -> M:
    """A request body's object as ``kind``.

    Raises:
        APIError: ``invalid``: a field missing or of the wrong type, named."""
    try:
        return kind.model_validate(data)
    except ValidationError as err:
        raise validation_error(err.errors(include_url=False)) from None


def too_large(size: int, limit: int, exact: bool = True) -> APIError:
    """The 413 for a request body of ``size`` bytes (``exact``: its declared length; else: at least) over
    ``limit``."""
    got = f"{size} bytes" if exact else f"over {limit} bytes"
    return APIError(
        "too_large",
        f"the request body has {got}; this server takes at most {limit} (--max-request-bytes)",
        code="request_too_large",
    )


async def read_json(request: Request) -> dict[str, Any]:
    """The request's JSON object (:func:`parse_json`): at most ``max_request_bytes`` bytes (413 as soon
    as more arrive, before anything is parsed), parsed on a worker thread when large."""
    limit, size, chunks = request.app.state.settings.max_request_bytes, 0, []
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(size, limit, exact=False)
        chunks.append(chunk)
    raw = b"".join(chunks)
    if len(raw) > PARSE_INLINE_BYTES:
        return await run_in_threadpool(parse_json, raw)
    return parse_json(raw)


async def read_body(request: Request, kind: type[M]) -> M:
    """The request's JSON body (:func:`read_json`) as ``kind`` (:func:`validate`)."""
    return validate(await read_json(request), kind)


def guard(request: Request) -> None:
    """The dependency of every route that reads a body or names the model: the API key
    (:attr:`ServeSettings.api_key`, as ``Authorization: Bearer KEY``) and the declared body size.

    Raises:
        APIError: ``unauthorized`` (401: no key or another one, OpenAI's ``invalid_api_key``),
            ``too_large`` (413: a ``Content-Length`` over ``max_request_bytes``)."""
    settings: ServeSettings = request.app.state.settings
    if settings.api_key is not None:
        scheme, _, token = (request.headers.get("authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise APIError(
                "unauthorized",
                "no API key: send the header 'Authorization: Bearer KEY'",
                code="invalid_api_key",
            )
        if not hmac.compare_digest(token.strip().encode(), settings.api_key.encode()):
            raise APIError("unauthorized", "incorrect API key provided", code="invalid_api_key")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > settings.max_request_bytes:
        raise too_large(int(declared), settings.max_request_bytes)
