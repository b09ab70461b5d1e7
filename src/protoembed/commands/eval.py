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
from typing import Any

from protoembed.commands.common import (
    add_allow_empty_option,
    add_model_options,
    load_from_args,
    output_file,
    task_names,
)
from protoembed.evaluation.encoders import LazyEncoder
from protoembed.evaluation.suite import Suite
from protoembed.evaluation.suites import SUITES


def lazy_encoder(args: argparse.Namespace) -> LazyEncoder:
    """A :class:`~protoembed.evaluation.encoders.LazyEncoder` for the model (``--runtime`` and
    ``--precision`` included), ``--batch-size``, ``--allow-empty`` and ``--cache-embeddings`` options of ``args`` (a progress bar when
    stderr is a terminal)."""
    return LazyEncoder(
        functools.partial(load_from_args, args),
        batch_size=args.batch_size,
        allow_empty=args.allow_empty,
        cache_embeddings=getattr(args, "cache_embeddings", False),
        show_progress_bar=sys.stderr.isatty(),
    )


def _meta(args: argparse.Namespace, encoder: LazyEncoder) -> dict[str, Any]:
    """The model's description for the results JSON: spec, resolved head (and template, if any)."""
    model = encoder.model
    meta: dict[str, Any] = {"model": args.model, "head": model.head}
    # what encoded the vectors: a report never mixes runtimes or precisions silently
    meta["runtime"] = model.runtime
    meta["precision"] = model.precision
    template = model.encoder.template
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
    from protoembed.data.needs import check_present, suite_needs

    if getattr(args, "cross_encoder", False):  # a folder that is no cross-encoder: said before the data
        from protoembed.evaluation.cross_encoder import cross_encoder_dir

        cross_encoder_dir(args.model)
    check_present(suite_needs(suite.name, args))  # the tasks' files, before the model is loaded
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
