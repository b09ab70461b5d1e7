"""Own-pairs study: adapt a sentence model to in-domain (query, document) pairs and judge it by retrieval.

The engineer's loop on data staged here (:mod:`experiments.own_pairs_data`: two sets, SNLI hypothesis ->
premise and GoogleNews title -> snippet, each with its training pairs and texts, a dev split and a test split
in the BEIR layout; no training step sees either split, no choice sees the test split). The methods, the
learning-rate grid and the seeds are :mod:`experiments.own_pairs_plan`'s; the configs are
``configs/cpu/own-pairs/<config>-<set>.yaml``:

- ``sup`` (protoembed): supervised SimCSE on the pairs (``data.columns`` maps the file's own column names,
  e.g. ``title`` / ``snippet``, to anchor / positive), in-batch negatives;
- ``sup-mined`` (protoembed): the same with one hard negative per pair mined by ``protoembed mine`` with
  the untrained model over the training documents (once per set, before the runs);
- ``st-mnrl``, ``st-mnrl-mined`` (the anchor): the same two configs trained by sentence-transformers'
  ``SentenceTransformerTrainer`` with ``MultipleNegativesRankingLoss`` (:mod:`experiments.own_pairs_st`);
- ``simcse``, ``conpvp``: unsupervised, recorded by the 30-step study and not rerun (their test split is
  unchanged).

Every supervised run trains one epoch and keeps its checkpoint with the best dev nDCG@10 (evaluated every
eighth of the epoch and after the last step: ``training.selection``). Per (set, method): the learning rates
of the grid with seed 1, the one whose run scores the best dev nDCG@10 chosen, then seeds 2 and 3 at it.
Every run's ``best/`` is evaluated by the same protoembed commands, whichever library trained it:
``protoembed eval retrieval`` on the dev split (``dev.json``, what the learning rate is chosen on) and, for
the three runs at the chosen learning rate, on the test split (``retrieval.json``, nDCG@10 the main score)
and ``protoembed eval sts --tasks STSBenchmark`` (``sts.json``: what general similarity is forgotten).
On GoogleNews, the untrained model and each method's seed-1 run are also measured by story
(:mod:`experiments.own_pairs_story`: a miss into another story or within the query's own).
"Untrained" is the default model with its own mean head, evaluated once per set (it has no seed).

Run from the repository root: ``make experiment-own-pairs`` or ``python experiments/own_pairs.py``
(``--sets googlenews --methods st-mnrl`` for a subset, ``--max-steps 4 --runs-dir ... --records-dir ...`` for
a smoke test, ``--set KEY=VALUE`` for a config override on every protoembed run, ``--report-only`` to
rewrite the page). The data goes to ``runs/own-pairs/data/``, runs train
into ``runs/own-pairs/<method>-<set>-lr<lr>-seed<k>/`` (git-ignored); each finished run's small files are
recorded in ``docs/results/own-pairs/<run>/`` (committed), a recorded run is skipped and an interrupted
protoembed run resumes (an anchor run starts again). The page, ``docs/results/own-pairs.md``, is rewritten
from the records every time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python experiments/own_pairs.py
    import script_path  # noqa: F401  (puts the repository root on sys.path)

from experiments.own_pairs_data import SETS, dev_dir, prepare, test_dir  # noqa: E402
from experiments.own_pairs_plan import (  # noqa: E402
    LR_GRID,
    METHODS,
    MINED_CONFIG,
    PROTOEMBED,
    SEEDS,
    SELECTION_SEED,
    TRAINED,
    choose_lr,
    epoch_steps,
    eval_steps,
    run_name,
)
from experiments.own_pairs_report import (  # noqa: E402
    DEV_FILE,
    MINED_COUNTS,
    RETRIEVAL_FILE,
    SET_LABELS,
    STS_FILE,
    UNTRAINED,
    collect,
    headline,
    retrieval_scores,
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

DEFAULTS = {
    "configs": "configs/cpu/own-pairs",
    "runs_dir": "runs/own-pairs",
    "records_dir": "docs/results/own-pairs",
    "report": "docs/results/own-pairs.md",
}
#: ``protoembed mine``'s settings for the mined methods (recorded on the page): one negative per pair
#: among the 20 documents the untrained model ranks highest for the query, the highest-ranked one scoring
#: at least 5% below the pair's own document (a guard against documents the query also describes).
MINE_OPTIONS = ["--num-negatives", "1", "--range-max", "20", "--relative-margin", "0.05", "--sampling", "top"]
MINED_FILE = "mined.jsonl"
#: The sentence-transformers anchor's script (:mod:`experiments.own_pairs_st`).
ANCHOR_SCRIPT = Path(__file__).resolve().with_name("own_pairs_st.py")
#: The story measures (:mod:`experiments.own_pairs_story`): the set they are taken on, and the script.
STORY_SET = "googlenews"
STORY_SCRIPT = Path(__file__).resolve().with_name("own_pairs_story.py")
#: A trained run's record files, in copying order (the last marks the record complete); a tested run's.
TRAINED_FILES = (CONFIG_FILE, LOG_FILE, TIME_FILE, RESULTS_FILE, DEV_FILE)
TESTED_FILES = (TIME_FILE, STS_FILE, RETRIEVAL_FILE)


def _say(message: str) -> None:
    print(f"own_pairs: {message}", file=sys.stderr, flush=True)


def _protoembed(*args: str) -> list[str]:
    return [sys.executable, "-m", "protoembed", *args]


def _timed(cmd: list[str], folder: Path, key: str, quiet: bool = False) -> bool:
    """Run ``cmd``; add its wall time to ``folder``'s ``key``; True if it exited 0."""
    shown = cmd[3:] if cmd[1] == "-m" else [Path(cmd[1]).name, *cmd[2:]]
    _say(f"{folder.name}: {' '.join(shown)}")
    code = timed_call(cmd, folder, key, quiet=quiet)
    if code != 0:
        _say(f"{folder.name}: exit {code}; rerun to resume")
    return code == 0


def eval_retrieval(
    model: str, task: Path, split: str, out: Path, folder: Path, key: str, options: tuple[str, ...] = ()
) -> bool:
    """``protoembed eval retrieval`` of ``model`` on the BEIR folder ``task``'s ``split`` into ``out``, with
    the command's ``options`` (e.g. ``--dims``), its wall time added to ``folder``'s ``key``."""
    cmd = _protoembed("eval", "retrieval", "--model", model, "--task-dir", str(task), "--split", split)
    return _timed([*cmd, *options, "--output", str(out)], folder, key, quiet=True)


def _sts(model: str, out: Path, folder: Path) -> bool:
    """``protoembed eval sts --tasks STSBenchmark`` (test) of ``model`` into ``out``."""
    cmd = _protoembed("eval", "sts", "--model", model, "--tasks", "STSBenchmark", "--output", str(out))
    return _timed(cmd, folder, "sts_s", quiet=True)


def mine(name: str, data: Path, records_dir: Path, model: str = "default") -> bool:
    """Mine set ``name``'s hard negatives for the mined methods once (``data/mined.jsonl``) with ``model``
    (the untrained one), its wall time recorded in ``mining-<set>/`` (a new mining replaces the time an
    earlier one recorded: mining starts over when interrupted)."""
    out = data / MINED_FILE
    if out.is_file():
        return True
    (records_dir / f"mining-{name}" / TIME_FILE).unlink(missing_ok=True)
    query, document = SETS[name][1]
    cmd = _protoembed("mine", "--model", model, "--data", str(data / "train_pairs.jsonl"))
    cmd += ["--columns", f"anchor={query}", f"positive={document}", "--corpus", str(data / "train_pool.txt")]
    folder = records_dir / f"mining-{name}"
    if not _timed([*cmd, *MINE_OPTIONS, "--output", str(out)], folder, "mine_s"):
        return False
    counts = {"pairs": _lines(data / "train_pairs.jsonl"), "rows": _lines(out)}
    write_json(folder / MINED_COUNTS, counts)
    return True


def _lines(path: Path) -> int:
    """The non-empty lines of a text file (a JSONL file's rows)."""
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def evaluate_untrained(name: str, data: Path, records_dir: Path) -> bool:
    """Test and dev retrieval and STS-B test of the untrained default model (its mean head) on set
    ``name``, once each."""
    out = records_dir / f"{UNTRAINED}-{name}"
    out.mkdir(parents=True, exist_ok=True)
    splits = ((test_dir(data, name), "test", RETRIEVAL_FILE), (dev_dir(data, name), "dev", DEV_FILE))
    for task, split, file in splits:
        if not (out / file).is_file() and not eval_retrieval(
            "default", task, split, out / file, out, f"{split}_s"
        ):
            return False
    if not (out / RESULTS_FILE).is_file() and not _sts("default", out / RESULTS_FILE, out):
        return False
    write_json(out / ENVIRONMENT_FILE, machine(None, load_average()))
    return True


def story_records(args: argparse.Namespace, data: dict[str, Path]) -> list[str]:
    """The story measures of :data:`STORY_SET`'s test split (:mod:`experiments.own_pairs_story`) for the
    untrained model and for each method's selection-seed run at its chosen learning rate whose ``best/`` is
    here, each once, into ``story-<set>/<untrained-default | run>.json``; returns what failed."""
    name = STORY_SET
    if name not in args.sets:
        return []
    models = {UNTRAINED: "default"}
    for method in args.methods:
        lr = chosen_lr(args.records_dir, method, name)
        best = None if lr is None else args.runs_dir / run_name(method, name, lr, SELECTION_SEED) / BEST_DIR
        if best is not None and best.is_dir():
            models[best.parent.name] = str(best)
    folder = args.records_dir / f"story-{name}"
    task = str(test_dir(data[name], name))
    failed = []
    for label, model in models.items():
        out = folder / f"{label}.json"
        cmd = [sys.executable, str(STORY_SCRIPT), "--model", model, "--task-dir", task, "--output", str(out)]
        if not out.is_file() and not _timed(cmd, folder, f"{label}_s", quiet=True):
            failed.append(f"story-{name}/{label}")
    return failed


def config_path(configs: Path, method: str, name: str) -> Path:
    """The config method ``method`` reads on set ``name``."""
    return configs / f"{METHODS[method].config}-{name}.yaml"


def study_overrides(method: str, overrides: list[str]) -> tuple[str, ...]:
    """The study's ``--set`` overrides (:func:`~experiments.study_cli.study_parser`) that a run of ``method``
    gets: all of them for protoembed's runs, none for the anchor's (they name protoembed's settings)."""
    return tuple(overrides) if METHODS[method].library == PROTOEMBED else ()


def check_config(config: Path, method: str, overrides: tuple[str, ...] = ()) -> None:
    """Validate ``config`` with ``overrides`` as ``method``'s library reads it (protoembed: ``load_run``;
    the anchor: its :func:`~experiments.own_pairs_st.anchor_config`), before the first run."""
    from experiments.own_pairs_st import anchor_config, read_config
    from protoembed import ProtoembedError, load_run

    if METHODS[method].library == PROTOEMBED:
        load_run(config, list(overrides))
        return
    try:
        anchor_config(read_config(config, []))
    except (ValueError, KeyError) as err:
        raise ProtoembedError(f"{config}: {err}") from None


def run_eval_steps(config: Path, max_steps: int | None) -> int:
    """``training.eval_steps`` of a run of ``config``: an eighth of its steps (one epoch of the pairs in
    its ``data.corpus`` at its ``batch_size``, or ``max_steps``)."""
    from experiments.own_pairs_st import _local, read_config

    data = read_config(config, [])
    pairs = _lines(_local(str(data["data"]["corpus"])))
    steps = epoch_steps(pairs, int(data["training"]["batch_size"]))
    return eval_steps(min(steps, max_steps) if max_steps else steps)


def train_command(method: str, config: Path, run_dir: Path, overrides: list[str]) -> list[str]:
    """The command that trains (or resumes) one run of ``method``: ``protoembed train`` or the anchor."""
    sets = [arg for o in overrides for arg in ("--set", o)]
    if METHODS[method].library == PROTOEMBED:
        return _protoembed("train", "--config", str(config), "--resume", "--output-dir", str(run_dir), *sets)
    return [sys.executable, str(ANCHOR_SCRIPT), "--config", str(config), "--output-dir", str(run_dir), *sets]


def train_run(
    method: str,
    config: Path,
    lr: float,
    seed: int,
    where: tuple[Path, Path, Path],
    every: int,
    cap: int | None,
    extra: tuple[str, ...] = (),
) -> bool:
    """Train one run (``where``: its run folder, record folder and the set's dev folder; ``extra``: more
    ``--set`` overrides, after the study's), evaluate its ``best/`` on the dev split, record it; True if
    done."""
    run_dir, record_dir, dev = where
    if (record_dir / DEV_FILE).is_file():
        return True
    overrides = [f"training.lr={lr}", f"training.seed={seed}", f"training.eval_steps={every}"]
    overrides += [f"training.max_steps={cap}"] if cap else []
    overrides += extra
    load_start = load_average()
    command = train_command(method, config, run_dir, overrides)
    if not (run_dir / RESULTS_FILE).is_file() and not _timed(command, run_dir, "train_s"):
        return False
    if not (run_dir / DEV_FILE).is_file() and not eval_retrieval(
        str(run_dir / BEST_DIR), dev, "dev", run_dir / DEV_FILE, run_dir, "dev_s"
    ):
        return False
    copy_record([(run_dir / n, n) for n in TRAINED_FILES], record_dir, machine(load_start, load_average()))
    return True


def test_run(run_dir: Path, record_dir: Path, test: Path) -> bool:
    """Evaluate a trained run's ``best/`` on the test split and STS-B test, add them to its record."""
    if (record_dir / RETRIEVAL_FILE).is_file():
        _say(f"{run_dir.name}: recorded, skipped")
        return True
    load_start = load_average()
    best = run_dir / BEST_DIR
    if not best.is_dir():
        _say(
            f"{run_dir.name}: {best} is missing (recorded elsewhere?); remove {record_dir} to train it again"
        )
        return False
    if not (run_dir / STS_FILE).is_file() and not _sts(str(best), run_dir / STS_FILE, run_dir):
        return False
    if not (run_dir / RETRIEVAL_FILE).is_file() and not eval_retrieval(
        str(best), test, "test", run_dir / RETRIEVAL_FILE, run_dir, "retrieval_s"
    ):
        return False
    environment = machine(load_start, load_average())  # the test evaluations' (training's: its log)
    copy_record([(run_dir / n, n) for n in TESTED_FILES], record_dir, environment)
    return True


def dev_score(record_dir: Path) -> float | None:
    """A recorded run's dev nDCG@10 (``None`` before it is recorded)."""
    import json

    path = record_dir / DEV_FILE
    return (
        retrieval_scores(json.loads(path.read_text(encoding="utf-8")))["ndcg_at_10"]
        if path.is_file()
        else None
    )


def chosen_lr(records_dir: Path, method: str, name: str) -> float | None:
    """The learning rate chosen for ``method`` on set ``name`` from its recorded selection runs (``None``
    while one is missing): :func:`~experiments.own_pairs_plan.choose_lr`."""
    scores = {lr: dev_score(records_dir / run_name(method, name, lr, SELECTION_SEED)) for lr in LR_GRID}
    return choose_lr(scores)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = study_parser("own_pairs.py", __doc__, DEFAULTS, "<config>-<set>.yaml folder")
    parser.add_argument("--sets", nargs="+", choices=list(SETS), default=list(SETS))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), choices=list(SEEDS))
    parser.add_argument("--methods", nargs="+", choices=TRAINED, default=TRAINED)
    parser.add_argument("--max-steps", type=int, default=None, help="cap every run (a smoke test)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the study (see the module docstring); returns the exit code."""
    args = parse_args(argv)
    return guarded(lambda: _study(args, argv), _say)


def _study(args: argparse.Namespace, argv: list[str] | None) -> int:
    """The study's body (see :func:`main`)."""
    from protoembed import resolve_data_dir

    if args.step_before:
        sets = {name: collect(args.records_dir, name) for name in SET_LABELS}
        return step_before(args.records_dir, headline(sets), _say)
    data = {name: args.runs_dir / "data" / name for name in args.sets}  # the configs name these folders
    failed: list[str] = []
    if not args.report_only:
        for name in args.sets:
            stats = prepare(name, resolve_data_dir(None), data[name])
            write_json(args.records_dir / f"data-{name}.json", stats)
        for name in args.sets:
            for method in args.methods:
                config = config_path(args.configs, method, name)
                check_config(config, method, study_overrides(method, args.set))  # all before the first run
        for name in args.sets:
            if not evaluate_untrained(name, data[name], args.records_dir):
                failed.append(f"{UNTRAINED}-{name}")
            mined = any(METHODS[m].config == MINED_CONFIG for m in args.methods)
            if mined and not mine(name, data[name], args.records_dir):
                failed.append(f"mining-{name}")
        failed += _runs(args, data)
        failed += story_records(args, data)
    write_report(args.report, args.records_dir, args.configs, MINE_OPTIONS, _command(argv, args))
    _say(f"report written to {args.report}")
    return finished(failed, _say)


def _runs(args: argparse.Namespace, data: dict[str, Path]) -> list[str]:
    """The selection runs of every (set, method), then its seeds at the chosen learning rate, each tested;
    returns the runs that failed."""
    failed = []
    every = {
        (name, method): run_eval_steps(config_path(args.configs, method, name), args.max_steps)
        for name in args.sets
        for method in args.methods
    }

    def train(method: str, name: str, lr: float, seed: int) -> bool:
        run = run_name(method, name, lr, seed)
        where = (args.runs_dir / run, args.records_dir / run, dev_dir(data[name], name))
        config = config_path(args.configs, method, name)
        extra = study_overrides(method, args.set)
        if train_run(method, config, lr, seed, where, every[name, method], args.max_steps, extra):
            return True
        failed.append(run)
        return False

    for name in args.sets:  # the learning rates, on the selection seed
        for method in args.methods:
            for lr in LR_GRID:
                train(method, name, lr, SELECTION_SEED)
    for seed in args.seeds:  # seed-major: a partial study already has every cell once
        for name in args.sets:
            for method in args.methods:
                lr = chosen_lr(args.records_dir, method, name)
                if lr is None:
                    continue  # a selection run failed: named above
                run = run_name(method, name, lr, seed)
                if train(method, name, lr, seed) and not test_run(
                    args.runs_dir / run, args.records_dir / run, test_dir(data[name], name)
                ):
                    failed.append(run)
    return failed


def _command(argv: list[str] | None, args: argparse.Namespace) -> str:
    """How to remake the study: ``make experiment-own-pairs`` when the defaults were used."""
    defaults = parse_args([])
    keys = ("configs", "seeds", "runs_dir", "records_dir", "report", "methods", "sets", "max_steps")
    if all(getattr(args, k) == getattr(defaults, k) for k in keys):
        return "`make experiment-own-pairs` (= `python experiments/own_pairs.py`)"
    return f"`{script_command('own_pairs.py', given_arguments(argv))}`"


if __name__ == "__main__":
    sys.exit(main())
