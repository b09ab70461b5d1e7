"""Smaller-vector study: Matryoshka training in protoembed and in sentence-transformers on the own-pairs
sets, every kept model scored at each vector width and with quantised vectors.

On the own-pairs study's two sets (:mod:`experiments.own_pairs_data`: SNLI hypothesis -> premise, GoogleNews
title -> snippet; the same dev and test splits) and its budget (one epoch, the checkpoint with the best
full-width dev nDCG@10 kept, the own-pairs configs read by both libraries), the methods of
:mod:`experiments.smaller_vectors_plan`: supervised SimCSE with one mined hard negative (``sup-mined``) and
the same with ``objective.matryoshka: {dims: [384, 256, 128, 64, 32]}`` (``sup-mined-mrl``), and beside them
sentence-transformers' ``MultipleNegativesRankingLoss`` on the same pairs (``st-mnrl-mined``) and
``MatryoshkaLoss`` around it with the same sizes (``st-mrl-mined``), trained by
:mod:`experiments.own_pairs_st`; and the untrained default model.

The learning rate (``--lr``): ``dev`` (the own-pairs protocol) tries the own-pairs grid with seed 1, keeps
the lr whose run scores the best dev nDCG@10 at full width, then trains seeds 2 and 3 at it; ``own-pairs``
trains every seed at the lr the own-pairs study chose for the method's base (``sup-mined`` or
``st-mnrl-mined``; the Matryoshka methods borrow their base's), seed-major, when the time is short. A
later ``dev`` pass adds the grid's other runs to the records; the page says which protocol each row followed.

Every kept model (the untrained one too) is evaluated on the test split by ``protoembed eval retrieval
--dims 384,256,128,64,32`` (``retrieval.json``: one encode, a result per width) and at full width with
``--vectors int8`` and ``--vectors binary``, each ``--rescore-multiplier 4`` (``int8.json``,
``binary.json``); the three share one encode through ``--cache-embeddings`` (the store under
``<runs-dir>/cache`` unless ``PROTOEMBED_CACHE`` is set).

Run from the repository root: ``make experiment-smaller-vectors`` or ``python experiments/smaller_vectors.py``
(``--lr own-pairs --seeds 1`` for the short protocol's first pass, ``--sets snli --methods sup-mined-mrl`` for
a subset, ``--max-steps 2 --runs-dir ... --records-dir ... --report ...`` for a smoke test, ``--report-only``
to rewrite the page). The sets' data and mined negatives are the own-pairs study's folders
(``runs/own-pairs/data/``, which its configs name; prepared and mined here when absent), runs train into
``runs/smaller-vectors/<method>-<set>-lr<lr>-seed<k>/`` (git-ignored), each finished run's small files are
recorded in ``docs/results/smaller-vectors/<run>/``; a recorded run is skipped, an interrupted protoembed
run resumes (a sentence-transformers run starts again). The page, ``docs/results/smaller-vectors.md``, is
rewritten from the records every time.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python experiments/smaller_vectors.py
    import script_path  # noqa: F401  (puts the repository root on sys.path)

from experiments.own_pairs import (  # noqa: E402
    DEFAULTS as OWN_PAIRS_DEFAULTS,
)
from experiments.own_pairs import (  # noqa: E402
    config_path,
    eval_retrieval,
    mine,
    run_eval_steps,
    study_overrides,
    train_run,
)
from experiments.own_pairs_data import SETS, dev_dir, prepare, test_dir  # noqa: E402
from experiments.own_pairs_plan import LR_GRID, SEEDS, SELECTION_SEED, run_name  # noqa: E402
from experiments.own_pairs_report import UNTRAINED  # noqa: E402
from experiments.records import (  # noqa: E402
    BEST_DIR,
    ENVIRONMENT_FILE,
    TIME_FILE,
    copy_record,
    finished,
    guarded,
    load_average,
    machine,
    write_json,
)
from experiments.smaller_vectors_plan import (  # noqa: E402
    DIMS,
    DIMS_FILE,
    LR_DEV,
    LR_OWN_PAIRS,
    METHODS,
    PROTOCOLS,
    QUANTISED,
    RESCORE_MULTIPLIER,
    own_pairs_lr,
    quantised_file,
    row_lr,
)
from experiments.step_rerun import step_before  # noqa: E402
from experiments.study_cli import given_arguments, script_command, study_parser  # noqa: E402

DEFAULTS = {
    "configs": OWN_PAIRS_DEFAULTS["configs"],
    "own_pairs_records": OWN_PAIRS_DEFAULTS["records_dir"],
    "runs_dir": "runs/smaller-vectors",
    "records_dir": "docs/results/smaller-vectors",
    "report": "docs/results/smaller-vectors.md",
}
#: The sets' data: the own-pairs study's folders, which its configs name.
DATA_DIR = Path(OWN_PAIRS_DEFAULTS["runs_dir"]) / "data"
#: A tested model's record files, in copying order (the last marks the record complete).
TESTED_FILES = (TIME_FILE, *(quantised_file(v) for v in QUANTISED), DIMS_FILE)


def _say(message: str) -> None:
    print(f"smaller_vectors: {message}", file=sys.stderr, flush=True)


def test_evaluations(test: Path) -> list[tuple[str, str, tuple[str, ...]]]:
    """``(file, time key, options)`` of each test evaluation of a kept model on the BEIR folder ``test``:
    every width of :data:`DIMS` first, then each quantised type at full width (sharing its encode)."""
    dims = ("--dims", ",".join(str(d) for d in DIMS), "--cache-embeddings")
    rescore = ("--rescore-multiplier", str(RESCORE_MULTIPLIER), "--cache-embeddings")
    return [(DIMS_FILE, "test_s", dims)] + [
        (quantised_file(v), f"{v}_s", ("--vectors", v, *rescore)) for v in QUANTISED
    ]


def evaluate(model: str, test: Path, folder: Path) -> bool:
    """Run :func:`test_evaluations` of ``model`` into ``folder`` (each file once); True if all done."""
    for file, key, options in test_evaluations(test):
        if not (folder / file).is_file() and not eval_retrieval(
            model, test, "test", folder / file, folder, key, options
        ):
            return False
    return True


def evaluate_untrained(name: str, data: Path, records_dir: Path) -> bool:
    """The untrained default model's test evaluations on set ``name``, recorded once."""
    out = records_dir / f"{UNTRAINED}-{name}"
    if (out / DIMS_FILE).is_file():
        return True
    load_start = load_average()
    out.mkdir(parents=True, exist_ok=True)
    if not evaluate("default", test_dir(data, name), out):
        return False
    write_json(out / ENVIRONMENT_FILE, machine(load_start, load_average()))
    return True


def test_run(run_dir: Path, record_dir: Path, test: Path) -> bool:
    """Evaluate a trained run's ``best/`` on the test split, add the results to its record."""
    if (record_dir / DIMS_FILE).is_file():
        return True
    best = run_dir / BEST_DIR
    if not best.is_dir():
        _say(f"{run_dir.name}: {best} is missing; remove {record_dir} to train it again")
        return False
    load_start = load_average()
    if not evaluate(str(best), test, run_dir):
        return False
    copy_record([(run_dir / n, n) for n in TESTED_FILES], record_dir, machine(load_start, load_average()))
    return True


def _runs(args: argparse.Namespace, data: dict[str, Path]) -> list[str]:
    """Train and test the runs of ``--lr``'s protocol (see the module docstring), seed-major so that a
    partial study has every (set, method) once; returns the runs that failed."""
    failed: list[str] = []
    every = {
        (name, method): run_eval_steps(config_path(args.configs, METHODS[method].base, name), args.max_steps)
        for name in args.sets
        for method in args.methods
    }

    def train(method: str, name: str, lr: float, seed: int) -> bool:
        run = run_name(method, name, lr, seed)
        where = (args.runs_dir / run, args.records_dir / run, dev_dir(data[name], name))
        spec = METHODS[method]
        config = config_path(args.configs, spec.base, name)
        cap = args.max_steps
        extra = (*spec.overrides, *study_overrides(spec.base, args.set))
        if train_run(spec.base, config, lr, seed, where, every[name, method], cap, extra):
            return True
        failed.append(run)
        return False

    def tested(method: str, name: str, lr: float | None, seed: int) -> None:
        if lr is None:
            failed.append(f"{method}-{name}: no learning rate recorded")
            return
        run = run_name(method, name, lr, seed)
        if train(method, name, lr, seed) and not test_run(
            args.runs_dir / run, args.records_dir / run, test_dir(data[name], name)
        ):
            failed.append(run)

    if args.lr == LR_DEV:
        for name in args.sets:  # the learning rates, on the selection seed
            for method in args.methods:
                for lr in LR_GRID:
                    train(method, name, lr, SELECTION_SEED)
    for seed in args.seeds:
        for name in args.sets:
            for method in args.methods:
                lr, protocol = row_lr(args.records_dir, args.own_pairs_records, method, name)
                if args.lr == LR_DEV and protocol != LR_DEV:
                    continue  # a selection run failed: named above
                if args.lr == LR_OWN_PAIRS:
                    lr = own_pairs_lr(args.own_pairs_records, method, name)
                tested(method, name, lr, seed)
    return failed


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = study_parser("smaller_vectors.py", __doc__, DEFAULTS, "own-pairs config folder")
    parser.add_argument("--sets", nargs="+", choices=list(SETS), default=list(SETS))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), choices=list(SEEDS))
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    parser.add_argument(
        "--lr",
        choices=PROTOCOLS,
        default=LR_DEV,
        help="dev: choose on dev from the grid (seed 1), then the other seeds; own-pairs: every seed at the "
        "own-pairs study's lr",
    )
    parser.add_argument("--max-steps", type=int, default=None, help="cap every run (a smoke test)")
    parser.add_argument(
        "--own-pairs-records", default=DEFAULTS["own_pairs_records"], type=Path, help="its chosen lrs"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the study (see the module docstring); returns the exit code."""
    args = parse_args(argv)
    return guarded(lambda: _study(args, argv), _say)


def _study(args: argparse.Namespace, argv: list[str] | None) -> int:
    """The study's body (see :func:`main`)."""
    from experiments.smaller_vectors_report import SET_LABELS, collect, headline, write_report
    from protoembed import resolve_data_dir

    if args.step_before:
        sets = {name: collect(args.records_dir, args.own_pairs_records, name) for name in SET_LABELS}
        return step_before(args.records_dir, headline(sets), _say)
    failed: list[str] = []
    if not args.report_only:
        os.environ.setdefault("PROTOEMBED_CACHE", str(args.runs_dir / "cache"))  # the evaluations' store
        data = {name: DATA_DIR / name for name in args.sets}
        for name in args.sets:
            if not (data[name] / "train_pairs.jsonl").is_file():
                prepare(name, resolve_data_dir(None), data[name])
            if not evaluate_untrained(name, data[name], args.records_dir):
                failed.append(f"{UNTRAINED}-{name}")
            if not mine(name, data[name], args.records_dir):
                failed.append(f"mining-{name}")
        failed += _runs(args, data)
    write_report(args.report, args.records_dir, args.own_pairs_records, _command(argv, args))
    _say(f"report written to {args.report}")
    return finished(failed, _say)


def _command(argv: list[str] | None, args: argparse.Namespace) -> str:
    """How to remake the study: ``make experiment-smaller-vectors`` when the defaults were used."""
    given = given_arguments(argv)
    if given == []:
        return f"`make experiment-smaller-vectors` (= `{script_command('smaller_vectors.py')}`)"
    return f"`{script_command('smaller_vectors.py', given)}`"


if __name__ == "__main__":
    sys.exit(main())
