"""text-embeddings-inference's API (``router/src/http/server.rs`` and ``types.rs`` are its spec; its
clients work unchanged): :func:`tei_router`.

- ``POST /embed``:
  ``{"inputs", "normalize": true, "truncate": false, "truncation_direction": "Right", "prompt_name",
  "dimensions"}`` -> one vector per input; ``normalize: false`` is the pooled vector before the model's own
  normalisation; ``truncation_direction`` ``Left`` (or ``left``) cuts a long input's start instead of its
  end, the prompt first, as TEI's tokenizer cuts the prompted text (every route that takes it);
- ``POST /embed_all``: each input's token vectors (the backbone's last hidden states of its row);
- ``POST /similarity``: ``{"inputs": {"source_sentence", "sentences"}, "parameters"}`` -> the cosine of
  the source's pooled vector with each sentence's;
- ``POST /`` and ``POST /invocations``: ``/similarity`` for a body whose ``inputs`` is an object, else
  ``/embed`` (text-embeddings-inference routes them to ``/embed`` for an embedding model, to
  ``/similarity`` when started with ``TASK=sentence-similarity``; ``huggingface_hub``'s
  ``InferenceClient(base_url=ROOT)`` posts both ``feature_extraction`` and ``sentence_similarity`` there);
  ``/rerank`` for a reranker, as TEI routes them;
- ``POST /tokenize``: ``{"inputs", "add_special_tokens": true, "prompt_name"}`` -> each input's tokens
  (``id``, ``text``, ``special``, ``start``, ``stop``: character offsets into the prompted input);
- ``POST /decode``: ``{"ids", "skip_special_tokens": true}`` -> each array's text;
- ``POST /rerank`` (a cross-encoder served: :class:`~protoembed.model.cross_encoder.Reranker`):
  ``{"query", "texts", "truncate", "truncation_direction", "raw_scores": false, "return_text": false}`` ->
  ``[{"index", "score", "text"?}]``, highest score first (ties: the later text first, as TEI's reversed
  stable sort gives them); ``score`` the sigmoid of the pair's logit, with ``raw_scores`` the logit; a
  pair empty on both sides (an empty query and an empty text) is TEI's ``Empty`` 400, one empty side is
  scored;
  on an embedding model a 424 (``Backend``), and on a reranker every embedding route answers that 424,
  as text-embeddings-inference answers them;
- ``GET /info``: the model and the server's limits (TEI's ``Info``; ``max_input_length`` counts a row's
  tokens with its special tokens and template, as TEI counts them; ``model_type`` ``{"reranker":
  {"id2label", "label2id"}}`` for a cross-encoder).

``inputs`` and token arrays as :mod:`protoembed.serving.inputs` reads them; a ``prompt_name`` left out
is the model's default prompt. ``truncate`` left out is ``/info``'s ``auto_truncate`` (false: an input
longer than a row holds is refused). Errors are TEI's ``ErrorResponse`` ``{"error", "error_type"}`` at the
status its router gives each type (:mod:`protoembed.serving.errors`).
"""

from __future__ import annotations

import functools
from typing import Any, Literal

import numpy as np
import orjson
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from protoembed.core.version import __version__
from protoembed.model.cross_encoder import Reranker
from protoembed.serving.errors import APIError
from protoembed.serving.http import TEIRoute, guard, read_body, read_json, validate
from protoembed.serving.infer import Infer
from protoembed.serving.inputs import check_count, check_vocabulary

#: ``truncate`` of a request that leaves it out (TEI's ``--auto-truncate``, off by default).
AUTO_TRUNCATE = False
#: The paths TEI routes to ``/embed`` for an embedding model (to ``/similarity`` with its
#: ``TASK=sentence-similarity``): here to either, by the body.
ROOT_PATHS = ("/", "/invocations")
#: TEI's ``model_dtype`` of each precision.
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}

Direction = Literal["Right", "right", "Left", "left"]
_DIRECTION = "with truncate, Right cuts the end of a long input, Left its start (a prompt first)"
_TRUNCATE = "cut an input longer than a row holds (default: auto_truncate, false: refuse it)"
_PROMPT = "the model's prompt of that name before each input (default: its default prompt)"


class EmbedRequest(BaseModel):
    """The body of ``POST /embed`` (TEI's fields; others are ignored)."""

    inputs: Any = Field(description="a string, a list of strings, a token array or a list of token arrays")
    normalize: bool = Field(True, description="L2-normalise the vectors (false: the pooled vectors)")
    truncate: bool | None = Field(None, description=_TRUNCATE)
    truncation_direction: Direction = Field("Right", description=_DIRECTION)
    prompt_name: str | None = Field(None, description=_PROMPT)
    dimensions: int | None = Field(
        None,
        description="keep the first D dimensions of each vector (1 to the model's width), then normalise",
    )


class EmbedAllRequest(BaseModel):
    """The body of ``POST /embed_all``."""

    inputs: Any = Field(description="a string, a list of strings, a token array or a list of token arrays")
    truncate: bool | None = Field(None, description=_TRUNCATE)
    truncation_direction: Direction = Field("Right", description=_DIRECTION)
    prompt_name: str | None = Field(None, description=_PROMPT)


class SimilarityInput(BaseModel):
    source_sentence: str
    sentences: list[str]


class SimilarityParameters(BaseModel):
    truncate: bool | None = Field(None, description=_TRUNCATE)
    truncation_direction: Direction = Field("Right", description=_DIRECTION)
    prompt_name: str | None = Field(None, description=_PROMPT)


class SimilarityRequest(BaseModel):
    """The body of ``POST /similarity``."""

    inputs: SimilarityInput
    parameters: SimilarityParameters | None = None


class RerankRequest(BaseModel):
    """The body of ``POST /rerank`` (TEI's fields; others are ignored)."""

    query: str
    texts: list[str]
    truncate: bool | None = Field(None, description=_TRUNCATE)
    truncation_direction: Direction = Field("Right", description=_DIRECTION)
    raw_scores: bool = Field(False, description="the model's logit (false: its sigmoid)")
    return_text: bool = Field(False, description="each rank gives its text")


class TokenizeRequest(BaseModel):
    """The body of ``POST /tokenize``."""

    inputs: str | list[str]
    add_special_tokens: bool = True
    prompt_name: str | None = Field(None, description=_PROMPT)


class DecodeRequest(BaseModel):
    """The body of ``POST /decode``."""

    ids: list[int] | list[list[int]]
    skip_special_tokens: bool = True


def _json(content: Any) -> Response:
    return Response(orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY), media_type="application/json")


def _schema(kind: type[BaseModel]) -> dict[str, Any]:
    return {"requestBody": {"content": {"application/json": {"schema": kind.model_json_schema()}}}}


def tei_router(infer: Infer, name: str) -> APIRouter:
    """The text-embeddings-inference routes of ``infer``'s model, served as ``name`` (see the module
    docstring)."""
    router = APIRouter(route_class=TEIRoute, dependencies=[Depends(guard)])
    model, settings = infer.model, infer.settings
    backend = getattr(model.tokenizer, "_tokenizer", None)  # the Rust tokenizer TEI runs, if fast

    def truncate(value: bool | None) -> bool:
        return AUTO_TRUNCATE if value is None else value

    def left(direction: Direction) -> bool:
        return direction.lower() == "left"

    async def embed(body: EmbedRequest) -> Response:
        """One vector per input (float32 lists)."""
        vectors, _ = await infer.embed(
            body.inputs,
            "inputs",
            body.prompt_name,
            truncate(body.truncate),
            body.normalize,
            body.dimensions,
            left=left(body.truncation_direction),
        )
        return _json(list(np.ascontiguousarray(vectors, dtype=np.float32)))

    async def similarity(body: SimilarityRequest) -> Response:
        """The cosine of the source sentence's vector with each sentence's."""
        if not body.inputs.sentences:
            raise APIError("empty", "`inputs.sentences` cannot be empty", "inputs")
        check_count(len(body.inputs.sentences) + 1, settings.max_inputs_per_request, "inputs")
        parameters = body.parameters or SimilarityParameters()
        texts = [body.inputs.source_sentence, *body.inputs.sentences]
        vectors, _ = await infer.embed(
            texts,
            "inputs",
            parameters.prompt_name,
            truncate(parameters.truncate),
            normalize=False,
            left=left(parameters.truncation_direction),
        )
        norms = np.maximum(np.linalg.norm(vectors, axis=1), 1e-12)
        return _json([float(v) for v in (vectors[1:] @ vectors[0]) / (norms[1:] * norms[0])])

    @router.post("/embed", openapi_extra=_schema(EmbedRequest))
    async def embed_route(request: Request) -> Response:
        return await embed(await read_body(request, EmbedRequest))

    @router.post("/similarity", openapi_extra=_schema(SimilarityRequest))
    async def similarity_route(request: Request) -> Response:
        return await similarity(await read_body(request, SimilarityRequest))

    async def rerank(body: RerankRequest) -> Response:
        """The texts ranked by their score against the query, highest first."""
        if not body.texts:
            raise APIError("empty", "`texts` cannot be empty", "texts")
        if not infer.reranker:
            raise APIError("model_type", "model is not a re-ranker model")
        check_count(len(body.texts), settings.max_inputs_per_request, "texts")
        if not body.query and "" in body.texts:  # TEI refuses a pair empty on both sides, scores the rest
            i = body.texts.index("")
            raise APIError(
                "empty", f"`inputs` cannot be empty: the query and texts[{i}] are both empty", "texts"
            )
        scores = await infer.rerank(
            body.query,
            body.texts,
            truncate(body.truncate),
            body.raw_scores,
            left=left(body.truncation_direction),
        )
        if np.isnan(scores).any():
            raise APIError("backend", "score is NaN")
        order = np.argsort(scores, kind="stable")[::-1]  # TEI: a stable ascending sort, reversed
        text = (lambda i: {"text": body.texts[i]}) if body.return_text else (lambda i: {})
        return _json([{"index": int(i), **text(i), "score": float(scores[i])} for i in order])

    @router.post("/rerank", openapi_extra=_schema(RerankRequest))
    async def rerank_route(request: Request) -> Response:
        return await rerank(await read_body(request, RerankRequest))

    async def root(request: Request) -> Response:
        """``/rerank`` for a reranker; else ``/similarity`` for a body whose ``inputs`` is an object
        (``source_sentence``, ``sentences``), else ``/embed``."""
        data = await read_json(request)
        if infer.reranker:
            return await rerank(validate(data, RerankRequest))
        if isinstance(data.get("inputs"), dict):
            return await similarity(validate(data, SimilarityRequest))
        return await embed(validate(data, EmbedRequest))

    for path in ROOT_PATHS:
        router.add_api_route(path, root, methods=["POST"], openapi_extra=_schema(EmbedRequest))

    @router.post("/embed_all", openapi_extra=_schema(EmbedAllRequest))
    async def embed_all(request: Request) -> Response:
        body = await read_body(request, EmbedAllRequest)
        states = await infer.token_vectors(
            body.inputs,
            "inputs",
            body.prompt_name,
            truncate(body.truncate),
            left=left(body.truncation_direction),
        )
        return _json([np.ascontiguousarray(s, dtype=np.float32) for s in states])

    @router.post("/tokenize", openapi_extra=_schema(TokenizeRequest))
    async def tokenize(request: Request) -> Response:
        body = await read_body(request, TokenizeRequest)
        texts = [body.inputs] if isinstance(body.inputs, str) else body.inputs
        if not texts:
            raise APIError("empty", "`inputs` cannot be empty", "inputs")
        check_count(len(texts), settings.max_inputs_per_request, "inputs")
        prompt = infer.prompt(body.prompt_name)
        tokenizer = _backend()
        texts = [prompt + text for text in texts]
        encode = functools.partial(tokenizer.encode_batch, add_special_tokens=body.add_special_tokens)
        encodings = await infer.on_pool(encode, texts)
        return _json([_tokens(text, encoding) for text, encoding in zip(texts, encodings)])

    @router.post("/decode", openapi_extra=_schema(DecodeRequest))
    async def decode(request: Request) -> Response:
        body = await read_body(request, DecodeRequest)
        arrays = body.ids if body.ids and isinstance(body.ids[0], list) else [body.ids]
        if not arrays or any(not ids for ids in arrays):
            raise APIError("empty", "`ids` cannot be empty", "ids")
        check_count(len(arrays), settings.max_inputs_per_request, "ids")
        names = ["ids"] if arrays[0] is body.ids else [f"ids[{i}]" for i in range(len(arrays))]
        check_vocabulary(model.tokenizer, arrays, names, "ids")
        tokenizer = _backend()
        decode = functools.partial(tokenizer.decode_batch, skip_special_tokens=body.skip_special_tokens)
        return _json(await infer.on_pool(decode, arrays))

    @router.get("/info")
    async def info() -> dict[str, Any]:
        return {
            "model_id": name,
            "model_sha": None,
            "model_dtype": DTYPES.get(model.precision, model.precision),
            "served_model_name": name,
            "model_type": model_type(),
            "max_concurrent_requests": settings.max_concurrent_requests,
            "max_input_length": infer.longest,
            "max_batch_tokens": settings.max_batch_tokens,
            "max_batch_requests": None,
            "max_client_batch_size": settings.max_inputs_per_request,
            "auto_truncate": AUTO_TRUNCATE,
            "tokenization_workers": infer.tokenizer_workers,
            "version": __version__,
            "sha": None,
            "docker_label": None,
        }

    def model_type() -> dict[str, Any]:
        """TEI's ``ModelType``: a reranker's labels, or an embedding model's pooling."""
        if isinstance(model, Reranker):
            labels = model.id2label
            return {"reranker": {"id2label": labels, "label2id": {v: int(k) for k, v in labels.items()}}}
        return {"embedding": {"pooling": model.head}}

    def _backend() -> Any:
        """The model's Rust tokenizer (what TEI tokenises and decodes with).

        Raises:
            APIError: ``tokenizer``: a model whose tokenizer is not a fast one."""
        if backend is None:
            raise APIError(
                "tokenizer", "this model's tokenizer is not a fast (Rust) tokenizer: it gives no offsets"
            )
        return backend

    return router


def _tokens(text: str, encoding: Any) -> list[dict[str, Any]]:
    """TEI's ``SimpleToken`` list of one encoding: a special token by its own text, without offsets;
    any other by the piece of ``text`` it covers and its character offsets."""
    out = []
    for token_id, (start, stop), special, token in zip(
        encoding.ids, encoding.offsets, encoding.special_tokens_mask, encoding.tokens
    ):
        if special:
            out.append({"id": token_id, "text": token, "special": True, "start": None, "stop": None})
        else:
            out.append(
                {"id": token_id, "text": text[start:stop], "special": False, "start": start, "stop": stop}
            )
    return out
