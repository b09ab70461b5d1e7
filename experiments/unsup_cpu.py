"""The unsupervised CPU study: every ``configs/cpu`` method x seeds {1, 2, 3}, then a markdown report.

Run from the repository root: ``make experiment-unsup``, ``python experiments/unsup_cpu.py`` or
``python -m experiments.unsup_cpu`` (``--methods conpvp-official`` runs one method, ``--report-only``
only rewrites the report). This is an experiment that uses protoembed, not part of the package: it
talks to the library only through ``protoembed train`` / ``protoembed eval sts`` (subprocesses),
``protoembed.load_run`` (to read the configs) and ``protoembed.load`` (to count the backbone's parameters).

Each run trains into ``runs/unsup-cpu/<method>-seed<k>/`` (git-ignored: weights, checkpoints) with
``protoembed train --resume``. A finished run's small files are recorded in
``docs/results/unsup-cpu/<method>-seed<k>/`` (committed; see :mod:`experiments.unsup_cpu_report` for what
a record holds), and a recorded run is skipped; an interrupted one continues from its checkpoint. So the
study can be stopped (Ctrl-C) and completed across sessions and machines. The untrained backbone (its own
head) is evaluated once into ``docs/results/unsup-cpu/untrained-default/``. The report,
``docs/results/unsup-cpu.md``, and its figure are rewritten from the records after every invocation.

``--suites transfer fewshot clustering`` (what ``make experiment-unsup`` passes) also runs those suites on
the untrained model and on the kept model of every recorded seed of ``--suite-methods`` (default ConPVP
(paper) and SimCSE; ``all`` for every method), retraining a kept model that is missing, and draws the
ConPVP paper's Figs. 4-7 (``--no-figures`` leaves them out): see :mod:`experiments.unsup_cpu_suites`.
``--dims`` evaluates the STS test tasks at every Matryoshka width (384 to 32) of the untrained model and of
the seeds of SimCSE, ConPVP (paper) and ConPVP + Matryoshka, retraining a kept model that is missing.
``--sklearn-transfer`` runs transfer with scikit-learn's classifier as well, on the same models as
``--suites`` (the page sets both classifiers side by side).
``--step-before`` keeps the records' headline numbers (:func:`experiments.unsup_cpu_report.headline`)
before records rerun with the current training step replace them; the page then shows both.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: python experiments/unsup_cpu.py
    import script_path  # noqa: F401  (puts the repository root on sys.path)

from experiments.records import (  # noqa: E402
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
    timed,
    timed_call,
    write_json,
)
from experiments.step_rerun import step_before  # noqa: E402
from experiments.study_cli import given_arguments, script_command, study_parser  # noqa: E402
from experiments.unsup_cpu_report import (  # noqa: E402
    DIMS_SUITE,
    SKLEARN_SUITE,
    UNTRAINED,
    headline,
    method_records,
    write_report,
)
from experiments.unsup_cpu_suites import DEFAULT_SUITE_METHODS, DIMS_METHODS, SUITES, suites_and_figures  # noqa: E402
from protoembed import ProtoembedError  # noqa: E402

#: Report order and row labels of the configs/cpu methods (other configs follow, labelled by file name).
METHODS = {
    "conpvp-paper": "ConPVP (paper: Table 1 templates, no denoising)",
    "conpvp-official": "ConPVP (authors' code: their template lists, template-only denoising)",
    "conpvp-manual": "ConPVP w/ manual",
    "conpvp-no-neg": "ConPVP w/o c-",
    "conpvp-no-proto": "ConPVP w/o c+ & c-",
    "simcse": "SimCSE",
    "promptbert": "PromptBERT",
    "conpvp-matryoshka": "ConPVP (paper) + Matryoshka (384-32)",
}
#: The method the observations compare every other one with.
REFERENCE = "simcse"
DEFAULTS = {
    "configs": "configs/cpu",
    "runs_dir": "runs/unsup-cpu",
    "records_dir": "docs/results/unsup-cpu",
    "report": "docs/results/unsup-cpu.md",
    "full_size": "configs/bert-base-uncased/conpvp.yaml",
}
DEFAULT_SEEDS = [1, 2, 3]
#: What ``make experiment-unsup`` passes: every suite on the default suite methods, the figures, the STS
#: at every Matryoshka width and transfer with scikit-learn's classifier too.
MAKE_ARGS = "--suites transfer fewshot clustering --dims --sklearn-transfer"
#: The options that run more without changing which records the page is drawn from (``True``: it takes
#: values).
SUITE_FLAGS = {
    "--suites": True,
    "--suite-methods": True,
    "--no-figures": False,
    "--dims": False,
    "--sklearn-transfer": False,
}


def resolved_config(path: Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """``path`` with its ``base`` includes and ``--set`` overrides, as plain data (the YAML's structure)."""
    from protoembed import load_run

    ((_, config),) = load_run(path, overrides)  # a single run: one entry
    return config.to_dict()


def unsupervised(path: Path) -> bool:
    """Whether ``path`` is a single run of an objective over unlabeled sentences (the ``text`` column)."""
    from protoembed import load_run

    stages = load_run(path)
    plan = stages[0][1].objective.plan  # planned when the config was read
    return len(stages) == 1 and plan.registered and tuple(plan.columns) == ("text",)


def method_configs(config_dir: Path, methods: list[str] | None = None) -> dict[str, Path]:
    """``{method: yaml}`` of the unsupervised configs of ``config_dir`` (the supervised ones beside them
    belong to experiments/supervised_cpu.py), in report order; ``methods`` selects a subset."""
    found = {p.stem: p for p in sorted(config_dir.glob("*.yaml")) if unsupervised(p)}
    if not found:
        raise ProtoembedError(f"no *.yaml config in {config_dir}")
    order = [m for m in METHODS if m in found] + [m for m in found if m not in METHODS]
    if methods:
        unknown = [m for m in methods if m not in found]
        if unknown:
            raise ProtoembedError(f"unknown method {unknown[0]!r}; {config_dir} has: {', '.join(order)}")
        order = [m for m in order if m in methods]
    return {m: found[m] for m in order}


def _say(message: str) -> None:
    print(f"unsup_cpu: {message}", file=sys.stderr, flush=True)


_BACKBONES: dict[str, dict[str, Any]] = {}


def backbone_facts(model: str) -> dict[str, Any]:
    """``{"model", "parameters", "dimension"}`` of the untrained backbone ``model``, counted from it."""
    if model not in _BACKBONES:
        import protoembed

        embedder = protoembed.load(model, device="cpu")
        parameters = sum(p.numel() for p in embedder.parameters())
        _BACKBONES[model] = {"model": model, "parameters": parameters, "dimension": embedder.dimension}
    return _BACKBONES[model]


def environment(model: str, load_start: float | None, load_end: float | None) -> dict[str, Any]:
    """The machine and backbone as measured now (what a record's ``environment.json`` holds)."""
    return {**machine(load_start, load_end), "backbone": backbone_facts(model)}


def record(run_dir: Path, record_dir: Path, env: dict[str, Any]) -> None:
    """Copy a finished run's small files and ``env`` to its (committed) record folder."""
    names = (CONFIG_FILE, LOG_FILE, TIME_FILE, RESULTS_FILE)  # results last: it marks a complete record
    copy_record([(run_dir / name, name) for name in names], record_dir, env)


def run_one(
    config: Path, seed: int, run_dir: Path, overrides: list[str], record_dir: Path, model: str
) -> bool:
    """Train (or resume) one run in a subprocess, then record it; True if it finished."""
    if (record_dir / RESULTS_FILE).is_file():
        _say(f"{run_dir.name}: recorded, skipped")
        return True
    if (run_dir / RESULTS_FILE).is_file():  # trained, not yet recorded
        record(run_dir, record_dir, environment(model, None, None))
        return True
    cmd = [sys.executable, "-m", "protoembed", "train", "--config", str(config), "--resume"]
    cmd += ["--output-dir", str(run_dir), "--set", f"training.seed={seed}"]
    for item in overrides:
        cmd += ["--set", item]
    _say(f"{run_dir.name}: {' '.join(cmd[1:])}")
    load_start = load_average()
    with timed(run_dir):
        code = subprocess.call(cmd)
    if code != 0:
        _say(f"{run_dir.name} failed (exit {code}); rerun to resume it")
        return False
    record(run_dir, record_dir, environment(model, load_start, load_average()))
    return True


def evaluate_untrained(records_dir: Path, cfg: dict[str, Any]) -> bool:
    """STS test results of the untrained backbone with its own head, once (``protoembed eval sts``)."""
    out = records_dir / UNTRAINED
    if (out / RESULTS_FILE).is_file():
        return True
    t = cfg["training"]
    cmd = [sys.executable, "-m", "protoembed", "eval", "sts", "--model", cfg["model"], "--variant"]
    cmd += [t["eval_variant"], "--batch-size", str(t["eval_batch_size"]), "--tasks", *t["test_tasks"]]
    cmd += ["--output", str(out / RESULTS_FILE)]
    _say(f"evaluating the untrained backbone: {' '.join(cmd[1:])}")
    out.mkdir(parents=True, exist_ok=True)
    load_start = load_average()
    code = timed_call(cmd, out, quiet=True)
    if code == 0:
        write_json(out / ENVIRONMENT_FILE, environment(cfg["model"], load_start, load_average()))
    return code == 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = study_parser("unsup_cpu.py", __doc__, DEFAULTS, "directory of method configs")
    parser.add_argument("--seeds", type=int, nargs="+", default=DEFAULT_SEEDS)
    parser.add_argument("--methods", nargs="+", default=None, help="a subset of the methods (config stems)")
    parser.add_argument(
        "--full-size", default=DEFAULTS["full_size"], help="config compared with in the report ('' for none)"
    )
    parser.add_argument("--data-dir", default=None, help="benchmark data (default: $PROTOEMBED_DATA)")
    parser.add_argument(
        "--suites",
        nargs="+",
        default=[],
        choices=SUITES,
        help="also run these suites on the untrained model and the kept models, and draw Figs. 4-7",
    )
    parser.add_argument(
        "--suite-methods",
        nargs="+",
        default=DEFAULT_SUITE_METHODS,
        metavar="METHOD",
        help=f"methods whose seeds get the suites (default: {' '.join(DEFAULT_SUITE_METHODS)}; 'all': every one)",
    )
    parser.add_argument("--no-figures", action="store_true", help="with --suites: do not draw Figs. 4-7")
    parser.add_argument(
        "--dims",
        action="store_true",
        help=f"also the STS test at every Matryoshka width of the untrained model and of {', '.join(DIMS_METHODS)}",
    )
    parser.add_argument(
        "--sklearn-transfer",
        action="store_true",
        help="also transfer with scikit-learn's classifier, on the untrained model and the --suite-methods",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the study (see the module docstring); returns the exit code."""
    args = parse_args(argv)
    return guarded(lambda: _study(args, argv), _say)


def _study(args: argparse.Namespace, argv: list[str] | None) -> int:
    """The study's body (see :func:`main`)."""
    if args.step_before:
        records = method_records(args.records_dir, method_configs(args.configs), args.seeds)
        return step_before(args.records_dir, headline(args.records_dir, records, METHODS, args.seeds), _say)
    paths = method_configs(args.configs, args.methods)
    configs = {m: resolved_config(p, args.set) for m, p in paths.items()}
    first = next(iter(configs.values()))
    every = method_configs(args.configs)
    chosen = None if args.suite_methods == ["all"] else args.suite_methods
    wanted = args.suites or args.sklearn_transfer
    suite_methods = list(method_configs(args.configs, chosen)) if wanted else []  # unknown: error
    if args.data_dir:
        os.environ["PROTOEMBED_DATA"] = str(Path(args.data_dir).absolute())
    failed = []
    if not args.report_only:
        if not evaluate_untrained(args.records_dir, first):
            failed.append(UNTRAINED)
        for seed in args.seeds:  # seed-major: a partial study already compares every method
            for method, config in paths.items():
                name = f"{method}-seed{seed}"
                run_dir, record_dir = args.runs_dir / name, args.records_dir / name
                if not run_one(config, seed, run_dir, args.set, record_dir, configs[method]["model"]):
                    failed.append(name)
        jobs = [(args.suites, suite_methods, not args.no_figures)] if args.suites else []
        jobs += [([DIMS_SUITE], DIMS_METHODS, False)] if args.dims else []
        jobs += [([SKLEARN_SUITE], suite_methods, False)] if args.sklearn_transfer else []
        for suites, methods, figures in jobs:
            failed += suites_and_figures(
                args.records_dir, args.runs_dir, every, args.seeds, suites, methods, args.set, figures
            )
    if args.methods:  # running some methods still reports the whole study
        configs = {m: resolved_config(p, args.set) for m, p in method_configs(args.configs).items()}
    full = (args.full_size, resolved_config(Path(args.full_size))) if args.full_size else None
    write_report(
        args.report,
        args.records_dir,
        configs,
        METHODS,
        args.seeds,
        _command(argv, args),
        REFERENCE,
        full,
        backbone_facts(first["model"]),
    )
    _say(f"report written to {args.report}")
    return finished(failed, _say)


def _without_suite_options(given: list[str]) -> list[str]:
    """``given`` without the :data:`SUITE_FLAGS` (and their values)."""
    kept, skipping = [], False
    for arg in given:
        if arg in SUITE_FLAGS:
            skipping = SUITE_FLAGS[arg]
            continue
        if skipping and not arg.startswith("-"):
            continue
        skipping = False
        kept.append(arg)
    return kept


def _command(argv: list[str] | None, args: argparse.Namespace) -> str:
    """How to remake the report: ``make experiment-unsup`` when the defaults were used."""
    given = _without_suite_options(given_arguments(argv))  # they run more; the page is of the same records
    command = f"`{script_command('unsup_cpu.py', given)}`"
    defaults = parse_args([])
    keys = ("configs", "seeds", "set", "runs_dir", "records_dir", "report", "full_size")
    if all(getattr(args, k) == getattr(defaults, k) for k in keys):
        return f"`make experiment-unsup` (= `{script_command('unsup_cpu.py', MAKE_ARGS.split())}`)"
    return command


if __name__ == "__main__":
    sys.exit(main())
