"""``README.md`` model cards: what a saved model folder says about itself.

Written at every save: :meth:`protoembed.Embedder.save` (the model alone), a training run's ``best/``
(rewritten at the end of the run with its training and results) and an export (ONNX, OpenVINO, ...).
Every fact comes from the files of the folder and, for a run, from the run's own records, never from
memory of the process:

- the folder: ``config.json`` (backbone architecture, layers, width), ``protoembed.json`` (head),
  ``protoembed_encoder.json`` (template, soft prompt), ``modules.json`` (which modules need
  ``trust_remote_code``), ``protoembed_export.json`` (an export's format and precision);
- the run folder: ``config.yaml`` (the resolved config), ``training_log.jsonl``'s ``start`` entry (the
  objective's options, each training file and its example count, steps and processes) and
  ``results.json`` (best step, STS-B dev Spearman, STS test results);
- the runtime registry (:mod:`protoembed.runtimes`): the ``library_name`` and the format's name of the
  entry that wrote the folder (the torch runtime's for a saved model, the format's writer for an export).

:func:`card_text` renders, :func:`write_model_card` writes atomically. This module imports no torch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from protoembed.io import write_atomic
from protoembed.run_layout import CONFIG_FILE, LOG_FILE, RESULTS_FILE, dev_score
from protoembed.runtimes import RUNTIMES, TORCH, RuntimeSpec, folder_format, format_writer
from protoembed.st_layout import MODULES_FILE

CARD_FILE = "README.md"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


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


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def _run_config(run_dir: Path | None) -> dict[str, Any]:
    """The run's ``config.yaml`` without ``output_dir`` (where it ran says nothing about the model)."""
    import yaml

    try:
        data = yaml.safe_load((run_dir / CONFIG_FILE).read_text(encoding="utf-8")) if run_dir else None
    except (OSError, yaml.YAMLError):
        return {}
    if not isinstance(data, dict):
        return {}
    data.pop("output_dir", None)
    return data


def _export_config(folder: Path) -> dict[str, Any] | None:
    """The folder's ``protoembed_export.json`` (``None``: not an export)."""
    return (
        _read_json(folder / "protoembed_export.json")
        if (folder / "protoembed_export.json").is_file()
        else None
    )


def _writer(export: dict[str, Any] | None) -> RuntimeSpec:
    """The registry entry that wrote the folder: the torch runtime for a saved model, else the writer of
    the export's format."""
    return RUNTIMES[TORCH] if export is None else format_writer(folder_format(export))


def _model_rows(folder: Path, run_config: dict[str, Any]) -> list[tuple[str, str]]:
    config = _read_json(folder / "config.json") or {}
    export = _export_config(folder)
    saved = _read_json(folder / "protoembed.json") or export or {}
    encoder = _read_json(folder / "protoembed_encoder.json") or {}
    architecture = ", ".join(config.get("architectures") or [config.get("model_type", "?")])
    backbone = run_config.get("model") or config.get("_name_or_path") or config.get("model_type", "?")
    shape = f"{config.get('num_hidden_layers', '?')} layers, hidden size {config.get('hidden_size', '?')}"
    head = str(saved.get("head", "?"))
    if encoder.get("template"):
        head += f", template `{encoder['template']}`"
    if encoder.get("n_soft_prompt"):
        head += f", {encoder['n_soft_prompt']} soft-prompt vectors ({encoder.get('soft_prompt_init')} init)"
    rows = [("backbone", f"{backbone} ({architecture}; {shape})"), ("head", head)]
    if export is not None:
        label = f"{_writer(export).format_label} export"
        rows.append((label, f"{export.get('quantize') or 'fp32'}, dimension {export.get('dimension')}"))
    rows.append(("max sequence length", str(encoder.get("max_seq_length") or "the backbone's limit")))
    rows.append(("protoembed version", str(saved.get("protoembed_version", "?"))))
    return rows


def _needs_remote_code(folder: Path) -> bool:
    modules = _read_json(folder / MODULES_FILE) or []
    return any(not str(m.get("type", "")).startswith("sentence_transformers.") for m in modules)


def _training_section(run_dir: Path) -> list[str]:
    start = _start_entry(run_dir)
    results = _read_json(run_dir / RESULTS_FILE)
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
        rows.append(("selected at step", _fmt(results.get("best_step"))))
        rows.append(("dev score there (STS-B dev Spearman x100 by default)", _fmt(dev_score(results))))
    lines += ["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows), ""]
    if isinstance(results, dict) and isinstance(results.get("tasks"), dict):
        split = results.get("split", "test")
        lines += [f"## Results: STS ({results.get('variant', '?')} data, {split} split, cosine)", ""]
        lines += ["| Task | Spearman x100 | Pearson x100 | n |", "|---|---:|---:|---:|"]
        for task, row in results["tasks"].items():
            lines.append(
                f"| {task} | {_fmt(row.get('spearman'))} | {_fmt(row.get('pearson'))} | {row.get('n')} |"
            )
        lines += [f"| Avg. | {_fmt(results.get('avg'))} | | |", ""]
    config = _run_config(run_dir)
    if config:
        import yaml

        text = yaml.safe_dump(config, sort_keys=False, allow_unicode=True).rstrip()
        lines += ["## Config", "", "```yaml", text, "```", ""]
    return lines


def card_text(
    folder: str | os.PathLike[str], run_dir: str | os.PathLike[str] | None = None, name: str | None = None
) -> str:
    """The card of the saved model in ``folder``; with ``run_dir``, also its training, results and config.

    In: a saved model folder (sentence-transformers layout or an export), optionally the training
    run folder whose ``best/`` it is, and the folder's final name (``folder`` may be a temp folder about
    to be renamed). Out: the markdown text (a YAML header for the Hugging Face hub whose
    ``library_name`` is the registry entry's that wrote the folder).
    """
    folder = Path(folder)
    export = _export_config(folder)
    where = name or folder.name
    title = Path(run_dir).name if run_dir is not None else where
    lines = ["---", f"library_name: {_writer(export).library_name}"]
    lines += ["tags: [protoembed, sentence-embeddings, sentence-similarity]", "---", "", f"# {title}", ""]
    lines += ["A sentence-embedding model saved by protoembed.", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in _model_rows(folder, _run_config(run_dir and Path(run_dir)))] + [""]
    if run_dir is not None:
        lines += _training_section(Path(run_dir))
    lines += ["## Usage", "", "```python", "import protoembed", "", f'model = protoembed.load("{where}")']
    lines += ['vectors = model.encode(["A man is playing a guitar."])']
    if export is None:
        remote = ", trust_remote_code=True" if _needs_remote_code(folder) else ""
        lines += ["", "from sentence_transformers import SentenceTransformer", ""]
        lines += [f'model = SentenceTransformer("{where}"{remote})']
    lines += ["```", ""]
    if export is None and _needs_remote_code(folder):
        lines += ["The head is a protoembed module: sentence-transformers imports it from the installed"]
        lines += ["`protoembed` package, which `trust_remote_code=True` allows.", ""]
    return "\n".join(lines)


def write_model_card(
    folder: str | os.PathLike[str], run_dir: str | os.PathLike[str] | None = None, name: str | None = None
) -> Path:
    """Write :func:`card_text` to ``folder/README.md`` atomically; returns its path."""
    text = card_text(folder, run_dir, name)
    return write_atomic(Path(folder) / CARD_FILE, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
