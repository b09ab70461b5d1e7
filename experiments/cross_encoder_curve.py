"""The cross-encoder's STS-B dev curve: how many epochs the supervised CPU study's cross-encoder needs.

Run from the repository root, one loss at a time (each run trains in this process)::

    python experiments/cross_encoder_curve.py --loss mse --epochs 4 --eval-steps 90
    python experiments/cross_encoder_curve.py --loss bce --epochs 4 --eval-steps 90
    python experiments/cross_encoder_curve.py --report-only   # rewrite the markdown from the JSON

Each run is ``configs/cpu/cross-encoder-stsb.yaml`` (the study's STS-B cross-encoder, seed 1) with
``training.epochs``, ``training.eval_steps`` and ``objective.loss`` set (then any ``--set``), into
``runs/cross-encoder-curve/<loss>/`` (git-ignored; ``--runs-dir``). Every ``eval_steps`` steps it records the
cross-encoder's own STS-B dev Spearman (the pair scored as one input: what Table II reads on test) and
the dev Spearman of its encoder read with the [CLS] head (Table I's "[CLS]" row); the cross-encoder's
score selects ``best/``. The points go to ``cross-encoder-curve.json`` in the supervised study's records
(``docs/results/supervised-cpu/``; ``--records-dir``), one entry per loss, written atomically after every
evaluation, and the table to ``cross-encoder-curve.md`` beside it. A loss whose finished curve of the same
settings is recorded is skipped; an interrupted one (a kill, the end of a session) resumes from its run's
last checkpoint (written after every evaluation), keeping the points recorded up to it; in fp32 on a CPU
(the study's setting) the finished curve equals an uninterrupted run's (the trainer's resume,
:mod:`protoembed.training.trainer`). Its ``elapsed_s`` and ``seconds`` count the attempts' time up to the
checkpoint each resumed from: steps an interruption lost after its last checkpoint are not counted;
``resumed_at`` lists those checkpoints' steps.

The linear learning-rate decay runs over the whole ``--epochs`` budget, so the point at epoch k of a
4-epoch run is not a k-epoch run; the curve shows where dev stops improving under that schedule.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: python experiments/cross_encoder_curve.py
    import script_path  # noqa: F401  (puts the repository root on sys.path)

from experiments.records import RESULTS_FILE, guarded, load_average, write_json, write_text  # noqa: E402
from experiments.study_cli import add_set_option  # noqa: E402
from protoembed import ProtoembedError  # noqa: E402

CONFIG = "configs/cpu/cross-encoder-stsb.yaml"
#: The curve's files, in the supervised study's records.
CURVE_FILE = "cross-encoder-curve.json"
RECORDS = Path("docs/results/supervised-cpu")
RUNS = Path("runs/cross-encoder-curve")


def _say(message: str) -> None:
    print(f"cross_encoder_curve: {message}", file=sys.stderr, flush=True)


def write_markdown(curves: dict[str, Any], records: Path = RECORDS) -> None:
    """Write :func:`markdown` of ``curves`` to the curve page in ``records``, atomically."""
    write_text((records / CURVE_FILE).with_suffix(".md"), markdown(curves))


def run_curve(
    loss: str,
    epochs: int,
    eval_steps: int,
    seed: int,
    extra: list[str] | None = None,
    records: Path = RECORDS,
    runs: Path = RUNS,
) -> dict[str, Any]:
    """Train the study's STS-B cross-encoder with ``loss`` for ``epochs``, evaluating every
    ``eval_steps`` steps (``extra``: config overrides after those), into ``runs/<loss>``; the curve goes to
    ``records`` (:func:`save`), resuming an interrupted curve of the same settings (module docstring).
    Returns ``{"loss", "epochs", "eval_steps", "steps_per_epoch", "points": [...], "seconds"}`` (and
    ``"resumed_at"`` when resumed) with points ``{"step", "epoch", "cross_encoder_dev", "cls_dev"}``
    (Spearman x100).

    Raises:
        ProtoembedError: the run folder holds an interrupted run whose points the JSON lacks (another
            curve's settings, or a JSON that was replaced)."""
    from protoembed import Evaluator, load_run
    from protoembed.training.components import build_objective_from_config
    from protoembed.training.trainer import train

    overrides = [
        f"training.epochs={epochs}",
        f"training.eval_steps={eval_steps}",
        f"training.seed={seed}",
        f"objective.loss={loss}",
        f"output_dir={runs / loss}",
        *(extra or []),
    ]
    path = records / CURVE_FILE
    recorded = (json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}).get(loss, {})
    if recorded.get("overrides") != overrides:
        recorded = {}  # another curve's settings: not resumed
    if "seconds" in recorded:
        _say(f"{loss}: a finished curve of these settings is in {path}, skipped")
        return recorded
    ((_, cfg),) = load_run(CONFIG, overrides)  # a single run: one entry
    steps_per_epoch = 5749 // cfg.training.batch_size
    total = cfg.training.max_steps or epochs * steps_per_epoch  # the trainer's last step
    # the trainer evaluates every eval_steps steps and after the last one
    schedule = [min(n * eval_steps, total) for n in range(1, -(-total // eval_steps) + 1)]
    done = _resumed_step(runs / loss, total)
    kept = [p for p in recorded.get("points", []) if p["step"] <= done]
    if [p["step"] for p in kept] != [step for step in schedule if step <= done]:
        raise ProtoembedError(
            f"{runs / loss}: an interrupted run at step {done} whose dev points up to it are not in {path}; "
            "remove that folder to start the curve again"
        )
    dev = Evaluator(
        ["STSBenchmark"],
        split="dev",
        metric="spearman",
        data_dir=cfg.data.data_dir,
        batch_size=cfg.training.eval_batch_size,
        variant=cfg.training.eval_variant,
    )
    built: dict[str, Any] = {}
    entry: dict[str, Any] = {
        "loss": loss,
        "epochs": epochs,
        "eval_steps": eval_steps,
        "seed": seed,
        "batch_size": cfg.training.batch_size,
        "steps_per_epoch": steps_per_epoch,
        "config": CONFIG,
        "overrides": overrides,
        "points": kept,
    }
    if done:
        entry["resumed_at"] = [*recorded.get("resumed_at", []), done]
        _say(f"{loss}: resuming the interrupted curve from step {done}")
    before = kept[-1]["elapsed_s"] if kept else 0.0
    start = time.perf_counter() - before

    def factory(config: Any, embedder: Any) -> Any:
        built["objective"] = build_objective_from_config(config, embedder)
        return built["objective"]

    def evaluate(embedder: Any) -> float:
        objective = built["objective"]
        cross = dev.score_pairs(lambda first, second: objective.dev_pair_scores(first, second, 64))
        cls = float(dev(embedder))
        step = schedule[len(entry["points"])]
        entry["points"].append(
            {
                "step": step,
                "epoch": round(step / steps_per_epoch, 3),
                "cross_encoder_dev": round(cross, 2),
                "cls_dev": round(cls, 2),
                "elapsed_s": round(time.perf_counter() - start, 1),
                "load_average": load_average(),
            }
        )
        save(entry, records)
        logging.info("curve %s: %s", loss, entry["points"][-1])
        return cross

    train(cfg, resume=True, objective_factory=factory, evaluator=evaluate)
    entry["seconds"] = round(time.perf_counter() - start, 1)
    save(entry, records)
    return entry


def _resumed_step(run: Path, total: int) -> int:
    """The step a curve run in folder ``run`` resumes from: its checkpoint's, ``total`` for a finished
    run (``results.json``: the trainer returns it, no step is trained), 0 for none."""
    from protoembed.training.checkpoint import find_checkpoint, read_state

    checkpoint = find_checkpoint(run)
    if checkpoint is not None:
        return read_state(checkpoint).step
    return total if (run / RESULTS_FILE).is_file() else 0


def save(entry: dict[str, Any], records: Path = RECORDS) -> None:
    """Put ``entry`` into the curve JSON in ``records`` under its loss (atomically) and rewrite the
    markdown."""
    path = records / CURVE_FILE
    curves = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    curves[entry["loss"]] = entry
    write_json(path, curves)
    write_markdown(curves, records)


def markdown(curves: dict[str, Any]) -> str:
    """The curves as one markdown table per loss: step, epoch, cross-encoder dev, [CLS] dev, best marked."""
    lines = [
        "# The cross-encoder's STS-B dev curve (supervised CPU study)",
        "",
        "Made by `python experiments/cross_encoder_curve.py` from `cross-encoder-curve.json`: "
        f"`{CONFIG}` (seed 1, batch 32, encoder lr 2e-5, classifier lr 1e-3, linear decay over the whole "
        "budget), STS-B dev Spearman x100 of the cross-encoder (pairs as one input) and of its encoder "
        "with the [CLS] head. **Bold**: the best cross-encoder dev score of the run.",
        "",
    ]
    for loss, entry in curves.items():
        points = entry["points"]
        best = max((p["cross_encoder_dev"] for p in points), default=None)
        lines += [
            f"## loss: {loss} ({entry['epochs']} epochs, eval every {entry['eval_steps']} steps"
            + (f", {entry['seconds'] / 60:.0f} min" if "seconds" in entry else ", unfinished")
            + "".join(f", resumed at step {step}" for step in entry.get("resumed_at", []))
            + ")",
            "",
            "| step | epoch | cross-encoder dev | [CLS] dev |",
            "|---:|---:|---:|---:|",
        ]
        for p in points:
            cross = f"{p['cross_encoder_dev']:.2f}"
            cross = f"**{cross}**" if p["cross_encoder_dev"] == best else cross
            lines.append(f"| {p['step']} | {p['epoch']:.2f} | {cross} | {p['cls_dev']:.2f} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loss", choices=("mse", "bce"), default="mse")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--eval-steps", type=int, default=90)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--records-dir", type=Path, default=RECORDS, help="the supervised study's records")
    parser.add_argument("--runs-dir", type=Path, default=RUNS, help="run folders (ignored)")
    add_set_option(parser)
    parser.add_argument("--report-only", action="store_true", help="only rewrite the markdown")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    def body() -> int:
        if args.report_only:
            curves = json.loads((args.records_dir / CURVE_FILE).read_text(encoding="utf-8"))
            write_markdown(curves, args.records_dir)
        else:
            run_curve(
                args.loss, args.epochs, args.eval_steps, args.seed, args.set, args.records_dir, args.runs_dir
            )
        return 0

    return guarded(body, _say)


if __name__ == "__main__":
    sys.exit(main())
