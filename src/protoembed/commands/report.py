"""``protoembed report RESULTS_OR_DIRS... -o report.md``: the ConPVP paper's tables and figures on one page.

Inputs are results JSON (``protoembed eval ... --output``, ``protoembed analyze ... --output``) and
folders holding them (a ``protoembed train`` run folder: its ``results.json``). Files with the same
label are seeds of one model and are shown as mean ± std.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from protoembed.report import load_results, write_report, write_summary


def run(args: argparse.Namespace) -> int:
    """Read the inputs, write the page (and its few-shot figure), say where."""
    results = load_results(args.inputs, args.label or ())
    if args.summary:
        print(f"wrote {write_summary(results, args.output)}", file=sys.stderr)
        return 0
    ablation = [a for item in args.ablation or () for a in item.split(",") if a]
    command = args.command or "protoembed report " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    target = write_report(results, args.output, ablation, command, figures=not args.no_figures)
    print(f"wrote {target}", file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``report`` to the top-level sub-parsers."""
    parser = subparsers.add_parser(
        "report",
        help="one markdown page of the papers' tables from results JSON of any number of models",
        description=__doc__.split("\n\n")[1].replace("\n", " ").replace("``", ""),
    )
    parser.add_argument("inputs", nargs="+", metavar="RESULTS_OR_DIR", help="results JSON files or folders")
    parser.add_argument("-o", "--output", required=True, metavar="REPORT.md", help="where to write the page")
    parser.add_argument(
        "--label",
        action="append",
        metavar="NAME|OLD=NEW",
        help="one per input, in order (the same name for the seeds of one model), or OLD=NEW renames",
    )
    parser.add_argument(
        "--ablation",
        action="append",
        metavar="LABEL,LABEL,...",
        help="labels of the ablation table (ConPVP Table 4), the full model first; the others leave Table 3",
    )
    parser.add_argument(
        "--summary",
        action="store_true",
        help="write only one table: each model's average on every suite given (the Avg. cells of the page; "
        "a column per table, so one per runtime/precision of a suite's results)",
    )
    parser.add_argument("--no-figures", action="store_true", help="do not draw the few-shot figure")
    parser.add_argument("--command", default=None, help=argparse.SUPPRESS)
    parser.set_defaults(func=run)
