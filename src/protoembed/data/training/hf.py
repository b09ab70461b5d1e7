"""Hugging Face ``datasets`` as training data: the ``hf_dataset`` table format.

What ``hf_dataset`` reads (``pip install 'protoembed[datasets]'``; the package is imported only then):

- a folder written by ``Dataset.save_to_disk`` (it holds ``dataset_info.json`` and ``state.json``) or by
  ``DatasetDict.save_to_disk`` (``dataset_dict.json``; the ``split`` option picks one, default ``train``),
  read with ``datasets.load_from_disk`` (memory-mapped Arrow: rows are read as they are iterated);
  such a folder is recognised without ``format:``;
- a data file given with ``format: hf_dataset``, read by ``datasets.load_dataset`` with the builder of its
  extension (:data:`BUILDERS`: ``json`` for ``.json`` / ``.jsonl``, ``csv`` for ``.csv`` and ``.tsv``,
  ``parquet``), split ``train`` (what ``load_dataset`` calls a lone data file);
- a hub dataset ``hub:owner/name`` (network needed, or the dataset in the local cache), split ``split``
  (default ``train``).

The rows then go through the table pipeline (:class:`~protoembed.data.training.tables.ExampleStream`):
the dataset's columns named like protoembed's or mapped. A ``ClassLabel`` column is read as its label
names (``-1``, no label, as ``-``), so an NLI ``label`` follows the dataset's own label order, not its
integers. Positions in messages are rows (``name: row N``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from protoembed.core.errors import ProtoembedError
from protoembed.data.paths import choose_data_dir
from protoembed.data.training.columns import NO_LABEL
from protoembed.data.training.tables import Row, Table, require

#: How a hub dataset is named in ``data.corpus``.
HUB_PREFIX = "hub:"
#: Files of a ``save_to_disk`` folder: a ``Dataset``'s, a ``DatasetDict``'s.
DATASET_MARKERS = ("dataset_info.json", "state.json")
DATASET_DICT_MARKER = "dataset_dict.json"
#: Data-file extension -> ``(load_dataset builder, its options)``.
BUILDERS: dict[str, tuple[str, dict[str, Any]]] = {
    ".json": ("json", {}),
    ".jsonl": ("json", {}),
    ".csv": ("csv", {}),
    ".tsv": ("csv", {"delimiter": "\t"}),
    ".parquet": ("parquet", {}),
}
DEFAULT_SPLIT = "train"


def is_saved_dataset(path: Path) -> bool:
    """Whether ``path`` is a folder written by ``save_to_disk``."""
    return path.is_dir() and (
        all((path / name).is_file() for name in DATASET_MARKERS) or (path / DATASET_DICT_MARKER).is_file()
    )


def locate_dataset(path: str | os.PathLike[str], data_dir: str | os.PathLike[str] | None) -> str | None:
    """``path`` as ``hf_dataset`` reads it when it is a hub id (``hub:owner/name``, returned as is) or a
    ``save_to_disk`` folder (relative: working directory, then the data directory of ``data_dir``;
    returned absolute); ``None`` otherwise."""
    text = str(path)
    if text.startswith(HUB_PREFIX):
        return text
    candidates = [Path(text).expanduser()]
    if not candidates[0].is_absolute():
        candidates.append(choose_data_dir(data_dir).path / text)
    for candidate in candidates:
        if is_saved_dataset(candidate):
            return str(candidate.absolute())
    return None


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def _offline_hint() -> str:
    offline = any(
        os.environ.get(name, "").upper() in ("1", "ON", "YES", "TRUE")
        for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )
    return (
        "; HF_HUB_OFFLINE is set: unset it, or run once with the network to fill the cache" if offline else ""
    )


def load(source: str | os.PathLike[str], split: str | None = None) -> Any:
    """The ``datasets.Dataset`` that ``source`` names (see the module docstring), loaded without the
    library's progress bars (library code does not print).

    Raises:
        ProtoembedError: the package is missing, an unknown split, an extension without a builder, or a
            dataset that cannot be loaded (one line: the source and the library's reason).
    """
    datasets = require("datasets", "reading Hugging Face datasets")
    quiet = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        return _load(datasets, source, split)
    finally:
        if not quiet:
            datasets.enable_progress_bars()


def _load(datasets: Any, source: str | os.PathLike[str], split: str | None) -> Any:
    text = str(source)
    split = split or DEFAULT_SPLIT
    if text.startswith(HUB_PREFIX):
        name = text[len(HUB_PREFIX) :]
        try:
            return datasets.load_dataset(name, split=split)
        except Exception as err:  # the hub client's errors have no common base
            raise ProtoembedError(
                f"{text}: cannot load the Hugging Face dataset {name!r} ({_first_line(err)}){_offline_hint()}"
            ) from None
    path = Path(text)
    if path.is_dir():
        try:
            loaded = datasets.load_from_disk(str(path))
        except Exception as err:  # a damaged folder: FileNotFoundError, ArrowInvalid, JSON errors
            raise ProtoembedError(f"{path}: cannot load the saved dataset ({_first_line(err)})") from None
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise ProtoembedError(
                    f"{path}: no split {split!r}; the dataset has {', '.join(loaded) or 'none'}"
                )
            return loaded[split]
        return loaded
    suffix = path.suffix.lower() if path.suffix.lower() != ".gz" else Path(path.stem).suffix.lower()
    if suffix not in BUILDERS:
        raise ProtoembedError(
            f"{path}: hf_dataset reads a save_to_disk folder, {HUB_PREFIX}owner/name or a data file ending in "
            f"{', '.join(BUILDERS)}"
        )
    builder, options = BUILDERS[suffix]
    try:
        return datasets.load_dataset(builder, data_files=str(path), split=DEFAULT_SPLIT, **options)
    except Exception as err:  # parse errors surface as the builders' own exceptions
        raise ProtoembedError(
            f"{path}: datasets.load_dataset({builder!r}) failed ({_first_line(err)})"
        ) from None


def open_hf_dataset(source: str | os.PathLike[str], split: str | None = None, **_: Any) -> Table:
    """The rows of a Hugging Face dataset (:func:`load`) as a :class:`~protoembed.data.training.tables.Table`,
    ``ClassLabel`` columns as their label names."""
    dataset = load(source, split)
    datasets = require("datasets", "reading Hugging Face datasets")
    names = {
        column: feature.names
        for column, feature in dataset.features.items()
        if isinstance(feature, datasets.ClassLabel)
    }

    def rows() -> Iterator[tuple[int, Row]]:
        for number, row in enumerate(dataset, start=1):
            for column, labels in names.items():
                value = row.get(column)
                if isinstance(value, int):
                    row[column] = labels[value] if 0 <= value < len(labels) else NO_LABEL
            yield number, row

    return Table(tuple(dataset.column_names), rows(), unit="row")


__all__ = ["HUB_PREFIX", "load", "locate_dataset", "open_hf_dataset"]
