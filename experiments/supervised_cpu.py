"""The supervised CPU study: the BERT/ALBERT paper's Table I systems on the default backbone, then a report.

Run from the repository root: ``make experiment-supervised`` or ``python experiments/supervised_cpu.py``
(``--systems sbert cnn-sbert``, ``--regimes stsb``, ``--seeds 1 2 3`` select runs; ``--set KEY=VALUE`` adds a
config override to every run, e.g. ``--set training.epochs=4``; ``--report-only`` only rewrites the report;
``--step-before`` keeps the records' headline numbers before records rerun with the current training step
replace them, and the page then shows both).
It uses protoembed through ``protoembed train`` / ``protoembed eval sts`` (subprocesses; Table II's with
``--cross-encoder``) and ``protoembed.load_run`` (to read the configs).

Runs: ``configs/cpu/<system>-<regime>.yaml`` for the systems of :data:`SYSTEMS` and the regimes of
:data:`REGIMES` (STS-B, NLI, NLI then STS-B as one staged config; by default the NLI column is read from the NLI
stage of the NLI then STS-B runs, which is the NLI run itself), each seed into
``runs/supervised-cpu/<system>-<regime>-seed<k>/`` (git-ignored) with ``--resume``. A finished run is
recorded in ``docs/results/supervised-cpu/<run>/`` (committed: config, results, each stage's training log,
the time it took, the machine) and skipped afterwards, so the study can be stopped and resumed. Besides the
trainer's results (STS test tasks of ``best/`` with the config's head), a cross-encoder run records the
same tasks with the mean head over its encoder (``results-mean.json``: the Avg. row) and, when it ends on
STS-B, the cross-encoder's own STS-B test scores (``cross-encoder.json``: Table II). The untrained
backbone is evaluated with each row's head (``untrained-<head>/``).
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: python experiments/supervised_cpu.py
    import script_path  # noqa: F401  (puts the repository root on sys.path)

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
    timed,
    write_json,
)
from experiments.step_rerun import step_before  # noqa: E402
from experiments.study_cli import script_command, study_parser  # noqa: E402
from experiments.unsup_cpu import environment  # noqa: E402
from protoembed import ProtoembedError  # noqa: E402

#: System -> (row label, the heads its rows are evaluated with: first = the run's own head).
SYSTEMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "cross-encoder": ("Cross-encoder", ("cls", "mean")),
    "cross-encoder-bce": ("Cross-encoder, BCE", ("cls", "mean")),
    "sbert": ("SBERT", ("mean",)),
    "cnn-sbert": ("CNN-SBERT", ("cnn",)),
    "simcse-sup": ("Supervised SimCSE", ("cls",)),
}
#: Regime -> column label (Table I's fine-tuning data).
REGIMES = {"stsb": "STS-B", "nli": "NLI", "nli-stsb": "NLI then STS-B"}
STSB = "STSBenchmark"
MEAN_RESULTS = "results-mean.json"
CROSS_ENCODER_RESULTS = "cross-encoder.json"
DEFAULTS = {
    "configs": "configs/cpu",
    "runs_dir": "runs/supervised-cpu",
    "records_dir": "docs/results/supervised-cpu",
    "report": "docs/results/supervised-cpu.md",
}


def _say(message: str) -> None:
    print(f"supervised_cpu: {message}", file=sys.stderr, flush=True)


def study_configs(config_dir: Path, systems: list[str], regimes: list[str]) -> dict[str, Path]:
    """``{"<system>-<regime>": yaml}`` that exist in ``config_dir``, in table order."""
    found = {}
    for regime in regimes:  # column by column: STS-B first
        for system in systems:
            path = config_dir / f"{system}-{regime}.yaml"
            if path.is_file():
                found[f"{system}-{regime}"] = path
    if not found:
        raise ProtoembedError(f"no config of {systems} x {regimes} in {config_dir}")
    return found


def split_name(name: str) -> tuple[str, str]:
    """``"<system>-<regime>"`` -> (system, regime), the longest system of :data:`SYSTEMS` that fits
    (``cross-encoder-bce-stsb`` is the system ``cross-encoder-bce``, not ``cross-encoder``)."""
    fits = [s for s in SYSTEMS if name.startswith(s + "-") and name[len(s) + 1 :] in REGIMES]
    if not fits:
        raise ProtoembedError(f"{name!r} is not <system>-<regime> of {list(SYSTEMS)} x {list(REGIMES)}")
    system = max(fits, key=len)
    return system, name[len(system) + 1 :]


def is_cross_encoder(system: str) -> bool:
    """Whether ``system`` is a cross-encoder (either loss): its runs get the Avg. row and Table II."""
    return system == "cross-encoder" or system.startswith("cross-encoder-")


def _run(cmd: list[str], where: Path, quiet: bool = False) -> int:
    _say(f"{where.name}: {shlex.join(cmd[1:])}")
    return subprocess.call(cmd, stdout=subprocess.DEVNULL if quiet else None)


def eval_sts(model: str, head: str | None, out: Path, tasks: list[str], batch_size: int) -> int:
    """``protoembed eval sts --model MODEL --head HEAD`` on ``tasks`` into ``out``; without a head,
    ``--cross-encoder``: the pair scored as one input by the cross-encoder folder ``MODEL``."""
    scorer = ["--head", head] if head else ["--cross-encoder"]
    cmd = [sys.executable, "-m", "protoembed", "eval", "sts", "--model", model, *scorer]
    cmd += ["--batch-size", str(batch_size), "--tasks", *tasks, "--output", str(out)]
    return _run(cmd, out.parent, quiet=True)


def _final_run_dir(run_dir: Path, config: dict[str, Any]) -> Path:
    """The folder whose ``best/`` is the run's model: the last stage's for a staged run."""
    stages = config.get("stages")
    return run_dir / stages[-1]["name"] if stages else run_dir


def extra_evaluations(run_dir: Path, system: str, regime: str, tasks: list[str], batch_size: int) -> bool:
    """The Avg. row (mean head over a cross-encoder's encoder) and Table II (the cross-encoder on STS-B)."""
    import yaml

    if not is_cross_encoder(system):
        return True
    config = yaml.safe_load((run_dir / CONFIG_FILE).read_text(encoding="utf-8"))
    best = _final_run_dir(run_dir, config) / BEST_DIR
    if not (run_dir / MEAN_RESULTS).is_file():
        tasks = tasks if regime == "nli-stsb" else [STSB]
        if eval_sts(str(best), "mean", run_dir / MEAN_RESULTS, tasks, batch_size) != 0:
            return False
    for stage in [s["name"] for s in config.get("stages", [])][:-1]:  # earlier stages: the NLI column
        out = run_dir / stage / MEAN_RESULTS
        if (
            not out.is_file()
            and eval_sts(str(run_dir / stage / BEST_DIR), "mean", out, [STSB], batch_size) != 0
        ):
            return False
    out = run_dir / CROSS_ENCODER_RESULTS
    if regime.endswith("stsb") and not out.is_file():
        return eval_sts(str(best / "cross_encoder"), None, out, [STSB], batch_size) == 0
    return True


def record(run_dir: Path, record_dir: Path, env: dict[str, Any]) -> None:
    """Copy a finished run's small files (each stage's log and results as ``<stage>.<file>``) and ``env``."""
    files = [(run_dir / LOG_FILE, LOG_FILE)]
    for name in (LOG_FILE, RESULTS_FILE, MEAN_RESULTS):  # each stage's, as <stage>.<name>
        files += [(p, f"{p.parent.name}.{name}") for p in sorted(run_dir.glob(f"*/{name}"))]
    names = (CONFIG_FILE, TIME_FILE, MEAN_RESULTS, CROSS_ENCODER_RESULTS, RESULTS_FILE)  # results last
    copy_record(files + [(run_dir / name, name) for name in names], record_dir, env)


def run_one(
    config: Path, name: str, seed: int, args: argparse.Namespace, tasks: list[str], batch_size: int
) -> bool:
    """Train (or resume) one run, add its extra evaluations, record it; True if it finished."""
    system, regime = split_name(name)
    run_name = f"{name}-seed{seed}"
    run_dir, record_dir = args.runs_dir / run_name, args.records_dir / run_name
    if (record_dir / RESULTS_FILE).is_file():
        _say(f"{run_name}: recorded, skipped")
        return True
    load_start = load_average()
    with timed(run_dir):
        if not (run_dir / RESULTS_FILE).is_file():
            cmd = [sys.executable, "-m", "protoembed", "train", "--config", str(config), "--resume"]
            cmd += ["--output-dir", str(run_dir), "--set", f"training.seed={seed}"]
            if regime != "nli-stsb":  # Table I reads STS-B; Table III (every task) the NLI then STS-B runs
                cmd += ["--set", f"training.test_tasks=[{STSB}]"]
            for item in args.set:
                cmd += ["--set", item]
            if _run(cmd, run_dir) != 0:
                _say(f"{run_name} failed; rerun to resume it")
                return False
        if not extra_evaluations(run_dir, system, regime, tasks, batch_size):
            return False
    record(run_dir, record_dir, environment("default", load_start, load_average()))
    return True


def evaluate_untrained(records_dir: Path, tasks: list[str], batch_size: int) -> bool:
    """STS-B test results of the untrained backbone with each row's head, once per head (Table I's first
    column; the other tasks of the untrained model are in the unsupervised study's records)."""
    ok = True
    for head in sorted({h for _, heads in SYSTEMS.values() for h in heads}):
        out = records_dir / f"untrained-{head}"
        if (out / RESULTS_FILE).is_file():
            continue
        out.mkdir(parents=True, exist_ok=True)
        load_start = load_average()
        with timed(out):
            code = eval_sts("default", head, out / RESULTS_FILE, [STSB], batch_size)
        if code == 0:
            write_json(out / ENVIRONMENT_FILE, environment("default", load_start, load_average()))
        ok = ok and code == 0
    return ok


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = study_parser("supervised_cpu.py", __doc__, DEFAULTS)
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    parser.add_argument(
        "--regimes",
        nargs="+",
        default=["stsb", "nli-stsb"],
        choices=list(REGIMES),
        help="default: stsb nli-stsb (the NLI column is the NLI stage of the NLI then STS-B runs: the same "
        "config, data, steps and seed as an NLI run)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the study (see the module docstring); returns the exit code."""
    args = parse_args(argv)
    return guarded(lambda: _study(args, argv), _say)


def _study(args: argparse.Namespace, argv: list[str] | None) -> int:
    """The study's body (see :func:`main`)."""
    from experiments.supervised_cpu_report import headline, write_report
    from protoembed import load_run

    if args.step_before:
        return step_before(args.records_dir, headline(args.records_dir), _say)

    configs = study_configs(args.configs, args.systems, args.regimes)
    _, first = load_run(next(iter(configs.values())), args.set)[-1]
    tasks, batch_size = list(first.training.test_tasks), first.training.eval_batch_size
    failed = []
    if not args.report_only:
        if not evaluate_untrained(args.records_dir, tasks, batch_size):
            failed.append("untrained")
        for seed in args.seeds:  # seed-major: a partial study already fills whole columns
            for name, config in configs.items():
                if not run_one(config, name, seed, args, tasks, batch_size):
                    failed.append(f"{name}-seed{seed}")
    write_report(args.report, args.records_dir, args.configs, _command(argv))
    _say(f"report written to {args.report}")
    return finished(failed, _say)


#: The options the page depends on; the others choose what runs, and the page is drawn from every record.
PAGE_OPTIONS = ("--configs", "--records-dir", "--report")


def _command(argv: list[str] | None) -> str:
    """The command that rewrites this page: the script with only the given :data:`PAGE_OPTIONS`."""
    given, kept = list(sys.argv[1:] if argv is None else argv), []
    for i, arg in enumerate(given):
        if arg.split("=", 1)[0] in PAGE_OPTIONS:
            kept += [arg] if "=" in arg or i + 1 == len(given) else [arg, given[i + 1]]
    return script_command("supervised_cpu.py", kept)


if __name__ == "__main__":
    sys.exit(main())
