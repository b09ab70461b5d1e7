"""The ``protoembed`` command line: ``protoembed <command> ...`` for each command in :data:`COMMANDS`.

Each sub-command lives in ``protoembed.commands.<name>`` and exposes ``register(subparsers)``,
which adds its parser and sets ``func`` (called with the parsed namespace, returns an exit code).
User mistakes (:class:`~protoembed.core.errors.ProtoembedError`) print one line and exit 2. protoembed's own
warnings (such as bf16 emulated on this CPU) print on stderr as ``protoembed: ...`` at the default level,
its info lines too with ``--verbose``. Command modules
import torch and the models only inside their ``func``, so ``--help`` and ``--version`` are fast; before
a model command runs, :func:`protoembed.core.threads.configure_process` sizes its threads to the free cores.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from protoembed.core.errors import ProtoembedError
from protoembed.core.threads import single_threaded_tokenizers
from protoembed.core.version import __version__

COMMANDS = ("encode", "search", "mine", "eval", "analyze", "report", "data", "train", "export", "serve")
#: The commands that run a model (their thread count is set before torch loads: protoembed.core.threads).
MODEL_COMMANDS = ("encode", "search", "mine", "eval", "analyze", "train", "export", "serve")


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every registered sub-command."""
    parser = argparse.ArgumentParser(prog="protoembed", description="Train and evaluate sentence embeddings.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--verbose", action="store_true", help="log what runs (also after a model command)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"protoembed.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    single_threaded_tokenizers()
    args = build_parser().parse_args(argv)
    args.command_line = list(sys.argv[1:] if argv is None else argv)  # what a resume command repeats
    if args.command in MODEL_COMMANDS and "torch" not in sys.modules:
        from protoembed.core.threads import configure_process

        configure_process()  # threads sized to the free cores, OpenMP waiting passively: before torch
    # protoembed's own warnings (--verbose: and info lines) on stderr, whatever else configured logging
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("protoembed: %(message)s"))
    logger = logging.getLogger("protoembed")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if args.verbose else logging.WARNING)
    try:
        return int(args.func(args) or 0)
    except ProtoembedError as err:
        print(f"protoembed: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("protoembed: interrupted", file=sys.stderr)
        return 130
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)


if __name__ == "__main__":
    sys.exit(main())
