"""``protoembed mine --model M --data PAIRS [--columns anchor=question positive=answer] [--corpus FILE]
-o TRIPLETS.jsonl``: hard negatives for (anchor, positive) pairs (:func:`protoembed.retrieval.mining.mine_hard_negatives`).

The pairs are read as training data is (``--format``, ``--columns`` as a config's ``data.columns``:
:func:`protoembed.data.training.formats.read_examples`); further candidate texts (``--corpus``) are a
text file (one per line) or one column of a table (``--corpus-column``, default ``text``). The output is
JSON lines, one object per row (``{"anchor", "positive", "negative"}``, or ``negative_1..N`` with
``--output-format n-tuple``), which a config reads as ``data.corpus: TRIPLETS.jsonl`` for ``simcse_sup``
with no mapping; it is written atomically, after everything was read and mined.
"""

from __future__ import annotations

import argparse

from protoembed.commands.common import add_model_options, add_option_flags, load_from_args, output_file
from protoembed.core.errors import ProtoembedError
from protoembed.core.pydantic_util import check_options
from protoembed.retrieval.mining import MineOptions

#: The example columns of the pairs.
PAIR_COLUMNS = ("anchor", "positive")
#: The example column of the corpus.
CORPUS_COLUMN = "text"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``mine`` sub-command."""
    parser = subparsers.add_parser(
        "mine",
        help="mine hard negatives for (anchor, positive) pairs -> (anchor, positive, negative) JSON lines",
        description="Mine hard negatives for (anchor, positive) pairs with an embedding model and write "
        "them as (anchor, positive, negative) JSON lines, the columns simcse_sup reads.",
    )
    parser.add_argument("--data", required=True, metavar="FILE", help="the (anchor, positive) pairs")
    parser.add_argument("--format", metavar="NAME", help="the data's format (default: from the file name)")
    parser.add_argument(
        "--columns",
        nargs="+",
        metavar="COLUMN=FILE_COLUMN",
        help="which of the file's columns are the anchor and the positive, e.g. anchor=question "
        "positive=answer (default: columns named anchor and positive)",
    )
    parser.add_argument(
        "--corpus", metavar="FILE", help="more candidate texts: one per line, or a column of a table"
    )
    parser.add_argument("--corpus-format", metavar="NAME", help="the corpus' format (default: from its name)")
    parser.add_argument(
        "--corpus-column",
        metavar="FILE_COLUMN",
        help=f"the corpus table's column of texts (default: {CORPUS_COLUMN})",
    )
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        type=output_file(".jsonl"),
        help="the mined examples, JSON lines (written atomically; missing folders are created)",
    )
    add_model_options(parser)
    add_option_flags(parser, MineOptions, check=True)
    parser.add_argument(
        "--cross-encoder",
        metavar="PATH",
        help="rescore the candidates with this cross-encoder (a sentence-transformers CrossEncoder folder, "
        "or a protoembed cross_encoder run); the rules then apply to its scores",
    )
    parser.set_defaults(func=run)


def read_pairs(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The anchors and positives of ``--data`` (mapped by ``--columns``).

    Raises:
        ProtoembedError: the data has no anchor or no positive column (names the file and its columns).
    """
    from protoembed.data.training.columns import parse_columns
    from protoembed.data.training.formats import read_examples

    columns = parse_columns(args.columns) if args.columns else None
    examples = read_examples(args.data, format=args.format, columns=columns)
    missing = [name for name in PAIR_COLUMNS if name not in examples.columns]
    if missing:
        raise ProtoembedError(
            f"{args.data}: no {' and no '.join(missing)} column to mine from (the examples have "
            f"{', '.join(examples.names)}); map the file's columns with --columns "
            "anchor=COLUMN positive=COLUMN"
        )
    return list(examples.columns["anchor"]), list(examples.columns["positive"])


def read_corpus_texts(args: argparse.Namespace) -> list[str] | None:
    """The texts of ``--corpus`` (``None`` without one)."""
    if args.corpus is None:
        return None
    from protoembed.data.training.formats import read_examples

    mapping = {CORPUS_COLUMN: args.corpus_column} if args.corpus_column else None
    examples = read_examples(args.corpus, format=args.corpus_format, columns=mapping)
    if CORPUS_COLUMN not in examples.columns:
        raise ProtoembedError(
            f"{args.corpus}: no column of texts (the examples have {', '.join(examples.names)}); name it "
            "with --corpus-column"
        )
    return list(examples.columns[CORPUS_COLUMN])


def run(args: argparse.Namespace) -> int:
    """Read the pairs and the corpus, mine, write ``args.output``, print the summary line."""
    from protoembed.model.cross_encoder import load_cross_encoder
    from protoembed.retrieval.mining import mine_hard_negatives

    options = check_options(MineOptions, {name: getattr(args, name) for name in MineOptions.model_fields})
    anchors, positives = read_pairs(args)
    corpus = read_corpus_texts(args)
    cross_encoder = load_cross_encoder(args.cross_encoder, args.device) if args.cross_encoder else None
    model = load_from_args(args)
    examples, summary = mine_hard_negatives(
        model,
        anchors,
        positives,
        corpus,
        cross_encoder=cross_encoder,
        batch_size=args.batch_size,
        **options.model_dump(),
    )
    if not len(examples):
        raise ProtoembedError(f"{args.data}: {summary.line()}; nothing written to {args.output}")
    from protoembed.outputs.io import write_jsonl_atomic

    names = list(examples.columns)
    rows = (dict(zip(names, row)) for row in zip(*examples.columns.values()))
    write_jsonl_atomic(args.output, rows)
    print(f"wrote {args.output}: {summary.line()}")
    return 0
