"""Own-pairs study: adapt a sentence model to in-domain (query, document) pairs and judge it by retrieval.

The engineer's loop on data staged here (:mod:`experiments.own_pairs_data`: SNLI entailment pairs read as
hypothesis -> premise, the training split's pairs and texts, a BEIR-layout retrieval set from the test
split that no training step sees). For seeds {1, 2, 3} and each method (configs in
``configs/cpu/own-pairs/``):

- ``simcse``, ``conpvp``: unsupervised, on the training split's texts (no pairing used);
- ``sup``: supervised SimCSE on the pairs (``data.columns`` maps the file's ``hypothesis`` / ``premise``
  to anchor / positive), in-batch negatives;
- ``sup-mined``: the same with one hard negative per pair mined by ``protoembed mine`` with the untrained
  model over the training premises (once, before the runs);

then ``protoembed eval retrieval`` on the retrieval set (nDCG@10 the main score) and STS-B test (in the
run's ``results.json``: what general similarity is forgotten). "Untrained" is the default model with its
own mean head, evaluated once (it has no seed).

Run from the repository root: ``make experiment-own-pairs`` or ``python experiments/own_pairs.py``
(``--methods sup --seeds 1`` for a subset, ``--report-only`` to rewrite the page). Runs train into
``runs/own-pairs/<method>-seed<k>/`` (git-ignored); each finished run's small files are recorded in
``docs/results/own-pairs/<run>/`` (committed), a recorded run is skipped and an interrupted one resumes.
The page, ``docs/results/own-pairs.md``, is rewritten from the records every time.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python experiments/own_pairs.py
    import script_path  # noqa: F401  (puts the repository root on sys.path)

from experiments.own_pairs_data import prepare  # noqa: E402
from experiments.own_pairs_report import (  # noqa: E402
    METHODS,
    RETRIEVAL_FILE,
    TASK_DIR,
    UNTRAINED,
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

DEFAULT_SEEDS = [1, 2, 3]
DEFAULTS = {
    "configs": "configs/cpu/own-pairs",
    "runs_dir": "runs/own-pairs",
    "records_dir": "docs/results/own-pairs",
    "report": "docs/results/own-pairs.md",
}
#: ``protoembed mine``'s settings for ``sup-mined`` (recorded on the page): one negative per pair among the
#: 20 premises the untrained model ranks highest for the hypothesis, the highest-ranked one scoring at least
#: 5% below the pair's own premise (a guard against premises the hypothesis also describes).
MINE_OPTIONS = ["--num-negatives", "1", "--range-max", "20", "--relative-margin", "0.05", "--sampling", "top"]
MINED_FILE = "mined.jsonl"


def _say(message: str) -> None:
    print(f"own_pairs: {message}", file=sys.stderr, flush=True)


def _protoembed(*args: str) -> list[str]:
    return [sys.executable, "-m", "protoembed", *args]


def _timed(cmd: list[str], folder: Path, key: str, quiet: bool = False) -> bool:
    """Run ``cmd``; add its wall time to ``folder``'s ``key``; True if it exited 0."""
    _say(f"{folder.name}: {' '.join(cmd[3:])}")
    code = timed_call(cmd, folder, key, quiet=quiet)
    if code != 0:
        _say(f"{folder.name}: exit {code}; rerun to resume")
    return code == 0


def _retrieval(model: str, task_dir: Path, out: Path, folder: Path) -> bool:
    cmd = _protoembed("eval", "retrieval", "--model", model, "--task-dir", str(task_dir), "--split", "test")
    return _timed([*cmd, "--output", str(out)], folder, "retrieval_s", quiet=True)


def mine(data: Path, records_dir: Path) -> bool:
    """Mine ``sup-mined``'s hard negatives once (``data/mined.jsonl``); its summary goes in the records."""
    out = data / MINED_FILE
    if out.is_file():
        return True
    cmd = _protoembed("mine", "--model", "default", "--data", str(data / "train_pairs.jsonl"))
    cmd += [
        "--columns",
        "anchor=hypothesis",
        "positive=premise",
        "--corpus",
        str(data / "train_premises.txt"),
    ]
    return _timed([*cmd, *MINE_OPTIONS, "--output", str(out)], records_dir / "mining", "mine_s")


def evaluate_untrained(data: Path, records_dir: Path) -> bool:
    """Retrieval and STS-B test of the untrained default model (its mean head), once."""
    out = records_dir / UNTRAINED
    out.mkdir(parents=True, exist_ok=True)
    if not (out / RETRIEVAL_FILE).is_file() and not _retrieval(
        "default", data / TASK_DIR, out / RETRIEVAL_FILE, out
    ):
        return False
    if not (out / RESULTS_FILE).is_file():
        cmd = _protoembed("eval", "sts", "--model", "default", "--tasks", "STSBenchmark")
        if not _timed([*cmd, "--output", str(out / RESULTS_FILE)], out, "sts_s", quiet=True):
            return False
    write_json(out / ENVIRONMENT_FILE, machine(None, load_average()))
    return True


def run_one(config: Path, seed: int, run_dir: Path, record_dir: Path, data: Path) -> bool:
    """Train (or resume) one run, evaluate its retrieval, record it; True if done."""
    if (record_dir / RETRIEVAL_FILE).is_file():
        _say(f"{run_dir.name}: recorded, skipped")
        return True
    load_start = load_average()
    if not (run_dir / RESULTS_FILE).is_file():
        cmd = _protoembed("train", "--config", str(config), "--resume", "--output-dir", str(run_dir))
        if not _timed([*cmd, "--set", f"training.seed={seed}"], run_dir, "train_s"):
            return False
    if not (run_dir / RETRIEVAL_FILE).is_file() and not _retrieval(
        str(run_dir / BEST_DIR), data / TASK_DIR, run_dir / RETRIEVAL_FILE, run_dir
    ):
        return False
    names = (CONFIG_FILE, LOG_FILE, TIME_FILE, RESULTS_FILE, RETRIEVAL_FILE)  # retrieval last: complete
    copy_record([(run_dir / n, n) for n in names], record_dir, machine(load_start, load_average()))
    return True


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python experiments/own_pairs.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--configs", default=DEFAULTS["configs"], type=Path, help="<method>.yaml folder")
    parser.add_argument("--seeds", type=int, nargs="+", default=DEFAULT_SEEDS)
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    parser.add_argument("--runs-dir", default=DEFAULTS["runs_dir"], type=Path)
    parser.add_argument("--records-dir", default=DEFAULTS["records_dir"], type=Path, help="committed records")
    parser.add_argument("--report", default=DEFAULTS["report"], type=Path)
    parser.add_argument("--report-only", action="store_true", help="only rewrite the report from the records")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the study (see the module docstring); returns the exit code."""
    args = parse_args(argv)
    return guarded(lambda: _study(args, argv), _say)


def _study(args: argparse.Namespace, argv: list[str] | None) -> int:
    """The study's body (see :func:`main`)."""
    from protoembed import load_run

    data = args.runs_dir / "data"  # the configs name these files relative to the repository root
    configs = {method: args.configs / f"{method}.yaml" for method in args.methods}
    failed = []
    if not args.report_only:
        stats = prepare(Path(os.environ.get("PROTOEMBED_DATA", "")), data)
        write_json(args.records_dir / "data.json", stats)
        for path in configs.values():
            load_run(path, [])  # every config checked before the first run
        if not evaluate_untrained(data, args.records_dir):
            failed.append(UNTRAINED)
        if "sup-mined" in args.methods and not mine(data, args.records_dir):
            failed.append("mining")
        for seed in args.seeds:  # seed-major: a partial study already has every cell once
            for method in args.methods:
                run = f"{method}-seed{seed}"
                if not run_one(configs[method], seed, args.runs_dir / run, args.records_dir / run, data):
                    failed.append(run)
    write_report(args.report, args.records_dir, args.configs, MINE_OPTIONS, _command(argv, args))
    _say(f"report written to {args.report}")
    return finished(failed, _say)


def _command(argv: list[str] | None, args: argparse.Namespace) -> str:
    """How to remake the study: ``make experiment-own-pairs`` when the defaults were used."""
    given = [a for a in (sys.argv[1:] if argv is None else argv) if a != "--report-only"]
    defaults = parse_args([])
    keys = ("configs", "seeds", "runs_dir", "records_dir", "report", "methods")
    if all(getattr(args, k) == getattr(defaults, k) for k in keys):
        return "`make experiment-own-pairs` (= `python experiments/own_pairs.py`)"
    return "`python experiments/own_pairs.py" + "".join(" " + shlex.quote(a) for a in given) + "`"


if __name__ == "__main__":
    sys.exit(main())
