"""A request answered with an error, in each dialect's shape: :class:`APIError` names what went wrong (a
:class:`Problem`), and each dialect writes it (:meth:`APIError.openai`, :meth:`APIError.tei`).

One table, :data:`PROBLEMS`, gives every problem its two statuses: text-embeddings-inference's
``error_type`` and the status its router gives that type (``router/src/http/server.rs``: Empty 400,
Validation and Tokenizer 422, Overloaded 429, Backend 424, Unhealthy 503), and the status and ``type`` of
OpenAI's error body.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi.responses import JSONResponse

#: Seconds a 429 asks the client to wait (``Retry-After``): about one batch's time.
RETRY_AFTER_S = 1


@dataclass(frozen=True)
class Problem:
    """What a refused request did: TEI's ``error_type`` (its ``ErrorType`` variant) with the status
    TEI's router gives it, and OpenAI's status and error ``type``."""

    error_type: str
    tei_status: int
    openai_status: int
    openai_type: str = "invalid_request_error"


#: Every problem by name. ``too_many``: more inputs, characters or tokens than the server takes (TEI's
#: router answers its batch-size error as Validation, 422, where its OpenAPI document lists 413; OpenAI's
#: clients get 413); ``unauthorized``: TEI answers a bare 401, named Validation here; ``model_type``: a route
#: the served model does not answer (an embedding route on a reranker, ``/rerank`` on an embedding model:
#: TEI's Backend 424; OpenAI's clients get 400, their own mistake, not the server's failure).
PROBLEMS: dict[str, Problem] = {
    "empty": Problem("Empty", 400, 400),
    "invalid": Problem("Validation", 422, 400),
    "too_many": Problem("Validation", 422, 413),
    "too_large": Problem("Validation", 413, 413),
    "tokenizer": Problem("Tokenizer", 422, 400),
    "not_found": Problem("Validation", 404, 404),
    "unauthorized": Problem("Validation", 401, 401),
    "overloaded": Problem("Overloaded", 429, 429, "rate_limit_error"),
    "backend": Problem("Backend", 424, 500, "server_error"),
    "model_type": Problem("Backend", 424, 400),
    "unhealthy": Problem("Unhealthy", 503, 503, "server_error"),
}


class APIError(Exception):
    """A request refused: its problem (a key of :data:`PROBLEMS`), the one-line message, and OpenAI's
    ``param`` (the field) and ``code``."""

    def __init__(self, problem: str, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.problem, self.message, self.param, self.code = PROBLEMS[problem], message, param, code

    def _response(self, status: int, content: dict[str, Any]) -> JSONResponse:
        headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 429 else None
        return JSONResponse(content, status_code=status, headers=headers)

    def openai(self) -> JSONResponse:
        """OpenAI's ``{"error": {"message", "type", "param", "code"}}`` at OpenAI's status (a 429 says
        when to retry: ``Retry-After``)."""
        p = self.problem
        body = {"message": self.message, "type": p.openai_type, "param": self.param, "code": self.code}
        return self._response(p.openai_status, {"error": body})

    def tei(self) -> JSONResponse:
        """text-embeddings-inference's ``ErrorResponse`` ``{"error", "error_type"}`` at the status its
        router gives that ``error_type``."""
        return self._response(
            self.problem.tei_status, {"error": self.message, "error_type": self.problem.error_type}
        )
