"""The naive embeddings server of benchmarks/serve.py: FastAPI + sentence-transformers, one
``model.encode(request's inputs)`` per request, no batching across requests.

The endpoint is a plain ``def``, so FastAPI runs each request in its thread pool (up to 40 at once), every
one calling ``encode`` on the shared model: what a first server written in a few lines does.

    NAIVE_MODEL=<model folder> [NAIVE_DEVICE=cuda] python -m uvicorn naive_server:app --app-dir benchmarks \
        --host 127.0.0.1 --port P

POST /v1/embeddings ``{"model": ..., "input": [...]}`` -> OpenAI's response shape; GET /health -> 200.
"""

from __future__ import annotations

import os

from fastapi import FastAPI
from pydantic import BaseModel
from sentence_transformers import SentenceTransformer

model = SentenceTransformer(os.environ["NAIVE_MODEL"], device=os.environ.get("NAIVE_DEVICE", "cpu"))
app = FastAPI()


class EmbeddingRequest(BaseModel):
    """OpenAI's embeddings request (a list of strings, or one string)."""

    input: list[str] | str
    model: str = "naive"


@app.get("/health")
def health() -> dict:
    return {"status": "ok"}


@app.post("/v1/embeddings")
def embeddings(request: EmbeddingRequest) -> dict:
    texts = [request.input] if isinstance(request.input, str) else request.input
    vectors = model.encode(texts, show_progress_bar=False)
    return {
        "object": "list",
        "model": request.model,
        "data": [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)],
        "usage": {"prompt_tokens": 0, "total_tokens": 0},
    }
