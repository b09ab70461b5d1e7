"""The domain adaptation study's report, ``docs/results/domain-adaptation.md``, from its records.

A record is ``docs/results/domain-adaptation/<method>-<set>-seed<k>/`` with ``clustering.json`` (``protoembed
eval clustering`` of the trained model on its set: accuracy and NMI x100, mean over 10 k-means runs),
``results.json`` (STS-B test Spearman x100 of the same model), ``config.yaml``, ``training_log.jsonl``,
``study_time.json`` (``train_s``, ``clustering_s``: wall seconds) and ``environment.json``; the untrained
default model is ``untrained-default/`` (its own mean head) and, where present,
``untrained-default-<head>/`` (``protoembed eval clustering --model default --head <head>``: the head a
method trains, before training). Cells are mean ± sample std over the seeds recorded; the
untrained row is one model, its ± is the spread over the k-means runs. The hand-written part, what the
numbers mean for a user, is ``DISCUSSION.md`` beside the records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from experiments.records import CONFIG_FILE, ENVIRONMENT_FILE, RESULTS_FILE, TIME_FILE, write_text
from experiments.step_rerun import seed_means, step_change_section

CLUSTERING_FILE = "clustering.json"
UNTRAINED = "untrained-default"


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _cell(values: list[float]) -> str:
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{np.mean(values):.2f} ± {np.std(values, ddof=1):.2f}"


def _delta(values: list[float], before: float | None) -> str:
    return "n/a" if not values or before is None else f"{np.mean(values) - before:+.2f}"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def collect(records_dir: Path, sets: dict[str, str], methods: dict[str, str]) -> dict[str, Any]:
    """``{(method, set): [record, ...]}`` of the complete records (seed order) and the untrained one."""
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for folder in sorted(records_dir.glob("*-seed*")):
        clustering = _json(folder / CLUSTERING_FILE)
        if clustering is None:
            continue
        method, name, seed = folder.name.rsplit("-", 2)
        if method not in methods or name not in sets:
            continue
        runs.setdefault((method, name), []).append(
            {
                "seed": int(seed.removeprefix("seed")),
                "task": clustering["tasks"][sets[name]],
                "sts": (_json(folder / RESULTS_FILE) or {}).get("tasks", {}).get("STSBenchmark", {}),
                "time": _json(folder / TIME_FILE) or {},
                "config": yaml.safe_load((folder / CONFIG_FILE).read_text(encoding="utf-8"))
                if (folder / CONFIG_FILE).is_file()
                else {},
                "environment": _json(folder / ENVIRONMENT_FILE) or {},
            }
        )
    untrained = records_dir / UNTRAINED
    heads = {  # the untrained model with another head (untrained-default-<head>/): separates head from training
        folder.name.removeprefix(UNTRAINED + "-"): _json(folder / CLUSTERING_FILE)
        for folder in sorted(records_dir.glob(f"{UNTRAINED}-*"))
        if (folder / CLUSTERING_FILE).is_file()
    }
    return {
        "runs": runs,
        "before": _json(untrained / CLUSTERING_FILE),
        "before_sts": (_json(untrained / RESULTS_FILE) or {}).get("tasks", {}).get("STSBenchmark"),
        "before_heads": heads,
    }


def main_table(data: dict[str, Any], sets: dict[str, str], methods: dict[str, str]) -> list[str]:
    """One row per set and model: accuracy, NMI (with the change from before), STS-B test, seeds, time."""
    head = "| Set | Model | Seeds | Acc. | Δ Acc. | NMI | Δ NMI | STS-B test | Wall / run (train + cluster) |"
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    before_sts = data["before_sts"]
    for name, task in sets.items():
        before = (data["before"] or {}).get("tasks", {}).get(task)
        acc0 = nmi0 = None
        if before:
            acc0, nmi0 = before["acc"], before["nmi"]
            sts0 = f"{before_sts['spearman']:.2f}" if before_sts else "n/a"
            lines.append(
                f"| {task} | before (untrained default, mean head) | – | {acc0:.2f} (± {before['acc_std']:.2f}) "
                f"| | {nmi0:.2f} (± {before['nmi_std']:.2f}) | | {sts0} | |"
            )
        for head, other in data.get("before_heads", {}).items():
            row = (other or {}).get("tasks", {}).get(task)
            if row and acc0 is not None and nmi0 is not None:
                lines.append(
                    f"| {task} | untrained default, {head} head | – | {row['acc']:.2f} (± {row['acc_std']:.2f}) "
                    f"| {row['acc'] - acc0:+.2f} | {row['nmi']:.2f} (± {row['nmi_std']:.2f}) "
                    f"| {row['nmi'] - nmi0:+.2f} | | |"
                )
        for method, label in methods.items():
            runs = data["runs"].get((method, name), [])
            acc = [r["task"]["acc"] for r in runs]
            nmi = [r["task"]["nmi"] for r in runs]
            sts = [r["sts"]["spearman"] for r in runs if "spearman" in r["sts"]]
            train = [r["time"].get("train_s", 0.0) for r in runs]
            cluster = [r["time"].get("clustering_s", 0.0) for r in runs]
            wall = (
                f"{np.mean(train) + np.mean(cluster):.0f} s ({np.mean(train):.0f} + {np.mean(cluster):.0f})"
                if runs
                else "n/a"
            )
            lines.append(
                f"| {task} | {label} | {len(runs)} | {_cell(acc)} | {_delta(acc, acc0)} | {_cell(nmi)} "
                f"| {_delta(nmi, nmi0)} | {_cell(sts)} | {wall} |"
            )
    return lines


def per_seed_table(data: dict[str, Any], sets: dict[str, str], methods: dict[str, str]) -> list[str]:
    """Every recorded run: accuracy, NMI, STS-B test and its wall times."""
    lines = [
        "| Run | Acc. | NMI | STS-B test | train s | cluster s | load avg. (start, end) |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for name in sets:
        for method in methods:
            for r in data["runs"].get((method, name), []):
                env = r["environment"]
                lines.append(
                    f"| {method}-{name}-seed{r['seed']} | {r['task']['acc']:.2f} | {r['task']['nmi']:.2f} | "
                    f"{r['sts'].get('spearman', float('nan')):.2f} | {r['time'].get('train_s', 0):.0f} | "
                    f"{r['time'].get('clustering_s', 0):.0f} | "
                    f"{env.get('load_average_start')}, {env.get('load_average_end')} |"
                )
    return lines


def findings(data: dict[str, Any], sets: dict[str, str], methods: dict[str, str]) -> list[str]:
    """One line per set and method: the mean change and how many seeds moved each way."""
    lines = []
    for name, task in sets.items():
        before = (data["before"] or {}).get("tasks", {}).get(task)
        if not before:
            continue
        for method, label in methods.items():
            runs = data["runs"].get((method, name), [])
            if not runs:
                continue
            acc = [r["task"]["acc"] - before["acc"] for r in runs]
            nmi = [r["task"]["nmi"] - before["nmi"] for r in runs]
            lines.append(
                f"- {task}, {label}: accuracy {np.mean(acc):+.2f} ({sum(a > 0 for a in acc)} of {len(acc)} "
                f"seeds above before), NMI {np.mean(nmi):+.2f} ({sum(n > 0 for n in nmi)} of {len(nmi)} above)."
            )
    return lines


def headline(data: dict[str, Any], sets: dict[str, str], methods: dict[str, str]) -> dict[str, float]:
    """The study's numbers that a rerun is compared on (:mod:`experiments.step_rerun`): per set and
    method, the seeds' mean accuracy, NMI and STS-B test Spearman of :func:`main_table`."""
    numbers: dict[str, float] = {}
    for name, task in sets.items():
        for method, label in methods.items():
            runs = data["runs"].get((method, name), [])
            sts = [r["sts"]["spearman"] for r in runs if "spearman" in r["sts"]]
            columns = {
                "accuracy": [r["task"]["acc"] for r in runs],
                "NMI": [r["task"]["nmi"] for r in runs],
                "STS-B test": sts,
            }
            numbers.update(seed_means(f"{task}, {label}", columns))
    return numbers


def write_report(
    report: Path,
    records_dir: Path,
    sets: dict[str, str],
    methods: dict[str, str],
    configs_dir: Path,
    command: str,
) -> Path:
    """Write the report page from the records in ``records_dir`` (atomically); the hand-written
    discussion is read from ``DISCUSSION.md`` beside the records, when there is one."""
    data = collect(records_dir, sets, methods)
    every = [r for runs in data["runs"].values() for r in runs]
    first = next((r["config"] for r in every if r["config"]), {})
    training = first.get("training", {})
    total = sum(r["time"].get("train_s", 0.0) + r["time"].get("clustering_s", 0.0) for r in every)
    expected = len(sets) * len(methods) * 3
    rel = Path("domain-adaptation")
    text = [
        "# Domain adaptation on short-text clustering: before and after a short unsupervised run",
        "",
        "Question: with a general sentence model and unlabeled text of my own domain, does a short SimCSE "
        "or ConPVP run on that text help? Answered on three short-text clustering sets, whose texts stand "
        "for the unlabeled in-domain data (the short-text clustering literature trains on the texts it "
        "clusters, without labels): each run trains the default backbone (all-MiniLM-L6-v2) on the texts "
        "of one set, read with the `clustering` training format, which keeps the text field of every "
        "`label<TAB>text` line and drops the label (a test checks that no label reaches the examples), "
        "then clusters the same set with the trained model.",
        "",
        f"Made by {command}; configs `{configs_dir}/<method>-<set>.yaml` "
        f"(SimCSE: `[CLS]`, MLP in training only; ConPVP as the paper describes it, soft-prompt anchor, "
        f"Table 1 templates, no denoising). Training: {training.get('max_steps', '?')} steps of "
        f"{training.get('batch_size', '?')} texts, lr {training.get('lr', '?')}, "
        f"{first.get('max_seq_length', '?')} tokens, no checkpoint selection (STS-B dev once, after the "
        "last step: the final model is kept). Clustering: `protoembed eval clustering --model RUN/best "
        "--tasks SET` (k-means, k = classes, 10 runs with seeds 0-9, Hungarian accuracy and NMI, x100). "
        "Before: the untrained default model with its own mean head, same protocol"
        + (
            f" (its rows taken from `{data['before']['copied_from']}`: `make eval-clustering`, all eight sets)"
            if (data["before"] or {}).get("copied_from")
            else ""
        )
        + "; STS-B test: Spearman x100 (senteval variant).",
        "",
        f"Runs recorded: {len(every)} of {expected} (3 seeds x {len(methods)} methods x {len(sets)} sets). "
        f"Cells: mean ± std over the seeds (the before row: one model, ± over its k-means runs). Wall "
        f"time of the recorded runs: {_minutes(total)} in all, on 2 CPU cores (the load averages below: "
        "about 2 is a run alone, more means other jobs shared the cores).",
        "",
        *main_table(data, sets, methods),
        "",
        "## Change from before, per set and method",
        "",
        *(findings(data, sets, methods) or ["(no run recorded yet)"]),
        "",
    ]
    discussion = records_dir / "DISCUSSION.md"
    if discussion.is_file():
        text += ["## What it means for a user", "", discussion.read_text(encoding="utf-8").strip(), ""]
    text += step_change_section(records_dir, headline(data, sets, methods))
    text += [
        "## Runs",
        "",
        f"Records (config, training log, results, clustering, wall times, environment): `{rel}/<run>/`.",
        "",
        *per_seed_table(data, sets, methods),
        "",
    ]
    body = "\n".join(text)
    report.parent.mkdir(parents=True, exist_ok=True)
    return write_text(report, body)
