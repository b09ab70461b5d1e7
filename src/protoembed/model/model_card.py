"""``README.md`` model cards: what a saved model folder says about itself.

Written at every save: :meth:`protoembed.Embedder.save` (the model alone), a training run's ``best/``
(rewritten at the end of the run with the sections :mod:`protoembed.training.model_card` makes from the
run's own records) and an export (ONNX, OpenVINO, ...). Every fact here comes from the files of the
folder, never from memory of the process:

- the folder: ``config.json`` (backbone architecture, layers, width), ``protoembed.json`` (head, Matryoshka
  dimensions),
  ``protoembed_encoder.json`` (template, soft prompt), ``modules.json`` (which modules need
  ``trust_remote_code``), ``protoembed_export.json`` (an export's format and precision);
- the runtime registry (:mod:`protoembed.model.runtimes`): the ``library_name`` and the format's name of the
  entry that wrote the folder (the torch runtime's for a saved model, the format's writer for an export).

:func:`card_text` renders, :func:`write_model_card` writes atomically. This module imports no torch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from protoembed.model.runtimes import RUNTIMES, TORCH, RuntimeSpec, folder_format, format_writer, runs_on
from protoembed.outputs.io import write_atomic
from protoembed.outputs.st_layout import MATRYOSHKA_DIMS, MODULES_FILE, PROTOEMBED_CONFIG

CARD_FILE = "README.md"


def read_json(path: Path) -> Any:
    """The JSON in ``path``; ``None`` when it is missing or not JSON (a card states what is there)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def fmt_cell(value: Any) -> str:
    """A table cell: ``-`` for nothing, two decimals for a float, else the value as text."""
    return "-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def _export_config(folder: Path) -> dict[str, Any] | None:
    """The folder's ``protoembed_export.json`` (``None``: not an export)."""
    return (
        read_json(folder / "protoembed_export.json")
        if (folder / "protoembed_export.json").is_file()
        else None
    )


def _writer(export: dict[str, Any] | None) -> RuntimeSpec:
    """The registry entry that wrote the folder: the torch runtime for a saved model, else the writer of
    the export's format."""
    return RUNTIMES[TORCH] if export is None else format_writer(folder_format(export))


def _model_rows(folder: Path, backbone: str | None) -> list[tuple[str, str]]:
    config = read_json(folder / "config.json") or {}
    export = _export_config(folder)
    saved = read_json(folder / PROTOEMBED_CONFIG) or export or {}
    encoder = read_json(folder / "protoembed_encoder.json") or {}
    architecture = ", ".join(config.get("architectures") or [config.get("model_type", "?")])
    backbone = backbone or config.get("_name_or_path") or config.get("model_type", "?")
    shape = f"{config.get('num_hidden_layers', '?')} layers, hidden size {config.get('hidden_size', '?')}"
    head = str(saved.get("head", "?"))
    if encoder.get("template"):
        head += f", template `{encoder['template']}`"
    if encoder.get("n_soft_prompt"):
        head += f", {encoder['n_soft_prompt']} soft-prompt vectors ({encoder.get('soft_prompt_init')} init)"
    rows = [("backbone", f"{backbone} ({architecture}; {shape})"), ("head", head)]
    if export is not None:
        label = f"{_writer(export).format_label} export"
        rows.append(
            (label, f"{export.get('quantize') or 'fp32'} weights, dimension {export.get('dimension')}")
        )
        rows.append(("runs on", runs_on(export, where="where it was written")))
    rows.append(("max sequence length", str(encoder.get("max_seq_length") or "the backbone's limit")))
    dims = saved.get(MATRYOSHKA_DIMS)
    if dims:
        shown = ", ".join(map(str, dims))
        rows.append(
            ("Matryoshka dimensions", f"{shown} (trained so that the first d dimensions are an embedding)")
        )
    rows.append(("protoembed version", str(saved.get("protoembed_version", "?"))))
    return rows


def _needs_remote_code(folder: Path) -> bool:
    modules = read_json(folder / MODULES_FILE) or []
    return any(not str(m.get("type", "")).startswith("sentence_transformers.") for m in modules)


def card_text(
    folder: str | os.PathLike[str],
    name: str | None = None,
    *,
    title: str | None = None,
    backbone: str | None = None,
    sections: Sequence[str] = (),
) -> str:
    """The card of the saved model in ``folder``.

    In: a saved model folder (sentence-transformers layout or an export), the folder's final name
    (``folder`` may be a temp folder about to be renamed), and what its maker knows besides the folder:
    the card's ``title`` (default: the name), the ``backbone`` it was made from (default: the one
    ``config.json`` names) and further markdown ``sections`` (lines; a training run's training, results
    and config: :mod:`protoembed.training.model_card`). Out: the markdown text (a YAML header for the
    Hugging Face hub whose ``library_name`` is the registry entry's that wrote the folder).
    """
    folder = Path(folder)
    export = _export_config(folder)
    where = name or folder.name
    title = title or where
    lines = ["---", f"library_name: {_writer(export).library_name}"]
    lines += ["tags: [protoembed, sentence-embeddings, sentence-similarity]", "---", "", f"# {title}", ""]
    lines += ["A sentence-embedding model saved by protoembed.", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in _model_rows(folder, backbone)] + [""]
    lines += list(sections)
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


def write_model_card(folder: str | os.PathLike[str], name: str | None = None, **facts: Any) -> Path:
    """Write :func:`card_text` (``facts``: its keyword arguments) to ``folder/README.md`` atomically;
    returns its path."""
    text = card_text(folder, name, **facts)
    return write_atomic(Path(folder) / CARD_FILE, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
