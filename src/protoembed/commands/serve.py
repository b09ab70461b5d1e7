"""``protoembed serve [MODEL]``: an embeddings server with dynamic batching (:mod:`protoembed.serving`), in
two dialects: OpenAI's (:mod:`protoembed.serving.openai_api`) and text-embeddings-inference's
(:mod:`protoembed.serving.tei_api`), with ``GET /health`` and ``GET /metrics``. A cross-encoder folder
(:func:`~protoembed.model.cross_encoder.find_cross_encoder`) is served as text-embeddings-inference serves
a reranker (``/rerank``).

The port is bound before the model loads (one line and exit 2 when it is in use, or when the model folder
is not one); a ``--max-batch-tokens`` below the longest row the model makes is refused in one line once it
has loaded; once the model has run a warm-up batch, one line says the URL, the model, the runtime and the
precision. SIGTERM or Ctrl-C: no new connections, the requests in flight answered, exit 0 (130 for
Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from protoembed.commands.common import (
    add_model_options,
    add_option_flags,
    add_pipeline_options,
    field_value,
    load_from_args,
    spec_from_args,
)
from protoembed.core.errors import ProtoembedError
from protoembed.model.model_spec import ModelSpec
from protoembed.serving.settings import API_KEY_ENV, ServeSettings, served_model_name

DESCRIPTION = (
    "Serve a model over HTTP in two dialects. OpenAI's (serving/openai_api.py): POST /v1/embeddings and "
    "/embeddings (input: a string, a list of strings or token arrays; encoding_format float or base64), "
    "GET /v1/models. text-embeddings-inference's (serving/tei_api.py): POST /embed (and POST /, "
    "/invocations), /embed_all, /similarity, /tokenize, /decode, /rerank, GET /info. GET /health (/ping, "
    "GET /) and GET /metrics (Prometheus). Rows of concurrent requests share forward passes (dynamic "
    "batching) and get the vectors protoembed encode gives. Token arrays are the model's own ids, as "
    "tokenizer(text) returns them. /v1/embeddings truncates inputs longer than the model's max_seq_length "
    "tokens, exactly as protoembed encode does; /embed refuses them unless truncate is true. A cross-encoder "
    "folder (a cross_encoder run's best/cross_encoder, the best/ holding it, or a sentence-transformers "
    "CrossEncoder folder with one output) is served as a reranker, as text-embeddings-inference serves one: "
    "POST /rerank (and POST /, /invocations), /tokenize, /decode, GET /info; its embedding routes answer "
    "TEI's 424. Needs pip install 'protoembed[serve]'."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``serve`` sub-command."""
    parser = subparsers.add_parser(
        "serve",
        help="serve a model over HTTP (OpenAI's /v1/embeddings, text-embeddings-inference's /embed; a "
        "cross-encoder: TEI's /rerank)",
        description=DESCRIPTION,
    )
    parser.add_argument(
        "model_arg",
        nargs="?",
        metavar="MODEL",
        type=field_value(ModelSpec, "model"),
        help="the model to serve, as --model (default: default); a cross-encoder folder is served as a "
        "reranker",
    )
    add_model_options(parser, batch_size=False)
    add_option_flags(parser, ServeSettings, check=True)
    add_pipeline_options(parser, budget_dest="max_batch_tokens")
    parser.set_defaults(func=run)


def settings_from_args(args: argparse.Namespace) -> ServeSettings:
    """The :class:`ServeSettings` of the flags: ``--api-key`` or ``$PROTOEMBED_API_KEY``, the served
    name defaulting to the model's folder name."""
    values = {name: getattr(args, name) for name in ServeSettings.model_fields}
    values["api_key"] = values["api_key"] or os.environ.get(API_KEY_ENV) or None
    values["served_model_name"] = values["served_model_name"] or served_model_name(args.model)
    return ServeSettings(**values)


def load_model(args: argparse.Namespace) -> Any:
    """The model of the flags: a cross-encoder folder's
    :class:`~protoembed.model.cross_encoder.Reranker` (on ``--device``, as saved), else
    :func:`load_from_args`'s model.

    Raises:
        ProtoembedError: a model flag other than ``--device`` given for a cross-encoder (it runs as saved).
    """
    from protoembed.model.cross_encoder import find_cross_encoder, load_reranker

    folder = find_cross_encoder(args.model) if Path(args.model).expanduser().is_dir() else None
    if folder is None:
        return load_from_args(args)
    spec, default = spec_from_args(args), ModelSpec(model=args.model)
    given = [
        name for name in spec.settings() if name != "device" and getattr(spec, name) != getattr(default, name)
    ]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise ProtoembedError(
            f"{folder} is a cross-encoder, served as saved (a reranker on --device): {flag} does not apply"
        )
    return load_reranker(folder, spec.device)


def run(args: argparse.Namespace) -> int:
    """Bind the port, load the model, serve until SIGTERM or Ctrl-C."""
    from protoembed.serving.settings import require

    if args.model_arg is not None:
        if args.model not in (ModelSpec.model_fields["model"].default, args.model_arg):
            raise ProtoembedError(f"two models given: {args.model_arg} and --model {args.model}; give one")
        args.model = args.model_arg
    require()
    settings = settings_from_args(args)
    from protoembed.serving.server import bind

    sock = bind(settings.host, settings.port)  # a port in use fails before the model loads
    try:
        model = load_model(args)
        from protoembed.serving import create_app
        from protoembed.serving.server import run as serve

        url = settings.url(sock.getsockname()[1])

        from protoembed.model.cross_encoder import Reranker

        where = f"{url}/rerank (a reranker)" if isinstance(model, Reranker) else f"{url}/v1"

        def ready() -> None:
            print(
                f"serving {settings.served_model_name} at {where} (runtime {model.runtime}, precision "
                f"{model.precision}); stop with Ctrl-C or SIGTERM",
                flush=True,
            )

        serve(create_app(model, settings, args.tokenizer_workers), sock, on_started=ready)
    finally:
        sock.close()
    return 0
