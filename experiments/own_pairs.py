"""Own-pairs study: adapt a sentence model to in-domain (query, document) pairs and judge it by retrieval.

The engineer's loop on data staged here (:mod:`experiments.own_pairs_data`: two sets, SNLI hypothesis ->
premise and GoogleNews title -> snippet, each with its training pairs and texts and a BEIR-layout retrieval
set that no training step sees). For each set, seeds {1, 2, 3} and each method (configs
``configs/cpu/own-pairs/<method>-<set>.yaml``):

- ``simcse``, ``conpvp``: unsupervised, on the training split's texts (no pairing used);
- ``sup``: supervised SimCSE on the pairs (``data.columns`` maps the file's own column names, e.g.
  ``title`` / ``snippet``, to anchor / positive), in-batch negatives;
- ``sup-mined``: the same with one hard negative per pair mined by ``protoembed mine`` with the untrained
  model over the training documents (once per set, before the runs);

then ``protoembed eval retrieval`` on the set's retrieval split (nDCG@10 the main score) and STS-B test (in
the run's ``results.json``: what general similarity is forgotten). "Untrained" is the default model with its
own mean head, evaluated once per set (it has no seed).

Run from the repository root: ``make experiment-own-pairs`` or ``python experiments/own_pairs.py``
(``--sets googlenews --methods sup --seeds 1`` for a subset, ``--report-only`` to rewrite the page). The
data goes to ``runs/own-pairs/data/<set>/``, runs train into ``runs/own-pairs/<method>-<set>-seed<k>/``
(git-ignored); each finished run's small files are recorded in ``docs/results/own-pairs/<run>/``
(committed), a recorded run is skipped and an interrupted one resumes. The page,
``docs/results/own-pairs.md``, is rewritten from the records every time.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python experiments/own_pairs.py
    import script_path  # noqa: F401  (puts the repository root on sys.path)

from experiments.own_pairs_data import SETS, prepare  # noqa: E402
from experiments.own_pairs_report import (  # noqa: E402
    METHODS,
    RETRIEVAL_FILE,
    UNTRAINED,
    task_dir,
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
#: 20 documents the untrained model ranks highest for the query, the highest-ranked one scoring at least
#: 5% below the pair's own document (a guard against documents the query also describes).
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


def _retrieval(model: str, retrieval_dir: Path, out: Path, folder: Path) -> bool:
    cmd = _protoembed(
        "eval", "retrieval", "--model", model, "--task-dir", str(retrieval_dir), "--split", "test"
    )
    return _timed([*cmd, "--output", str(out)], folder, "retrieval_s", quiet=True)


def mine(name: str, data: Path, records_dir: Path) -> bool:
    """Mine set ``name``'s hard negatives for ``sup-mined`` once (``data/mined.jsonl``), its wall time
    recorded in ``mining-<set>/``."""
    out = data / MINED_FILE
    if out.is_file():
        return True
    query, document = SETS[name][1]
    cmd = _protoembed("mine", "--model", "default", "--data", str(data / "train_pairs.jsonl"))
    cmd += ["--columns", f"anchor={query}", f"positive={document}", "--corpus", str(data / "train_pool.txt")]
    return _timed([*cmd, *MINE_OPTIONS, "--output", str(out)], records_dir / f"mining-{name}", "mine_s")


def evaluate_untrained(name: str, data: Path, records_dir: Path) -> bool:
    """Retrieval and STS-B test of the untrained default model (its mean head) on set ``name``, once."""
    out = records_dir / f"{UNTRAINED}-{name}"
    out.mkdir(parents=True, exist_ok=True)
    retrieval = out / RETRIEVAL_FILE
    if not retrieval.is_file() and not _retrieval("default", task_dir(data, name), retrieval, out):
        return False
    if not (out / RESULTS_FILE).is_file():
        cmd = _protoembed("eval", "sts", "--model", "default", "--tasks", "STSBenchmark")
        if not _timed([*cmd, "--output", str(out / RESULTS_FILE)], out, "sts_s", quiet=True):
            return False
    write_json(out / ENVIRONMENT_FILE, machine(None, load_average()))
    return True


def run_one(config: Path, seed: int, run_dir: Path, record_dir: Path, retrieval_dir: Path) -> bool:
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
        str(run_dir / BEST_DIR), retrieval_dir, run_dir / RETRIEVAL_FILE, run_dir
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
    parser.add_argument(
        "--configs", default=DEFAULTS["configs"], type=Path, help="<method>-<set>.yaml folder"
    )
    parser.add_argument("--sets", nargs="+", choices=list(SETS), default=list(SETS))
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
    from protoembed import load_run, resolve_data_dir

    data = {name: args.runs_dir / "data" / name for name in args.sets}  # the configs name these folders
    configs = {(m, name): args.configs / f"{m}-{name}.yaml" for name in args.sets for m in args.methods}
    failed = []
    if not args.report_only:
        for name in args.sets:
            stats = prepare(name, resolve_data_dir(None), data[name])
            write_json(args.records_dir / f"data-{name}.json", stats)
        for path in configs.values():
            load_run(path, [])  # every config checked before the first run
        for name in args.sets:
            if not evaluate_untrained(name, data[name], args.records_dir):
                failed.append(f"{UNTRAINED}-{name}")
            if "sup-mined" in args.methods and not mine(name, data[name], args.records_dir):
                failed.append(f"mining-{name}")
        for seed in args.seeds:  # seed-major: a partial study already has every cell once
            for name in args.sets:
                for method in args.methods:
                    run = f"{method}-{name}-seed{seed}"
                    where = (args.runs_dir / run, args.records_dir / run, task_dir(data[name], name))
                    if not run_one(configs[method, name], seed, *where):
                        failed.append(run)
    write_report(args.report, args.records_dir, args.configs, MINE_OPTIONS, _command(argv, args))
    _say(f"report written to {args.report}")
    return finished(failed, _say)


def _command(argv: list[str] | None, args: argparse.Namespace) -> str:
    """How to remake the study: ``make experiment-own-pairs`` when the defaults were used."""
    given = [a for a in (sys.argv[1:] if argv is None else argv) if a != "--report-only"]
    defaults = parse_args([])
    keys = ("configs", "seeds", "runs_dir", "records_dir", "report", "methods", "sets")
    if all(getattr(args, k) == getattr(defaults, k) for k in keys):
        return "`make experiment-own-pairs` (= `python experiments/own_pairs.py`)"
    return "`python experiments/own_pairs.py" + "".join(" " + shlex.quote(a) for a in given) + "`"


if __name__ == "__main__":
    sys.exit(main())
