"""Domain adaptation study: does a short unsupervised run on unlabeled in-domain text help clustering?

For each short-text clustering set (StackOverflow, Biomedical, Tweet), each method (SimCSE, ConPVP; the
configs in ``configs/cpu/adapt/``) and seeds {1, 2, 3}: train the default backbone on the set's texts
(the ``clustering`` format keeps the text field of each line and drops the label, so no run ever reads a
label), then cluster the same set with the trained model (``protoembed eval clustering``: k-means with
k = classes, 10 runs, Hungarian accuracy and NMI). "Before" is the untrained default model (its own mean
head) on the same sets and STS-B test. The short-text clustering literature trains on the texts it
clusters, without their labels; this study asks the same of a general sentence model.

Run from the repository root: ``make experiment-adapt`` or ``python experiments/domain_adapt.py``
(``--sets tweet --methods simcse`` for a subset, ``--report-only`` to rewrite the report, ``--step-before``
to keep the records' headline numbers before records rerun with the current training step replace them:
:mod:`experiments.step_rerun`). Like
:mod:`experiments.unsup_cpu` it talks to the library through the ``protoembed`` command (subprocesses)
and ``protoembed.load_run`` (to check the configs). Runs train into ``runs/domain-adaptation/<method>-<set>-seed<k>/`` (git-ignored: the
models); a finished run's small files (``config.yaml``, ``training_log.jsonl``, ``results.json`` with
STS-B test, ``clustering.json``, ``study_time.json`` with the wall time of training and of clustering,
``environment.json``) are recorded in ``docs/results/domain-adaptation/<run>/`` (committed). A recorded run
is skipped and an interrupted one resumes from its checkpoint, so the study can be stopped and completed
later. The report, ``docs/results/domain-adaptation.md``, is rewritten from the records every time.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: python experiments/domain_adapt.py
    import script_path  # noqa: F401  (puts the repository root on sys.path)

from experiments.domain_adapt_report import (  # noqa: E402
    CLUSTERING_FILE,
    UNTRAINED,
    collect,
    headline,
    write_report,
)
from experiments.records import (  # noqa: E402
    BEST_DIR,
    CONFIG_FILE,
    ENVIRONMENT_FILE,
    LOG_FILE,
    RESULTS_FILE,
    TIME_FILE,
    copy_record,
    finished,
    guarded,
    load_average,
    machine,
    timed_call,
    write_json,
)
from experiments.step_rerun import step_before  # noqa: E402
from experiments.study_cli import given_arguments, script_command, study_parser  # noqa: E402

#: Config name of a set -> the clustering task it is evaluated on (the order of the study and report).
SETS = {"tweet": "Tweet", "stackoverflow": "StackOverflow", "biomedical": "Biomedical"}
METHODS = {"simcse": "SimCSE", "conpvp": "ConPVP"}
DEFAULT_SEEDS = [1, 2, 3]
DEFAULTS = {
    "configs": "configs/cpu/adapt",
    "runs_dir": "runs/domain-adaptation",
    "records_dir": "docs/results/domain-adaptation",
    "report": "docs/results/domain-adaptation.md",
}


def _say(message: str) -> None:
    print(f"domain_adapt: {message}", file=sys.stderr, flush=True)


def _timed(cmd: list[str], run_dir: Path, key: str, quiet: bool = False) -> bool:
    """Run ``cmd``; add its wall time to ``run_dir``'s ``key``; True if it exited 0."""
    _say(f"{run_dir.name}: {' '.join(cmd[1:])}")
    code = timed_call(cmd, run_dir, key, quiet=quiet)
    if code != 0:
        _say(f"{run_dir.name}: exit {code}; rerun to resume")
    return code == 0


def record(run_dir: Path, record_dir: Path, env: dict[str, Any]) -> None:
    """Copy a finished run's small files and ``env`` to its (committed) record folder."""
    # the clustering results last: they mark a complete record
    names = (CONFIG_FILE, LOG_FILE, TIME_FILE, RESULTS_FILE, CLUSTERING_FILE)
    copy_record([(run_dir / name, name) for name in names], record_dir, env)


def run_one(
    config: Path, task: str, seed: int, run_dir: Path, record_dir: Path, overrides: list[str]
) -> bool:
    """Train (or resume) one run, cluster its set with the trained model, record it; True if done."""
    if (record_dir / CLUSTERING_FILE).is_file():
        _say(f"{run_dir.name}: recorded, skipped")
        return True
    load_start = load_average()
    py = [sys.executable, "-m", "protoembed"]
    if not (run_dir / RESULTS_FILE).is_file():
        cmd = [*py, "train", "--config", str(config), "--resume"]
        cmd += ["--output-dir", str(run_dir), "--set", f"training.seed={seed}"]
        for item in overrides:
            cmd += ["--set", item]
        if not _timed(cmd, run_dir, "train_s"):
            return False
    if not (run_dir / CLUSTERING_FILE).is_file():
        cmd = [*py, "eval", "clustering", "--model", str(run_dir / BEST_DIR), "--tasks", task]
        if not _timed([*cmd, "--output", str(run_dir / CLUSTERING_FILE)], run_dir, "clustering_s", True):
            return False
    record(run_dir, record_dir, machine(load_start, load_average()))
    return True


def evaluate_untrained(records_dir: Path, tasks: list[str], reuse: Path | None) -> bool:
    """Clustering and STS-B test of the untrained default model (its mean head), once.

    ``reuse``: a ``protoembed eval clustering --model default`` results file with the same protocol (10
    k-means runs, seeds 0-9: deterministic), whose rows for ``tasks`` are taken instead of re-encoding.
    """
    out = records_dir / UNTRAINED
    out.mkdir(parents=True, exist_ok=True)
    py = [sys.executable, "-m", "protoembed"]
    if (out / CLUSTERING_FILE).is_file() and (out / RESULTS_FILE).is_file():
        return True  # recorded: its files, the environment included, are left as they are
    if not (out / CLUSTERING_FILE).is_file():
        old = json.loads(reuse.read_text(encoding="utf-8")) if reuse and reuse.is_file() else None
        if old and old.get("model") == "default" and all(t in old["tasks"] for t in tasks):
            kept = {**old, "tasks": {t: old["tasks"][t] for t in tasks}, "copied_from": str(reuse)}
            write_json(out / CLUSTERING_FILE, kept)
            _say(f"untrained clustering rows taken from {reuse}")
        else:
            cmd = [*py, "eval", "clustering", "--model", "default", "--tasks", *tasks]
            if not _timed([*cmd, "--output", str(out / CLUSTERING_FILE)], out, "clustering_s", True):
                return False
    if not (out / RESULTS_FILE).is_file():
        cmd = [*py, "eval", "sts", "--model", "default", "--tasks", "STSBenchmark"]
        if not _timed([*cmd, "--output", str(out / RESULTS_FILE)], out, "sts_s", True):
            return False
    write_json(out / ENVIRONMENT_FILE, machine(None, load_average()))
    return True


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = study_parser("domain_adapt.py", __doc__, DEFAULTS, "<method>-<set>.yaml folder")
    parser.add_argument("--seeds", type=int, nargs="+", default=DEFAULT_SEEDS)
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    parser.add_argument("--sets", nargs="+", choices=list(SETS), default=list(SETS))
    parser.add_argument(
        "--untrained-from",
        default="docs/results/clustering-default.json",
        type=Path,
        help="take the untrained model's clustering rows from this `eval clustering --model default` file",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the study (see the module docstring); returns the exit code."""
    args = parse_args(argv)
    return guarded(lambda: _study(args, argv), _say)


def _study(args: argparse.Namespace, argv: list[str] | None) -> int:
    """The study's body (see :func:`main`)."""
    from protoembed import load_run

    if args.step_before:
        return step_before(
            args.records_dir, headline(collect(args.records_dir, SETS, METHODS), SETS, METHODS), _say
        )

    configs = {}
    for method in args.methods:
        for name in args.sets:
            path = args.configs / f"{method}-{name}.yaml"
            load_run(path, args.set)  # every config checked before the first run
            configs[method, name] = path
    failed = []
    if not args.report_only:
        if not evaluate_untrained(args.records_dir, [SETS[s] for s in SETS], args.untrained_from):
            failed.append(UNTRAINED)
        for seed in args.seeds:  # seed-major: a partial study already has every cell once
            for name in args.sets:
                for method in args.methods:
                    run = f"{method}-{name}-seed{seed}"
                    ok = run_one(
                        configs[method, name],
                        SETS[name],
                        seed,
                        args.runs_dir / run,
                        args.records_dir / run,
                        args.set,
                    )
                    if not ok:
                        failed.append(run)
    write_report(args.report, args.records_dir, SETS, METHODS, args.configs, _command(argv, args))
    _say(f"report written to {args.report}")
    return finished(failed, _say)


def _command(argv: list[str] | None, args: argparse.Namespace) -> str:
    """How to remake the study: ``make experiment-adapt`` when the defaults were used."""
    defaults = parse_args([])
    keys = ("configs", "seeds", "set", "runs_dir", "records_dir", "report", "methods", "sets")
    if all(getattr(args, k) == getattr(defaults, k) for k in keys):
        return "`make experiment-adapt` (= `python experiments/domain_adapt.py`)"
    return f"`{script_command('domain_adapt.py', given_arguments(argv))}`"


if __name__ == "__main__":
    sys.exit(main())
