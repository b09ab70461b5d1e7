"""Rewrite the README's result tables that ``protoembed report --summary`` makes, or check they are current.

A generated table sits between two HTML comments: the first holds the ``protoembed report`` arguments
(inputs, ``--label`` renames, ``--summary``), the second closes the block::

    <!-- protoembed report docs/results/x/a docs/results/x/b --summary --label a=A -->
    | Model | ... |
    <!-- end report -->

The table is made in this process by the same code as the command (:func:`protoembed.report.summary_table`
on :func:`protoembed.report.load_results`), with paths relative to the repository root.

Usage: ``python experiments/readme_tables.py [--check] [README.md]``; with ``--check`` nothing is written and
the exit code is 1 when a table differs from what its records give now.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from pathlib import Path

from protoembed.cli import build_parser
from protoembed.errors import ProtoembedError
from protoembed.io import write_atomic
from protoembed.report import by_suite, load_results, summary_table

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"(<!-- protoembed report (?P<args>.+?) -->\n)(?P<table>.*?)(<!-- end report -->)", re.S)


def _table(arguments: str, origin: str) -> str:
    """The summary table, between blank lines, for one block's ``protoembed report`` arguments."""
    expected = f"{origin}: expected 'protoembed report INPUTS... --summary [--label ...]'"
    try:  # the command's own parser, so a block takes exactly the command's options
        args = build_parser().parse_args(["report", *shlex.split(arguments), "-o", os.devnull])
    except SystemExit:
        raise ProtoembedError(expected) from None
    if not args.summary:
        raise ProtoembedError(expected)
    results = load_results([ROOT / item for item in args.inputs], args.label or ())
    return "\n" + "\n".join(summary_table(by_suite(results))) + "\n\n"


def render(text: str, origin: str) -> str:
    """``text`` with every generated block's table made again from its records."""

    def replace(match: re.Match[str]) -> str:
        line = text.count("\n", 0, match.start()) + 1
        return match.group(1) + _table(match.group("args"), f"{origin}:{line}") + match.group(4)

    return BLOCK.sub(replace, text)


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or with ``--check`` compare) the README's generated tables; 0 when current or rewritten."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("readme", nargs="?", default=str(ROOT / "README.md"))
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a table is stale")
    args = parser.parse_args(argv)
    path = Path(args.readme)
    try:
        text = path.read_text(encoding="utf-8")
        new = render(text, os.path.relpath(path))
    except (OSError, ProtoembedError) as err:
        print(f"readme_tables: {err}", file=sys.stderr)
        return 2
    if new == text:
        print(f"readme_tables: {path.name} is current", file=sys.stderr)
        return 0
    if args.check:
        print(f"readme_tables: {path.name} differs from its records; run python experiments/readme_tables.py")
        return 1
    write_atomic(path, lambda tmp: Path(tmp).write_text(new, encoding="utf-8"))
    print(f"readme_tables: rewrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
