"""The own-pairs study's page, ``docs/results/own-pairs.md``, from its records.

A record is ``docs/results/own-pairs/<method>-<set>-seed<k>/`` with ``retrieval.json`` (``protoembed eval
retrieval`` of the trained model on the study's retrieval set), ``results.json`` (STS-B test Spearman x100
of the same model), ``config.yaml``, ``training_log.jsonl``, ``study_time.json`` (wall seconds) and
``environment.json``; ``untrained-default-<set>/`` holds the untrained default model's two results,
``data-<set>.json`` the set's counts and ``mining-<set>/`` the mining's wall time. Cells are mean ± sample std over the seeds
recorded. The hand-written part is ``DISCUSSION.md`` beside the records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from experiments.records import CONFIG_FILE, ENVIRONMENT_FILE, RESULTS_FILE, TIME_FILE, write_text

#: Method (config name) -> its label on the page, in the page's order.
METHODS = {
    "simcse": "unsupervised SimCSE on the texts",
    "conpvp": "ConPVP on the texts",
    "sup": "supervised SimCSE, in-batch negatives",
    "sup-mined": "supervised SimCSE, + 1 mined hard negative",
}
RETRIEVAL_FILE = "retrieval.json"
UNTRAINED = "untrained-default"
#: Set -> its label on the page, in the page's order (the sets of :mod:`experiments.own_pairs_data`).
SET_LABELS = {"snli": "SNLI, hypothesis -> premise", "googlenews": "GoogleNews, title -> snippet"}
#: The metrics shown (the first is the main score).
METRICS = (("ndcg_at_10", "nDCG@10"), ("recall_at_10", "Recall@10"), ("mrr_at_10", "MRR@10"))


def task_dir(data: Path, name: str) -> Path:
    """Set ``name``'s retrieval folder (BEIR layout) in its data folder; its name is the task's."""
    return data / f"{name}-retrieval"


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _cell(values: list[float], scale: float = 1.0) -> str:
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"{values[0] * scale:.2f}"
    return f"{np.mean(values) * scale:.2f} ± {np.std(values, ddof=1) * scale:.2f}"


def retrieval_scores(result: dict[str, Any] | None) -> dict[str, float]:
    """The shown metrics of a ``retrieval.json`` (its one task; x100 as the suite writes them)."""
    if not result:
        return {}
    (task,) = result["tasks"].values()
    return {key: float(task[key]) for key, _ in METRICS}


def sts_score(result: dict[str, Any] | None) -> float | None:
    """STS-B test Spearman x100 of a ``results.json`` (``None`` when absent)."""
    row = (result or {}).get("tasks", {}).get("STSBenchmark")
    return float(row["spearman"]) if row else None


def collect(records_dir: Path, name: str) -> dict[str, Any]:
    """Set ``name``'s complete records: ``{"runs": {method: [record, ...]}, "before": record | None,
    "data": its counts}``."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for folder in sorted(records_dir.glob(f"*-{name}-seed*")):
        retrieval = _json(folder / RETRIEVAL_FILE)
        method, seed = folder.name.rsplit(f"-{name}-seed", 1)
        if retrieval is None or method not in METHODS:
            continue
        runs.setdefault(method, []).append(
            {
                "seed": int(seed),
                "retrieval": retrieval_scores(retrieval),
                "sts": sts_score(_json(folder / RESULTS_FILE)),
                "time": _json(folder / TIME_FILE) or {},
                "config": yaml.safe_load((folder / CONFIG_FILE).read_text(encoding="utf-8"))
                if (folder / CONFIG_FILE).is_file()
                else {},
                "environment": _json(folder / ENVIRONMENT_FILE) or {},
                "protocol": retrieval.get("protocol", {}),
            }
        )
    untrained = records_dir / f"{UNTRAINED}-{name}"
    retrieval = _json(untrained / RETRIEVAL_FILE)
    before = (
        {"retrieval": retrieval_scores(retrieval), "sts": sts_score(_json(untrained / RESULTS_FILE))}
        if retrieval
        else None
    )
    return {"runs": runs, "before": before, "data": _json(records_dir / f"data-{name}.json") or {}}


def main_table(data: dict[str, Any]) -> list[str]:
    """One row per model: the retrieval metrics, nDCG@10's change, STS-B test and its change, wall time."""
    names = " | ".join(label for _, label in METRICS)
    lines = [
        f"| Model | Seeds | {names} | Δ nDCG@10 | STS-B test | Δ STS-B | Wall / run (train + retrieval) |",
        "|---|---:|" + "---:|" * len(METRICS) + "---:|---:|---:|---:|",
    ]
    before = data["before"]
    main = METRICS[0][0]
    if before:
        cells = " | ".join(f"{before['retrieval'][k]:.2f}" for k, _ in METRICS)
        sts = f"{before['sts']:.2f}" if before["sts"] is not None else "n/a"
        lines.append(f"| untrained default (mean head) | – | {cells} | | {sts} | | |")
    for method, label in METHODS.items():
        runs = data["runs"].get(method, [])
        cells = " | ".join(_cell([r["retrieval"][k] for r in runs]) for k, _ in METRICS)
        ndcg = [r["retrieval"][main] for r in runs]
        sts = [r["sts"] for r in runs if r["sts"] is not None]
        d_ndcg = f"{np.mean(ndcg) - before['retrieval'][main]:+.2f}" if runs and before else "n/a"
        d_sts = (
            f"{np.mean(sts) - before['sts']:+.2f}" if sts and before and before["sts"] is not None else "n/a"
        )
        train = [r["time"].get("train_s", 0.0) for r in runs]
        ret = [r["time"].get("retrieval_s", 0.0) for r in runs]
        wall = (
            f"{np.mean(train) + np.mean(ret):.0f} s ({np.mean(train):.0f} + {np.mean(ret):.0f})"
            if runs
            else "n/a"
        )
        lines.append(f"| {label} | {len(runs)} | {cells} | {d_ndcg} | {_cell(sts)} | {d_sts} | {wall} |")
    return lines


def summary_table(records_dir: Path) -> list[str]:
    """One row per set: the untrained model's nDCG@10 / STS-B test, then each method's change of the two
    means (the table of docs/training/your-data.md; the page has it too)."""
    head = " | ".join(METHODS[m] for m in METHODS)
    lines = [f"| Set: nDCG@10 / STS-B test | untrained | {head} |", "|---|---:|" + "---:|" * len(METHODS)]
    main = METRICS[0][0]
    for name, label in SET_LABELS.items():
        data = collect(records_dir, name)
        before = data["before"]
        if not before or before["sts"] is None:
            continue
        cells = []
        for method in METHODS:
            runs = data["runs"].get(method, [])
            sts = [r["sts"] for r in runs if r["sts"] is not None]
            cells.append(
                f"{np.mean([r['retrieval'][main] for r in runs]) - before['retrieval'][main]:+.2f} / "
                f"{np.mean(sts) - before['sts']:+.2f}"
                if runs and sts
                else "n/a"
            )
        lines.append(
            f"| {label} | {before['retrieval'][main]:.2f} / {before['sts']:.2f} | {' | '.join(cells)} |"
        )
    return lines


def per_seed_table(data: dict[str, Any], name: str) -> list[str]:
    """Every recorded run: its metrics, STS-B test, wall times and load averages."""
    names = " | ".join(label for _, label in METRICS)
    lines = [
        f"| Run | {names} | STS-B test | train s | retrieval s | load avg. (start, end) |",
        "|---|" + "---:|" * len(METRICS) + "---:|---:|---:|---|",
    ]
    for method in METHODS:
        for r in data["runs"].get(method, []):
            env = r["environment"]
            cells = " | ".join(f"{r['retrieval'][k]:.2f}" for k, _ in METRICS)
            sts = f"{r['sts']:.2f}" if r["sts"] is not None else "n/a"
            lines.append(
                f"| {method}-{name}-seed{r['seed']} | {cells} | {sts} | {r['time'].get('train_s', 0):.0f} | "
                f"{r['time'].get('retrieval_s', 0):.0f} | {env.get('load_average_start')}, "
                f"{env.get('load_average_end')} |"
            )
    return lines


def write_report(
    report: Path, records_dir: Path, configs_dir: Path, mine_options: list[str], command: str
) -> Path:
    """Write the page from the records in ``records_dir`` (atomically); the hand-written discussion is
    read from ``DISCUSSION.md`` beside the records, when there is one."""
    sets = {name: collect(records_dir, name) for name in SET_LABELS}
    every = [r for data in sets.values() for runs in data["runs"].values() for r in runs]
    first = next((r["config"] for r in every if r["config"]), {})
    training = first.get("training", {})
    protocol = next((r["protocol"] for r in every if r["protocol"]), {})
    snli, news = sets["snli"]["data"], sets["googlenews"]["data"]
    text = [
        "# Your own pairs: supervised adaptation with in-batch and mined hard negatives, judged by retrieval",
        "",
        "Question: I have (query, document) pairs of my own domain; which adaptation of a general sentence "
        "model helps retrieval there, and what does it cost on general similarity? Two sets stand in for an "
        "engineer's pairs (`experiments/own_pairs_data.py`), each with a retrieval split in the BEIR layout "
        "that no training or mining step sees:",
        "",
        f"- **SNLI, hypothesis -> premise** (SentEval's copy): training on the dev split, "
        f"{snli.get('train_pairs', '?')} entailment pairs in `train_pairs.jsonl` with the columns "
        f"`hypothesis`, `premise` (mapped by `data.columns` in the configs), its {snli.get('train_texts', '?')} "
        f"distinct texts for the unsupervised methods, its {snli.get('train_pool', '?')} premises as the mining "
        f"pool; retrieval on the test split: {snli.get('queries', '?')} queries (entailment hypotheses), "
        f"{snli.get('corpus', '?')} premises, {snli.get('qrels', '?')} relevant pairs. The splits are SNLI's own "
        "(other image captions). all-MiniLM-L6-v2 was itself trained on many datasets, SNLI's train split "
        "among them, so this domain is not new to it.",
        f"- **GoogleNews, title -> snippet** (the GSDMM release: a news article's title and snippet, 152 "
        f"stories, lower-cased, stop words removed): split by story (every fourth story held out), training on "
        f"{news.get('train_pairs', '?')} pairs with the columns `title`, `snippet`, {news.get('train_texts', '?')} "
        f"texts, {news.get('train_pool', '?')} snippets as the mining pool; retrieval: "
        f"{news.get('queries', '?')} titles, {news.get('corpus', '?')} snippets, a title's own snippet relevant "
        "(its story's other snippets are the hard negatives). A domain and a text form the backbone was not "
        "trained on.",
        "",
        "In both, a retrieval pair whose query or document also occurs in the training split's text is dropped "
        f"({snli.get('test_pairs_dropped_seen_in_training', '?')} and "
        f"{news.get('test_pairs_dropped_seen_in_training', '?')} pairs).",
        "",
        f"Made by {command}; configs `{configs_dir}/<method>-<set>.yaml`. Every method: "
        f"{training.get('max_steps', '?')} steps of {training.get('batch_size', '?')} examples, lr "
        f"{training.get('lr', '?')}, {first.get('max_seq_length', '?')} tokens, the final model kept "
        "(unsupervised SimCSE: `[CLS]`, MLP in training only; ConPVP as the paper describes it; supervised: "
        "the model's own mean head, tau 0.05). Hard negatives: `protoembed mine "
        + " ".join(mine_options)
        + "` "
        "with the untrained model. Retrieval: `protoembed eval retrieval --model RUN/best --task-dir "
        "DATA/<set>-retrieval --split test` (exact search"
        + (f", {protocol.get('score_function')} scores" if protocol.get("score_function") else "")
        + "; metrics x100 as trec_eval computes them). STS-B test: Spearman x100 (senteval variant).",
        "",
        f"Runs recorded: {len(every)} of {3 * len(METHODS) * len(SET_LABELS)}. Cells: mean ± std over the "
        "seeds; wall times on 2 CPU cores shared with other jobs (load averages in the run tables).",
        "",
    ]
    text += [
        "Change from the untrained model (mean over the seeds), nDCG@10 / STS-B test:",
        "",
        *summary_table(records_dir),
        "",
    ]
    for name, label in SET_LABELS.items():
        text += [f"## {label}", "", *main_table(sets[name]), ""]
    discussion = records_dir / "DISCUSSION.md"
    if discussion.is_file():
        text += ["## What it means for a user", "", discussion.read_text(encoding="utf-8").strip(), ""]
    text += [
        "## Runs",
        "",
        "Records (config, training log, results, retrieval, wall times, environment): `own-pairs/<run>/`.",
        "",
    ]
    for name in SET_LABELS:
        text += [*per_seed_table(sets[name], name), ""]
    return write_text(report, "\n".join(text))
