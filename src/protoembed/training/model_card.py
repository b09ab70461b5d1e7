"""A training run's part of its ``best/`` model card: the sections made from the run's own records.

- ``config.yaml`` (the resolved config, less ``output_dir``; its ``model`` is the card's backbone);
- ``training_log.jsonl``'s ``start`` entry (the objective's options, each training file and its example
  count, steps and processes);
- ``results.json`` (best step, the dev score that chose ``best/`` and what it scored, the test results as their suite's
  table prints them).

:func:`write_run_card` writes the card (:func:`protoembed.model_card.write_model_card`) with them.
This module imports no torch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from protoembed.evaluation.suite import SUITES
from protoembed.model.model_card import fmt_cell, read_json, write_model_card
from protoembed.outputs.run_layout import (
    BEST_DIR,
    CONFIG_FILE,
    LOG_FILE,
    RESULTS_FILE,
    dev_score,
    dev_score_name,
)


def _start_entry(run_dir: Path) -> dict[str, Any]:
    """The ``start`` entry of the run's ``training_log.jsonl`` (``{}`` when absent)."""
    try:
        lines = (run_dir / LOG_FILE).read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") == "start":
            return entry
    return {}


def _line_count(path: str) -> int | None:
    try:
        with open(path, "rb") as handle:
            return sum(1 for _ in handle)
    except OSError:
        return None


def _run_config(run_dir: Path) -> dict[str, Any]:
    """The run's ``config.yaml`` without ``output_dir`` (where it ran says nothing about the model)."""
    import yaml

    try:
        data = yaml.safe_load((run_dir / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    if not isinstance(data, dict):
        return {}
    data.pop("output_dir", None)
    return data


def _training_section(run_dir: Path) -> list[str]:
    start = _start_entry(run_dir)
    results = read_json(run_dir / RESULTS_FILE)
    lines = ["## Training", ""]
    objective = dict(start.get("objective") or {})
    name = objective.pop("name", "?")
    objective.pop("objective", None)
    options = ", ".join(f"{k}={v}" for k, v in objective.items()) or "defaults"
    rows = [("objective", f"{name} ({options})")]
    for source in (start.get("data") or {}).get("files", []):
        path = str(source.get("path", "?"))
        count = _line_count(path)
        lines_text = f"{count} lines, " if count is not None else ""
        rows.append(
            ("training data", f"`{os.path.basename(path)}` ({lines_text}{source.get('examples')} examples)")
        )
    if start:
        rows.append(("steps", f"{start.get('total_steps')} on {start.get('world_size')} process(es)"))
    if isinstance(results, dict):
        rows.append(("selected at step", fmt_cell(results.get("best_step"))))
        rows.append(("dev score there", f"{fmt_cell(dev_score(results))} ({dev_score_name(results)})"))
    lines += ["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows), ""]
    suite = SUITES.get(results.get("suite")) if isinstance(results, dict) else None
    if suite is not None:
        own = {k: v for k, v in results.items() if k != "model"}  # the model is this folder, wherever it is
        lines += ["## Results", "", suite.format_table(own), ""]
    config = _run_config(run_dir)
    if config:
        import yaml

        text = yaml.safe_dump(config, sort_keys=False, allow_unicode=True).rstrip()
        lines += ["## Config", "", "```yaml", text, "```", ""]
    return lines


def write_run_card(run_dir: str | os.PathLike[str]) -> Path:
    """Write the card of ``run_dir/best/``: the model's rows, then the run's training, results and config
    (titled by the run folder's name); returns its path."""
    run_dir = Path(run_dir)
    backbone = _run_config(run_dir).get("model")
    return write_model_card(
        run_dir / BEST_DIR,
        title=run_dir.name,
        backbone=str(backbone) if backbone else None,
        sections=_training_section(run_dir),
    )
