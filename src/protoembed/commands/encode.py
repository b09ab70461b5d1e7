"""``protoembed encode --model SPEC [--head H] [--prompt NAME] INPUT.txt -o OUT.npy``: one sentence per line ->
(N, D) array (``--prompt``: the model's prompt of that name, e.g. ``query``, put before each line)."""

from __future__ import annotations

import argparse
import sys

from protoembed.commands.common import add_allow_empty_option, add_model_options, load_from_args, output_file
from protoembed.data.lines import read_lines
from protoembed.errors import EmptySentenceError, ProtoembedError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``encode`` sub-command."""
    parser = subparsers.add_parser(
        "encode", help="encode a text file (one sentence per line) to a .npy array"
    )
    parser.add_argument("input", help="UTF-8 text file, one sentence per line")
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        type=output_file(".npy", create_parents=False),
        help="output .npy file (float32, one row per line), in an existing writable folder",
    )
    add_model_options(parser)
    parser.add_argument("--normalize", action="store_true", help="L2-normalise the vectors")
    parser.add_argument(
        "--prompt",
        metavar="NAME",
        help="put the model's prompt NAME before each line (query, document: none when the model has none)",
    )
    add_allow_empty_option(parser)
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.set_defaults(func=run)


def empty_lines_error(path: str, err: EmptySentenceError) -> ProtoembedError:
    """The CLI's wording of an empty-sentence error: 1-based line numbers and ``--allow-empty``."""
    lines = [i + 1 for i in err.indexes]
    shown = ", ".join(map(str, lines[:10])) + (" ..." if len(lines) > 10 else "")
    return ProtoembedError(
        f"{path}: {len(lines)} empty or blank line(s) (line {shown}); remove them or pass --allow-empty "
        "to encode them as the template alone"
    )


def run(args: argparse.Namespace) -> int:
    """Encode ``args.input`` and write ``args.output``."""
    import numpy as np

    from protoembed.io import write_atomic

    sentences = read_lines(args.input)
    if not sentences:
        raise ProtoembedError(f"{args.input}: no lines to encode")
    embedder = load_from_args(args)
    try:
        vectors = embedder.encode(
            sentences,
            batch_size=args.batch_size,
            normalize=True if args.normalize else None,
            show_progress_bar=not args.no_progress and sys.stderr.isatty(),
            allow_empty=args.allow_empty,
            prompt_name=args.prompt,
        )
    except EmptySentenceError as err:
        raise empty_lines_error(args.input, err) from None
    write_atomic(args.output, lambda tmp: np.save(tmp, vectors), suffix=".npy")
    print(f"wrote {args.output}: {vectors.shape[0]} x {vectors.shape[1]} float32")
    return 0
