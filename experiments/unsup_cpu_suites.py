"""The unsupervised CPU study's other suites: transfer, few-shot and clustering of the kept models, and
the ConPVP paper's Figs. 4-7 for the untrained model, SimCSE and ConPVP (paper).

In: the study's records (``docs/results/unsup-cpu/<method>-seed<k>/``) and kept models
(``runs/unsup-cpu/<method>-seed<k>/best``, git-ignored). Out, beside each record: ``transfer.json``,
``fewshot.json``, ``clustering.json`` (what ``protoembed eval <suite> --output`` writes) and
``suite_time.json`` (seconds per suite, and of any retraining); the untrained model's go to
``untrained-default/``; the figures (PNG + JSON, ``protoembed analyze``) and their ``suite_time.json`` to
``figures/``. Everything goes through the command line, in subprocesses.

A run whose kept model is gone (another machine: only the committed record is left) is retrained from its
recorded ``config.yaml`` (a record made before configs were kept: the method's config with the run's
seed, as the study trained it) with ``protoembed train --resume``; its STS test results must then equal
the record's (Spearman within :data:`STS_TOLERANCE` on every task), else the study stops with a one-line
error naming the run and the first task that differs. The record itself is never rewritten. A suite or
figure whose JSON exists is skipped, so the work can be stopped and resumed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from experiments.records import BEST_DIR, CONFIG_FILE, RESULTS_FILE, legacy_settings, timed_call
from experiments.unsup_cpu_report import (
    DIMS,
    DIMS_SUITE,
    FIGURE_FILES,
    FIGURES_DIR,
    SKLEARN_SUITE,
    SUITE_TIME_FILE,
    SUITES,
    UNTRAINED,
    recorded,
    suite_file,
)
from protoembed import ProtoembedError

#: Options each suite runs with beyond the model and output. Every suite encodes with ONNX Runtime on
#: the model's cached fp32 export (``--runtime onnx``: vectors equal to torch's to ~1e-7; the transfer
#: numbers are unchanged, a k-means run can move by 0.01, as Biomedical's for the untrained model).
#: Transfer keeps its vectors (``--cache-embeddings``) and few-shot, run after it, looks its sentences
#: (a subset of transfer's) up instead of encoding them. Transfer runs the ConPVP authors' classifier
#: (their evaluation.py: SentEval's PyTorch logistic regression), ``--classifier pytorch``; its
#: scikit-learn twin, run after it, looks its vectors up too.
SUITE_OPTIONS: dict[str, tuple[str, ...]] = {
    "transfer": ("--runtime", "onnx", "--cache-embeddings", "--classifier", "pytorch"),
    SKLEARN_SUITE: ("--runtime", "onnx", "--cache-embeddings", "--classifier", "sklearn"),
    "fewshot": ("--runtime", "onnx", "--cache-embeddings"),
    "clustering": ("--runtime", "onnx"),
    # the STS test tasks as the runs' own evaluation reads them (torch, eval_variant senteval)
    DIMS_SUITE: ("--dims", ",".join(map(str, DIMS)), "--variant", "senteval"),
}
#: The ``protoembed eval`` suite of a study suite named otherwise.
SUITE_COMMANDS = {DIMS_SUITE: "sts", SKLEARN_SUITE: "transfer"}
#: Methods whose seeds ``--dims`` evaluates at every width of :data:`DIMS`.
DIMS_METHODS = ["simcse", "conpvp-paper", "conpvp-matryoshka"]

#: Methods whose seeds get the suites by default (``--suite-methods``).
DEFAULT_SUITE_METHODS = ["conpvp-paper", "simcse"]
#: The figures' models: (label, method or ``None`` for the untrained model); seed :data:`FIGURE_SEED`.
FIGURE_MODELS: list[tuple[str, str | None]] = [
    ("untrained", None),
    ("SimCSE", "simcse"),
    ("ConPVP (paper)", "conpvp-paper"),
]
FIGURE_SEED = 1
#: Largest |retrained - recorded| STS Spearman (x100) per task accepted as the same model.
STS_TOLERANCE = 0.01
PROTOEMBED = [sys.executable, "-m", "protoembed"]


def _say(message: str) -> None:
    print(f"unsup_cpu: {message}", file=sys.stderr, flush=True)


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _timed(cmd: list[str], folder: Path, key: str) -> int:
    """Run ``cmd`` (its stdout, the suite's table, discarded), its wall time added to ``key``."""
    _say(" ".join(cmd[1:]))
    return timed_call(cmd, folder, key, SUITE_TIME_FILE, quiet=True)


def sts_difference(retrained: dict[str, Any], recorded: dict[str, Any]) -> str | None:
    """The first recorded STS task whose Spearman the retrained results lack or miss by more than
    :data:`STS_TOLERANCE` (as ``"TASK (recorded R, retrained N)"``); ``None`` when all agree."""
    for task, entry in recorded["tasks"].items():
        mine = retrained.get("tasks", {}).get(task, {}).get("spearman")
        if mine is None or abs(mine - entry["spearman"]) > STS_TOLERANCE:
            shown = "missing" if mine is None else f"{mine:.4f}"
            return f"{task} (recorded {entry['spearman']:.4f}, retrained {shown})"
    return None


def train_command(
    record_dir: Path, run_dir: Path, fallback: Path, seed: int, overrides: list[str]
) -> list[str]:
    """``protoembed train --resume`` of a recorded run: its recorded config (with the settings added to
    protoembed since, as the record was made: :func:`~experiments.records.legacy_settings`), else
    ``fallback`` with the run's seed and the study's overrides (the command the study trained it with)."""
    recorded = record_dir / CONFIG_FILE
    cmd = [*PROTOEMBED, "train", "--config", str(recorded if recorded.is_file() else fallback)]
    cmd += ["--output-dir", str(run_dir), "--resume"]
    if recorded.is_file():
        items = legacy_settings(yaml.safe_load(recorded.read_text(encoding="utf-8")) or {})
    else:
        items = [f"training.seed={seed}", *overrides]
    for item in items:
        cmd += ["--set", item]
    return cmd


def kept_model(
    record_dir: Path, run_dir: Path, fallback: Path, seed: int, overrides: list[str]
) -> Path | None:
    """The run's ``best/``, retrained when missing (or unfinished) and checked against the record.

    Returns ``None`` when training failed (said on stderr; rerun to resume). Raises ProtoembedError when
    the STS results differ from the record's, or when ``best/`` is gone from a finished run folder.
    """
    name, best = record_dir.name, run_dir / BEST_DIR
    finished = (run_dir / RESULTS_FILE).is_file()
    if finished and not best.is_dir():
        raise ProtoembedError(
            f"{name}: {run_dir} holds a finished run without best/; move it away to retrain"
        )
    if not finished:
        _say(f"{name}: no kept model in {run_dir}; retraining it")
        code = _timed(train_command(record_dir, run_dir, fallback, seed, overrides), record_dir, "retrain")
        if code != 0 or not best.is_dir():
            _say(f"{name}: retraining failed (exit {code}); rerun to resume it")
            return None
    differs = sts_difference(_json(run_dir / RESULTS_FILE), _json(record_dir / RESULTS_FILE))
    if differs:
        raise ProtoembedError(f"{name}: the model in {run_dir} is not the recorded one: STS {differs}")
    return best


def suite_command(suite: str, model: str, output: Path) -> list[str]:
    """``protoembed eval <suite> --model M --output F`` with the suite's :data:`SUITE_OPTIONS`."""
    return [
        *PROTOEMBED,
        "eval",
        SUITE_COMMANDS.get(suite, suite),
        "--model",
        model,
        "--output",
        str(output),
        *SUITE_OPTIONS.get(suite, ()),
    ]


def run_suites(folder: Path, suites: list[str], model: Callable[[], str | None]) -> list[str]:
    """Run each of ``suites`` not :func:`recorded` in ``folder``; ``model()`` is asked (it may retrain)
    only then. Returns the suites that failed."""
    missing = [s for s in suites if not recorded(folder, s)]
    if not missing:
        _say(f"{folder.name}: {', '.join(suites)} recorded, skipped")
        return []
    spec = model()
    if spec is None:
        return missing
    return [s for s in missing if _timed(suite_command(s, spec, suite_file(folder, s)), folder, s) != 0]


def figure_commands(
    figures: Path, models: list[tuple[str, str]], fewshot: list[Path]
) -> dict[str, list[str]]:
    """``protoembed analyze`` commands of Figs. 4-7 (name -> command), PNG and JSON in ``figures``.

    ``models``: (label, model spec) in drawing order; ``fewshot``: their few-shot results files (Fig. 7).
    Fig. 5 compares the mean-pooled token states of every model (``--head mean``), which the
    frequent-token removal needs.
    """
    labels = [arg for label, _ in models for arg in ("--label", label)]
    specs = [arg for _, spec in models for arg in ("--model", spec)]
    commands = {}
    for name, file in FIGURE_FILES.items():
        png = figures / file
        where = ["--figure", str(png), "--output", str(png.with_suffix(".json"))]
        if name == "fewshot":
            commands[name] = [*PROTOEMBED, "analyze", name, *map(str, fewshot), *labels, *where]
        else:
            head = ["--head", "mean"] if name == "frequent-tokens" else []
            commands[name] = [*PROTOEMBED, "analyze", name, *specs, *labels, *head, *where]
    return commands


def draw_figures(records_dir: Path, models: dict[str, Callable[[], str | None]]) -> list[str]:
    """Draw the figures of :data:`FIGURE_MODELS` whose JSON is missing; returns those that failed.

    ``models``: label -> a function giving that model's spec (retraining it if needed), asked only when
    a figure is drawn. Fig. 7 waits for the three few-shot results (skipped, and said, until they exist).
    """
    figures = records_dir / FIGURES_DIR
    missing = [n for n, f in FIGURE_FILES.items() if not (figures / f).with_suffix(".json").is_file()]
    if not missing:
        return []
    fewshot = [records_dir / _folder(method) / "fewshot.json" for _, method in FIGURE_MODELS]
    if "fewshot" in missing and not all(p.is_file() for p in fewshot):
        _say(
            "Fig. 7 waits for the few-shot results of "
            + ", ".join(str(p) for p in fewshot if not p.is_file())
        )
        missing.remove("fewshot")
    specs: list[tuple[str, str]] = []
    if any(n != "fewshot" for n in missing):
        for label, _ in FIGURE_MODELS:
            spec = models[label]()
            if spec is None:
                return missing
            specs.append((label, spec))
    else:
        specs = [(label, "") for label, _ in FIGURE_MODELS]
    commands = figure_commands(figures, specs, fewshot)
    figures.mkdir(parents=True, exist_ok=True)
    return [n for n in missing if _timed(commands[n], figures, n) != 0]


def _folder(method: str | None) -> str:
    return UNTRAINED if method is None else f"{method}-seed{FIGURE_SEED}"


def suites_and_figures(
    records_dir: Path,
    runs_dir: Path,
    configs: dict[str, Path],
    seeds: list[int],
    suites: list[str],
    methods: list[str],
    overrides: list[str],
    figures: bool = True,
) -> list[str]:
    """The suites of the untrained model and of every recorded seed of ``methods``; the figures as soon
    as the models of seed :data:`FIGURE_SEED` are evaluated.

    Args:
        records_dir, runs_dir: the study's records and run folders.
        configs: method -> its config file (the retraining fallback for a record without a config).
        seeds: the seeds to evaluate; a seed without a record is skipped (train it first).
        suites: some of :data:`SUITES`, or :data:`DIMS_SUITE`, or :data:`SKLEARN_SUITE`.
        methods: the methods whose seeds are evaluated.
        overrides: the study's ``--set`` items (used with the fallback config only).
        figures: also draw Figs. 4-7.
    Returns:
        ``<run>:<suite>`` (or ``figure:<name>``) of everything that failed; a retrained model whose STS
        differs from its record raises ProtoembedError.
    """
    known = (*SUITES, DIMS_SUITE, SKLEARN_SUITE)
    unknown = [s for s in suites if s not in known]
    if unknown:
        raise ProtoembedError(f"unknown study suite {unknown[0]!r}; expected one of {', '.join(known)}")
    kept: dict[str, str | None] = {}

    def model(method: str, seed: int) -> Callable[[], str | None]:
        name = f"{method}-seed{seed}"

        def resolve() -> str | None:
            if name not in kept:
                best = kept_model(records_dir / name, runs_dir / name, configs[method], seed, overrides)
                kept[name] = None if best is None else str(best)
            return kept[name]

        return resolve

    def figures_now() -> list[str]:
        models = {
            label: (lambda: "default") if method is None else model(method, FIGURE_SEED)
            for label, method in FIGURE_MODELS
        }
        absent = [
            m for _, m in FIGURE_MODELS if m and not (records_dir / _folder(m) / RESULTS_FILE).is_file()
        ]
        if absent:
            _say(f"the figures wait for the record of {_folder(absent[0])}")
            return []
        return [f"figure:{n}" for n in draw_figures(records_dir, models)]

    failed = [f"{UNTRAINED}:{s}" for s in run_suites(records_dir / UNTRAINED, suites, lambda: "default")]
    for seed in seeds:  # seed-major, as the training: a partial run already compares the methods
        for method in methods:
            name = f"{method}-seed{seed}"
            if not (records_dir / name / RESULTS_FILE).is_file():
                _say(f"{name}: not recorded yet; its suites wait for its training")
                continue
            failed += [f"{name}:{s}" for s in run_suites(records_dir / name, suites, model(method, seed))]
        if figures and seed == FIGURE_SEED:  # drawn as soon as their models are evaluated
            failed += figures_now()
    if figures and FIGURE_SEED not in seeds:
        failed += figures_now()
    return failed
