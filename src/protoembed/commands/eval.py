"""``protoembed eval <suite>``: evaluate a model on a benchmark suite and write a results JSON.

Suites are sub-commands of ``eval``, one per :class:`~protoembed.evaluation.suite.Suite` of
:data:`protoembed.evaluation.suites.SUITES` (``sts``, ``transfer``, ``fewshot``, ``clustering``): its
declaration gives the sub-command's help, tasks, options, evaluation and table. The results JSON records
the model, the suite's name (``"suite"``) and the suite's result.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from protoembed.commands.common import (
    add_allow_empty_option,
    add_model_options,
    load_from_args,
    output_file,
    task_names,
)
from protoembed.errors import EmptySentenceError, ProtoembedError
from protoembed.evaluation.suite import Suite
from protoembed.evaluation.suites import SUITES

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


def run_suite(suite: Suite, args: argparse.Namespace) -> int:
    """``protoembed eval <suite>``: print the suite's tables, optionally write the results JSON (and the
    suite's other files, such as few-shot's ``--figure``)."""
    encoder = lazy_encoder(args)
    result = suite.evaluate(args, encoder)
    # a cross-encoder (STS --cross-encoder) never loads the embedder: the model spec alone describes it
    meta = _meta(args, encoder) if encoder.model is not None else {"model": args.model}
    result = {**meta, "suite": suite.name, **result}
    for path in suite.write_files(args, result):
        print(f"wrote {path}", file=sys.stderr)
    return _finish(args, result, suite.format_table(result))


def _suite_parser(
    suites: argparse._SubParsersAction,
    name: str,
    help: str,
    description: str,
    tasks: tuple[str, ...],
    all_by_default: bool = True,
    tasks_help: str | None = None,
    aliases: Mapping[str, str] | Callable[[], Mapping[str, str]] | None = None,
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


def add_suite(suites: argparse._SubParsersAction, suite: Suite) -> None:
    """Add the sub-command of ``suite``: the options every suite has, then its own and its output files."""
    parser = _suite_parser(
        suites,
        suite.name,
        suite.help,
        suite.description,
        suite.tasks,
        all_by_default=suite.all_by_default,
        tasks_help=suite.tasks_help,
        aliases=suite.display_names or None,
    )
    suite.add_options(parser)
    for flag, metavar, help in suite.output_files:
        parser.add_argument(flag, default=None, type=output_file(), metavar=metavar, help=help)
    parser.set_defaults(func=functools.partial(run_suite, suite))


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``eval`` and its suites to the top-level sub-parsers."""
    parser = subparsers.add_parser("eval", help="evaluate a model on a benchmark suite")
    suites = parser.add_subparsers(dest="suite", required=True, metavar="SUITE")
    for suite in SUITES.values():
        add_suite(suites, suite)
