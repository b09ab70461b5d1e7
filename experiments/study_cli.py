"""The command line every study shares, and the command its page names.

Every study (``unsup_cpu``, ``supervised_cpu``, ``domain_adapt``, ``own_pairs``, ``smaller_vectors``) takes
``--configs``, ``--runs-dir``, ``--records-dir`` and ``--report`` (defaults from its ``DEFAULTS``: the keys
``configs``, ``runs_dir``, ``records_dir``, ``report``), ``--set``, ``--report-only`` and ``--step-before``
(:func:`study_parser`); its page names the command that remakes it (:func:`given_arguments`,
:func:`script_command`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from experiments.step_rerun import STEP_BEFORE_FILE

__all__ = ["add_set_option", "given_arguments", "script_command", "study_parser"]


def study_parser(
    script: str, doc: str, defaults: Mapping[str, str], configs_help: str | None = None
) -> argparse.ArgumentParser:
    """The command line of ``experiments/<script>`` (described by the first line of ``doc``, its module
    docstring) with the options every study takes; the study adds its own:

    - ``--configs``, ``--runs-dir``, ``--records-dir``, ``--report`` (paths; ``defaults``' values);
    - ``--set`` (:func:`add_set_option`);
    - ``--report-only``: only rewrite the report from the records;
    - ``--step-before``: keep the records' headline numbers
      (:func:`~experiments.step_rerun.write_step_before`), then stop.
    """
    parser = argparse.ArgumentParser(prog=script_command(script), description=doc.split("\n")[0])
    parser.add_argument("--configs", default=defaults["configs"], type=Path, help=configs_help)
    parser.add_argument("--runs-dir", default=defaults["runs_dir"], type=Path, help="run folders (ignored)")
    parser.add_argument("--records-dir", default=defaults["records_dir"], type=Path, help="committed records")
    parser.add_argument("--report", default=defaults["report"], type=Path, help="the page")
    add_set_option(parser)
    parser.add_argument("--report-only", action="store_true", help="only rewrite the report from the records")
    parser.add_argument(
        "--step-before",
        action="store_true",
        help=f"only write the records' headline numbers to {STEP_BEFORE_FILE}, before records rerun with the "
        "current training step replace them (the page then shows both)",
    )
    return parser


def add_set_option(parser: argparse.ArgumentParser) -> None:
    """``--set KEY=VALUE`` (repeatable; ``args.set``, a list): config overrides every protoembed run of the
    script gets after its own, as ``protoembed train --set`` takes them."""
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="extra config override"
    )


def given_arguments(argv: list[str] | None) -> list[str]:
    """The study's arguments (``argv``, else the process's) without ``--report-only``: they remake its
    page."""
    return [a for a in (sys.argv[1:] if argv is None else argv) if a != "--report-only"]


def script_command(script: str, args: Iterable[str] = ()) -> str:
    """``python experiments/<script> ARGS``, each argument shell-quoted."""
    return f"python experiments/{script}" + "".join(" " + shlex.quote(a) for a in args)
