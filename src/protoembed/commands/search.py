"""``protoembed search --model M --corpus FILE (--query TEXT ... | --queries FILE) [--top-k 10]``: the best
documents of a corpus for each query (:func:`protoembed.search`), printed, or written as JSON Lines.

The corpus (and a ``--queries`` file) is one document per line, or a ``.jsonl`` in the BEIR corpus layout
(:func:`protoembed.data.documents.read_documents`); a document's id is its ``_id``, else its line number.
The queries are encoded with the model's ``query`` prompt, the documents with its ``document`` prompt.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from protoembed.commands.common import add_model_options, output_file, positive_int
from protoembed.model.protocol import SCORE_FUNCTIONS
from protoembed.model.quantize import FLOAT32, VECTOR_TYPES
from protoembed.retrieval.faiss_index import EXACT_BELOW, NPROBE_FRACTION, PIP_FAISS
from protoembed.retrieval.quantized_search import RESCORE_MULTIPLIER
from protoembed.retrieval.semantic_search import INDEXES

#: Characters of a document or query shown per printed line.
SHOWN_CHARS = 80


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``search`` sub-command."""
    parser = subparsers.add_parser("search", help="the best documents of a corpus for each query")
    parser.add_argument(
        "--corpus",
        required=True,
        metavar="FILE",
        help="documents: one per line, or a .jsonl in the BEIR corpus layout (_id, title, text)",
    )
    queries = parser.add_mutually_exclusive_group(required=True)
    queries.add_argument("--query", action="append", metavar="TEXT", help="a query (repeat for more)")
    queries.add_argument("--queries", metavar="FILE", help="queries: one per line, or a BEIR queries.jsonl")
    parser.add_argument("--top-k", type=int, default=10, metavar="K", help="hits per query (default: 10)")
    parser.add_argument(
        "--index",
        choices=INDEXES,
        default=INDEXES[0],
        help=f"exact: every document scored, block by block; faiss: FAISS, exact below {EXACT_BELOW} "
        f"documents, an inverted-file index from there on ({PIP_FAISS}) (default: exact)",
    )
    parser.add_argument(
        "--nprobe",
        type=positive_int,
        metavar="N",
        help=f"faiss: cells visited per query (default: {NPROBE_FRACTION:.4g} of them)",
    )
    parser.add_argument(
        "--vectors",
        choices=VECTOR_TYPES,
        default=FLOAT32,
        help="the documents' vectors as searched: float32, or quantised (int8 / uint8: ranges calibrated on "
        "the corpus; binary / ubinary: Hamming distance) with the best rescored by the float query "
        "(default: float32)",
    )
    parser.add_argument(
        "--rescore-multiplier",
        type=int,
        default=RESCORE_MULTIPLIER,
        metavar="K",
        help=f"quantised vectors: K x --top-k candidates rescored with the float query; 0: none, the "
        f"scores are then minus the Hamming distance or the integer inner product (default: {RESCORE_MULTIPLIER})",
    )
    parser.add_argument(
        "--score-function",
        choices=SCORE_FUNCTIONS,
        help="default: the model's own (its similarity_fn_name; cosine when it names none)",
    )
    parser.add_argument(
        "--output",
        type=output_file(".jsonl", create_parents=False),
        metavar="FILE",
        help="write the rankings as JSON Lines (one object per query: query_id, query, hits) instead of "
        "printing them, in an existing writable folder",
    )
    add_model_options(parser)
    parser.set_defaults(func=run)


def shorten(text: str, width: int = SHOWN_CHARS) -> str:
    """``text`` on one line, cut to ``width`` characters (``...`` marking a cut)."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def result_rows(
    query_ids: list[Any], queries: list[str], rankings: list[list[tuple[Any, float]]]
) -> list[dict[str, Any]]:
    """One JSON object per query: ``query_id``, ``query`` and its ``hits`` (``rank`` from 1, ``id``,
    ``score``)."""
    return [
        {
            "query_id": qid,
            "query": query,
            "hits": [{"rank": r, "id": doc, "score": score} for r, (doc, score) in enumerate(ranking, 1)],
        }
        for qid, query, ranking in zip(query_ids, queries, rankings)
    ]


def run(args: argparse.Namespace) -> int:
    """Read the corpus and queries, search, print or write the rankings."""
    import protoembed
    from protoembed.commands.common import load_from_args
    from protoembed.data.documents import read_documents
    from protoembed.outputs.io import write_jsonl_atomic
    from protoembed.retrieval.quantized_search import check_rescore_multiplier
    from protoembed.retrieval.semantic_search import check_index, check_top_k

    check_top_k(args.top_k, "--top-k")
    check_index(args.index, args.nprobe)
    check_rescore_multiplier(args.rescore_multiplier, "--rescore-multiplier")
    if args.index == "faiss":
        from protoembed.retrieval.faiss_index import require_faiss

        require_faiss()
    doc_ids, docs = read_documents(args.corpus)
    if args.queries:
        query_ids, queries = read_documents(args.queries)
    else:
        query_ids, queries = list(range(1, len(args.query) + 1)), list(args.query)
    model = load_from_args(args)
    rankings = protoembed.search(
        model,
        queries,
        docs,
        top_k=args.top_k,
        corpus_ids=doc_ids,
        score_function=args.score_function,
        index=args.index,
        batch_size=args.batch_size,
        nprobe=args.nprobe,
        vectors=args.vectors,
        rescore_multiplier=args.rescore_multiplier,
    )
    rows = result_rows(query_ids, queries, rankings)
    if args.output:
        target = write_jsonl_atomic(args.output, rows, suffix=".jsonl")
        print(
            f"wrote {target}: {len(rows)} ranking(s), top {args.top_k} of {len(docs)} documents",
            file=sys.stderr,
        )
        return 0
    text_of = dict(zip(doc_ids, docs))
    for row in rows:
        print(f"query {row['query_id']}: {shorten(row['query'])}")
        for hit in row["hits"]:
            print(f"  {hit['rank']:>3}  {hit['id']}  {hit['score']:.4f}  {shorten(text_of[hit['id']])}")
    return 0
