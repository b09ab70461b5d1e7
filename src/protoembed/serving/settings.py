"""The settings of ``protoembed serve`` (:class:`ServeSettings`) and the check of its optional packages
(:func:`require`). Nothing here imports torch, FastAPI or uvicorn."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field

from protoembed.core.errors import missing_package
from protoembed.core.pydantic_util import STRICT, Flag

#: The modules of the ``serve`` extra (``pip install 'protoembed[serve]'``), as imported.
SERVE_MODULES = ("fastapi", "uvicorn", "prometheus_client", "orjson")
#: The environment variable read when ``--api-key`` is not given.
API_KEY_ENV = "PROTOEMBED_API_KEY"


def require() -> None:
    """Raise a one-line :class:`ProtoembedError` with the pip command when a package of the ``serve``
    extra is missing."""
    missing = next((name for name in SERVE_MODULES if importlib.util.find_spec(name) is None), None)
    if missing is not None:
        raise missing_package("protoembed serve", missing, "serve")


class ServeSettings(BaseModel):
    """How the server listens, names its model and batches; each field's description is its ``--help``.

    Inputs longer than the model's ``max_seq_length`` tokens are truncated to it, exactly as
    ``protoembed encode`` and ``Embedder.encode`` do; the response's ``usage`` counts the tokens after
    truncation (the template's and the special tokens included).
    """

    model_config = STRICT

    served_model_name: Annotated[str | None, Flag(metavar="NAME")] = Field(
        None,
        min_length=1,
        description="the model's name in requests and in /v1/models (default: the model folder's name, or "
        "default)",
    )
    host: Annotated[str, Flag(metavar="HOST")] = Field(
        "127.0.0.1", min_length=1, description="address to listen on (0.0.0.0: every interface)"
    )
    port: Annotated[int, Flag(metavar="PORT")] = Field(
        8000, ge=0, le=65535, description="TCP port to listen on (0: any free port)"
    )
    api_key: Annotated[str | None, Flag(metavar="KEY", show_default=False)] = Field(
        None,
        min_length=1,
        description="require 'Authorization: Bearer KEY' on every route of both dialects, OpenAI's "
        "(serving/openai_api.py) and text-embeddings-inference's (serving/tei_api.py); /health, /ping, GET / "
        f"and /metrics stay open (default: ${API_KEY_ENV} if set, else no key)",
    )
    max_batch_tokens: Annotated[int, Flag(metavar="N")] = Field(
        16384,
        ge=1,
        description="token budget of one forward pass: longest row x rows, padding included; at least the "
        "longest row the model makes (/info's max_input_length), else refused at start",
    )
    max_wait_ms: Annotated[float, Flag(metavar="MS")] = Field(
        5.0,
        ge=0,
        description="how long the first queued row waits for others to join its batch, in milliseconds",
    )
    max_inputs_per_request: Annotated[int, Flag(metavar="N")] = Field(
        2048, ge=1, description="most inputs in one request (more: 413)"
    )
    max_input_chars: Annotated[int, Flag(metavar="N")] = Field(
        100_000, ge=1, description="most characters in one input (more: 413)"
    )
    max_concurrent_requests: Annotated[int, Flag(metavar="N")] = Field(
        256, ge=1, description="most embedding requests in flight at once (more: 429)"
    )
    max_request_bytes: Annotated[int, Flag(metavar="N")] = Field(
        16_000_000, ge=1, description="most bytes in one request body (more: 413, before it is parsed)"
    )
    max_queued_tokens: Annotated[int, Flag(metavar="N")] = Field(
        1_000_000,
        ge=1,
        description="most tokens queued for the model across requests (more: 429 with Retry-After)",
    )

    def url(self, port: int | None = None) -> str:
        """``http://HOST:PORT`` (``port``: the one bound, when :attr:`port` is 0); an IPv6 host in
        brackets."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port if port is None else port}"


def served_model_name(model: str) -> str:
    """The default name of the served model: its folder's name (``.`` too), the last part of a hub id,
    ``default`` for the packaged one."""
    path = Path(model).expanduser()
    return (path.resolve() if path.is_dir() else path).name or model
