"""OpenAI's embeddings API (its clients work unchanged): :func:`openai_router`.

- ``POST /v1/embeddings`` (and ``/embeddings``, text-embeddings-inference's path of it): ``{"input": str |
  [str, ...] | [int, ...] | [[int, ...], ...], "model": NAME, "encoding_format": "float" | "base64",
  "dimensions": D, "user": ...}`` -> ``{"object": "list", "data": [{"object": "embedding", "index": i,
  "embedding": [...] | "<base64 of little-endian float32>"}], "model": NAME, "usage": {"prompt_tokens": n,
  "total_tokens": n}}``. The vectors are those of ``model.encode(inputs)`` (float rounding apart): the
  same tokenisation (inputs longer than the model's ``max_seq_length`` tokens are truncated to it, as
  ``encode`` does, token arrays too; ``usage`` counts the tokens after truncation, the template's and the
  special tokens included), the model's default prompt if it has one, its own normalisation. ``model``
  may be left out; ``dimensions`` keeps the first D dimensions (1 to the model's width; cut, then normalised as the model normalises); ``user`` is ignored.
- ``GET /v1/models`` (and ``/v1/models/NAME``): the served model, in OpenAI's list shape.

Errors are OpenAI's ``{"error": {"message", "type", "param", "code"}}`` (:meth:`APIError.openai`): 400 for
a malformed or invalid request, 401 without the key, 404 for another model's name (``model_not_found``),
413 for too many or too long inputs or a body over ``max_request_bytes``, 429 (``Retry-After``) when
overloaded, 503 while starting or stopping.
"""

from __future__ import annotations

import base64
import time
from typing import Any, Literal

import numpy as np
import orjson
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from protoembed.serving.errors import APIError
from protoembed.serving.http import OpenAIRoute, guard, read_body
from protoembed.serving.infer import Infer

#: The paths of OpenAI's embeddings route (``/embeddings``: text-embeddings-inference's second path).
EMBEDDINGS_PATHS = ("/v1/embeddings", "/embeddings")


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
    dimensions: int | None = Field(
        None,
        description="keep the first D dimensions of each vector (1 to the model's width), normalised after",
    )
    user: Any = Field(None, description="ignored")


def openai_router(infer: Infer, name: str) -> APIRouter:
    """The OpenAI routes of ``infer``'s model, served as ``name`` (see the module docstring)."""
    router = APIRouter(route_class=OpenAIRoute, dependencies=[Depends(guard)])
    created = int(time.time())
    schema = {
        "requestBody": {"content": {"application/json": {"schema": EmbeddingRequest.model_json_schema()}}}
    }

    def model_card() -> dict[str, Any]:
        return {"id": name, "object": "model", "created": created, "owned_by": "protoembed"}

    def check_model(requested: str | None) -> None:
        """A 404 ``model_not_found`` (as OpenAI answers) unless ``requested`` is the served model."""
        if requested is not None and requested != name:
            raise APIError(
                "not_found",
                f"The model `{requested}` does not exist; this server serves `{name}`",
                "model",
                "model_not_found",
            )

    async def embeddings(request: Request) -> Response:
        body = await read_body(request, EmbeddingRequest)
        infer.check_ready()
        check_model(body.model)
        vectors, tokens = await infer.embed(body.input, "input", dimensions=body.dimensions)
        return Response(
            response_body(vectors, body.encoding_format, name, tokens), media_type="application/json"
        )

    for path in EMBEDDINGS_PATHS:
        router.add_api_route(path, embeddings, methods=["POST"], openapi_extra=schema)

    @router.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card()]}

    @router.get("/v1/models/{model_name:path}")
    async def one_model(model_name: str) -> dict[str, Any]:
        check_model(model_name)
        return model_card()

    return router


def response_body(vectors: np.ndarray, encoding_format: str, name: str, tokens: int) -> bytes:
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
