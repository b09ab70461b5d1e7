"""``protoembed serve``: an embeddings server with dynamic batching, in OpenAI's and
text-embeddings-inference's dialects.

- :class:`ServeSettings` (:mod:`protoembed.serving.settings`): the server's settings, each once (its
  fields make ``protoembed serve``'s flags);
- :func:`create_app` (:mod:`protoembed.serving.app`): a loaded model -> a FastAPI app: one router per
  dialect (:mod:`~protoembed.serving.openai_api`, :mod:`~protoembed.serving.tei_api`) over one
  :class:`~protoembed.serving.infer.Infer` (the tokenizer pool, the
  :class:`~protoembed.serving.batcher.DynamicBatcher` and the model), ``GET /health`` and ``GET /metrics``;
- :mod:`protoembed.serving.server`: the listening socket (bound before the model loads) and uvicorn.

The server needs the ``serve`` extra (fastapi, uvicorn, prometheus-client, orjson): :func:`require` says the pip
command when one is missing. :class:`ServeSettings` is imported without them (and without torch), so
``protoembed --help`` stays fast; :func:`create_app` on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from protoembed.serving.settings import ServeSettings, require

if TYPE_CHECKING:
    from protoembed.serving.app import create_app as create_app

__all__ = ["ServeSettings", "create_app", "require"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        require()
        return import_module("protoembed.serving.app").create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
