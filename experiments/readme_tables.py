"""Rewrite the result tables that ``protoembed report --summary`` makes in the README and the documentation
pages (docs/), or check they are current.

A generated table sits between two HTML comments: the first holds the ``protoembed report`` arguments
(inputs, ``--label`` renames, ``--summary``), the second closes the block::

    <!-- protoembed report docs/results/x/a docs/results/x/b --summary --label a=A -->
    | Model | ... |
    <!-- end report -->

The table is what the command itself writes (``protoembed report ARGS -o FILE``, run from the repository
root, so paths are relative to it).

Usage: ``python experiments/readme_tables.py [--check] [FILE.md ...]`` (default: :func:`pages`); with
``--check`` nothing is written and the exit code is 1 when a table differs from what its records give now.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python experiments/readme_tables.py
    import script_path  # noqa: F401  (puts the repository root on sys.path)

from experiments.records import write_text  # noqa: E402
from protoembed import ProtoembedError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"(<!-- protoembed report (?P<args>.+?) -->\n)(?P<table>.*?)(<!-- end report -->)", re.S)


def _table(arguments: str, origin: str) -> str:
    """The summary table, between blank lines, that ``protoembed report`` writes for one block's
    arguments; its error (the last line it says) is raised as a one-line error naming ``origin``."""
    args = shlex.split(arguments)
    if "--summary" not in args:
        raise ProtoembedError(f"{origin}: expected 'protoembed report INPUTS... --summary [--label ...]'")
    with tempfile.TemporaryDirectory() as folder:
        table = Path(folder) / "table.md"
        command = [sys.executable, "-m", "protoembed", "report", *args, "-o", str(table)]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            said = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
            raise ProtoembedError(f"{origin}: protoembed report: {said[-1]}")
        return "\n" + table.read_text(encoding="utf-8") + "\n"


def render(text: str, origin: str) -> str:
    """``text`` with every generated block's table made again from its records."""

    def replace(match: re.Match[str]) -> str:
        line = text.count("\n", 0, match.start()) + 1
        return match.group(1) + _table(match.group("args"), f"{origin}:{line}") + match.group(4)

    return BLOCK.sub(replace, text)


def pages() -> list[Path]:
    """The README and every page under docs/ that holds a generated table, in path order."""
    found = sorted(
        path for path in (ROOT / "docs").rglob("*.md") if "<!-- protoembed report " in path.read_text("utf-8")
    )
    return [ROOT / "README.md", *found]


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or with ``--check`` compare) the generated tables of each page; 0 when all are current or
    rewritten, 1 when ``--check`` finds one stale, 2 on an error."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "files", nargs="*", help="markdown files (default: the README and the docs pages with a table)"
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a table is stale")
    args = parser.parse_args(argv)
    stale = False
    for path in [Path(name) for name in args.files] or pages():
        try:
            text = path.read_text(encoding="utf-8")
            new = render(text, os.path.relpath(path))
        except (OSError, ProtoembedError) as err:
            print(f"readme_tables: {err}", file=sys.stderr)
            return 2
        if new == text:
            print(f"readme_tables: {path.name} is current", file=sys.stderr)
        elif args.check:
            print(
                f"readme_tables: {path.name} differs from its records; run python experiments/readme_tables.py"
            )
            stale = True
        else:
            write_text(path, new)
            print(f"readme_tables: rewrote {path}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
