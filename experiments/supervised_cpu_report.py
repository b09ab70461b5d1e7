"""The supervised CPU study's report (docs/results/supervised-cpu.md + .png), drawn from the run records.

A record ``<system>-<regime>-seed<k>/`` holds ``results.json`` (STS test tasks of the kept model with the
run's head, Spearman and Pearson x100; a staged run's also lists its stages), ``config.yaml`` (every
stage's resolved config for a staged run), the training logs (``training_log.jsonl``, or
``<stage>.training_log.jsonl``), ``study_time.json``, ``environment.json`` and, for a cross-encoder,
``results-mean.json`` (mean head over its encoder) and ``cross-encoder.json`` (the cross-encoder on STS-B
test); a staged run keeps each stage's results as ``<stage>.results.json`` (and ``<stage>.results-mean.json``):
without a separate NLI run, the NLI column is the NLI stage of the NLI then STS-B run. ``untrained-<head>/results.json`` are the backbone before fine-tuning. The hand-written discussion
is read from ``DISCUSSION.md`` beside the records.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from experiments.records import LOG_FILE, RESULTS_FILE, cpus_text, pyplot, save_figure, write_text
from experiments.step_rerun import seed_means, step_change_section
from experiments.unsup_cpu_report import mean_std
from protoembed import run_layout, table_name

RUN = re.compile(r"^(?P<name>.+)-seed(?P<seed>\d+)$")
#: Table I rows: label -> (system, results file, head of the untrained column).
ROWS = {
    "[CLS] (cross-encoder)": ("cross-encoder", RESULTS_FILE, "cls"),
    "Avg. (cross-encoder)": ("cross-encoder", "results-mean.json", "mean"),
    "SBERT": ("sbert", RESULTS_FILE, "mean"),
    "CNN-SBERT": ("cnn-sbert", RESULTS_FILE, "cnn"),
    "Supervised SimCSE": ("simcse-sup", RESULTS_FILE, "cls"),
}
REGIMES = {"stsb": "STS-B", "nli": "NLI", "nli-stsb": "NLI then STS-B"}
STSB = "STSBenchmark"
#: The cross-encoder's STS-B recipes (system -> label): the runs of a regime report the one whose kept
#: checkpoints score STS-B dev best on average (:func:`chosen_recipe`); Table II shows every one.
RECIPES = {
    "cross-encoder": "MSE on the 0-5 score (GLUE)",
    "cross-encoder-bce": "BCE on score / 5 (sentence-transformers)",
}


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def read_records(records_dir: Path) -> dict[str, list[Path]]:
    """``{"<system>-<regime>": [record folders, by seed]}`` of the finished runs."""
    runs: dict[str, list[Path]] = {}
    for folder in sorted(records_dir.glob("*-seed*")):
        match = RUN.match(folder.name)
        if match and (folder / RESULTS_FILE).is_file():
            runs.setdefault(match["name"], []).append(folder)
    return runs


def _scores(folders: list[Path], file: str, task: str = STSB) -> tuple[list[float], list[float]]:
    spearman, pearson = [], []
    for folder in folders:
        results = _json(folder / file)
        if results and task in results.get("tasks", {}):
            spearman.append(results["tasks"][task]["spearman"])
            pearson.append(results["tasks"][task]["pearson"])
    return spearman, pearson


def _cell(spearman: list[float], pearson: list[float]) -> str:
    if not spearman:
        return "–"
    return f"{mean_std(spearman)} ({mean_std(pearson)})"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows]) + "\n"


def dev_scores(folders: list[Path]) -> list[float]:
    """The dev score that chose each run's kept model (a cross-encoder's: its own STS-B dev Spearman)."""
    found = [run_layout.dev_score(_json(f / RESULTS_FILE) or {}) for f in folders]
    return [float(v) for v in found if v is not None]


def chosen_recipe(runs: dict[str, list[Path]], regime: str) -> str:
    """The cross-encoder system of :data:`RECIPES` whose ``regime`` runs have the highest mean dev score
    (never test); the first recipe when none has runs. The NLI column is the NLI then STS-B runs'."""
    regime = "nli-stsb" if regime == "nli" and not any(runs.get(f"{r}-nli") for r in RECIPES) else regime
    scored = {r: dev_scores(runs.get(f"{r}-{regime}", [])) for r in RECIPES}
    scored = {r: float(np.mean(v)) for r, v in scored.items() if v}
    return max(scored, key=scored.__getitem__) if scored else next(iter(RECIPES))


def row_system(system: str, regime: str, runs: dict[str, list[Path]]) -> str:
    """A Table I row's system in ``regime``: the chosen recipe for the cross-encoder rows."""
    return chosen_recipe(runs, regime) if system in RECIPES else system


def table_one(
    records_dir: Path, runs: dict[str, list[Path]]
) -> tuple[str, dict[str, dict[str, list[float]]]]:
    """Table I: STS-B test Spearman (Pearson) x100 per row and regime; also the Spearman lists."""
    values: dict[str, dict[str, list[float]]] = {}
    rows = []
    for label, (system, file, head) in ROWS.items():
        untrained = _json(records_dir / f"untrained-{head}" / RESULTS_FILE)
        cells = [_cell(*_scores([records_dir / f"untrained-{head}"], RESULTS_FILE)) if untrained else "–"]
        values[label] = {}
        for regime in REGIMES:
            chosen = row_system(system, regime, runs)
            folders, name = runs.get(f"{chosen}-{regime}", []), file
            if regime == "nli" and not folders:  # the NLI stage of the NLI then STS-B runs
                folders, name = runs.get(f"{chosen}-nli-stsb", []), f"nli.{file}"
            spearman, pearson = _scores(folders, name)
            values[label][regime] = spearman
            cells.append(_cell(spearman, pearson))
        rows.append([label, *cells])
    header = ["Model", "Not fine-tuned", *REGIMES.values()]
    return _table(header, rows), values


def headline(records_dir: Path) -> dict[str, float]:
    """The study's headline numbers (:mod:`experiments.step_rerun`) of the records in ``records_dir``:
    :func:`headline_of` their Table I."""
    return headline_of(table_one(records_dir, read_records(records_dir))[1])


def headline_of(values: dict[str, dict[str, list[float]]]) -> dict[str, float]:
    """Table I's STS-B test Spearman x100 (``values``: :func:`table_one`'s lists), the mean over the seeds
    of each row and regime with runs (``"<row>: <regime>"``)."""
    numbers: dict[str, float] = {}
    for label, by_regime in values.items():
        numbers |= seed_means(label, {REGIMES[regime]: spearman for regime, spearman in by_regime.items()})
    return numbers


def table_two(runs: dict[str, list[Path]]) -> str:
    """Table II: the cross-encoder itself on STS-B test, one row per regime and recipe that has runs,
    with the dev score that chose each run's checkpoint and the recipe the regime reports."""
    rows = []
    for regime in ("stsb", "nli-stsb"):
        chosen = chosen_recipe(runs, regime)
        for system, recipe in RECIPES.items():
            folders = runs.get(f"{system}-{regime}", [])
            if not folders:
                continue
            rows.append(
                [
                    f"Cross-encoder, {REGIMES[regime]}",
                    recipe,
                    str(len(folders)),
                    mean_std(dev_scores(folders)),
                    _cell(*_scores(folders, "cross-encoder.json")),
                    "yes" if system == chosen else "no",
                ]
            )
    header = ["Model", "Loss", "Seeds", "STS-B dev Spearman", "STS-B test Spearman (Pearson)", "Reported"]
    return _table(header, rows)


#: Earlier records kept to show what a fix moved (same layout, with ``CHANGES.md`` saying what changed).
BEFORE_DIR = "before-fixes"
#: (label, results file) of the numbers the comparison shows for each earlier run.
COMPARED = {
    "cross-encoder": [
        ("Table II", "cross-encoder.json"),
        ("[CLS]", RESULTS_FILE),
        ("Avg.", "results-mean.json"),
    ],
}


def table_before(records_dir: Path, runs: dict[str, list[Path]]) -> str:
    """What a fix moved: for each run name in ``records_dir/before-fixes/``, its STS-B test Spearman
    (Pearson) x100 in the earlier records and in the current ones (mean ± std over the seeds each side
    has, both counts shown: a rerun may add seeds the earlier records lack), for the numbers
    :data:`COMPARED` lists for its system; empty without earlier records."""
    before_dir = records_dir / BEFORE_DIR
    earlier = read_records(before_dir) if before_dir.is_dir() else {}
    rows = []
    for name, old in earlier.items():
        system = next((s for s in COMPARED if name.startswith(f"{s}-")), None)
        if system is None:
            continue
        new = runs.get(name, [])
        for label, file in COMPARED[system]:
            rows.append(
                [
                    f"{name}: {label}",
                    f"{len(old)} / {len(new)}",
                    _cell(*_scores(old, file)),
                    _cell(*_scores(new, file)),
                ]
            )
    if not rows:
        return ""
    changes = before_dir / "CHANGES.md"
    return (changes.read_text(encoding="utf-8").strip() + "\n\n" if changes.is_file() else "") + _table(
        ["Run: number", "seeds (before / now)", "before", "now"], rows
    )


def table_three(runs: dict[str, list[Path]], values: dict[str, dict[str, list[float]]]) -> str:
    """Table III: every STS task for the best two rows after NLI then STS-B (by STS-B Spearman)."""
    ranked = sorted(
        (label for label in values if values[label]["nli-stsb"]),
        key=lambda label: -float(np.mean(values[label]["nli-stsb"])),
    )[:2]
    tasks = [STSB]
    rows = []
    for label in ranked:
        system, file, _ = ROWS[label]
        folders = runs[f"{row_system(system, 'nli-stsb', runs)}-nli-stsb"]
        first = _json(folders[0] / file)
        tasks = list(first["tasks"])
        cells = [mean_std(_scores(folders, file, task)[0]) for task in tasks]
        averages = [(_json(f / file) or {}).get("avg") for f in folders]
        rows.append([label, *cells, mean_std(averages)])
    return _table(["Model", *[table_name(t) for t in tasks], "Avg."], rows) if rows else "–\n"


def setup_text(records_dir: Path, runs: dict[str, list[Path]]) -> str:
    """Steps, data sizes, seeds and compute, from the logs and time records."""
    lines = []
    total = 0.0
    for name, folders in runs.items():
        seconds = [(_json(f / "study_time.json") or {}).get("seconds", 0.0) for f in folders]
        total += sum(seconds)
        steps = []
        for folder in folders[:1]:
            for log in sorted(folder.glob("*training_log.jsonl")):
                entries = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines() if x.strip()]
                start = next((e for e in entries if e.get("event") == "start"), None)
                if start:
                    stage = log.name.split(".")[0] if log.name != LOG_FILE else "run"
                    steps.append(
                        f"{stage}: {start['total_steps']} steps over {start['data']['examples']:,} examples"
                    )
        lines.append(f"| {name} | {len(folders)} | {'; '.join(steps)} | {np.mean(seconds) / 60:.1f} |")
    for folder in sorted(records_dir.glob("untrained-*")):
        total += (_json(folder / "study_time.json") or {}).get("seconds", 0.0)
    environments = [
        e for f in runs.values() for folder in f for e in [_json(folder / "environment.json")] if e
    ]
    head = "| Run | Seeds | Steps (per stage) | Minutes per seed |\n|---|---:|---|---:|\n"
    cores = environments[0].get("cpu_count", "?") if environments else "?"
    cpus = cpus_text(environments)
    where = f"{cores} CPU cores" + (f" ({cpus})" if cpus else "")
    return head + "\n".join(lines) + f"\n\nTotal compute: {total / 60:.0f} min on {where}.\n"


def plot(values: dict[str, dict[str, list[float]]], path: Path) -> Path:
    """Grouped bars: STS-B test Spearman per row, one bar per regime (mean, error bar = std over seeds)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.6))
    labels = list(values)
    width = 0.8 / len(REGIMES)
    for i, (regime, title) in enumerate(REGIMES.items()):
        means = [float(np.mean(values[r][regime])) if values[r][regime] else 0.0 for r in labels]
        stds = [
            float(np.std(values[r][regime], ddof=1)) if len(values[r][regime]) > 1 else 0.0 for r in labels
        ]
        ax.bar(np.arange(len(labels)) + (i - 1) * width, means, width, yerr=stds, label=title, capsize=2)
    ax.set_xticks(np.arange(len(labels)), labels, fontsize=8)
    ax.set_ylabel("STS-B test Spearman x100")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("Fine-tuning data per model (default backbone, CPU study)", fontsize=9)
    return save_figure(fig, path)


def write_report(report: Path, records_dir: Path, config_dir: Path, command: str) -> Path:
    """Write the study page and its figure from the records."""
    runs = read_records(records_dir)
    t1, values = table_one(records_dir, runs)
    figure = plot(values, report.with_suffix(".png"))
    nli = yaml.safe_load((config_dir.parent / "base" / "sup-nli-cpu.yaml").read_text(encoding="utf-8"))
    discussion = records_dir / "DISCUSSION.md"
    parts = [
        "# Supervised CPU study: the BERT/ALBERT paper's Table I on the default backbone\n",
        f"Produced by `{command}` from the run records in `{records_dir}/` (one folder per run). Backbone: "
        "the embedded default (all-MiniLM-L6-v2, a 6-layer BERT already trained as a sentence encoder) "
        "instead of BERT-base; ALBERT rows are configs and tiny-model tests only (no ALBERT weights "
        "here). NLI data: what can be had offline, SNLI dev + test and SICK train + trial entailment "
        f"labels ({', '.join(nli['data']['corpus'])}), not SNLI + MultiNLI train.\n",
        "## Table I: STS-B test, Spearman (Pearson) x100\n",
        "Rows as the paper's: [CLS] and Avg. are the encoder of a cross-encoder fine-tune read with the "
        "[CLS] state or the mean of token states (one run gives both); SBERT and CNN-SBERT are siamese "
        "(mean / CNN head); supervised SimCSE is beyond the paper (NLI triplets; its NLI then STS-B "
        "column continues with SBERT's STS-B regression on [CLS]). Mean ± std over seeds where there "
        "are several.\n",
        t1,
        f"![Table I as bars]({figure.name})\n",
        "## Table II: the cross-encoder on STS-B test, Spearman (Pearson) x100\n",
        "Each recipe's STS-B dev Spearman is that of the checkpoints its runs kept (mean ± std over seeds); "
        "a regime reports the recipe with the higher mean dev score (never test), and Table I's [CLS] and "
        "Avg. rows read that recipe's runs.\n",
        table_two(runs),
        "## Table III: the best two models after NLI then STS-B, Spearman x100\n",
        table_three(runs, values),
        "## Runs and compute\n",
        setup_text(records_dir, runs),
    ]
    before = table_before(records_dir, runs)
    before_after = step_change_section(records_dir, headline_of(values))
    if before:
        parts += [f"## What the fixes moved (earlier records in `{BEFORE_DIR}/`), STS-B test x100\n", before]
    parts += ["\n".join(before_after)] if before_after else []
    if discussion.is_file():
        parts += ["## Discussion\n", discussion.read_text(encoding="utf-8")]
    text = "\n".join(parts)
    write_text(report, text)
    return report
