"""``protoembed train --config FILE.yaml [--set key=value ...] [--output-dir DIR] [--resume]``.

Runs under ``torchrun --nproc_per_node N -m protoembed train ...`` and ``accelerate launch -m protoembed
train ...`` as well (Accelerate reads the launcher's environment); see :mod:`protoembed.training.trainer`.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from protoembed.commands.common import check_output_folder, output_folder
from protoembed.core.errors import WriteError, resume_with

if TYPE_CHECKING:
    from protoembed.training.preflight import Stages


def _print_progress() -> logging.Handler:
    """Print the trainer's ``protoembed.training`` log records on stderr, one line each (only there: not
    also through the command line's ``protoembed`` handler)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("protoembed train: %(message)s"))
    log = logging.getLogger("protoembed.training")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    return handler


def run_train(args: argparse.Namespace) -> int:
    """Check the run before the heavy imports (:mod:`protoembed.training.preflight`) and take its output
    folders' locks, then train (``--check``: print what was checked and stop)."""
    from protoembed.outputs.folder_lock import hold_output_dirs
    from protoembed.training.preflight import output_folders, preflight
    from protoembed.training.stages import load_run

    # --output-dir: a path is not YAML, so it is kept verbatim. Validated before torch is imported.
    stages = load_run(args.config, list(args.set or []), args.output_dir)
    staged = bool(stages[0][0])  # the pipeline's folder holds the stages' folders
    top = os.path.dirname(str(stages[0][1].output_dir)) if staged else str(stages[0][1].output_dir)
    if stages[0][1].output_dir:  # before any data is read or model loaded (--output-dir: at parse time)
        check_output_folder(top)
    checked = preflight(stages, args.config, whole_files=args.check, resume=args.resume)
    folders = output_folders(stages)
    with hold_output_dirs(folders):  # a busy folder is refused here, before torch is imported
        if args.check:
            return _print_check(args, stages, checked, folders)
        return _train(args, stages, staged, top)


def _print_check(args: argparse.Namespace, stages: Stages, checked: list[str], folders: list[Path]) -> int:
    """``--check``: the precision checked against this machine, then one line per check on stdout."""
    precisions = dict.fromkeys(cfg.training.precision for _, cfg in stages)
    kinds = ", ".join(f"{name or 'run'}: {cfg.objective.name}" for name, cfg in stages)
    lines = [f"config {args.config}: valid ({kinds})"]
    lines += checked
    lines += [f"output folder {folder}: not in use by another run (its lock taken)" for folder in folders]
    for precision in precisions:
        if precision == "fp32":  # runs everywhere: no torch imported for it
            lines.append("training.precision fp32: runs on any machine")
            continue
        from protoembed.training.mixed_precision import check_precision_here

        lines.append(f"training.precision {precision}: {check_precision_here(precision)}")
    for line in lines:
        print(f"protoembed train --check: {line}")
    print("protoembed train --check: all checks passed; nothing trained")
    return 0


def _train(args: argparse.Namespace, stages: Stages, staged: bool, top: str) -> int:
    """Train the checked, locked run; the exit code (a stopped or interrupted run: the signal's)."""
    from protoembed.outputs.folder_lock import main_process
    from protoembed.training.preflight import output_folders
    from protoembed.training.stages import train_stages
    from protoembed.training.stopping import TrainingInterrupted  # torch, transformers, ...

    handler = _print_progress()
    try:
        train_stages(stages, resume=args.resume, hold_lock=False)
    except TrainingInterrupted as stop:
        if stop.main_process:
            out = os.path.dirname(str(stop.output_dir)) if staged else str(stop.output_dir)
            print(f"protoembed train: {stop}; resume with: {_resume_command(args, out)}", file=sys.stderr)
        return 128 + 15  # the shell's status for a process ended by SIGTERM
    except WriteError as err:  # a full disk: the message says what was kept
        print(
            f"protoembed: error: {resume_with(str(err), _resume_command(args, os.path.abspath(top)))}",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        if main_process():
            kept = _kept_checkpoint([folder.absolute() for folder in output_folders(stages)])
            print(
                f"protoembed train: interrupted (Ctrl-C); {kept}; resume with: "
                f"{_resume_command(args, os.path.abspath(top))}",
                file=sys.stderr,
            )
        return 128 + 2  # the shell's status for a process ended by SIGINT
    finally:
        log = logging.getLogger("protoembed.training")
        log.removeHandler(handler)
        log.propagate = True
    return 0


def _kept_checkpoint(folders: list[Path]) -> str:
    """What a resumed run starts from: the latest stage folder's checkpoint, or that there is none."""
    from protoembed.training.checkpoint import find_checkpoint, kept_checkpoint, read_state

    for folder in reversed(folders):
        checkpoint = find_checkpoint(folder)
        if checkpoint is not None:
            return kept_checkpoint(read_state(checkpoint).step, checkpoint)
    return kept_checkpoint(None)


def _resume_command(args: argparse.Namespace, output_dir: str) -> str:
    """The command that continues an interrupted run (absolute paths, the same ``--set`` overrides)."""
    command = ["protoembed", "train", "--config", os.path.abspath(args.config)]
    for override in args.set or []:
        command += ["--set", override]
    command += ["--output-dir", output_dir, "--resume"]
    text = shlex.join(command)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        text += " (under the same launcher, with the same number of processes)"
    return text


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``train`` to the top-level sub-parsers."""
    parser = subparsers.add_parser(
        "train",
        help="train an embedder from a YAML config (ConPVP, SimCSE, PromptBERT, SBERT, cross-encoder, ...)",
        description="Train an embedder from a YAML config; writes OUTPUT_DIR/best (sentence-transformers "
        "layout), results.json (STS test results of best), training_log.jsonl and checkpoints. A config "
        "with 'stages' trains them in turn, each in OUTPUT_DIR/<stage name>.",
    )
    parser.add_argument("--config", required=True, metavar="FILE.yaml", help="training config (see configs/)")
    parser.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set training.lr=1e-5 --set objective.temperature=0.1 (repeatable)",
    )
    parser.add_argument(
        "--output-dir",
        default=None,
        type=output_folder,
        metavar="DIR",
        help="output directory (overrides the config); checked writable first",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue from OUTPUT_DIR/checkpoint (a finished run is left as is)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the run and stop: the config, every file it reads (present, its rows parse), the base "
        "model, the precision on this machine and the output folder (writable, not in use); trains nothing",
    )
    parser.set_defaults(func=run_train)
