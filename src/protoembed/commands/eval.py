"""``protoembed eval <suite>``: evaluate a model on a benchmark suite and write a results JSON.

Suites are sub-commands of ``eval``, one per :class:`~protoembed.evaluation.suite.Suite` of
:data:`protoembed.evaluation.suite.SUITES` (``sts``, ``transfer``, ``fewshot``, ``clustering``): its
:class:`~protoembed.evaluation.suite.CommandLine` gives the sub-command's help and options, ``--tasks``
takes the entries of :data:`protoembed.evaluation.tasks.TASKS` that list the suite. This module is an
adapter: the options parsed, it runs the :class:`~protoembed.evaluation.evaluator.Evaluator` of the
suite's tasks, as :func:`protoembed.evaluate` does, prints the suite's table and writes the results JSON (the model, the
suite's name ``"suite"`` and the suite's result).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from protoembed.commands.common import (
    add_allow_empty_option,
    add_data_dir_option,
    add_model_options,
    add_option_flags,
    add_pipeline_options,
    load_from_args,
    output_file,
    pipeline_options,
)
from protoembed.evaluation.encoders import LazyEncoder
from protoembed.evaluation.suite import SUITES, Suite

if TYPE_CHECKING:
    from protoembed.evaluation.tasks import Task


def lazy_encoder(args: argparse.Namespace) -> LazyEncoder:
    """A :class:`~protoembed.evaluation.encoders.LazyEncoder` for the model (``--runtime`` and
    ``--precision`` included), ``--batch-size``, ``--allow-empty`` and ``--cache-embeddings`` options of
    ``args`` (progress on stderr: a bar on a terminal, a line every 10 s elsewhere)."""
    return LazyEncoder(
        functools.partial(load_from_args, args),
        batch_size=args.batch_size,
        allow_empty=args.allow_empty,
        cache_embeddings=getattr(args, "cache_embeddings", False),
        show_progress_bar=True,
        **pipeline_options(args),
    )


def _finish(args: argparse.Namespace, result: dict[str, Any], table: str) -> int:
    from protoembed.outputs.io import write_json_atomic

    print(table)
    if args.output:
        target = write_json_atomic(args.output, result)
        print(f"wrote {target}", file=sys.stderr)
    return 0


def suite_options(suite: Suite, args: argparse.Namespace) -> dict[str, Any]:
    """The suite's options from the command line: each field of :attr:`Suite.options` read from
    ``args`` by name."""
    return {name: getattr(args, name) for name in suite.options.model_fields}


@contextlib.contextmanager
def registered(entry: Task | None) -> Iterator[None]:
    """``entry`` (``--task-dir``'s task) known by name in the block only, never registered
    (:func:`protoembed.evaluation.tasks.tasks_in_scope`)."""
    from protoembed.evaluation.tasks import tasks_in_scope

    with tasks_in_scope([entry] if entry is not None else None):
        yield


def run_eval(suite: Suite, args: argparse.Namespace) -> int:
    """``protoembed eval <suite>``: print the suite's tables, optionally write the results JSON (and the
    suite's other files, such as few-shot's ``--figure``); the results are
    :class:`~protoembed.evaluation.evaluator.Evaluator`'s, as :func:`protoembed.evaluate` returns them."""
    from protoembed.evaluation.evaluator import Evaluator

    if getattr(args, "cross_encoder", False):  # a folder that is no cross-encoder: said before the data
        from protoembed.model.cross_encoder import cross_encoder_dir

        cross_encoder_dir(args.model)
    folder = getattr(args, "task_dir", None)
    entry = suite.command.folder_task(folder) if folder else None
    tasks = [*(args.tasks or []), entry.name] if entry else args.tasks
    dims = getattr(args, "dims", None)
    with registered(entry):
        evaluator = Evaluator(
            tasks,
            suite=suite.name,
            data_dir=args.data_dir,
            batch_size=args.batch_size,
            **suite_options(suite, args),
        )
        if dims:
            return _finish(args, *_run_dims(suite, evaluator, args, dims))
        result = evaluator.run(
            lazy_encoder(args), label=args.model, model_path=args.model, progress=True, device=args.device
        )[suite.name]
    for path in suite.command.write_files(args, result):
        print(f"wrote {path}", file=sys.stderr)
    return _finish(args, result, suite.format_table(result))


def _run_dims(
    suite: Suite, evaluator: Any, args: argparse.Namespace, dims: list[int]
) -> tuple[dict[str, Any], str]:
    """``--dims``: :meth:`~protoembed.evaluation.evaluator.Evaluator.run`'s ``dims`` result (the suite at
    each width, from one encode) and its table with a row per width
    (:func:`~protoembed.evaluation.tables.dims_table`)."""
    from protoembed.evaluation.tables import dims_table
    from protoembed.evaluation.tasks import table_names

    assert suite.command.dims is not None
    caption, score = suite.command.dims
    result = evaluator.run(
        lazy_encoder(args),
        label=args.model,
        model_path=args.model,
        progress=True,
        device=args.device,
        dims=dims,
    )[suite.name]
    by_dim = result["dims"]
    names = list(by_dim[str(dims[0])]["tasks"])
    rows = [(int(dim), [r["tasks"][name][score] for name in names], r["avg"]) for dim, r in by_dim.items()]
    return result, "\n".join(dims_table(caption, table_names(names), rows)) + "\n"


def dims_list(text: str) -> list[int]:
    """``argparse`` type for ``--dims``: distinct positive integers, comma-separated (``384,256,128``)."""
    from protoembed.core.errors import ProtoembedError
    from protoembed.evaluation.evaluator import check_dims

    try:
        return check_dims([int(part) for part in text.split(",")])
    except (ValueError, ProtoembedError):
        raise argparse.ArgumentTypeError(
            f"expected distinct positive integers separated by commas (384,256,128), got {text!r}"
        ) from None


def task_name(suite: str) -> Callable[[str], str]:
    """``argparse`` type for ``--tasks``: a task of ``suite`` in :data:`protoembed.evaluation.tasks.TASKS`
    by its name or table name, case ignored, as its canonical name (looked up when parsed, so an entry
    added after the parser was built is known too)."""
    from protoembed.core.errors import ProtoembedError
    from protoembed.evaluation.tasks import get_task

    def convert(text: str) -> str:
        try:
            return get_task(text, suite).name
        except ProtoembedError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    convert.__name__ = "task"
    return convert


def add_suite(suites: argparse._SubParsersAction, suite: Suite) -> None:
    """Add the sub-command of ``suite`` from its :class:`~protoembed.evaluation.suite.CommandLine`: the
    options every suite has (model with --runtime, --data-dir, --tasks, --output, --allow-empty,
    --cache-embeddings), then its own and its output files. ``--tasks`` defaults to ``None`` (the suite's
    default tasks); ``--output`` and the output files are checked writable before anything runs."""
    command = suite.command
    from protoembed.evaluation.tasks import default_tasks

    tasks_help = command.tasks_help or f"tasks to run (default: {' '.join(default_tasks(suite.name))})"
    parser = suites.add_parser(suite.name, help=command.help, description=command.description)
    add_model_options(parser)
    add_pipeline_options(parser)
    add_data_dir_option(parser)
    parser.add_argument(
        "--tasks", nargs="+", type=task_name(suite.name), default=None, metavar="TASK", help=tasks_help
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
    if command.folder_task is not None:
        parser.add_argument(
            "--task-dir",
            default=None,
            metavar="DIR",
            help="evaluate the folder DIR as one more task, named after the folder (for this run only)",
        )
    if command.dims is not None:
        parser.add_argument(
            "--dims",
            type=dims_list,
            default=None,
            metavar="D1,D2,...",
            help="score at each of these vector widths (the first D dimensions of each vector, normalised "
            "again when the model normalises: as --truncate-dim D) from one encode at full size; one "
            "table, a row per width; the results JSON holds each width's result",
        )
    add_option_flags(parser, suite.options)
    for flag, metavar, help in command.output_files:
        parser.add_argument(flag, default=None, type=output_file(), metavar=metavar, help=help)
    parser.set_defaults(func=functools.partial(run_eval, suite))


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``eval`` and its suites to the top-level sub-parsers."""
    parser = subparsers.add_parser("eval", help="evaluate a model on a benchmark suite")
    suites = parser.add_subparsers(dest="suite", required=True, metavar="SUITE")
    for suite in SUITES.values():
        add_suite(suites, suite)
