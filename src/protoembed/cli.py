"""The ``protoembed`` command line: ``protoembed <command> ...`` for each command in :data:`COMMANDS`.

Each sub-command lives in ``protoembed.commands.<name>`` and exposes ``register(subparsers)``,
which adds its parser and sets ``func`` (called with the parsed namespace, returns an exit code).
User mistakes (:class:`~protoembed.errors.ProtoembedError`) print one line and exit 2. Command modules
import torch and the models only inside their ``func``, so ``--help`` and ``--version`` are fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from protoembed.errors import ProtoembedError
from protoembed.version import __version__

COMMANDS = ("encode", "eval", "analyze", "report", "data", "train", "export")


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every registered sub-command."""
    parser = argparse.ArgumentParser(prog="protoembed", description="Train and evaluate sentence embeddings.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"protoembed.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ProtoembedError as err:
        print(f"protoembed: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("protoembed: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
