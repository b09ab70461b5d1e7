"""The smaller-vector study's page, ``docs/results/smaller-vectors.md``, from its records.

Records are folders of ``docs/results/smaller-vectors/``:

- a trained run, ``<method>-<set>-lr<lr>-seed<k>/`` (:func:`~experiments.own_pairs_plan.run_name`):
  ``dev.json`` (``protoembed eval retrieval`` of its ``best/`` on the set's dev split, full width),
  ``config.yaml``, ``training_log.jsonl``, ``results.json`` (the library's own), ``study_time.json`` and
  ``environment.json``; a tested run also has ``retrieval.json`` (the test split at every width of
  :data:`~experiments.smaller_vectors_plan.DIMS`) and ``int8.json`` / ``binary.json`` (full width,
  quantised, rescored);
- ``untrained-default-<set>/``: the untrained default model's test evaluations, the same three files;
- ``mining-<set>/``: the mining's wall time and counts, when this study mined.

A row's runs are its tested runs at the row's learning rate
(:func:`~experiments.smaller_vectors_plan.row_lr`); cells are mean ± sample std over their seeds. Every
sentence of the page is generated from the records (no number is written by hand).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from experiments.own_pairs_plan import (
    LR_GRID,
    PROTOEMBED,
    SELECTION_SEED,
    SENTENCE_TRANSFORMERS,
    lr_text,
    parse_run_name,
)
from experiments.own_pairs_report import (
    DEV_FILE,
    MAIN,
    RETRIEVAL_FILE,
    SET_LABELS,
    UNTRAINED,
    cell,
    log_start,
    retrieval_scores,
)
from experiments.records import RESULTS_FILE, TIME_FILE, write_text
from experiments.smaller_vectors_plan import (
    AIM,
    BY_LIBRARY,
    DIMS,
    DIMS_FILE,
    LR_DEV,
    MATRYOSHKA_OVERRIDE,
    METHODS,
    PROTOEMBED_MATRYOSHKA,
    QUANTISED,
    QUANTISED_AIMS,
    RESCORE_MULTIPLIER,
    SMALL_DIMS,
    quantised_file,
    row_lr,
)
from experiments.step_rerun import seed_means, step_change_section

FULL = DIMS[0]
FLOAT32 = "float32"
#: The evaluation time keys of a record (``study_time.json``), besides ``train_s``.
EVAL_KEYS = ("dev_s", "test_s", *(f"{v}_s" for v in QUANTISED))


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _main(result: dict[str, Any] | None) -> float | None:
    """nDCG@10 x100 of a one-task retrieval result (``None`` when absent)."""
    scores = retrieval_scores(result)
    return scores[MAIN] if scores else None


def tested_scores(folder: Path) -> dict[str, dict[Any, float]] | None:
    """A tested model's test nDCG@10: ``{"dims": {width: score}, "vectors": {type: score}}`` (``float32``
    the full-width row of the widths), or ``None`` before its widths are recorded."""
    result = _json(folder / DIMS_FILE)
    if not result:
        return None
    dims = {int(d): _main(r) for d, r in result["dims"].items()}
    vectors = {FLOAT32: dims[FULL]}
    for v in QUANTISED:
        score = _main(_json(folder / quantised_file(v)))
        if score is not None:
            vectors[v] = score
    return {"dims": dims, "vectors": vectors}


def _record(folder: Path, seed: int) -> dict[str, Any]:
    """One trained run's record as the page reads it."""
    results = _json(folder / RESULTS_FILE) or {}
    return {
        "seed": seed,
        "dev": _main(_json(folder / DEV_FILE)),
        "test": tested_scores(folder),
        "time": _json(folder / TIME_FILE) or {},
        "best_step": results.get("best_step"),
        "steps": results.get("total_steps") or log_start(folder).get("total_steps"),
    }


def collect(records_dir: Path, own_pairs_records: Path, name: str) -> dict[str, Any]:
    """Set ``name``'s records: ``{"untrained": tested scores or None, "rows": {method: {"lr", "protocol",
    "runs": [tested record, ...]}}, "all": {run name: record}}``."""
    everything: dict[str, dict[str, Any]] = {}
    for folder in sorted(records_dir.glob(f"*-{name}-lr*-seed*")):
        parsed = parse_run_name(folder.name)
        if parsed and parsed[0] in METHODS and parsed[1] == name and (folder / DEV_FILE).is_file():
            everything[folder.name] = _record(folder, parsed[3])
    rows = {}
    for method in METHODS:
        lr, protocol = row_lr(records_dir, own_pairs_records, method, name)
        runs = [
            r
            for run, r in everything.items()
            if r["test"] and lr is not None and parse_run_name(run)[:3] == (method, name, lr)
        ]
        rows[method] = {"lr": lr, "protocol": protocol, "runs": sorted(runs, key=lambda r: r["seed"])}
    untrained = tested_scores(records_dir / f"{UNTRAINED}-{name}")
    return {"untrained": untrained, "rows": rows, "all": everything}


def _values(runs: list[dict[str, Any]], part: str, key: Any) -> list[float]:
    return [r["test"][part][key] for r in runs if key in r["test"][part]]


def mean(runs: list[dict[str, Any]], part: str, key: Any) -> float | None:
    """The mean over ``runs`` of their test score ``part`` (``dims`` / ``vectors``) ``key``."""
    values = _values(runs, part, key)
    return float(np.mean(values)) if values else None


def spread(runs: list[dict[str, Any]], part: str, key: Any) -> float:
    """The sample std over ``runs`` of their test score ``part`` ``key`` (0 for fewer than two)."""
    values = _values(runs, part, key)
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def _resolution(short: float, noise: float, where: str, among: str) -> str:
    """A missed aim's shortfall against the largest seed std ``among`` the methods it compares: a
    shortfall below it is not resolved by the records."""
    verdict = "not resolved" if short < noise else "resolved"
    return f"short by {short:.2f}{where}; the largest seed std {among} is {noise:.2f}: {verdict}"


def _lr_cell(row: dict[str, Any], inline: bool = False) -> str:
    """A row's learning rate and where it comes from: ``5e-05 (chosen on dev)``, or inline in a sentence
    ``5e-05, chosen on dev``."""
    if row["lr"] is None:
        return "?"
    how = "chosen on dev" if row["protocol"] == LR_DEV else "chosen on dev by the own-pairs study"
    return f"{lr_text(row['lr'])}, {how}" if inline else f"{lr_text(row['lr'])} ({how})"


def widths_table(data: dict[str, Any]) -> list[str]:
    """Test nDCG@10 at each width: the untrained model cut, then each method (mean ± std over seeds)."""
    head = " | ".join(str(d) for d in DIMS)
    lines = [f"| Model | lr | Seeds | {head} |", "|---|---|---:|" + "---:|" * len(DIMS)]
    if data["untrained"]:
        cells = " | ".join(f"{data['untrained']['dims'][d]:.2f}" for d in DIMS)
        lines.append(f"| untrained default (cut) | – | – | {cells} |")
    for method, spec in METHODS.items():
        row = data["rows"][method]
        cells = " | ".join(cell(_values(row["runs"], "dims", d)) for d in DIMS)
        lines.append(f"| {spec.label} | {_lr_cell(row)} | {len(row['runs'])} | {cells} |")
    return lines


def _bytes(vectors: str) -> int:
    from protoembed.model.quantize import bytes_per_vector

    return bytes_per_vector(vectors, FULL)


def _share(score: float | None, full: float | None) -> float | None:
    return 100.0 * score / full if score is not None and full else None


def quantised_table(data: dict[str, Any]) -> list[str]:
    """Full width: float32 and each quantised type's test nDCG@10 (means) and its share of float32's."""
    kinds = (FLOAT32, *QUANTISED)
    head = " | ".join(
        f"{v} ({_bytes(v)} B)" if v == FLOAT32 else f"{v} rescored x{RESCORE_MULTIPLIER} ({_bytes(v)} B) | %"
        for v in kinds
    )
    lines = [f"| Model | {head} |", "|---|" + "---:|" * (1 + 2 * len(QUANTISED))]
    rows = [("untrained default", data["untrained"] and [{"test": data["untrained"]}])]
    rows += [(METHODS[m].label, data["rows"][m]["runs"]) for m in METHODS]
    for label, runs in rows:
        if not runs:
            lines.append(f"| {label} | n/a |" + " n/a | n/a |" * len(QUANTISED))
            continue
        full = mean(runs, "vectors", FLOAT32)
        cells = [cell(_values(runs, "vectors", FLOAT32))]
        for v in QUANTISED:
            share = _share(mean(runs, "vectors", v), full)
            cells += [cell(_values(runs, "vectors", v)), f"{share:.1f}" if share is not None else "n/a"]
        lines.append(f"| {label} | {' | '.join(cells)} |")
    return lines


def _verdict(met: bool) -> str:
    return "met" if met else "not met"


def findings(data: dict[str, Any]) -> list[str]:
    """The issue's aims on one set, each met / not met with its numbers (``n/a`` parts not yet measured),
    judged for each of protoembed's Matryoshka methods (:data:`PROTOEMBED_MATRYOSHKA`) against
    sentence-transformers' ``MatryoshkaLoss`` run."""
    st_plain, st = BY_LIBRARY[SENTENCE_TRANSFORMERS]
    pe_plain = BY_LIBRARY[PROTOEMBED][0]
    rows, untrained = data["rows"], data["untrained"]
    st_runs = rows[st]["runs"]
    out = []
    for pe in PROTOEMBED_MATRYOSHKA:
        pe_runs = rows[pe]["runs"]
        if not (pe_runs and st_runs):
            out.append(f"`{pe}` against `{st}`: not measured yet.")
            continue
        gaps = {d: mean(pe_runs, "dims", d) - mean(st_runs, "dims", d) for d in DIMS}
        shown = ", ".join(f"{d}: {g:+.2f}" for d, g in gaps.items())
        out.append(
            f"`{pe}` ≥ `{st}` {AIM:+.1f} nDCG@10 at every width: "
            f"{_verdict(all(g >= AIM for g in gaps.values()))} ({shown})."
        )
        if untrained:
            parts, missed = [], []
            for d in SMALL_DIMS:
                ours = mean(pe_runs, "dims", d) - untrained["dims"][d]
                theirs = mean(st_runs, "dims", d) - untrained["dims"][d]
                if ours < theirs:
                    noise = max(spread(pe_runs, "dims", d), spread(st_runs, "dims", d))
                    missed.append(_resolution(theirs - ours, noise, f" at {d}", "of the two there"))
                parts.append(f"{d}: {ours:+.2f} against {theirs:+.2f}")
            out.append(
                f"At {' and '.join(str(d) for d in SMALL_DIMS)} dimensions `{pe}` beats the untrained model "
                f"cut to the same width by at least `{st}`'s margin: {_verdict(not missed)} ({'; '.join(parts)})"
                + "".join(f"; {m}" for m in missed)
                + "."
            )

    def cost(plain: str, mrl: str) -> float | None:
        a, b = rows[plain]["runs"], rows[mrl]["runs"]
        return mean(a, "dims", FULL) - mean(b, "dims", FULL) if a and b else None

    st_cost = cost(st_plain, st)
    for pe in PROTOEMBED_MATRYOSHKA:
        pe_cost = cost(pe_plain, pe)
        if pe_cost is None or st_cost is None:
            out.append(f"Full-width cost of `{pe}`: not measured yet.")
            continue
        text = (
            f"Full-width cost of Matryoshka (plain − Matryoshka test nDCG@10 at {FULL}): protoembed "
            f"`{pe_plain}` − `{pe}` {pe_cost:+.2f} (lr {_lr_cell(rows[pe], inline=True)}, {METHODS[pe].weights_text}), "
            f"sentence-transformers `{st_plain}` − `{st}` {st_cost:+.2f} (lr {_lr_cell(rows[st], inline=True)}, "
            f"{METHODS[st].weights_text}). "
        )
        if st_cost > 0:
            text += f"protoembed's pays less: {_verdict(pe_cost < st_cost)}"
            if pe_cost >= st_cost:
                noise = max(spread(rows[m]["runs"], "dims", FULL) for m in (pe_plain, pe, st_plain, st))
                text += f" ({_resolution(pe_cost - st_cost, noise, '', f'of the four methods at {FULL}')})"
            text += "."
        else:
            text += "sentence-transformers' Matryoshka run pays nothing at full width here, so that aim does not apply."
        out.append(text)
    trained = {
        m: {v: mean(r["runs"], "vectors", v) for v in (FLOAT32, *QUANTISED)}
        for m, r in rows.items()
        if r["runs"]
    }
    for v in QUANTISED:
        shares = {m: _share(scores.get(v), scores[FLOAT32]) for m, scores in trained.items() if scores.get(v)}
        if not shares:
            out.append(f"{v} rescored x{RESCORE_MULTIPLIER}: not measured yet.")
            continue
        low = min(shares, key=shares.__getitem__)
        text = (
            f"{v} rescored x{RESCORE_MULTIPLIER} keeps ≥ {QUANTISED_AIMS[v]:.0f}% of float32's nDCG@10 at "
            f"{_bytes(FLOAT32) // _bytes(v)}x fewer bytes, judged on the trained models: "
            f"{_verdict(shares[low] >= QUANTISED_AIMS[v])} ({sum(s >= QUANTISED_AIMS[v] for s in shares.values())} "
            f"of {len(shares)} reach it; lowest {shares[low]:.1f}%, `{low}`; highest {max(shares.values()):.1f}%)"
        )
        if untrained and untrained["vectors"].get(v) is not None:
            kept = _share(untrained["vectors"][v], untrained["vectors"][FLOAT32])
            text += f"; the untrained default model keeps {kept:.1f}%"
        out.append(text + ".")
    return out


def seeds_line(data: dict[str, Any], own_pairs_records: Path, name: str) -> str:
    """The seeds behind the findings, and the own-pairs study's seed std of each plain method's full-width
    test nDCG@10 on the set (its 3 seeds): the scale below which a difference of means is not resolved."""
    from experiments.own_pairs_report import collect as own_pairs_collect
    from experiments.own_pairs_report import method_runs

    counts = ", ".join(f"`{m}` {len(data['rows'][m]['runs'])}" for m in METHODS)
    own = own_pairs_collect(own_pairs_records, name)
    spreads = []
    for plain, _ in BY_LIBRARY.values():
        scores = [r["retrieval"][MAIN] for r in method_runs(own, METHODS[plain].base)]
        if len(scores) > 1:
            spreads.append(f"`{plain}` {np.std(scores, ddof=1):.2f}")
    text = f"Seeds recorded: {counts}."
    if spreads:
        text += (
            " The own-pairs study's seed std of full-width test nDCG@10 (3 seeds): "
            f"{', '.join(spreads)}; a difference of means below it is not resolved."
        )
    return text


def reproduction(data: dict[str, Any], own_pairs_records: Path, name: str) -> str | None:
    """The plain methods' runs retrained here against the own-pairs study's records of the same run (same
    config, lr and seed): full-width test nDCG@10, the largest difference; ``None`` when none is in both."""
    pairs = []
    for method in (plain for plain, _ in BY_LIBRARY.values()):
        row = data["rows"][method]
        for r in row["runs"]:
            run = f"{METHODS[method].base}-{name}-lr{lr_text(row['lr'])}-seed{r['seed']}"
            before = _main(_json(own_pairs_records / run / RETRIEVAL_FILE))
            if before is not None:
                pairs.append((run, r["test"]["dims"][FULL], before))
    if not pairs:
        return None
    run, now, before = max(pairs, key=lambda p: abs(p[1] - p[2]))
    return (
        f"The plain methods retrained here (the own-pairs runs' weights are not kept) against the own-pairs "
        f"records of the same runs: {len(pairs)} run{'s' if len(pairs) > 1 else ''}, the largest full-width test nDCG@10 difference "
        f"{now - before:+.2f} (`{run}`: {now:.2f} here, {before:.2f} there)."
    )


def runs_table(data: dict[str, Any]) -> list[str]:
    """Every recorded run: kept step, dev nDCG@10 (full width), test nDCG@10 at each width and quantised,
    train and evaluation wall times."""
    head = " | ".join(str(d) for d in DIMS)
    quant = " | ".join(QUANTISED)
    lines = [
        f"| Run | kept step / steps | dev | {head} | {quant} | train s | evaluations s |",
        "|---|---:|---:|" + "---:|" * (len(DIMS) + len(QUANTISED)) + "---:|---:|",
    ]
    for run, r in data["all"].items():
        test = r["test"] or {"dims": {}, "vectors": {}}
        cells = [f"{test['dims'][d]:.2f}" if d in test["dims"] else "–" for d in DIMS]
        cells += [f"{test['vectors'][v]:.2f}" if v in test["vectors"] else "–" for v in QUANTISED]
        kept = f"{r['best_step']} / {r['steps']}" if r["best_step"] else "–"
        dev = f"{r['dev']:.2f}" if r["dev"] is not None else "–"
        evals = sum(r["time"].get(k, 0.0) for k in EVAL_KEYS)
        lines.append(
            f"| {run} | {kept} | {dev} | {' | '.join(cells)} | {r['time'].get('train_s', 0):.0f} | {evals:.0f} |"
        )
    return lines


def summary_table(sets: dict[str, dict[str, Any]]) -> list[str]:
    """The docs' table: per set, the untrained model and each method's mean test nDCG@10 at each width."""
    head = " | ".join(str(d) for d in DIMS)
    lines = [f"| Set | Model | {head} |", "|---|---|" + "---:|" * len(DIMS)]
    for name, label in SET_LABELS.items():
        data = sets[name]
        if data["untrained"]:
            cells = " | ".join(f"{data['untrained']['dims'][d]:.2f}" for d in DIMS)
            lines.append(f"| {label} | untrained default (cut) | {cells} |")
        for method in METHODS:
            runs = data["rows"][method]["runs"]
            if runs:
                cells = " | ".join(f"{mean(runs, 'dims', d):.2f}" for d in DIMS)
                seeds = f"{len(runs)} seed{'s' if len(runs) > 1 else ''}"
                lines.append(f"| {label} | `{method}` ({seeds}) | {cells} |")
    return lines


def headline(sets: dict[str, dict[str, Any]]) -> dict[str, float]:
    """The study's numbers that a rerun with a new training step is compared on
    (:mod:`experiments.step_rerun`): per set and protoembed method, the mean test nDCG@10 of its row at
    each width (sentence-transformers' rows do not depend on the step; wall times are left out, as
    :func:`experiments.own_pairs_report.headline` says)."""
    numbers: dict[str, float] = {}
    for name, label in SET_LABELS.items():
        for method, spec in METHODS.items():
            runs = sets[name]["rows"][method]["runs"] if spec.library == PROTOEMBED else []
            columns = {f"test nDCG@10 at {d}": _values(runs, "dims", d) for d in DIMS}
            numbers.update(seed_means(f"{label}, `{method}`", columns))
    return numbers


def write_report(report: Path, records_dir: Path, own_pairs_records: Path, command: str) -> Path:
    """Write the page from the records in ``records_dir`` (atomically)."""
    sets = {name: collect(records_dir, own_pairs_records, name) for name in SET_LABELS}
    widths = ", ".join(str(d) for d in DIMS)
    weighted = next(name for name, method in METHODS.items() if method.weights)
    grid = ", ".join(lr_text(lr) for lr in LR_GRID)
    text = [
        "# Smaller vectors: Matryoshka training, cut widths and quantised vectors on your own pairs",
        "",
        "Question: when the index, not the model, is the cost, how much ranking is lost by cutting a model's "
        "vectors to fewer dimensions or storing them as int8 or bits, and does training for it "
        "(Matryoshka representation learning, Kusupati et al., NeurIPS 2022) in protoembed match "
        "sentence-transformers' `MatryoshkaLoss` on the same pairs, budget and selection?",
        "",
        "The sets, splits, budget and mined negatives are the own-pairs study's ([own-pairs.md](own-pairs.md): "
        "SNLI hypothesis -> premise, GoogleNews title -> snippet; one epoch at batch 64, bf16, the "
        "checkpoint with the best full-width dev nDCG@10 kept; configs `configs/cpu/own-pairs/"
        "sup-mined-<set>.yaml`, read by both libraries). Methods: supervised SimCSE with one mined hard "
        "negative (`sup-mined`), the same with `--set "
        f"'{MATRYOSHKA_OVERRIDE}'` (`sup-mined-mrl`: protoembed's `objective.matryoshka`, equal weights), "
        "and sentence-transformers' `SentenceTransformerTrainer` on the same pairs with "
        "`MultipleNegativesRankingLoss` (`st-mnrl-mined`) and with `MatryoshkaLoss` around it at the same "
        "widths and weights (`st-mrl-mined`; `experiments/own_pairs_st.py`); and protoembed's Matryoshka run "
        f"with weighted widths (`{weighted}`: {METHODS[weighted].weights_text}, a larger share for the full width's "
        "loss, to see whether that lowers what training for the small widths costs it). "
        "Every method's checkpoint and "
        f"learning rate are chosen on full-width dev nDCG@10, the lr from {grid} with seed {SELECTION_SEED}: "
        'by this study\'s own runs of that grid ("chosen on dev") or, for a method this study has not run '
        "the grid of, by the own-pairs study's runs of the same method on the same splits (\"chosen on dev "
        "by the own-pairs study\"; a Matryoshka method would borrow its plain method's); the lr column says "
        "which.",
        "",
        f"Every kept model and the untrained default model are evaluated on the test split by `protoembed "
        f"eval retrieval --dims {widths.replace(' ', '')}` (one encode; the first d dimensions, normalised "
        "again) and at full width by `--vectors int8` and `--vectors binary`, each `--rescore-multiplier "
        f"{RESCORE_MULTIPLIER}` (the best {100 * RESCORE_MULTIPLIER} documents of the quantised search scored "
        "again with the float query; int8 ranges calibrated on the test corpus). nDCG@10 x100; cells: mean ± "
        f"std over the seeds. Made by {command}.",
        "",
    ]
    for name, label in SET_LABELS.items():
        data = sets[name]
        text += [
            f"## {label}",
            "",
            "Test nDCG@10 at each width:",
            "",
            *widths_table(data),
            "",
            "Full width, quantised (the % column: the mean's share of float32's mean):",
            "",
            *quantised_table(data),
            "",
            "Against the aims:",
            "",
            f"- {seeds_line(data, own_pairs_records, name)}",
            *(f"- {line}" for line in findings(data)),
            *(f"- {line}" for line in [reproduction(data, own_pairs_records, name)] if line),
            "",
        ]
    text += step_change_section(records_dir, headline(sets))
    text += ["## Runs", "", "Records: `smaller-vectors/<run>/` (– : not tested: an lr not chosen).", ""]
    for name in SET_LABELS:
        text += [*runs_table(sets[name]), ""]
    return write_text(report, "\n".join(text))
