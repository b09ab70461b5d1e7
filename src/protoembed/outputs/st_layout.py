"""The sentence-transformers folder layout: the JSON files that let ``SentenceTransformer(path)`` read a folder.

One home for what :meth:`protoembed.model.embedder.Embedder.save`, :meth:`protoembed.model.encoder.PromptEncoder.save`
and the ONNX export (:mod:`protoembed.model.export.graph`) write, and for what the loader reads:

- ``modules.json``: the module list, one ``{"idx", "name", "path", "type"}`` entry per module; the input
  module sits in the root (``path`` ``""``), module ``i`` in ``<i>_<ClassName>/``
  (:func:`write_modules`, :func:`read_modules`);
- ``config_sentence_transformers.json``: library versions, the model's input prompts (name -> text,
  :mod:`protoembed.inputs.prompts`) and its score function (``similarity_fn_name``)
  (:func:`write_st_config`, :func:`read_st_config`);
- ``sentence_bert_config.json``: ``max_seq_length`` and ``do_lower_case`` of the input module, what
  sentence-transformers' own ``Transformer`` module reads (:func:`write_sentence_bert_config`).

Beside them protoembed's own ``protoembed.json`` (:data:`PROTOEMBED_CONFIG`): the head's name, the
protoembed version and, for a model trained Matryoshka-style, the sizes it was trained to be cut to
(:data:`MATRYOSHKA_DIMS`, :func:`read_matryoshka_dims`; sentence-transformers' own files have no place for
them: its ``truncate_dim`` is one size that ``encode`` cuts to, its model card lists a ``MatryoshkaLoss``'s
dims).

A module's own files (the pooling module's ``config.json``, ``2_Normalize/config.json``) are written by the
module's ``save``; :func:`write_modules` calls it for each module it is given. This module imports neither
torch nor sentence-transformers at import time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODULES_FILE = "modules.json"
ST_CONFIG_FILE = "config_sentence_transformers.json"
SENTENCE_BERT_CONFIG_FILE = "sentence_bert_config.json"
#: protoembed's own file in a saved model's root: ``{"head", "protoembed_version"}`` and
#: :data:`MATRYOSHKA_DIMS` where set.
PROTOEMBED_CONFIG = "protoembed.json"
#: The key of :data:`PROTOEMBED_CONFIG` listing the sizes a model was trained to be cut to (largest first).
MATRYOSHKA_DIMS = "matryoshka_dims"

#: sentence-transformers' own modules, by the aliases every sentence-transformers version knows.
TRANSFORMER = "sentence_transformers.models.Transformer"
POOLING = "sentence_transformers.models.Pooling"
NORMALIZE = "sentence_transformers.models.Normalize"
#: Class name -> the ``modules.json`` type written for it (other classes: their dotted path).
ST_TYPES = {"Pooling": POOLING, "Normalize": NORMALIZE}


@dataclass(frozen=True)
class LayoutModule:
    """One entry of ``modules.json``.

    Attributes:
        type: the dotted type sentence-transformers imports (e.g. :data:`POOLING`).
        module: a module with ``save(folder)``, called on the entry's folder; ``None`` when the caller
            writes that folder's files itself (or leaves it empty).
    """

    type: str
    module: Any = None


def module_type(module: Any) -> str:
    """The ``modules.json`` type of ``module``: :data:`ST_TYPES`'s alias for sentence-transformers' own
    classes, else ``<its module>.<its class>``."""
    name = type(module).__name__
    return ST_TYPES.get(name, f"{type(module).__module__}.{name}")


def module_folder(idx: int, kind: str) -> str:
    """Folder of module ``idx`` (type ``kind``), relative to the model's root: ``""`` for the input
    module, else ``<idx>_<ClassName>``."""
    return "" if idx == 0 else f"{idx}_{kind.rsplit('.', 1)[-1]}"


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` to ``path`` as indented JSON with a final newline (every layout file's format)."""
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def write_modules(folder: Path, modules: Sequence[LayoutModule]) -> list[dict[str, Any]]:
    """Create each module's folder under ``folder``, save the modules given, write ``modules.json``.

    Returns:
        the entries written, in order.
    """
    entries = []
    for idx, entry in enumerate(modules):
        sub = module_folder(idx, entry.type)
        (folder / sub).mkdir(exist_ok=True)
        if entry.module is not None:
            entry.module.save(str(folder / sub))
        entries.append({"idx": idx, "name": str(idx), "path": sub, "type": entry.type})
    write_json(folder / MODULES_FILE, entries)
    return entries


def library_versions(*names: str) -> dict[str, str]:
    """Installed versions of ``names`` among ``sentence_transformers``, ``transformers`` and ``pytorch``,
    in the order given (the ``__version__`` of ``config_sentence_transformers.json``)."""
    found = {}
    for name in names:
        if name == "sentence_transformers":
            import sentence_transformers

            found[name] = sentence_transformers.__version__
        elif name == "transformers":
            import transformers

            found[name] = transformers.__version__
        elif name == "pytorch":
            import torch

            found[name] = torch.__version__
        else:
            raise ValueError(f"unknown library {name!r}")
    return found


def write_st_config(
    folder: Path,
    versions: dict[str, str],
    prompts: dict[str, str],
    similarity_fn_name: str,
    default_prompt_name: str | None = None,
    truncate_dim: int | None = None,
) -> None:
    """Write ``config_sentence_transformers.json``: ``versions``, the model's ``prompts`` (name -> text),
    its ``default_prompt_name`` (the prompt ``encode`` puts before every input when none is named;
    ``None``: none), its ``similarity_fn_name`` (``cosine``, ``dot``) and its ``truncate_dim`` (the width
    ``encode`` cuts its vectors to; written only when set, as sentence-transformers writes it)."""
    config: dict[str, Any] = {
        "__version__": versions,
        "prompts": dict(prompts),
        "default_prompt_name": default_prompt_name,
        "similarity_fn_name": similarity_fn_name,
    }
    if truncate_dim is not None:
        config["truncate_dim"] = truncate_dim
    write_json(folder / ST_CONFIG_FILE, config)


def read_st_config(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """``prompts`` (name -> text, ``{}`` when none), ``similarity_fn_name``, ``default_prompt_name`` and
    ``truncate_dim`` (``None`` when not named) of ``folder``'s ``config_sentence_transformers.json``; empty
    when there is no such file.

    Raises:
        ValueError: a file that is not JSON, or prompts that are not a mapping of texts (the file named).
    """
    path = Path(folder) / ST_CONFIG_FILE
    config = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    prompts = config.get("prompts") or {}
    if not isinstance(prompts, dict) or not all(isinstance(v, str) for v in prompts.values()):
        raise ValueError(f"{path}: 'prompts' must map prompt names to texts, got {prompts!r}")
    default = config.get("default_prompt_name")
    if default is not None and default not in prompts:
        raise ValueError(
            f"{path}: default_prompt_name {default!r} is not one of its prompts ({', '.join(prompts) or 'none'})"
        )
    return {
        "prompts": dict(prompts),
        "similarity_fn_name": config.get("similarity_fn_name"),
        "default_prompt_name": default,
        "truncate_dim": config.get("truncate_dim"),
    }


def read_matryoshka_dims(folder: str | os.PathLike[str]) -> list[int] | None:
    """The Matryoshka sizes of the model saved in ``folder`` (its :data:`PROTOEMBED_CONFIG`'s
    :data:`MATRYOSHKA_DIMS`), largest first; ``None`` for a model trained without, or a folder without the
    file.

    Raises:
        ValueError: a file that is not JSON, or dims that are not a list of positive integers (the file
            named).
    """
    path = Path(folder) / PROTOEMBED_CONFIG
    if not path.is_file():
        return None
    dims = json.loads(path.read_text(encoding="utf-8")).get(MATRYOSHKA_DIMS)
    if dims is None:
        return None
    if not isinstance(dims, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims
    ):
        raise ValueError(f"{path}: {MATRYOSHKA_DIMS!r} must be a list of positive integers, got {dims!r}")
    return dims


def write_sentence_bert_config(
    folder: str | os.PathLike[str], max_seq_length: int, do_lower_case: bool
) -> None:
    """Write ``sentence_bert_config.json`` (what sentence-transformers' ``Transformer`` reads) into ``folder``."""
    config = {"max_seq_length": max_seq_length, "do_lower_case": do_lower_case}
    write_json(Path(folder) / SENTENCE_BERT_CONFIG_FILE, config)


def read_sentence_bert_config(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """``max_seq_length`` / ``do_lower_case`` of ``folder``'s ``sentence_bert_config.json`` (the keys it
    has), or ``None`` when there is no such file."""
    path = Path(folder) / SENTENCE_BERT_CONFIG_FILE
    if not path.is_file():
        return None
    config = json.loads(path.read_text(encoding="utf-8"))
    return {k: config[k] for k in ("max_seq_length", "do_lower_case") if k in config}


def read_modules(folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The entries of ``folder``'s ``modules.json``, sorted by ``idx``.

    Raises:
        OSError: no readable file; ValueError: not JSON.
    """
    entries = json.loads((Path(folder) / MODULES_FILE).read_text(encoding="utf-8"))
    return sorted(entries, key=lambda e: e["idx"])
