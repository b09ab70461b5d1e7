"""``protoembed analyze <analysis>``: the ConPVP paper's embedding-space figures (PNG) and their data (JSON).

Analyses (see :mod:`protoembed.evaluation.analysis`): ``similarity`` (Fig. 4, predicted cosine vs gold on
STS-B test), ``frequent-tokens`` (Fig. 5, STS average with the top-k frequent tokens left out of mean
pooling), ``tsne`` (Fig. 6, t-SNE of chosen STS-B test pairs).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from protoembed.commands.common import add_model_options, load_from_args
from protoembed.errors import ProtoembedError
from protoembed.evaluation import analysis
from protoembed.io import write_json_atomic

ANALYSES = ("similarity", "frequent-tokens", "tsne")


def run(args: argparse.Namespace) -> int:
    """Load the model, run the analysis, write the figure (and the JSON), print the summary."""
    try:
        top_k = [int(k) for k in args.top_k.split(",")] if args.top_k else list(analysis.TOP_K)
    except ValueError:
        top_k = [-1]
    if any(k < 0 for k in top_k):
        raise ProtoembedError(f"--top-k takes comma-separated non-negative integers, got {args.top_k!r}")
    if args.analysis == "tsne" and args.pairs < 2:  # checked before the slow model load
        raise ProtoembedError(f"--pairs must be at least 2, got {args.pairs}")
    model = load_from_args(args)
    if args.analysis == "similarity":
        result: dict[str, Any] = analysis.similarity_vs_gold(
            model, args.data_dir, args.figure, args.variant, batch_size=args.batch_size
        )
    elif args.analysis == "frequent-tokens":
        result = analysis.frequent_token_removal(
            model, args.data_dir, args.figure, top_k, variant=args.variant, batch_size=args.batch_size
        )
    else:
        result = analysis.tsne_pairs(
            model,
            args.data_dir,
            args.figure,
            args.pairs,
            args.min_score,
            args.seed,
            args.variant,
            batch_size=args.batch_size,
        )
    result = {"analysis": args.analysis, "model": args.model, "head": model.head, **result}
    print(json.dumps({k: v for k, v in result.items() if k != "pairs"}, indent=2))
    print(f"wrote {result['figure']}", file=sys.stderr)
    if args.output:
        print(f"wrote {write_json_atomic(args.output, result)}", file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``analyze`` to the top-level sub-parsers."""
    parser = subparsers.add_parser(
        "analyze",
        help="embedding-space figures: similarity vs gold, frequent tokens, t-SNE of pairs",
        description=__doc__.split("\n\n")[1].replace("\n", " "),
    )
    parser.add_argument("analysis", choices=ANALYSES)
    add_model_options(parser)
    parser.add_argument("--figure", required=True, metavar="FILE.png", help="where to write the figure")
    parser.add_argument("--output", default=None, metavar="FILE.json", help="write the data as JSON here")
    parser.add_argument(
        "--data-dir", default=None, metavar="D", help="benchmark data (default: $PROTOEMBED_DATA)"
    )
    parser.add_argument("--variant", choices=("senteval", "raw"), default="senteval", help="STS data variant")
    parser.add_argument(
        "--top-k", default=None, metavar="K,K,...", help="frequent-tokens: k values (0,1,2,5,10,20,50,100)"
    )
    parser.add_argument("--pairs", type=int, default=12, help="tsne: number of STS-B test pairs")
    parser.add_argument("--min-score", type=float, default=4.0, help="tsne: minimum gold score of a pair")
    parser.add_argument("--seed", type=int, default=0, help="tsne: seed of the pair draw and of t-SNE")
    parser.set_defaults(func=run)
