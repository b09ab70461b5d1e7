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


def _print_progress() -> logging.Handler:
    """Print the trainer's ``protoembed.training`` log records on stderr, one line each."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("protoembed train: %(message)s"))
    log = logging.getLogger("protoembed.training")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    return handler


def run_train(args: argparse.Namespace) -> int:
    """Load and validate the config, then train."""
    from protoembed.training.stages import load_run, train_stages
    from protoembed.training.stopping import TrainingInterrupted

    # --output-dir: a path is not YAML, so it is kept verbatim
    stages = load_run(args.config, list(args.set or []), args.output_dir)
    handler = _print_progress()
    try:
        train_stages(stages, resume=args.resume)
    except TrainingInterrupted as stop:
        if stop.main_process:
            staged = bool(stages[0][0])  # the pipeline's folder holds the stages' folders
            out = os.path.dirname(str(stop.output_dir)) if staged else str(stop.output_dir)
            print(f"protoembed train: {stop}; resume with: {_resume_command(args, out)}", file=sys.stderr)
        return 128 + 15  # the shell's status for a process ended by SIGTERM
    finally:
        logging.getLogger("protoembed.training").removeHandler(handler)
    return 0


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
        "--output-dir", default=None, metavar="DIR", help="output directory (overrides the config)"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue from OUTPUT_DIR/checkpoint (a finished run is left as is)",
    )
    parser.set_defaults(func=run_train)
