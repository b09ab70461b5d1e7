"""``protoembed encode --model SPEC [--head H] INPUT.txt -o OUT.npy``: one sentence per line -> (N, D) array."""

from __future__ import annotations

import argparse

import numpy as np

from protoembed.commands.common import add_model_options, load_from_args
from protoembed.errors import ProtoembedError
from protoembed.io import write_atomic


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``encode`` sub-command."""
    parser = subparsers.add_parser(
        "encode", help="encode a text file (one sentence per line) to a .npy array"
    )
    parser.add_argument("input", help="UTF-8 text file, one sentence per line")
    parser.add_argument("-o", "--output", required=True, help="output .npy file (float32, one row per line)")
    add_model_options(parser)
    parser.add_argument("--normalize", action="store_true", help="L2-normalise the vectors")
    parser.add_argument("--allow-empty", action="store_true", help="encode empty lines as the bare template")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.set_defaults(func=run)


def read_lines(path: str) -> list[str]:
    """The file's lines without line endings (CRLF too); a BOM is dropped."""
    try:
        with open(path, encoding="utf-8-sig") as handle:
            return handle.read().splitlines()
    except FileNotFoundError:
        raise ProtoembedError(f"{path}: no such file") from None
    except UnicodeDecodeError as err:
        raise ProtoembedError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise ProtoembedError(f"{path}: cannot read ({err.strerror})") from None


def run(args: argparse.Namespace) -> int:
    """Encode ``args.input`` and write ``args.output``."""
    if not args.output.endswith(".npy"):
        raise ProtoembedError(f"output {args.output!r}: expected a .npy file name")
    sentences = read_lines(args.input)
    if not sentences:
        raise ProtoembedError(f"{args.input}: no lines to encode")
    embedder = load_from_args(args)
    try:
        vectors = embedder.encode(
            sentences,
            batch_size=args.batch_size,
            normalize=True if args.normalize else None,
            show_progress_bar=not args.no_progress,
            allow_empty=args.allow_empty,
        )
    except ProtoembedError as err:
        raise ProtoembedError(f"{args.input}: {err}") from None
    write_atomic(args.output, lambda tmp: np.save(tmp, vectors), suffix=".npy")
    print(f"wrote {args.output}: {vectors.shape[0]} x {vectors.shape[1]} float32")
    return 0
