"""The unsupervised CPU study: every ``configs/cpu`` method x seeds {1, 2, 3}, then a markdown report.

``make experiment-unsup`` runs ``python -m protoembed.training.study``. Each run trains into
``runs/unsup-cpu/<method>-seed<k>/`` (git-ignored: weights, checkpoints) with ``protoembed train --resume``
in a subprocess. A finished run's ``results.json`` and ``study_time.json`` are recorded in
``docs/results/unsup-cpu/<method>-seed<k>/`` (small, committed), and a recorded run is skipped; an
interrupted one continues from its checkpoint. So the study can be stopped (Ctrl-C) and completed across
sessions and machines. The untrained default model (its own mean head) is evaluated once into
``docs/results/unsup-cpu/untrained-default/``. The report, ``docs/results/unsup-cpu.md``, is rewritten
from the records (``--report-only`` skips training), with its figure ``docs/results/unsup-cpu.png``
(:mod:`protoembed.training.study_figure`).

Wall time: each run's ``study_time.json`` accumulates the seconds its subprocesses took (over all
sessions); the report's total is their sum plus the untrained model's evaluation.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from protoembed.errors import ProtoembedError
from protoembed.io import write_atomic, write_json_atomic
from protoembed.training.config import STS_TEST_TASKS, load_config  # noqa: F401 (re-exported)
from protoembed.training.study_figure import plot_study

#: Report order and labels of the configs/cpu methods (other configs follow, labelled by file name).
METHODS = {
    "conpvp-paper": "ConPVP (paper: Table 1 templates, no denoising)",
    "conpvp-official": "ConPVP (authors' code: their templates, denoising)",
    "conpvp-manual": "ConPVP w/ manual",
    "conpvp-no-neg": "ConPVP w/o c-",
    "conpvp-no-proto": "ConPVP w/o c+ & c-",
    "simcse": "SimCSE",
    "promptbert": "PromptBERT",
}
SHORT = {"STSBenchmark": "STS-B", "SICKRelatedness": "SICK-R"}
UNTRAINED = "untrained-default"
TIME_FILE = "study_time.json"


def method_configs(config_dir: Path, methods: list[str] | None = None) -> dict[str, Path]:
    """``{method: yaml}`` of ``config_dir``, in report order; ``methods`` selects a subset."""
    found = {p.stem: p for p in sorted(config_dir.glob("*.yaml"))}
    if not found:
        raise ProtoembedError(f"no *.yaml config in {config_dir}")
    order = [m for m in METHODS if m in found] + [m for m in found if m not in METHODS]
    if methods:
        unknown = [m for m in methods if m not in found]
        if unknown:
            raise ProtoembedError(f"unknown method {unknown[0]!r}; {config_dir} has: {', '.join(order)}")
        order = [m for m in order if m in methods]
    return {m: found[m] for m in order}


def _add_time(run_dir: Path, seconds: float) -> None:
    path = run_dir / TIME_FILE
    before = json.loads(path.read_text(encoding="utf-8"))["seconds"] if path.is_file() else 0.0
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, {"seconds": round(before + seconds, 1)})


def run_one(config: Path, seed: int, run_dir: Path, overrides: list[str], record_dir: Path) -> bool:
    """Train (or resume) one run in a subprocess, then record its results; True if it finished."""
    if (record_dir / "results.json").is_file():
        print(f"study: {run_dir.name}: finished, skipped", file=sys.stderr, flush=True)
        return True
    if (run_dir / "results.json").is_file():  # trained, not yet recorded
        _record(run_dir, record_dir)
        return True
    cmd = [sys.executable, "-m", "protoembed", "train", "--config", str(config), "--resume"]
    cmd += ["--output-dir", str(run_dir), "--set", f"training.seed={seed}"]
    for item in overrides:
        cmd += ["--set", item]
    print(f"study: {run_dir.name}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        code = subprocess.call(cmd)
    finally:
        _add_time(run_dir, time.monotonic() - started)
    if code != 0:
        print(f"study: {run_dir.name} failed (exit {code}); rerun to resume it", file=sys.stderr, flush=True)
        return False
    _record(run_dir, record_dir)
    return True


def _record(run_dir: Path, record_dir: Path) -> None:
    """Copy a finished run's small result files to its (committed) record folder."""
    record_dir.mkdir(parents=True, exist_ok=True)
    for name in (TIME_FILE, "results.json"):  # results last: its presence marks the record complete
        if (run_dir / name).is_file():
            write_json_atomic(record_dir / name, json.loads((run_dir / name).read_text(encoding="utf-8")))


def evaluate_untrained(runs_dir: Path, data_dir: str | None, variant: str, tasks: list[str]) -> None:
    """STS results of the untrained default model with its own (mean) head, once."""
    out = runs_dir / UNTRAINED
    if (out / "results.json").is_file():
        return
    import protoembed
    from protoembed.evaluation.sts import evaluate_sts

    print("study: evaluating the untrained default model", file=sys.stderr, flush=True)
    started = time.monotonic()
    model = protoembed.load("default")
    results = evaluate_sts(
        lambda s: model.encode(s, batch_size=128, show_progress_bar=False),
        data_dir,
        variant=variant,
        tasks=tasks,
    )
    results["model"] = "default (untrained, its own mean head)"
    out.mkdir(parents=True, exist_ok=True)
    _add_time(out, time.monotonic() - started)
    write_json_atomic(out / "results.json", results)


# ------------------------------------------------------------------ report
def _collect(runs_dir: Path, method: str, seeds: list[int]) -> list[dict[str, Any]]:
    out = []
    for seed in seeds:
        path = runs_dir / f"{method}-seed{seed}" / "results.json"
        if path.is_file():
            out.append(json.loads(path.read_text(encoding="utf-8")))
    return out


def _mean_std(values: list[float]) -> str:
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{np.mean(values):.2f} ± {np.std(values, ddof=1):.2f}"


def _run_seconds(runs_dir: Path) -> float:
    return sum(json.loads(p.read_text(encoding="utf-8"))["seconds"] for p in runs_dir.glob(f"*/{TIME_FILE}"))


def _seconds(run_dir: Path) -> float:
    path = run_dir / TIME_FILE
    return json.loads(path.read_text(encoding="utf-8"))["seconds"] if path.is_file() else 0.0


def _observations(averages: dict[str, list[float]], untrained: dict[str, Any] | None) -> str:
    """Mechanical statements: each method's mean STS avg against the untrained model and SimCSE."""
    if not averages:
        return "No finished run yet.\n"
    base = untrained["avg"] if untrained is not None else None
    simcse = averages.get(METHODS["simcse"])
    lines = []
    for label, values in sorted(averages.items(), key=lambda kv: -np.mean(kv[1])):
        mean = float(np.mean(values))
        spread = float(np.std(values, ddof=1)) if len(values) > 1 else float("nan")
        parts = [f"- {label}: avg {mean:.2f}"]
        if base is not None:
            parts.append(f"{mean - base:+.2f} vs untrained")
        if simcse and label != METHODS["simcse"]:
            parts.append(f"{mean - float(np.mean(simcse)):+.2f} vs SimCSE")
        if not math.isnan(spread):
            parts.append(f"seed std {spread:.2f}")
        lines.append(", ".join(parts))
    return "\n".join(lines) + "\n"


def _discussion(records_dir: Path) -> str:
    """The hand-written explanation kept beside the records (``DISCUSSION.md``), if any."""
    path = records_dir / "DISCUSSION.md"
    return "\n" + path.read_text(encoding="utf-8").strip() + "\n" if path.is_file() else ""


def write_report(
    path: Path,
    runs_dir: Path,
    configs: dict[str, Path],
    seeds: list[int],
    command: str,
    tasks: list[str],
    overrides: list[str] | None = None,
) -> str:
    """Write the markdown report from the finished runs; returns its text."""
    names = [SHORT.get(t, t) for t in tasks]
    header = "| Method | seeds | " + " | ".join(names) + " | Avg. |"
    rule = "|---|---:|" + "---:|" * (len(tasks) + 1)
    rows = []
    untrained_path = runs_dir / UNTRAINED / "results.json"
    untrained = json.loads(untrained_path.read_text(encoding="utf-8")) if untrained_path.is_file() else None
    if untrained is not None:
        cells = [_mean_std([untrained["tasks"][t]["spearman"]]) for t in tasks] + [
            _mean_std([untrained["avg"]])
        ]
        rows.append("| untrained default (mean head) | - | " + " | ".join(cells) + " |")
    dev_rows, complete = [], True
    per_method: dict[str, list[dict[str, Any]]] = {}
    for method in configs:
        results = _collect(runs_dir, method, seeds)
        complete &= len(results) == len(seeds)
        label = METHODS.get(method, method)
        if not results:
            rows.append(f"| {label} | 0/{len(seeds)} | " + " | ".join(["-"] * (len(tasks) + 1)) + " |")
            continue
        cells = [_mean_std([r["tasks"][t]["spearman"] for r in results]) for t in tasks]
        cells.append(_mean_std([r["avg"] for r in results]))
        rows.append(f"| {label} | {len(results)}/{len(seeds)} | " + " | ".join(cells) + " |")
        dev = _mean_std([r.get("stsb_dev_spearman") for r in results])
        steps = ", ".join(str(r.get("best_step")) for r in results)
        minutes = [_seconds(runs_dir / f"{method}-seed{seed}") / 60 for seed in seeds]
        minutes = [m for m in minutes if m > 0]
        per_run = f"{np.mean(minutes):.1f}" if minutes else "-"
        dev_rows.append(f"| {label} | {dev} | {steps} | {per_run} |")
        per_method[label] = results

    first = load_config(next(iter(configs.values())), overrides)
    t = first.training
    steps = t.max_steps or t.epochs * (11914 // t.batch_size)  # the staged sample's usable sentences
    total = _run_seconds(runs_dir)
    status = "complete" if complete else "INCOMPLETE (rerun the command to finish the missing runs)"
    path.parent.mkdir(parents=True, exist_ok=True)
    figure = plot_study(path.with_suffix(".png"), per_method, tasks, untrained, SHORT)
    picture = (
        f"\n![STS average per method and seed; per-task change from the untrained model]({figure.name})\n"
        if figure is not None
        else ""
    )
    text = (
        f"""# Unsupervised sentence embeddings on CPU: ConPVP, its ablations, SimCSE, PromptBERT

Generated by `python -m protoembed.training.study` from the run records in `{runs_dir}`; study status: **{status}**.

Command: {command} (resumable: finished runs are skipped; `--report-only` rewrites this page from the
records without training)

Total wall time: **{total / 60:.1f} min** ({total:.0f} s, the sum of every run's training + evaluation
processes over all sessions, and the untrained model's evaluation).

Setup (every method the same): backbone `{first.model}` (all-MiniLM-L6-v2), corpus
`{first.data.corpus}`, {steps} steps of batch {t.batch_size}, lr {t.lr:g} (linear decay, warm-up
{t.warmup}), sentences truncated to {first.max_seq_length} tokens, seeds {", ".join(map(str, seeds))};
STS-B dev Spearman every {t.eval_steps} steps, the best checkpoint kept and evaluated. Test metric:
Spearman x100 of cosine similarity ({t.eval_variant} data, STS12-16 "all" setting, STS-B and SICK-R
test); mean ± sample standard deviation over seeds.

{header}
{rule}
"""
        + "\n".join(rows)
        + "\n"
        + picture
        + """
STS-B dev Spearman (x100) of the kept checkpoints, the step each was taken at, and the mean wall time of
one run (training, dev evaluations, checkpoints and the final STS evaluation, in one process):

| Method | dev Spearman | best steps | min/run |
|---|---:|---|---:|
"""
        + "\n".join(dev_rows)
        + """

## Observations (computed from the table)

"""
        + _observations({label: [r["avg"] for r in runs] for label, runs in per_method.items()}, untrained)
        + _discussion(runs_dir)
        + f"""

## How this was scaled down from the paper

ConPVP (Zeng et al., 2022) trains BERT/RoBERTa base and large for one epoch over SimCSE's 1M Wikipedia
sentences with batch 128 (256 for RoBERTa-large), i.e. about 7.8k steps, evaluating on STS-B dev every
125 steps, on GPUs. Here, on a shared 2-core CPU, every method runs {steps} steps of
{t.batch_size} sentences ({steps * t.batch_size:,} sentences, taken in a seeded random order from
the 11.9k-sentence head of that corpus) on the 22M-parameter all-MiniLM-L6-v2 with the paper's
sentence length (32 tokens), temperature (0.05) and BERT-base learning rate (3e-5, not tuned), with
the dev set checked only {max(1, steps // t.eval_steps)} times. That is about 1/{7813 / steps:.0f}
of the paper's updates and 1/{1_000_000 / (steps * t.batch_size):.0f} of its training sentences, on a
backbone that was already trained for sentence
similarity with mean pooling, so the numbers measure how each objective moves a strong starting point in
a short run, not the paper's converged results; the prompt-based methods (ConPVP, PromptBERT) also start
from a `[MASK]` state that all-MiniLM-L6-v2 was never trained to use. The full-size rows are in
`configs/<backbone>/*.yaml` (they need the Hugging Face weights and a GPU).
"""
    )
    write_atomic(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return text


def main(argv: list[str] | None = None) -> int:
    """Run the study (see the module docstring); returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m protoembed.training.study", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--configs", default="configs/cpu", type=Path, help="directory of method configs")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--methods", nargs="+", default=None, help="a subset of the methods (config stems)")
    parser.add_argument("--runs-dir", default="runs/unsup-cpu", type=Path)
    parser.add_argument(
        "--records-dir", default="docs/results/unsup-cpu", type=Path, help="committed per-run results"
    )
    parser.add_argument("--report", default="docs/results/unsup-cpu.md", type=Path)
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="extra config override"
    )
    parser.add_argument("--data-dir", default=None, help="benchmark data (default: $PROTOEMBED_DATA)")
    parser.add_argument(
        "--report-only", action="store_true", help="only rewrite the report from finished runs"
    )
    args = parser.parse_args(argv)
    try:
        configs = method_configs(args.configs, args.methods)
        first = load_config(next(iter(configs.values())), args.set)
        tasks = list(first.training.test_tasks)
        if args.data_dir:
            os.environ["PROTOEMBED_DATA"] = str(Path(args.data_dir).absolute())
        failed = []
        if not args.report_only:
            evaluate_untrained(args.records_dir, None, first.training.eval_variant, tasks)
            for seed in args.seeds:  # seed-major: a partial study already compares every method
                for method, config in configs.items():
                    name = f"{method}-seed{seed}"
                    if not run_one(config, seed, args.runs_dir / name, args.set, args.records_dir / name):
                        failed.append(name)
        command = f"`{_command(argv)}`"
        if _is_default(args):
            command = f"`make experiment-unsup` (= {command})"
        write_report(
            args.report,
            args.records_dir,
            configs,
            args.seeds,
            command,
            tasks or list(STS_TEST_TASKS),
            args.set,
        )
        print(f"study: report written to {args.report}", file=sys.stderr)
        if failed:
            print(f"study: {len(failed)} run(s) failed: {', '.join(failed)}", file=sys.stderr)
            return 1
        return 0
    except ProtoembedError as err:
        print(f"study: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("study: interrupted; rerun to resume", file=sys.stderr)
        return 130


def _is_default(args: argparse.Namespace) -> bool:
    return (
        str(args.configs) == "configs/cpu"
        and args.seeds == [1, 2, 3]
        and not args.methods
        and not args.set
        and str(args.runs_dir) == "runs/unsup-cpu"
        and str(args.records_dir) == "docs/results/unsup-cpu"
    )


def _command(argv: list[str] | None) -> str:
    import shlex

    args = [a for a in (sys.argv[1:] if argv is None else argv) if a != "--report-only"]
    return "python -m protoembed.training.study" + "".join(" " + shlex.quote(a) for a in args)


if __name__ == "__main__":
    sys.exit(main())
