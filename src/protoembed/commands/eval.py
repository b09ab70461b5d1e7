"""``protoembed eval <suite>``: evaluate a model on a benchmark suite and write a results JSON.

Suites are sub-commands of ``eval``; each one is a ``_register_<suite>(suites)`` function listed in
:data:`SUITES` (``sts``, ``transfer``, ``fewshot``, ``clustering``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from protoembed.commands.common import add_model_options, load_from_args
from protoembed.data.clustering import CLUSTERING_TASKS
from protoembed.evaluation.clustering import evaluate_clustering, format_clustering_table
from protoembed.evaluation.fewshot import evaluate_fewshot, format_fewshot_table, plot_fewshot
from protoembed.evaluation.sts import STS_TASKS, evaluate_sts, format_sts_table
from protoembed.evaluation.transfer import TRANSFER_TASKS, evaluate_transfer, format_transfer_table
from protoembed.io import write_json_atomic


def lazy_encoder(args: argparse.Namespace) -> Callable[[list[str]], np.ndarray]:
    """Return ``encode(sentences) -> array`` that loads the model on its first call.

    Loading lazily lets a suite read (and validate) its data before the slow model load.
    """
    state: dict[str, Any] = {}

    def encode(sentences: list[str]) -> np.ndarray:
        if "model" not in state:
            state["model"] = load_from_args(args)
        progress = sys.stderr.isatty()
        return np.asarray(
            state["model"].encode(sentences, batch_size=args.batch_size, show_progress_bar=progress)
        )

    return encode


def _meta(args: argparse.Namespace) -> dict[str, Any]:
    meta: dict[str, Any] = {"model": args.model, "head": args.head}
    if args.template is not None:
        meta["template"] = args.template
    return meta


def _finish(args: argparse.Namespace, result: dict[str, Any], table: str) -> int:
    print(table)
    if args.output:
        target = write_json_atomic(args.output, result)
        print(f"wrote {target}", file=sys.stderr)
    return 0


def run_sts(args: argparse.Namespace) -> int:
    """``protoembed eval sts``: print the STS tables, optionally write the results JSON."""
    tasks = args.tasks
    if tasks is None:  # STS12-16 have only a test split: a dev/train run defaults to the two that have one
        tasks = list(STS_TASKS) if args.split == "test" else ["STSBenchmark", "SICKRelatedness"]
    result = evaluate_sts(
        lazy_encoder(args), args.data_dir, variant=args.variant, tasks=tasks, split=args.split
    )
    result = {**_meta(args), **result}
    return _finish(args, result, format_sts_table(result))


def _evaluate(
    args: argparse.Namespace, evaluate: Callable[..., dict[str, Any]], **options: Any
) -> dict[str, Any]:
    """``evaluate(encoder, data_dir, tasks=..., progress=True, **options)`` plus the model's description."""
    result = evaluate(lazy_encoder(args), args.data_dir, tasks=args.tasks, progress=True, **options)
    return {**_meta(args), **result}


def run_transfer(args: argparse.Namespace) -> int:
    """``protoembed eval transfer``: print the transfer tables, optionally write the results JSON."""
    result = _evaluate(
        args, evaluate_transfer, folds=args.folds, inner_folds=args.inner_folds, seed=args.seed
    )
    return _finish(args, result, format_transfer_table(result))


def run_clustering(args: argparse.Namespace) -> int:
    """``protoembed eval clustering``: print the clustering tables, optionally write the results JSON."""
    result = _evaluate(args, evaluate_clustering, runs=args.runs)
    return _finish(args, result, format_clustering_table(result))


def run_fewshot(args: argparse.Namespace) -> int:
    """``protoembed eval fewshot``: print the table; optionally write the JSON and the violin plot."""
    result = _evaluate(args, evaluate_fewshot, shots=args.shots, seeds=args.seeds, c=args.C)
    if args.figure:
        print(f"wrote {plot_fewshot(result, args.figure)}", file=sys.stderr)
    return _finish(args, result, format_fewshot_table(result))


def _suite_parser(
    suites: argparse._SubParsersAction,
    name: str,
    help: str,
    description: str,
    tasks: tuple[str, ...],
    all_by_default: bool = True,
    tasks_help: str | None = None,
) -> argparse.ArgumentParser:
    """A suite's sub-parser with the options every suite has: model, --data-dir, --tasks, --output.

    ``--tasks`` defaults to all of ``tasks`` (``all_by_default``), else to ``None`` (the suite decides).
    """
    default_tasks = list(tasks) if all_by_default else None
    tasks_help = tasks_help or f"tasks to run (default: all of {' '.join(tasks)})"
    parser = suites.add_parser(name, help=help, description=description)
    add_model_options(parser)
    parser.add_argument(
        "--data-dir", default=None, metavar="D", help="benchmark data (default: $PROTOEMBED_DATA)"
    )
    parser.add_argument(
        "--tasks", nargs="+", choices=tasks, default=default_tasks, metavar="TASK", help=tasks_help
    )
    parser.add_argument("--output", default=None, metavar="FILE.json", help="write the results JSON here")
    return parser


def _register_sts(suites: argparse._SubParsersAction) -> None:
    parser = _suite_parser(
        suites,
        "sts",
        "STS12-16, STS-B, SICK-R: cosine vs gold, Spearman/Pearson x100",
        "Evaluate on STS12-16 (all subsets of a year pooled), STS Benchmark and SICK-R.",
        STS_TASKS,
        all_by_default=False,
        tasks_help=f"tasks to run (default: all of {' '.join(STS_TASKS)}; with --split dev/train: STS-B and SICK-R)",
    )
    parser.add_argument("--variant", choices=("senteval", "raw"), default="senteval", help="data variant")
    parser.add_argument(
        "--split",
        choices=("test", "dev", "train"),
        default="test",
        help="split of STSBenchmark/SICKRelatedness (default: test)",
    )
    parser.set_defaults(func=run_sts)


def _register_transfer(suites: argparse._SubParsersAction) -> None:
    parser = _suite_parser(
        suites,
        "transfer",
        "SentEval MR CR SUBJ MPQA SST2 TREC MRPC: logistic regression on frozen embeddings",
        "Evaluate on the SentEval transfer tasks (SentEval's scikit-learn protocol: nested "
        "10-fold CV for MR/CR/SUBJ/MPQA, dev-selected C for SST2, inner CV on train for TREC/MRPC).",
        TRANSFER_TASKS,
    )
    parser.add_argument("--folds", type=int, default=10, help="outer CV folds (MR, CR, SUBJ, MPQA)")
    parser.add_argument("--inner-folds", type=int, default=10, help="inner CV folds that choose C")
    parser.add_argument("--seed", type=int, default=1111, help="seed of the fold splits (SentEval's)")
    parser.set_defaults(func=run_transfer)


def _register_fewshot(suites: argparse._SubParsersAction) -> None:
    parser = _suite_parser(
        suites,
        "fewshot",
        "few-shot transfer: K examples per class, several seeds, logistic regression",
        "Train logistic regression on K labelled examples per class (drawn per seed) of each SentEval "
        "transfer task and report the accuracy over the seeds (test split, or the undrawn examples).",
        TRANSFER_TASKS,
    )
    parser.add_argument("--shots", type=int, default=16, help="labelled examples per class (default 16)")
    parser.add_argument("--seeds", type=int, default=10, help="draws (seeds 0..seeds-1, default 10)")
    parser.add_argument("--C", type=float, default=1.0, help="inverse L2 strength of the classifier")
    parser.add_argument("--figure", default=None, metavar="FILE.png", help="write the violin plot here")
    parser.set_defaults(func=run_fewshot)


def _register_clustering(suites: argparse._SubParsersAction) -> None:
    parser = _suite_parser(
        suites,
        "clustering",
        "short-text clustering: k-means, Hungarian-matched accuracy and NMI",
        "Cluster each dataset with k-means (k = classes, several runs); report accuracy after "
        "the best one-to-one cluster-class matching and NMI, mean ± std over the runs.",
        CLUSTERING_TASKS,
    )
    parser.add_argument("--runs", type=int, default=10, help="k-means runs (seeds 0..runs-1)")
    parser.set_defaults(func=run_clustering)


#: Suites of ``protoembed eval``: name -> function adding its sub-parser.
SUITES: dict[str, Callable[[argparse._SubParsersAction], None]] = {
    "sts": _register_sts,
    "transfer": _register_transfer,
    "fewshot": _register_fewshot,
    "clustering": _register_clustering,
}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``eval`` and its suites to the top-level sub-parsers."""
    parser = subparsers.add_parser("eval", help="evaluate a model on a benchmark suite")
    suites = parser.add_subparsers(dest="suite", required=True, metavar="SUITE")
    for add in SUITES.values():
        add(suites)
