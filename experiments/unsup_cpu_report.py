"""The unsupervised CPU study's report: markdown tables drawn from the run records, nothing typed in.

A run record is a folder ``<method>-seed<k>/`` holding what the run itself wrote: ``results.json`` (STS
test results of the kept checkpoint, its step and STS-B dev Spearman), ``config.yaml`` (the resolved
config), ``training_log.jsonl`` (the trainer's log: the corpus it read, its step count, losses),
``study_time.json`` (seconds its processes took) and ``environment.json`` (the machine and backbone as
measured when it was recorded). Records from before the last three files were kept have only the first
and the time; every number a record lacks is taken from the method's config or reported as missing.

Every number of the report comes from those files or from the configs: steps, batch, learning rate,
sentence length, the corpus's sentence count (from the logs), the backbone's parameter count and the
machine's cores (from the environment records), the full-size comparison (from a full-size config). The
hand-written discussion is read from ``DISCUSSION.md`` beside the records.

Where the other suites were run (``--suites``, :mod:`experiments.unsup_cpu_suites`), a record (and
``untrained-default/``) also holds ``transfer.json``, ``fewshot.json``, ``clustering.json`` and
``suite_time.json``, and ``figures/`` the analysis figures and their JSON: the page then gains the ConPVP
paper's Tables 5 and 6, the few-shot table and Figs. 4-7, drawn by protoembed's report code
(:func:`protoembed.report.build_report`).

Records of an earlier version of the methods may sit in ``before-fixes/`` (same layout, with a
``CHANGES.md`` saying what was fixed): the page then shows, per method, the STS average before and now
and whether it moved by more than one seed standard deviation; the suites are read from there when the
current records have none.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from experiments.records import (
    CONFIG_FILE,
    ENVIRONMENT_FILE,
    LOG_FILE,
    RESULTS_FILE,
    TIME_FILE,
    cpus_text,
    write_text,
)
from experiments.step_rerun import seed_means, step_change_section
from experiments.unsup_cpu_figure import plot_study
from protoembed import build_report, load_results, run_layout, table_name

UNTRAINED = "untrained-default"
#: The other suites run on the kept models (``<suite>.json`` beside ``results.json``), in report order.
SUITES = ("transfer", "fewshot", "clustering")
SUITE_TIME_FILE = "suite_time.json"
#: The STS suite at each vector width (``protoembed eval sts --dims``; ``sts-dims.json`` beside a record),
#: run by the study's ``--dims`` (:mod:`experiments.unsup_cpu_suites`).
DIMS_SUITE = "sts-dims"
#: The widths it is read at: the Matryoshka method's (configs/cpu/conpvp-matryoshka.yaml).
DIMS = (384, 256, 128, 64, 32)
#: The transfer suite with scikit-learn's logistic regression (``protoembed eval transfer --classifier
#: sklearn``), run by the study's ``--sklearn-transfer`` to set the two classifiers side by side on the
#: same vectors; its results are kept in a folder of this name (:func:`suite_file`).
SKLEARN_SUITE = "transfer-sklearn"
FIGURES_DIR = "figures"
#: Records of an earlier version of the methods, kept to show what a fix moved (``before-fixes/``: the
#: same ``<method>-seed<k>/`` layout, its ``figures/``, and ``CHANGES.md`` saying what was fixed).
BEFORE_DIR = "before-fixes"
CHANGES_FILE = "CHANGES.md"
#: ``protoembed analyze`` analysis -> its PNG in ``figures/`` (the JSON beside it, same stem).
FIGURE_FILES = {
    "similarity": "fig4-similarity.png",
    "frequent-tokens": "fig5-frequent-tokens.png",
    "tsne": "fig6-tsne.png",
    "fewshot": "fig7-fewshot.png",
}


@dataclass
class Record:
    """One run's record folder, read back: ``results`` always, the rest where it was kept."""

    results: dict[str, Any]
    seconds: float | None = None
    config: dict[str, Any] | None = None
    log: list[dict[str, Any]] = field(default_factory=list)
    environment: dict[str, Any] | None = None

    def event(self, name: str) -> dict[str, Any] | None:
        """The last log entry with ``event == name`` (``start``, ``end``...), if logged."""
        found = [e for e in self.log if e.get("event") == name]
        return found[-1] if found else None

    def final_loss(self) -> float | None:
        """The training loss of the last logged window (mean over the last ``log_steps`` steps)."""
        losses = [e["loss"] for e in self.log if e.get("event") == "train"]
        return float(losses[-1]) if losses else None


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def read_record(folder: Path) -> Record | None:
    """The record in ``folder``, or ``None`` when it has no ``results.json`` (not finished)."""
    results = _json(folder / RESULTS_FILE)
    if results is None:
        return None
    time = _json(folder / TIME_FILE)
    log_path = folder / LOG_FILE
    log = (
        [json.loads(line) for line in log_path.read_text(encoding="utf-8").splitlines() if line.strip()]
        if log_path.is_file()
        else []
    )
    config_path = folder / CONFIG_FILE
    config = yaml.safe_load(config_path.read_text(encoding="utf-8")) if config_path.is_file() else None
    return Record(results, time["seconds"] if time else None, config, log, _json(folder / ENVIRONMENT_FILE))


# ------------------------------------------------------------------ small formatters
#: Protocol entries a suite's recorded JSON must have to count as done (else it is run again, and the
#: page leaves it out): transfer results of another classifier are redone.
SUITE_PROTOCOL: dict[str, dict[str, Any]] = {
    "transfer": {"classifier": "pytorch"},
    SKLEARN_SUITE: {"classifier": "sklearn"},
}


def suite_file(folder: Path, suite: str) -> Path:
    """Where the record in ``folder`` keeps its ``suite`` result: ``<folder>/<suite>.json``, but
    :data:`SKLEARN_SUITE`'s in that folder beside the records (``transfer-sklearn/<record>/transfer.json``):
    ``protoembed report`` reads a record folder as one page, where a transfer result of another
    classifier cannot share the transfer table."""
    if suite == SKLEARN_SUITE:
        return folder.parent / SKLEARN_SUITE / folder.name / "transfer.json"
    return folder / f"{suite}.json"


def recorded_result(folder: Path, suite: str) -> dict[str, Any] | None:
    """The record's ``suite`` result (:func:`suite_file`) when it exists and was made with the study's
    :data:`SUITE_PROTOCOL`, else ``None``."""
    data = _json(suite_file(folder, suite))
    if data is None:
        return None
    protocol = data.get("protocol") or {}
    return data if all(protocol.get(k) == v for k, v in SUITE_PROTOCOL.get(suite, {}).items()) else None


def recorded(folder: Path, suite: str) -> bool:
    """Whether the record's ``suite`` result exists and was made with the study's :data:`SUITE_PROTOCOL`."""
    return recorded_result(folder, suite) is not None


def mean_std(values: list[float | None]) -> str:
    """``mean ± sample std`` with 2 decimals; one value alone; ``n/a`` for none."""
    kept = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not kept:
        return "n/a"
    if len(kept) == 1:
        return f"{kept[0]:.2f}"
    return f"{np.mean(kept):.2f} ± {np.std(kept, ddof=1):.2f}"


def _table(header: list[str], rows: list[list[str]], aligns: str) -> str:
    rule = "|" + "".join("---|" if a == "l" else "---:|" for a in aligns)
    lines = ["| " + " | ".join(header) + " |", rule] + ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _distinct(values: list[Any]) -> str:
    seen = sorted({v for v in values if v is not None}, key=str)
    return ", ".join(f"{v:,}" if isinstance(v, int) else str(v) for v in seen) if seen else "not recorded"


def _step_counts(cfg: dict[str, Any], records: list[Record]) -> list[int]:
    """Optimizer steps: the logs' ``total_steps`` where logged, else the config's ``max_steps`` (if set)."""
    logged = [r.event("start")["total_steps"] for r in records if r.event("start")]
    limit = cfg["training"].get("max_steps")
    return logged or ([limit] if limit else [])


def _steps_text(cfg: dict[str, Any], records: list[Record]) -> str:
    counts = _step_counts(cfg, records)
    return _distinct(counts) if counts else f"{cfg['training']['epochs']} epoch(s) of"


def _corpus_sentences(records: list[Record]) -> list[int]:
    """Sentences each run trained on (its log's ``start`` event: ``data.examples``)."""
    starts = [r.event("start") for r in records if r.event("start")]
    return [s["data"]["examples"] for s in starts]


# ------------------------------------------------------------------ sections
def _count(values: list[Any], noun: str) -> str:
    shown = _distinct(values)
    return f"{noun} not recorded" if shown == "not recorded" else f"{shown} {noun}"


def setup_text(
    configs: dict[str, dict[str, Any]],
    records: dict[str, list[Record]],
    seeds: list[int],
    backbone: dict[str, Any] | None = None,
) -> str:
    """The setup paragraphs: the first method's config, the logs' corpus size, the recorded environment.

    ``backbone`` (``{"parameters", "dimension"}``, counted from the model) is used where given, else what
    the runs' environment records hold.
    """
    first = next(iter(configs.values()))
    everything = [r for runs in records.values() for r in runs]
    t = first["training"]
    counts, sentences = set(_step_counts(first, everything)), set(_corpus_sentences(everything))
    seen = ""
    if len(counts) == 1:
        per_run = counts.pop() * t["batch_size"]
        share = f", {per_run / sentences.pop():.0%} of the corpus" if len(sentences) == 1 else ""
        seen = f" ({per_run:,} sentences per run{share})"
    environments = [r.environment for r in everything if r.environment]
    facts = [backbone] if backbone else [e.get("backbone", {}) for e in environments]
    keys = ("model", "max_seq_length", ("training", "max_steps"), ("training", "batch_size"))
    differ = [m for m, cfg in configs.items() if any(_get(cfg, k) != _get(first, k) for k in keys)]
    same = "every method the same" if not differ else f"differs for {', '.join(differ)}: see their configs"
    machine = "Machine: not recorded (no run has an environment record).\n"
    if environments:
        cores = _count([e.get("cpu_count") for e in environments], "CPU core(s)")
        loads = _distinct([_load(e) for e in environments])
        machine = f"Machine: {cores} (`os.cpu_count()`); 1-minute load average at the start and end of a run: {loads}"
        cpus = cpus_text(environments)
        machine += f"; CPU: {cpus}" if cpus else ""
        if len(environments) < len(everything):
            machine += (
                f" (recorded by {len(environments)} of {len(everything)} runs; older records have none)"
            )
        machine += ".\n"
    parameters = _count([f.get("parameters") for f in facts], "parameters")
    dimension = _distinct([f.get("dimension") for f in facts])
    return (
        f"Setup ({same}): backbone `{first['model']}` ({parameters}, embedding dimension {dimension}), "
        f"corpus `{first['data']['corpus']}` ({_count(_corpus_sentences(everything), 'sentences')} as the "
        f"runs' logs read it), {_steps_text(first, everything)} steps of batch {t['batch_size']}{seen}, "
        f"lr {t['lr']:g} (linear decay, warm-up {t['warmup']}), sentences truncated to "
        f"{first['max_seq_length']} tokens, seeds {', '.join(map(str, seeds))}; STS-B dev Spearman every "
        f"{t['eval_steps']} steps, the best checkpoint kept and evaluated. Test metric: Spearman x100 of "
        f"cosine similarity ({t['eval_variant']} data; {', '.join(t['test_tasks'])} test); mean ± sample "
        f"standard deviation over seeds.\n\n{machine}"
    )


def _get(cfg: dict[str, Any], key: str | tuple[str, str]) -> Any:
    return cfg[key[0]].get(key[1]) if isinstance(key, tuple) else cfg.get(key)


def _load(environment: dict[str, Any]) -> str | None:
    start, end = environment.get("load_average_start"), environment.get("load_average_end")
    return None if start is None or end is None else f"{start:.1f}-{end:.1f}"


def scale_table(study: dict[str, Any], records: list[Record], full: tuple[str, dict[str, Any]] | None) -> str:
    """This study's settings against a full-size config's, side by side (both read from configs)."""
    if full is None:
        return ""
    name, big = full
    rows = []
    for label, key in (
        ("backbone", "model"),
        ("corpus", ("data", "corpus")),
        ("batch", ("training", "batch_size")),
        ("lr", ("training", "lr")),
        ("max tokens per sentence", "max_seq_length"),
        ("STS-B dev every (steps)", ("training", "eval_steps")),
        ("epochs", ("training", "epochs")),
        ("step limit", ("training", "max_steps")),
    ):
        rows.append([label, *(str(_get(c, key) if _get(c, key) is not None else "-") for c in (study, big))])
    rows.append(["steps run", _steps_text(study, records), "-"])
    rows.append(["corpus sentences (logged)", _distinct(_corpus_sentences(records)), "-"])
    return (
        f"\n## This study against a full-size config\n\nBoth columns are read from the configs (`{name}` on "
        "the right; the full-size configs need the Hugging Face weights and, in practice, a GPU):\n\n"
        + _table(["", "this study", "full size"], rows, "lrr")
    )


def observations(averages: dict[str, list[float]], untrained: dict[str, Any] | None, reference: str) -> str:
    """Mechanical statements: each method's mean STS avg against the untrained model and ``reference``."""
    if not averages:
        return "No finished run yet.\n"
    base = untrained["avg"] if untrained is not None else None
    ref = averages.get(reference)
    lines = []
    for label, values in sorted(averages.items(), key=lambda kv: -np.mean(kv[1])):
        mean = float(np.mean(values))
        parts = [f"- {label}: avg {mean:.2f}"]
        if base is not None:
            parts.append(f"{mean - base:+.2f} vs untrained")
        if ref and label != reference:
            parts.append(f"{mean - float(np.mean(ref)):+.2f} vs {reference}")
        if len(values) > 1:
            parts.append(f"seed std {float(np.std(values, ddof=1)):.2f}")
        lines.append(", ".join(parts))
    return "\n".join(lines) + "\n"


def suite_sections(
    path: Path,
    folders: list[tuple[Path, str]],
    figures_dir: Path,
    training_seconds: float,
    note: str = "",
) -> str:
    """Transfer (ConPVP Table 5), clustering (Table 6, accuracy and NMI), few-shot and Figs. 4-7 of the
    recorded suite results, drawn by protoembed's report code; empty when none is recorded.

    In: the report's path (links are relative to its folder), ``(record folder, row label)`` in row order
    (the seeds of a method share its label: mean ± std), the folder of the figures, the seconds of the
    training records (for the total) and a sentence saying which models the suites ran on (when not the
    records of the STS table). Each table is present when some folder has its suite's JSON; the compute
    is the sum of the folders' and the figures' ``suite_time.json``.
    """
    files, labels, done = [], [], []
    for folder, label in folders:
        found = [folder / f"{suite}.json" for suite in SUITES if recorded(folder, suite)]
        files += found
        labels += [label] * len(found)
        if len(found) == len(SUITES):
            done.append(folder.name)
    for file in FIGURE_FILES.values():
        data = (figures_dir / file).with_suffix(".json")
        if data.is_file():
            files.append(data)
            labels.append(data.stem)
    if not files:
        return ""
    page = build_report(load_results(files, labels), path, figures=False)
    page = page.split("\n", 2)[2] if page.startswith("# ") else page  # the study page has its own title
    times = [_json(d / SUITE_TIME_FILE) for d in [*(f for f, _ in folders), figures_dir]]
    seconds = sum(float(v) for t in times if t for v in t.values())
    return (
        "\n## Transfer, clustering and few-shot of the kept models\n\n"
        + (note + "\n\n" if note else "")
        + "The untrained model and the kept model of each recorded run, evaluated by `protoembed eval "
        "transfer|fewshot|clustering` (encoded with ONNX Runtime on the model's cached fp32 export, "
        "`--runtime onnx`; few-shot looks up the vectors transfer stored, `--cache-embeddings`). "
        f"Models with all {len(SUITES)} suites recorded ({len(done)}): {', '.join(done) or 'none'}. "
        "Figures by `protoembed "
        "analyze` for the untrained model and seed 1 of SimCSE and ConPVP (paper) (Fig. 5 on each model's "
        "mean-pooled token states, `--head mean`, which the frequent-token removal needs). "
        f"Compute: **{seconds / 60:.1f} min** ({seconds:.0f} s, the `{SUITE_TIME_FILE}` files: suites, figures and any retraining of a "
        f"kept model); with the training and STS evaluations above, **{(seconds + training_seconds) / 60:.1f} "
        "min** in all.\n\n" + page.strip() + "\n"
    )


def dims_section(folders: list[tuple[Path, str]]) -> str:
    """The STS test average (Spearman x100) at each width of :data:`DIMS` of the models with a
    :data:`DIMS_SUITE` result: a row per label (mean ± std over its seeds, which share the label), in
    ``folders``' order; empty when none has one."""
    found: dict[str, list[dict[str, Any]]] = {}
    for folder, label in folders:
        data = _json(folder / f"{DIMS_SUITE}.json")
        if data is not None:
            found.setdefault(label, []).append(data["dims"])
    if not found:
        return ""
    rows = [
        [label, str(len(runs)), *(mean_std([r[str(d)]["avg"] for r in runs]) for d in DIMS)]
        for label, runs in found.items()
    ]
    return (
        "\n## STS at smaller widths (Matryoshka)\n\n"
        "The STS test average (Spearman x100 of the cosine similarity) of each model's vector cut to its "
        "first d dimensions "
        "(`protoembed eval sts --dims " + ",".join(map(str, DIMS)) + "`, the kept model of each seed; "
        "`python experiments/unsup_cpu.py --dims`). ConPVP + Matryoshka trains its loss on every width "
        "(configs/cpu/conpvp-matryoshka.yaml); the others are cut after training:\n\n"
        + _table(["Model", "seeds", *(f"{d}" for d in DIMS)], rows, "lr" + "r" * len(DIMS))
    )


def write_report(
    path: Path,
    records_dir: Path,
    configs: dict[str, dict[str, Any]],
    labels: dict[str, str],
    seeds: list[int],
    command: str,
    reference: str | None = None,
    full_size: tuple[str, dict[str, Any]] | None = None,
    backbone: dict[str, Any] | None = None,
) -> str:
    """Write the markdown report (and its figure beside it) from the records; returns the text.

    Args:
        path: the report (``.md``); the figure goes to ``path`` with suffix ``.png``.
        records_dir: the folder of the ``<method>-seed<k>/`` records, ``untrained-default/``,
            ``figures/`` and ``DISCUSSION.md``.
        configs: method -> its resolved config (the YAML's structure), in report order.
        labels: method -> row label (a method without one is labelled by its name).
        seeds: the seeds each method should have.
        command: how the report was made (shown at the top).
        reference: the method the observations compare against (e.g. ``simcse``).
        full_size: ``(name, resolved config)`` of a full-size run for the scale table.
        backbone: ``{"parameters", "dimension"}`` of the backbone, counted from the model (else the
            records' environment files are used).
    """
    first = next(iter(configs.values()))
    tasks = list(first["training"]["test_tasks"])
    untrained_record = read_record(records_dir / UNTRAINED)
    untrained = untrained_record.results if untrained_record else None
    records = method_records(records_dir, configs, seeds)
    rows, dev_rows, per_label = [], [], {}
    if untrained is not None:
        cells = [mean_std([untrained["tasks"][t]["spearman"]]) for t in tasks]
        rows.append([f"untrained {first['model']} (its own head)", "-", *cells, mean_std([untrained["avg"]])])
    for method, runs in records.items():
        label = labels.get(method, method)
        if not runs:
            rows.append([label, f"0/{len(seeds)}", *["-"] * (len(tasks) + 1)])
            continue
        cells = [mean_std([r.results["tasks"][t]["spearman"] for r in runs]) for t in tasks]
        rows.append([label, f"{len(runs)}/{len(seeds)}", *cells, mean_std([r.results["avg"] for r in runs])])
        minutes = [r.seconds / 60 for r in runs if r.seconds]
        dev_rows.append(
            [
                label,
                mean_std([run_layout.dev_score(r.results) for r in runs]),
                ", ".join(str(r.results.get("best_step")) for r in runs),
                ", ".join(f"{v:.3f}" for r in runs if (v := r.final_loss()) is not None) or "-",
                f"{np.mean(minutes):.1f}" if minutes else "-",
            ]
        )
        per_label[label] = [r.results for r in runs]
    complete = all(len(runs) == len(seeds) for runs in records.values())
    seconds = [r.seconds or 0.0 for runs in records.values() for r in runs]
    total = sum(seconds) + ((untrained_record.seconds or 0.0) if untrained_record else 0.0)
    status = "complete" if complete else "INCOMPLETE (rerun the command to finish the missing runs)"
    path.parent.mkdir(parents=True, exist_ok=True)
    names = [table_name(t) for t in tasks]
    figure = plot_study(path.with_suffix(".png"), per_label, tasks, untrained, table_name)
    picture = (
        f"\n![STS average per method and seed; per-task change from the untrained model]({figure.name})\n"
        if figure is not None
        else ""
    )
    discussion = records_dir / "DISCUSSION.md"
    untrained_label = f"untrained {first['model']} (its own head)"
    method_rows, figures_dir, suites_note = _suite_folders(
        records_dir, {m: labels.get(m, m) for m in configs}, seeds
    )
    suite_rows = [(records_dir / UNTRAINED, untrained_label), *method_rows]
    text = (
        "# Unsupervised sentence embeddings on CPU: ConPVP, its ablations, SimCSE, PromptBERT\n\n"
        f"Generated from the run records in `{records_dir}` by {command}; study status: **{status}**.\n"
        "Resumable: finished runs are skipped; `--report-only` rewrites this page from the records.\n\n"
        f"Total wall time: **{total / 60:.1f} min** ({total:.0f} s: the training + evaluation processes of "
        "every run over all sessions, and the untrained model's evaluation).\n\n"
        + setup_text(configs, records, seeds, backbone)
        + "\n"
        + _table(["Method", "seeds", *names, "Avg."], rows, "lr" + "r" * (len(tasks) + 1))
        + picture
        + "\nSTS-B dev Spearman (x100) of the kept checkpoints, the step each was taken at, the training loss"
        " of the last logged window (where the run's log was kept) and the mean wall time of one run"
        " (training, dev evaluations, checkpoints and the final STS evaluation):\n\n"
        + _table(["Method", "dev Spearman", "best steps", "final loss", "min/run"], dev_rows, "lrlrr")
        + "\n## Observations (computed from the table)\n\n"
        + observations(
            {label: [r["avg"] for r in runs] for label, runs in per_label.items()},
            untrained,
            labels.get(reference, reference) if reference else "",
        )
        + dims_section(
            [(records_dir / UNTRAINED, untrained_label)]
            + [(records_dir / f"{m}-seed{k}", labels.get(m, m)) for m in configs for k in seeds]
        )
        + ("\n" + discussion.read_text(encoding="utf-8").strip() + "\n" if discussion.is_file() else "")
        + changes_section(records_dir / BEFORE_DIR, records, labels, seeds)
        + "".join(
            "\n" + line
            for line in step_change_section(records_dir, headline(records_dir, records, labels, seeds))
        )
        + suite_sections(path, suite_rows, figures_dir, total, suites_note)
        + classifier_section(suite_rows)
        + scale_table(first, [r for runs in records.values() for r in runs], full_size)
    )
    write_text(path, text)
    return text


def method_records(records_dir: Path, methods: Iterable[str], seeds: list[int]) -> dict[str, list[Record]]:
    """Each method's finished records (``<method>-seed<k>/`` of ``seeds``, in that order)."""
    return {
        m: [r for s in seeds if (r := read_record(records_dir / f"{m}-seed{s}")) is not None] for m in methods
    }


def headline(
    records_dir: Path, records: dict[str, list[Record]], labels: dict[str, str], seeds: list[int]
) -> dict[str, float]:
    """The study's headline numbers (:mod:`experiments.step_rerun`): per method of ``records``
    (:func:`method_records`, named by its label), the mean over its recorded seeds of the STS test
    average, of each suite's average where recorded, and of the STS test average at each smaller width of
    :data:`DIMS` where recorded."""
    numbers: dict[str, float] = {}
    for method, runs in records.items():
        folders = [records_dir / f"{method}-seed{s}" for s in seeds]
        columns = {"STS avg.": [r.results["avg"] for r in runs]}
        for suite in SUITES:
            results = [recorded_result(f, suite) for f in folders]
            columns[f"{suite} avg."] = [r["avg"] for r in results if r is not None]
        dims = [data["dims"] for f in folders if (data := _json(f / f"{DIMS_SUITE}.json")) is not None]
        for d in DIMS[1:]:
            columns[f"STS avg. at {d}"] = [r[str(d)]["avg"] for r in dims]
        numbers |= seed_means(labels.get(method, method), columns)
    return numbers


def classifier_section(folders: list[tuple[Path, str]]) -> str:
    """The transfer tasks with both classifiers: SentEval's PyTorch logistic regression (the ConPVP and
    SimCSE ``evaluation.py`` setting, the records' ``transfer.json``) and scikit-learn's logistic
    regression (:data:`SKLEARN_SUITE`). Per row label and classifier: accuracy x100 per task and the
    average (mean ± std over the seeds that have both), and the change of the average; empty when no
    record has both.

    In: the ``(record folder, row label)`` rows of the suites."""
    pairs: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for folder, label in folders:
        torch_result = recorded_result(folder, "transfer")
        sklearn_result = recorded_result(folder, SKLEARN_SUITE)
        if torch_result and sklearn_result:
            pairs.setdefault(label, []).append((sklearn_result, torch_result))
    if not pairs:
        return ""
    tasks = list(next(iter(pairs.values()))[0][1]["tasks"])
    rows = []
    for label, both in pairs.items():
        for name, side in (("scikit-learn", 0), ("SentEval PyTorch", 1)):
            cells = [mean_std([pair[side]["tasks"][t]["acc"] for pair in both]) for t in tasks]
            rows.append([label, name, str(len(both)), *cells, mean_std([pair[side]["avg"] for pair in both])])
        change = [pair[1]["avg"] - pair[0]["avg"] for pair in both]
        rows.append([label, "change of Avg.", str(len(both)), *["" for _ in tasks], mean_std(change)])
    return (
        "\n## Transfer with both classifiers\n\n"
        "SentEval's PyTorch logistic regression (`--classifier pytorch`: Adam, batch 64, tenacity 5, epoch "
        "size 4, L2 grid 1e-5 to 1e-2, as the ConPVP and SimCSE `evaluation.py` run it; the table above) "
        "against scikit-learn's logistic regression (`--classifier sklearn`, C grid; the study's earlier "
        f"protocol, run by `--sklearn-transfer` into `{SKLEARN_SUITE}/`), on the same "
        "vectors, accuracy x100, mean ± std over the seeds that have both:\n\n"
        + _table(["Model", "Classifier", "seeds", *tasks, "Avg."], rows, "llr" + "r" * (len(tasks) + 1))
    )


def _suite_folders(
    records_dir: Path, methods: dict[str, str], seeds: list[int]
) -> tuple[list[tuple[Path, str]], Path, str]:
    """Where each method's suite results are: its current records when any of its seeds has one, else
    the earlier records in ``before-fixes/`` when they have one (said in the returned sentence), else
    the current records. Returns the ``(folder, label)`` rows, the figures' folder and that sentence.

    In: the records folder, method -> row label, the study's seeds."""
    before = records_dir / BEFORE_DIR

    def has_suites(folder: Path, method: str) -> bool:
        return any(
            (folder / f"{method}-seed{s}" / f"{suite}.json").is_file() for s in seeds for suite in SUITES
        )

    rows, earlier = [], []
    for method, label in methods.items():
        base = records_dir
        if not has_suites(records_dir, method) and has_suites(before, method):
            base = before
            earlier.append(label)
        rows += [(base / f"{method}-seed{s}", label) for s in seeds]
    figures = records_dir / FIGURES_DIR
    if not figures.is_dir() and (before / FIGURES_DIR).is_dir():
        figures = before / FIGURES_DIR
        earlier.append("the figures")
    note = ""
    if earlier:
        note = (
            f"**{', '.join(earlier)}: these suites ran on the models of the earlier records** (`{before.name}/`, "
            "before the fixes the section above describes); the STS table above is of the current records. "
            "A method whose STS average moved by more than one seed standard deviation (the table above) is "
            "to have them run again on its new models; the others keep these."
        )
    return rows, figures, note


def changes_section(
    before_dir: Path, records: dict[str, list[Record]], labels: dict[str, str], seeds: list[int]
) -> str:
    """What a fix moved: each method's STS average and STS-B dev Spearman in the earlier records
    (``before_dir``, same seeds) against the current ones, and whether the average moved by more than
    one seed standard deviation of the earlier records; empty when there are no earlier records.

    In: the earlier records' folder (its ``CHANGES.md`` is shown first), the current records per method,
    row labels and the study's seeds. Out: a markdown section.
    """
    if not before_dir.is_dir():
        return ""
    rows = []
    for method, runs in records.items():
        earlier = [r for s in seeds if (r := read_record(before_dir / f"{method}-seed{s}")) is not None]
        if not earlier:
            continue
        old = [r.results["avg"] for r in earlier]
        new = [r.results["avg"] for r in runs]
        change = moved = "-"
        if new:
            delta = float(np.mean(new) - np.mean(old))
            spread = float(np.std(old, ddof=1)) if len(old) > 1 else float("nan")
            change = f"{delta:+.2f}"
            moved = (
                "-"
                if math.isnan(spread)
                else f"{abs(delta) / spread:.1f} ({'yes' if abs(delta) > spread else 'no'})"
            )
        rows.append(
            [
                labels.get(method, method),
                f"{len(runs)}/{len(earlier)}",
                mean_std(old),
                mean_std(new),
                change,
                moved,
                mean_std([run_layout.dev_score(r.results) for r in earlier]),
                mean_std([run_layout.dev_score(r.results) for r in runs]),
            ]
        )
    if not rows:
        return ""
    changes = before_dir / CHANGES_FILE
    header = [
        "Method",
        "seeds rerun",
        "Avg. before",
        "Avg. now",
        "change",
        "change / std before (> 1?)",
        "dev before",
        "dev now",
    ]
    return (
        f"\n## What the fixes moved (earlier records in `{before_dir.parent.name}/{before_dir.name}/`)\n\n"
        + (changes.read_text(encoding="utf-8").strip() + "\n\n" if changes.is_file() else "")
        + "STS test average (x100) and STS-B dev Spearman of the kept checkpoints, mean ± std over the seeds "
        "each side has; the change is of the means, against the earlier records' seed standard deviation:\n\n"
        + _table(header, rows, "lrrrrrrr")
    )
