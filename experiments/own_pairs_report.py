"""The own-pairs study's page, ``docs/results/own-pairs.md``, from its records.

Records are folders of ``docs/results/own-pairs/``:

- a supervised run, ``<method>-<set>-lr<lr>-seed<k>/`` (:func:`~experiments.own_pairs_plan.run_name`):
  ``dev.json`` (``protoembed eval retrieval`` of its ``best/`` on the set's dev split), ``config.yaml``,
  ``training_log.jsonl``, ``results.json`` (the library's own: best step, best dev score),
  ``study_time.json`` (wall seconds: train, dev, and for a tested run retrieval, sts) and
  ``environment.json``; a run at the chosen learning rate also has ``retrieval.json`` (the test split) and
  ``sts.json`` (STS-B test Spearman x100);
- a run of the 30-step study, ``<method>-<set>-seed<k>/`` (the unsupervised rows, and that study's
  supervised runs): ``retrieval.json``, ``results.json`` (with STS-B test), the same other files;
- ``untrained-default-<set>/``: the untrained default model's ``retrieval.json``, ``dev.json`` and
  ``results.json`` (STS-B test); ``data-<set>.json``: the set's counts; ``mining-<set>/``: the mining's
  wall time; ``story-<set>/<untrained-default | run>.json``: where a model's misses are
  (:mod:`experiments.own_pairs_story`).

Cells are mean ± sample std over the seeds recorded. Every sentence of the page is generated from the
records (no number is written by hand).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from experiments.own_pairs_plan import (
    ANCHORS,
    LR_GRID,
    METHODS,
    PROTOEMBED,
    SEEDS,
    SELECTION_SEED,
    TRAINED,
    choose_lr,
    lr_text,
    parse_run_name,
)
from experiments.records import CONFIG_FILE, ENVIRONMENT_FILE, LOG_FILE, RESULTS_FILE, TIME_FILE, write_text
from experiments.step_rerun import seed_means, step_change_section

RETRIEVAL_FILE = "retrieval.json"
DEV_FILE = "dev.json"
STS_FILE = "sts.json"
#: ``mining-<set>/``'s counts: the training pairs and the mined rows (the pairs that got a negative).
MINED_COUNTS = "mined.json"
UNTRAINED = "untrained-default"
#: Set -> its label on the page, in the page's order (the sets of :mod:`experiments.own_pairs_data`).
SET_LABELS = {"snli": "SNLI, hypothesis -> premise", "googlenews": "GoogleNews, title -> snippet"}
#: The metrics shown (the first is the main score).
METRICS = (("ndcg_at_10", "nDCG@10"), ("recall_at_10", "Recall@10"), ("mrr_at_10", "MRR@10"))
MAIN = METRICS[0][0]
#: The methods of the 30-step study (records ``<method>-<set>-seed<k>``), in its table's order.
THIRTY_STEP = ("simcse", "conpvp", "sup", "sup-mined")
UNSUPERVISED = [m for m in METHODS if not METHODS[m].trained]
#: protoembed's aim against its anchor: test nDCG@10 means at most this far below.
AIM = -0.5


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def cell(values: list[float], scale: float = 1.0) -> str:
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"{values[0] * scale:.2f}"
    return f"{np.mean(values) * scale:.2f} ± {np.std(values, ddof=1) * scale:.2f}"


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def retrieval_scores(result: dict[str, Any] | None) -> dict[str, float]:
    """The shown metrics of a ``protoembed eval retrieval`` result (its one task; x100 as the suite writes
    them)."""
    if not result:
        return {}
    (task,) = result["tasks"].values()
    return {key: float(task[key]) for key, _ in METRICS}


def sts_score(result: dict[str, Any] | None) -> float | None:
    """STS-B test Spearman x100 of a results file (``None`` when absent)."""
    row = (result or {}).get("tasks", {}).get("STSBenchmark")
    return float(row["spearman"]) if row else None


def log_start(folder: Path) -> dict[str, Any]:
    """The first entry of a run's training log (protoembed's ``start`` event: total steps, ...)."""
    path = folder / LOG_FILE
    if not path.is_file():
        return {}
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    return json.loads(first) if first.strip() else {}


def _record(folder: Path, seed: int) -> dict[str, Any]:
    """One run's record as the page reads it."""
    results = _json(folder / RESULTS_FILE) or {}
    start = log_start(folder)
    sts = _json(folder / STS_FILE)
    return {
        "seed": seed,
        "dev": retrieval_scores(_json(folder / DEV_FILE)),
        "retrieval": retrieval_scores(_json(folder / RETRIEVAL_FILE)),
        "sts": sts_score(sts if sts is not None else results),
        "time": _json(folder / TIME_FILE) or {},
        "config": yaml.safe_load((folder / CONFIG_FILE).read_text(encoding="utf-8"))
        if (folder / CONFIG_FILE).is_file()
        else {},
        "environment": _json(folder / ENVIRONMENT_FILE) or {},
        "protocol": (_json(folder / RETRIEVAL_FILE) or {}).get("protocol", {}),
        "best_step": results.get("best_step"),
        "steps": results.get("total_steps") or start.get("total_steps"),
    }


def collect(records_dir: Path, name: str) -> dict[str, Any]:
    """Set ``name``'s records: ``{"runs": {method: {lr: [record, ...]}}`` (the supervised runs),
    ``"thirty": {method: [record, ...]}`` (the 30-step study's, with a test result), ``"before"``
    (untrained: retrieval, dev, sts; or ``None``), ``"data"`` (its counts)}."""
    runs: dict[str, dict[float, list[dict[str, Any]]]] = {}
    thirty: dict[str, list[dict[str, Any]]] = {}
    for folder in sorted(records_dir.glob(f"*-{name}-*seed*")):
        parsed = parse_run_name(folder.name)
        if parsed is not None:
            method, set_name, lr, seed = parsed
            if set_name == name and method in TRAINED and (folder / DEV_FILE).is_file():
                runs.setdefault(method, {}).setdefault(lr, []).append(_record(folder, seed))
            continue
        method, sep, seed_text = folder.name.rpartition(f"-{name}-seed")
        if sep and method in THIRTY_STEP and seed_text.isdigit() and (folder / RETRIEVAL_FILE).is_file():
            thirty.setdefault(method, []).append(_record(folder, int(seed_text)))
    for by_lr in runs.values():
        for records in by_lr.values():
            records.sort(key=lambda r: r["seed"])
    untrained = records_dir / f"{UNTRAINED}-{name}"
    retrieval = _json(untrained / RETRIEVAL_FILE)
    before = (
        {
            "retrieval": retrieval_scores(retrieval),
            "dev": retrieval_scores(_json(untrained / DEV_FILE)),
            "sts": sts_score(_json(untrained / RESULTS_FILE)),
        }
        if retrieval
        else None
    )
    data = _json(records_dir / f"data-{name}.json") or {}
    measured = sorted((records_dir / f"story-{name}").glob("*.json"))
    story = {path.stem: _json(path) for path in measured if path.name != TIME_FILE}
    return {"runs": runs, "thirty": thirty, "before": before, "data": data, "story": story}


def selection(data: dict[str, Any], method: str) -> dict[float, float | None]:
    """Learning rate -> the dev nDCG@10 of its selection-seed run (``None`` if not recorded)."""
    by_lr = data["runs"].get(method, {})
    return {
        lr: next((r["dev"][MAIN] for r in by_lr.get(lr, []) if r["seed"] == SELECTION_SEED), None)
        for lr in LR_GRID
    }


def tested(data: dict[str, Any], method: str) -> tuple[float | None, list[dict[str, Any]]]:
    """``(chosen lr, its runs with a test result)`` of a supervised method (``(None, [])`` before the
    choice)."""
    lr = choose_lr(selection(data, method))
    if lr is None:
        return None, []
    return lr, [r for r in data["runs"][method].get(lr, []) if r["retrieval"]]


def method_runs(data: dict[str, Any], method: str) -> list[dict[str, Any]]:
    """The runs a method's row shows: the tested runs at the chosen lr, or the 30-step runs (unsupervised)."""
    return data["thirty"].get(method, []) if method in UNSUPERVISED else tested(data, method)[1]


def _change(values: list[float], before: float | None) -> float | None:
    return float(np.mean(values)) - before if values and before is not None else None


def _signed(value: float | None) -> str:
    return f"{value:+.2f}" if value is not None else "n/a"


def _wall(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return "n/a"
    train = np.mean([r["time"].get("train_s", 0.0) for r in runs])
    evals = np.mean([sum(r["time"].get(k, 0.0) for k in ("dev_s", "retrieval_s", "sts_s")) for r in runs])
    return f"{train + evals:.0f} s ({train:.0f} + {evals:.0f})"


def _steps_cell(runs: list[dict[str, Any]]) -> str:
    """The runs' steps and evaluation interval (each distinct one; ``n/a`` before a run is recorded)."""
    shown = sorted(
        {
            (r["steps"], (r["config"].get("training") or {}).get("eval_steps"))
            for r in runs
            if r["steps"] is not None
        },
        key=str,
    )
    return ", ".join(f"{steps} ({every})" if every else str(steps) for steps, every in shown) or "n/a"


def _lr_cell(data: dict[str, Any], method: str) -> str:
    if method in UNSUPERVISED:
        return "3e-05 (fixed)"
    scores = selection(data, method)
    chosen = choose_lr(scores)
    shown = " / ".join(f"{s:.2f}" if s is not None else "–" for s in scores.values())
    return f"{lr_text(chosen) if chosen is not None else '?'} ({shown})"


def main_table(data: dict[str, Any]) -> list[str]:
    """One row per model: the chosen lr (and the dev nDCG@10 of each lr of the grid), the kept checkpoints'
    dev nDCG@10, the test metrics, nDCG@10's change, STS-B test and its change, wall time per run."""
    names = " | ".join(label for _, label in METRICS)
    grid = " / ".join(lr_text(lr) for lr in LR_GRID)
    lines = [
        f"| Model | Steps (dev every) | lr (dev nDCG@10 at {grid}) | Seeds | dev nDCG@10 | {names} | Δ nDCG@10 | "
        "STS-B test | Δ STS-B | Wall / run (train + evaluations) |",
        "|---|---:|---|---:|---:|" + "---:|" * len(METRICS) + "---:|---:|---:|---:|",
    ]
    before = data["before"]
    if before:
        cells = " | ".join(f"{before['retrieval'][k]:.2f}" for k, _ in METRICS)
        dev = f"{before['dev'][MAIN]:.2f}" if before["dev"] else "n/a"
        sts = f"{before['sts']:.2f}" if before["sts"] is not None else "n/a"
        lines.append(f"| untrained default (mean head) | – | – | – | {dev} | {cells} | | {sts} | | |")
    for method, spec in METHODS.items():
        runs = method_runs(data, method)
        label = spec.label + (" (30 steps)" if method in UNSUPERVISED else "")
        cells = " | ".join(cell([r["retrieval"][k] for r in runs]) for k, _ in METRICS)
        dev = cell([r["dev"][MAIN] for r in runs if r["dev"]])
        sts = [r["sts"] for r in runs if r["sts"] is not None]
        d_ndcg = _change([r["retrieval"][MAIN] for r in runs], before["retrieval"][MAIN] if before else None)
        d_sts = _change(sts, before["sts"] if before else None)
        lines.append(
            f"| {label} | {_steps_cell(runs)} | {_lr_cell(data, method)} | {len(runs)} | {dev} | {cells} | "
            f"{_signed(d_ndcg)} | "
            f"{cell(sts)} | {_signed(d_sts)} | {_wall(runs)} |"
        )
    return lines


def anchor_gaps(data: dict[str, Any]) -> dict[str, float | None]:
    """protoembed method -> its test nDCG@10 mean minus its anchor's (``None`` until both are tested)."""
    gaps: dict[str, float | None] = {}
    for pe, st in ANCHORS.items():
        ours, theirs = method_runs(data, pe), method_runs(data, st)
        gaps[pe] = (
            float(
                np.mean([r["retrieval"][MAIN] for r in ours])
                - np.mean([r["retrieval"][MAIN] for r in theirs])
            )
            if ours and theirs
            else None
        )
    return gaps


def anchor_line(data: dict[str, Any]) -> str:
    """protoembed against sentence-transformers on the set: the difference of the test nDCG@10 means per
    method pair, and whether the aim (at least :data:`AIM`) holds."""
    parts = []
    for pe, gap in anchor_gaps(data).items():
        verdict = "not measured yet" if gap is None else ("aim met" if gap >= AIM else "aim missed")
        parts.append(f"`{pe}` − `{ANCHORS[pe]}` {_signed(gap)} ({verdict})")
    return (
        f"protoembed − sentence-transformers, test nDCG@10 (mean over the seeds; the aim: ≥ {AIM:+.1f}): "
        + "; ".join(parts)
        + "."
    )


def summary_table(records_dir: Path) -> list[str]:
    """The 30-step study's summary: one row per set, the untrained
    model's nDCG@10 / STS-B test, then each of its methods' change of the two means."""
    head = " | ".join(METHODS[m].label for m in THIRTY_STEP)
    lines = [f"| Set: nDCG@10 / STS-B test | untrained | {head} |", "|---|---:|" + "---:|" * len(THIRTY_STEP)]
    for name, label in SET_LABELS.items():
        data = collect(records_dir, name)
        before = data["before"]
        if not before or before["sts"] is None:
            continue
        cells = []
        for method in THIRTY_STEP:
            runs = data["thirty"].get(method, [])
            sts = [r["sts"] for r in runs if r["sts"] is not None]
            cells.append(
                f"{np.mean([r['retrieval'][MAIN] for r in runs]) - before['retrieval'][MAIN]:+.2f} / "
                f"{np.mean(sts) - before['sts']:+.2f}"
                if runs and sts
                else "n/a"
            )
        lines.append(
            f"| {label} | {before['retrieval'][MAIN]:.2f} / {before['sts']:.2f} | {' | '.join(cells)} |"
        )
    return lines


def study_summary_table(sets: dict[str, dict[str, Any]]) -> list[str]:
    """This study's summary: one row per set, the untrained model's nDCG@10 / STS-B test, then each
    method's change of the two means (unsupervised: the 30-step runs; supervised: the chosen lr)."""
    head = " | ".join(METHODS[m].label for m in METHODS)
    lines = [f"| Set: nDCG@10 / STS-B test | untrained | {head} |", "|---|---:|" + "---:|" * len(METHODS)]
    for name, label in SET_LABELS.items():
        before = sets[name]["before"]
        if not before or before["sts"] is None:
            continue
        cells = []
        for method in METHODS:
            runs = method_runs(sets[name], method)
            sts = [r["sts"] for r in runs if r["sts"] is not None]
            d_ndcg = _change([r["retrieval"][MAIN] for r in runs], before["retrieval"][MAIN])
            cells.append(f"{_signed(d_ndcg)} / {_signed(_change(sts, before['sts']))}" if runs else "n/a")
        lines.append(
            f"| {label} | {before['retrieval'][MAIN]:.2f} / {before['sts']:.2f} | {' | '.join(cells)} |"
        )
    return lines


def findings(sets: dict[str, dict[str, Any]]) -> list[str]:
    """The "what it means" bullets, each computed from the records: per set the best supervised method
    against the untrained model (and, when none raises nDCG@10, the dev measurement that shows why), the
    mined negative against in-batch negatives per library, protoembed against its anchor."""
    lines = []
    for name, label in SET_LABELS.items():
        data = sets[name]
        before = data["before"]
        means = {
            m: float(np.mean([r["retrieval"][MAIN] for r in method_runs(data, m)]))
            for m in TRAINED
            if method_runs(data, m)
        }
        if not before or not means:
            lines.append(f"- {label}: not measured yet.")
            continue
        best = max(means, key=means.__getitem__)
        runs = method_runs(data, best)
        change = means[best] - before["retrieval"][MAIN]
        spread = float(np.std([r["retrieval"][MAIN] for r in runs], ddof=1)) if len(runs) > 1 else 0.0
        sts = _change([r["sts"] for r in runs if r["sts"] is not None], before["sts"])
        if change > spread:
            lines.append(
                f"- {label}: {METHODS[best].label} (`{best}`) raises test nDCG@10 by {change:+.2f} over the "
                f"untrained model (seed std {spread:.2f}), at {_signed(sts)} STS-B test."
            )
        else:
            lines.append(f"- {label}: {_no_gain(data, best, change, spread)}")
        lines += [f"  - {text}" for text in _mined_gains(data)]
        lines.append(f"  - {anchor_line(data)}")
        if data.get("story", {}).get(UNTRAINED):
            lines.append(f"  - {story_line(data['story'])}")
    return lines


def _no_gain(data: dict[str, Any], best: str, change: float, spread: float) -> str:
    """Why no method helped: the dev split's untrained score against the kept checkpoints', and where in the
    epoch the checkpoints were kept."""
    before = data["before"]
    dev_before = before["dev"][MAIN] if before["dev"] else None
    kept = [r for m in TRAINED for r in method_runs(data, m)]
    dev_after = [r["dev"][MAIN] for r in kept if r["dev"]]
    steps = [(r["best_step"], r["steps"]) for r in kept if r["best_step"] and r["steps"]]
    early = sum(1 for b, s in steps if b * 4 <= s)
    text = (
        f"no supervised method raises test nDCG@10 beyond its seed spread: the best, {METHODS[best].label} "
        f"(`{best}`), changes it by {change:+.2f} (seed std {spread:.2f})."
    )
    if dev_before is not None and dev_after:
        text += (
            f" The dev split shows the same: untrained {dev_before:.2f}, the kept checkpoints "
            f"{min(dev_after):.2f} to {max(dev_after):.2f}"
        )
        if steps:
            text += f", {early} of {len(steps)} of them kept within the first quarter of the epoch"
        text += "."
    return text


def story_line(story: dict[str, dict[str, Any]]) -> str:
    """Where the misses are (``story-<set>/``: :mod:`experiments.own_pairs_story`'s measures of the
    untrained model and of each method's seed-1 run on the test split)."""
    before = story[UNTRAINED]

    def cells(m: dict[str, Any]) -> str:
        return (
            f"rank 1 of the query's own story for {100 * m['top1_same_story']:.1f}% of queries, "
            f"{100 * m['top10_same_story']:.1f}% of the top 10, the exact snippet at rank 1 for "
            f"{100 * m['exact_top1']:.1f}%"
        )

    text = (
        f"Where the misses are (test split, {before['queries']} queries; "
        f"`experiments/own_pairs_story.py`): untrained, {cells(before)}, against "
        f"{100 * before['chance_top1']:.1f}% for a ranking that finds the story and orders its snippets at "
        f"random (median {before['story_documents_median']:.0f} snippets a story)"
    )
    for run, measures in story.items():
        if run != UNTRAINED:
            parsed = parse_run_name(run)
            label = f"`{parsed[0]}` (seed {parsed[3]})" if parsed else f"`{run}`"
            text += f"; {label}: {cells(measures)}"
    missed_story = 1 - before["top1_same_story"]
    missed = 1 - before["exact_top1"]
    return (
        text + f". Of the untrained model's rank-1 misses, {100 * (missed - missed_story) / missed:.0f}% are "
        "another snippet of the query's own story: what is left to learn is the order within a story."
        if missed > 0
        else text + "."
    )


def _mined_gains(data: dict[str, Any]) -> list[str]:
    """The mined hard negative against in-batch negatives, per library (same seeds, paired)."""
    out = []
    for plain, mined in (("sup", "sup-mined"), ("st-mnrl", "st-mnrl-mined")):
        a = {r["seed"]: r for r in method_runs(data, plain)}
        b = {r["seed"]: r for r in method_runs(data, mined)}
        seeds = sorted(set(a) & set(b))
        if not seeds:
            continue
        diffs = [b[s]["retrieval"][MAIN] - a[s]["retrieval"][MAIN] for s in seeds]
        above = sum(d > 0 for d in diffs)
        out.append(
            f"`{mined}` against `{plain}`: {float(np.mean(diffs)):+.2f} test nDCG@10, above it in {above} of "
            f"{len(seeds)} seeds"
        )
    return out


def per_seed_table(data: dict[str, Any], name: str) -> list[str]:
    """Every recorded run: lr, seed, the kept step, dev and test metrics, STS-B test, wall times, load."""
    names = " | ".join(label for _, label in METRICS)
    lines = [
        f"| Run | kept step / steps | dev nDCG@10 | {names} | STS-B test | train s | evaluations s | "
        "load avg. (start, end) |",
        "|---|---:|---:|" + "---:|" * len(METRICS) + "---:|---:|---:|---|",
    ]
    rows = [(f"{m}-{name}-seed{r['seed']}", r) for m in UNSUPERVISED for r in data["thirty"].get(m, [])]
    for method in TRAINED:
        for lr, runs in sorted(data["runs"].get(method, {}).items()):
            rows += [(f"{method}-{name}-lr{lr_text(lr)}-seed{r['seed']}", r) for r in runs]
    for run, r in rows:
        env = r["environment"]
        cells = " | ".join(f"{r['retrieval'][k]:.2f}" if r["retrieval"] else "–" for k, _ in METRICS)
        dev = f"{r['dev'][MAIN]:.2f}" if r["dev"] else "–"
        sts = f"{r['sts']:.2f}" if r["sts"] is not None else "–"
        kept = f"{r['best_step']} / {r['steps']}" if r["best_step"] else "–"
        evals = sum(r["time"].get(k, 0.0) for k in ("dev_s", "retrieval_s", "sts_s"))
        lines.append(
            f"| {run} | {kept} | {dev} | {cells} | {sts} | {r['time'].get('train_s', 0):.0f} | {evals:.0f} | "
            f"{env.get('load_average_start')}, {env.get('load_average_end')} |"
        )
    return lines


def _budget(sets: dict[str, dict[str, Any]]) -> str:
    """The supervised budget as a recorded protoembed run's config shows it (batch, precision, sampler)."""
    config = next(
        (
            r["config"]
            for data in sets.values()
            for m in TRAINED
            if METHODS[m].library == "protoembed"
            for rs in data["runs"].get(m, {}).values()
            for r in rs
            if r["config"]
        ),
        {},
    )
    training = config.get("training", {})
    if not training:
        return "one epoch over the training pairs (no run recorded yet)"
    return (
        f"one epoch over the training pairs (steps in the tables), batch {training.get('batch_size', '?')} "
        f"(the last incomplete batch dropped, batch sampler `{training.get('batch_sampler', '?')}`), "
        f"{config.get('max_seq_length', '?')} tokens, {training.get('precision', '?')}, warm-up "
        f"{training.get('warmup', '?')}, weight decay {training.get('weight_decay', '?')}"
    )


def _mined_counts(records_dir: Path, data: dict[str, dict[str, Any]]) -> str:
    """What the mining kept per set (``mining-<set>/mined.json``): the pairs that got a negative."""
    parts = []
    for name in SET_LABELS:
        mined = _json(records_dir / f"mining-{name}" / MINED_COUNTS) or {}
        if mined:
            parts.append(f"{name} {mined['rows']} of {mined['pairs']} pairs")
    if not parts:
        return ""
    return (
        " The mined methods train on the pairs that got a negative (the others have none in their top 20 "
        f"at least 5% below their own document): {', '.join(parts)}; their epoch is that much shorter."
    )


def headline(sets: dict[str, dict[str, Any]]) -> dict[str, float]:
    """The study's numbers that a rerun with a new training step is compared on
    (:mod:`experiments.step_rerun`): per set and supervised protoembed method, the mean over its row's runs
    of test nDCG@10 and STS-B test (the unsupervised rows are the 30-step study's records, not rerun, and
    sentence-transformers' rows do not depend on the step; wall times are left out:
    they depend on the session's CPU and load as much as on the step, whose speed
    ``benchmarks/train_run.py`` measures)."""
    numbers: dict[str, float] = {}
    for name, label in SET_LABELS.items():
        for method, spec in METHODS.items():
            runs = method_runs(sets[name], method) if spec.library == PROTOEMBED and spec.trained else []
            columns = {
                "test nDCG@10": [r["retrieval"][MAIN] for r in runs if MAIN in r["retrieval"]],
                "STS-B test": [r["sts"] for r in runs if r["sts"] is not None],
            }
            numbers.update(seed_means(f"{label}, {spec.label}", columns))
    return numbers


def write_report(
    report: Path, records_dir: Path, configs_dir: Path, mine_options: list[str], command: str
) -> Path:
    """Write the page from the records in ``records_dir`` (atomically)."""
    sets = {name: collect(records_dir, name) for name in SET_LABELS}
    recorded = sum(
        len(rs) for data in sets.values() for by_lr in data["runs"].values() for rs in by_lr.values()
    )
    planned = len(SET_LABELS) * len(TRAINED) * (len(LR_GRID) + len(SEEDS) - 1)
    protocol = next(
        (
            r["protocol"]
            for data in sets.values()
            for rs in data["thirty"].values()
            for r in rs
            if r["protocol"]
        ),
        {},
    )
    snli, news = sets["snli"]["data"], sets["googlenews"]["data"]
    grid = ", ".join(lr_text(lr) for lr in LR_GRID)
    text = [
        "# Your own pairs: supervised adaptation with in-batch and mined hard negatives, judged by retrieval",
        "",
        "Question: I have (query, document) pairs of my own domain; which adaptation of a general sentence "
        "model helps retrieval there, and what does it cost on general similarity? And does protoembed's "
        "training match sentence-transformers' own on the same pairs, budget and selection? Two sets stand in "
        "for an engineer's pairs (`experiments/own_pairs_data.py`), each with a dev split (what the learning "
        "rate and the checkpoint are chosen on) and a test split, in the BEIR layout, that no training or "
        "mining step sees:",
        "",
        f"- **SNLI, hypothesis -> premise** (SentEval's copy, which has no train split): training on the dev "
        f"split less every fifth premise: {snli.get('train_pairs', '?')} entailment pairs in "
        "`train_pairs.jsonl` (columns `hypothesis`, `premise`, mapped by `data.columns`), "
        f"{snli.get('train_pool', '?')} premises as the mining pool; dev: the held-out premises, "
        f"{snli.get('dev_queries', '?')} queries, {snli.get('dev_corpus', '?')} premises; test: the test split, "
        f"{snli.get('queries', '?')} queries (entailment hypotheses), {snli.get('corpus', '?')} premises, "
        f"{snli.get('qrels', '?')} relevant pairs. all-MiniLM-L6-v2 was itself trained on SNLI's train split "
        "among many, so this domain is not new to it.",
        f"- **GoogleNews, title -> snippet** (the GSDMM release: 152 stories, lower-cased, stop words removed): "
        "split by story (every fourth story the test split, every eighth of the others the dev split), "
        f"training on {news.get('train_pairs', '?')} pairs (columns `title`, `snippet`), "
        f"{news.get('train_pool', '?')} snippets as the mining pool; dev: {news.get('dev_queries', '?')} titles, "
        f"{news.get('dev_corpus', '?')} snippets; test: {news.get('queries', '?')} titles, "
        f"{news.get('corpus', '?')} snippets, a title's own snippet relevant (its story's other snippets are "
        "the hard negatives). A domain and a text form the backbone was not trained on.",
        "",
        "A test pair whose query or document also occurs in the training or dev text is dropped "
        f"({snli.get('test_pairs_dropped_seen_in_training_or_dev', '?')} and "
        f"{news.get('test_pairs_dropped_seen_in_training_or_dev', '?')} pairs: the test split is the 30-step "
        "study's, unchanged), and a dev pair whose text occurs in the training or test text "
        f"({snli.get('dev_pairs_dropped_seen_in_training_or_test', '?')} and "
        f"{news.get('dev_pairs_dropped_seen_in_training_or_test', '?')}).",
        "",
        f"Made by {command}; configs `{configs_dir}/<config>-<set>.yaml`, read by both libraries. Supervised "
        f"methods: {_budget(sets)}; the model's own mean head without an MLP, tau 0.05 (sentence-transformers: "
        "`MultipleNegativesRankingLoss`, scale 20). Each run keeps the checkpoint with the best dev nDCG@10; "
        f"the learning rate is chosen from {grid} by the dev nDCG@10 of seed {SELECTION_SEED}'s runs, then "
        f"seeds {', '.join(str(s) for s in SEEDS if s != SELECTION_SEED)} run at it. The anchor rows are "
        "sentence-transformers' own `SentenceTransformerTrainer` (`experiments/own_pairs_st.py`) on the same "
        "pairs, batch, steps, learning rate, schedule, seed and dev split. Hard negatives: `protoembed mine "
        + " ".join(mine_options)
        + "` with the untrained model."
        + _mined_counts(records_dir, sets)
        + " Every kept model, whichever library trained it, is evaluated by "
        "`protoembed eval retrieval --model RUN/best --task-dir DATA/<set>-dev --split dev` (what the lr is "
        "chosen on), `... --task-dir DATA/<set>/<set>-retrieval --split test` (exact search"
        + (f", {protocol.get('score_function')} scores" if protocol.get("score_function") else "")
        + "; metrics x100 as trec_eval computes them) and `protoembed eval sts --tasks STSBenchmark` "
        "(Spearman x100, senteval variant). The unsupervised rows are the 30-step study's runs (30 steps of "
        "64 texts at lr 3e-5, the final model kept), on the training text of that study, which also held "
        "what is now the dev split.",
        "",
        f"Supervised runs recorded: {recorded} of {planned}. Cells: mean ± std over the seeds; wall times on 2 "
        "CPU cores shared with other jobs (load averages in the run tables). Runs recorded in different "
        "sessions may have run on different CPUs (the CPU changes between sessions), so the two libraries' "
        "speed is compared by `python benchmarks/train_run.py`, which alternates them on one machine "
        "(docs/training/scale.md), not by these columns.",
        "",
        "Change from the untrained model (mean over the seeds), test nDCG@10 / STS-B test:",
        "",
        *study_summary_table(sets),
        "",
    ]
    for name, label in SET_LABELS.items():
        text += [f"## {label}", "", *main_table(sets[name]), "", anchor_line(sets[name]), ""]
    text += ["## What it means for a user", "", *findings(sets), ""]
    text += [
        "## The 30-step study",
        "",
        "Before this study every method had 30 steps of 64 examples at lr 3e-5 and kept its final model "
        "(supervised SimCSE then with a fresh Linear+Tanh MLP kept on the mean head); change from the "
        "untrained model, test nDCG@10 / STS-B test:",
        "",
        *summary_table(records_dir),
        "",
        *step_change_section(records_dir, headline(sets)),
        "## Runs",
        "",
        "Records (config, training log, results, dev and test retrieval, STS-B test, wall times, environment): "
        "`own-pairs/<run>/`. A run at a learning rate that was not chosen has no test result (–).",
        "",
    ]
    for name in SET_LABELS:
        text += [*per_seed_table(sets[name], name), ""]
    return write_text(report, "\n".join(text))
