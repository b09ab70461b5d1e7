"""``protoembed eval <suite>``: evaluate a model on a benchmark suite and write a results JSON.

Suites are sub-commands of ``eval``; each one is a ``_register_<suite>(suites)`` function listed in
:data:`SUITES` (``sts``, ``transfer``, ``fewshot``, ``clustering``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from protoembed.commands.common import (
    add_allow_empty_option,
    add_model_options,
    load_from_args,
    output_file,
    task_names,
)
from protoembed.data.clustering import CLUSTERING_TASKS
from protoembed.data.sts import SHORT_NAMES as STS_SHORT_NAMES
from protoembed.data.sts import STS_TASKS
from protoembed.data.transfer import TRANSFER_TASKS
from protoembed.errors import EmptySentenceError, ProtoembedError

if TYPE_CHECKING:
    import numpy as np


class LazyEncoder:
    """``encode(sentences) -> array`` that loads the model on its first call.

    Loading lazily lets a suite read (and validate) its data before the slow model load. After the
    first call, :attr:`model` is the loaded :class:`~protoembed.Embedder` (or its ONNX export, with
    ``--runtime onnx``) and, with ``--cache-embeddings``, :attr:`store` its
    :class:`~protoembed.evaluation.embedding_cache.EmbeddingStore`.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.model = None
        self.store = None

    def _load(self) -> None:
        self.model = load_from_args(self.args)
        runtime = getattr(self.args, "runtime", "torch")
        digest = None  # of the torch model's weights and settings: keys both caches, hashed once
        if getattr(self.args, "cache_embeddings", False):
            from protoembed.evaluation.embedding_cache import EmbeddingStore, store_folder
            from protoembed.export.cache import model_digest

            digest = model_digest(self.model)
            key = runtime + ("-allow-empty" if self.args.allow_empty else "")
            self.store = EmbeddingStore(self._encode, store_folder(digest, key))
        if runtime == "onnx":
            from protoembed.export.cache import onnx_embedder

            self.model = onnx_embedder(self.model, digest=digest)

    def _encode(self, sentences: list[str]) -> np.ndarray:
        import numpy as np

        try:
            vectors = self.model.encode(
                sentences,
                batch_size=self.args.batch_size,
                show_progress_bar=sys.stderr.isatty(),
                allow_empty=self.args.allow_empty,
            )
        except EmptySentenceError as err:
            first = sentences[err.indexes[0]]
            raise ProtoembedError(
                f"{len(err.indexes)} sentence(s) of the benchmark data have no tokens (first: {first!r}); "
                "pass --allow-empty to encode them as the template alone"
            ) from None
        return np.asarray(vectors)

    def __call__(self, sentences: list[str]) -> np.ndarray:
        if self.model is None:
            self._load()
        return self.store(sentences) if self.store is not None else self._encode(sentences)


def lazy_encoder(args: argparse.Namespace) -> LazyEncoder:
    """A :class:`LazyEncoder` for the model options of ``args``."""
    return LazyEncoder(args)


def _meta(args: argparse.Namespace, encoder: LazyEncoder) -> dict[str, Any]:
    """The model's description for the results JSON: spec, resolved head (and template, if any)."""
    model = encoder.model
    meta: dict[str, Any] = {"model": args.model, "head": getattr(model, "head", args.head)}
    template = getattr(getattr(model, "encoder", None), "template", args.template)
    if template is not None:
        meta["template"] = template
    return meta


def _finish(args: argparse.Namespace, result: dict[str, Any], table: str) -> int:
    from protoembed.io import write_json_atomic

    print(table)
    if args.output:
        target = write_json_atomic(args.output, result)
        print(f"wrote {target}", file=sys.stderr)
    return 0


def run_sts(args: argparse.Namespace) -> int:
    """``protoembed eval sts``: print the STS tables, optionally write the results JSON."""
    from protoembed.evaluation.sts import evaluate_sts, format_sts_table

    tasks = args.tasks
    if tasks is None:  # STS12-16 have only a test split: a dev/train run defaults to the two that have one
        tasks = list(STS_TASKS) if args.split == "test" else ["STSBenchmark", "SICKRelatedness"]
    if args.cross_encoder:  # the pair scored as one input (the BERT/ALBERT paper's Table II)
        from protoembed.evaluation.cross_encoder import evaluate_cross_encoder_sts

        options = dict(tasks=tasks, split=args.split, batch_size=args.batch_size, device=args.device)
        result = evaluate_cross_encoder_sts(args.model, args.data_dir, variant=args.variant, **options)
        result = {"model": args.model, "scorer": "cross-encoder", **result}
        return _finish(args, result, format_sts_table(result))
    encoder = lazy_encoder(args)
    result = evaluate_sts(encoder, args.data_dir, variant=args.variant, tasks=tasks, split=args.split)
    result = {**_meta(args, encoder), **result}
    return _finish(args, result, format_sts_table(result))


def _evaluate(
    args: argparse.Namespace, evaluate: Callable[..., dict[str, Any]], **options: Any
) -> dict[str, Any]:
    """``evaluate(encoder, data_dir, tasks=..., progress=True, **options)`` plus the model's description."""
    encoder = lazy_encoder(args)
    result = evaluate(encoder, args.data_dir, tasks=args.tasks, progress=True, **options)
    return {**_meta(args, encoder), **result}


def run_transfer(args: argparse.Namespace) -> int:
    """``protoembed eval transfer``: print the transfer tables, optionally write the results JSON."""
    from protoembed.evaluation.transfer import evaluate_transfer, format_transfer_table

    result = _evaluate(
        args,
        evaluate_transfer,
        folds=args.folds,
        inner_folds=args.inner_folds,
        seed=args.seed,
        mrpc_features=args.mrpc_features,
    )
    return _finish(args, result, format_transfer_table(result))


def run_clustering(args: argparse.Namespace) -> int:
    """``protoembed eval clustering``: print the clustering tables, optionally write the results JSON."""
    from protoembed.evaluation.clustering import evaluate_clustering, format_clustering_table

    result = _evaluate(args, evaluate_clustering, runs=args.runs)
    return _finish(args, result, format_clustering_table(result))


def run_fewshot(args: argparse.Namespace) -> int:
    """``protoembed eval fewshot``: print the table; optionally write the JSON and the violin plot."""
    from protoembed.evaluation.fewshot import evaluate_fewshot, format_fewshot_table, plot_fewshot

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
    aliases: dict[str, str] | Callable[[], dict[str, str]] | None = None,
) -> argparse.ArgumentParser:
    """A suite's sub-parser with the options every suite has: model, --data-dir, --tasks, --output,
    --allow-empty and --runtime.

    ``--tasks`` defaults to all of ``tasks`` (``all_by_default``), else to ``None`` (the suite decides);
    it accepts the names the papers' tables print (``aliases``: task -> that name) too. ``--output``
    is checked to be writable before anything runs.
    """
    default_tasks = list(tasks) if all_by_default else None
    tasks_help = tasks_help or f"tasks to run (default: all of {' '.join(tasks)})"
    parser = suites.add_parser(name, help=help, description=description)
    add_model_options(parser)
    parser.add_argument(
        "--data-dir", default=None, metavar="D", help="benchmark data (default: $PROTOEMBED_DATA)"
    )
    parser.add_argument(
        "--tasks",
        nargs="+",
        type=task_names(tasks, aliases),
        default=default_tasks,
        metavar="TASK",
        help=tasks_help,
    )
    parser.add_argument(
        "--output", default=None, type=output_file(), metavar="FILE.json", help="write the results JSON here"
    )
    add_allow_empty_option(parser)
    parser.add_argument(
        "--runtime",
        choices=("torch", "onnx"),
        default="torch",
        help="encode with torch (default) or with ONNX Runtime on an fp32 export of the model, made once "
        "and cached in $PROTOEMBED_CACHE/onnx (default ~/.cache/protoembed/onnx); same vectors to ~1e-7",
    )
    parser.add_argument(
        "--cache-embeddings",
        action="store_true",
        help="keep the model's sentence vectors in $PROTOEMBED_CACHE/embeddings (default "
        "~/.cache/protoembed/embeddings) and look them up in later runs of the same model: few-shot after "
        "transfer encodes almost nothing",
    )
    return parser


def _transfer_short_names() -> dict[str, str]:
    """The transfer tasks' table names (``SST2`` -> ``SST``), imported only when a name needs them."""
    from protoembed.evaluation.transfer import SHORT_NAMES

    return SHORT_NAMES


def _register_sts(suites: argparse._SubParsersAction) -> None:
    parser = _suite_parser(
        suites,
        "sts",
        "STS12-16, STS-B, SICK-R: cosine vs gold, Spearman/Pearson x100",
        "Evaluate on STS12-16 (all subsets of a year pooled), STS Benchmark and SICK-R.",
        STS_TASKS,
        all_by_default=False,
        tasks_help=f"tasks to run, also as STS-B / SICK-R (default: all of {' '.join(STS_TASKS)}; "
        "with --split dev/train: STS-B and SICK-R)",
        aliases=STS_SHORT_NAMES,
    )
    parser.add_argument("--variant", choices=("senteval", "raw"), default="senteval", help="data variant")
    parser.add_argument(
        "--split",
        choices=("test", "dev", "train"),
        default="test",
        help="split of STSBenchmark/SICKRelatedness (default: test)",
    )
    parser.add_argument(
        "--cross-encoder",
        action="store_true",
        help="score each pair with the cross-encoder of MODEL (a cross_encoder run's best/ or its "
        "cross_encoder/ folder) instead of the cosine of two embeddings",
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
        aliases=_transfer_short_names,
    )
    parser.add_argument("--folds", type=int, default=10, help="outer CV folds (MR, CR, SUBJ, MPQA)")
    parser.add_argument("--inner-folds", type=int, default=10, help="inner CV folds that choose C")
    parser.add_argument("--seed", type=int, default=1111, help="seed of the fold splits (SentEval's)")
    parser.add_argument(
        "--mrpc-features",
        choices=("senteval", "full"),
        default="senteval",
        help="MRPC classifier inputs: SentEval's [|u-v|, u*v] (default) or [u, v, |u-v|, u*v]",
    )
    parser.set_defaults(func=run_transfer)


def _register_fewshot(suites: argparse._SubParsersAction) -> None:
    parser = _suite_parser(
        suites,
        "fewshot",
        "few-shot transfer: K examples per class, several seeds, logistic regression",
        "Train logistic regression on K labelled examples per class (drawn per seed) of each SentEval "
        "transfer task and report the accuracy over the seeds (test split, or the undrawn examples).",
        TRANSFER_TASKS,
        aliases=_transfer_short_names,
    )
    parser.add_argument("--shots", type=int, default=16, help="labelled examples per class (default 16)")
    parser.add_argument("--seeds", type=int, default=10, help="draws (seeds 0..seeds-1, default 10)")
    parser.add_argument("--C", type=float, default=1.0, help="inverse L2 strength of the classifier")
    parser.add_argument(
        "--figure", default=None, type=output_file(), metavar="FILE.png", help="write the violin plot here"
    )
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
