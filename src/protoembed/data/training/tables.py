"""Tables of named columns as training examples: JSON lines, CSV / TSV with a header row, Parquet.

A table format is an *opener* (``path, **options -> Table``: the file's column names and its rows, read
as they come) registered in :data:`~protoembed.data.training.formats.FORMATS` through :func:`reader` and
:func:`streamer`. One pipeline (:class:`ExampleStream`) turns the rows of any table into examples: the
columns resolved by :func:`~protoembed.data.training.columns.resolve_columns` (a column mapping, or the
columns already named like protoembed's), every cell checked by
:func:`~protoembed.data.training.columns.column_value`. The rows are never held as a list: an
:class:`ExampleStream` reads its file again each time it is iterated (the streamed training path,
:mod:`protoembed.training.streaming`), and :func:`collect` keeps the examples' values only (the in-memory
path, :func:`protoembed.data.training.formats.read_examples`).

Layouts:

- ``jsonl``: one JSON object per line (``*.jsonl``, ``*.jsonl.gz``); blank lines are skipped and
  counted; the first object's keys are the file's columns, every row is checked for the mapped ones;
- ``csv`` / ``tsv``: a header row, then one row per record (Python's ``csv`` dialect: ``,`` with ``"``
  quoting for CSV; tab-separated without quoting for TSV, as NLI files hold unbalanced quotes); blank
  rows are skipped and counted; a row with another field count than the header is an error;
- ``parquet``: read with pyarrow (``pip install 'protoembed[datasets]'``), record batch by record batch.

Positions in messages: ``file:line`` for text files (the line a CSV record starts on), ``file: row N``
(1-based) for Parquet and Hugging Face datasets.
"""

from __future__ import annotations

import csv
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protoembed.core.errors import ProtoembedError
from protoembed.data.lines import json_object
from protoembed.data.training.columns import column_value, resolve_columns
from protoembed.data.training.examples import Examples
from protoembed.data.training.nli import iter_lines

logger = logging.getLogger(__name__)

#: What installs the optional readers (Parquet, Hugging Face datasets).
DATASETS_EXTRA = "pip install 'protoembed[datasets]'"

#: Rows read from Parquet at a time (one record batch).
PARQUET_BATCH_ROWS = 4096


#: A row of a :class:`Table`: its cells by column name, or why it is skipped (``empty_line``).
Row = Mapping[str, Any] | str
#: The reason a blank line is skipped.
EMPTY_LINE = "empty_line"


@dataclass
class Table:
    """One file's rows as they are read.

    ``fields``: the file's column names (a header, a schema); ``None`` when each row names its own
    (JSON lines: the first row's keys stand for the file's). ``rows``: ``(position, row)`` pairs, ``row``
    a mapping of column name to cell, or a string: why the line is skipped (``empty_line``), counted
    under that name in the file's ``skipped`` record. ``unit``: ``line``
    (``file:N`` in messages) or ``row`` (``file: row N``).
    """

    fields: tuple[str, ...] | None
    rows: Iterator[tuple[int, Row]]
    unit: str = "line"


#: ``opener(path, **options) -> Table``; options a format does not know are ignored.
Opener = Callable[..., Table]


def position(path: Path | str, unit: str, number: int) -> str:
    """``file:12`` (a line) or ``file: row 12`` (a row), for messages."""
    return f"{path}:{number}" if unit == "line" else f"{path}: row {number}"


@dataclass
class ExampleStream:
    """The examples of one table, read each time the stream is iterated (see the module docstring).

    Iterating yields one ``{column: value}`` dict per usable row; afterwards :attr:`source` holds what
    the training log records about the file (``path``, ``format``, ``examples``, ``skipped``, the
    ``columns`` mapping used and the ``ignored_columns``), and :attr:`names` the example columns.
    """

    path: Path
    format: str
    opener: Opener
    columns: Mapping[str, str] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    names: tuple[str, ...] = field(default=(), init=False)
    source: dict[str, Any] = field(default_factory=dict, init=False)
    _logged: bool = field(default=False, init=False, repr=False)

    def _resolve(self, fields: tuple[str, ...], require_mapped: bool) -> tuple[dict[str, str], list[str]]:
        columns, ignored = resolve_columns(str(self.path), fields, self.columns, require_mapped)
        self.names = tuple(columns)
        if ignored and not self._logged:  # once, not once per epoch
            logger.info(
                "%s: column(s) %s ignored (not example columns, not mapped)", self.path, ", ".join(ignored)
            )
        self._logged = True
        return columns, ignored

    def __iter__(self) -> Iterator[dict[str, Any]]:
        table = self.opener(self.path, **self.options)
        resolved: dict[str, str] | None = None
        ignored: list[str] = []
        if table.fields is not None:
            resolved, ignored = self._resolve(table.fields, require_mapped=True)
        skipped: Counter[str] = Counter()
        count = 0
        for number, row in table.rows:
            if isinstance(row, str):
                skipped[row] += 1
                continue
            if resolved is None:
                resolved, ignored = self._resolve(tuple(map(str, row)), require_mapped=False)
            where = position(self.path, table.unit, number)
            example = {
                target: column_value(where, target, source, row) for target, source in resolved.items()
            }
            if example.get("label", 0) is None:
                skipped["no_gold_label"] += 1
                continue
            count += 1
            yield example
        self.source = {
            "path": str(self.path),
            "format": self.format,
            "examples": count,
            "skipped": dict(skipped),
            "columns": dict(resolved or {}),
            "ignored_columns": ignored,
        }


def collect(stream: ExampleStream) -> Examples:
    """The examples of ``stream`` in memory (one list per column, no list of rows)."""
    values: dict[str, list[Any]] | None = None
    for example in stream:
        if values is None:
            values = {name: [] for name in example}
        for name, value in example.items():
            values[name].append(value)
    return Examples(values or {}, [stream.source])


def streamer(name: str, opener: Opener) -> Callable[..., ExampleStream]:
    """The ``stream(path, columns=None, **options) -> ExampleStream`` function of table format ``name``."""

    def stream(
        path: str | os.PathLike[str], columns: Mapping[str, str] | None = None, **options: Any
    ) -> ExampleStream:
        return ExampleStream(Path(path), name, opener, columns, options)

    stream.__doc__ = f"The examples of a {name} table, streamed (:class:`ExampleStream`)."
    return stream


def reader(name: str, opener: Opener) -> Callable[..., Examples]:
    """The ``read(path, columns=None, **options) -> Examples`` reader of table format ``name``."""
    stream = streamer(name, opener)

    def read(
        path: str | os.PathLike[str], columns: Mapping[str, str] | None = None, **options: Any
    ) -> Examples:
        return collect(stream(path, columns, **options))

    read.__doc__ = f"The examples of a {name} table, in memory (:func:`collect`)."
    return read


# --------------------------------------------------------------------------- openers


def open_jsonl(path: Path, **_: Any) -> Table:
    """JSON lines: one object per line (see the module docstring)."""

    def rows() -> Iterator[tuple[int, Row]]:
        for lineno, line in iter_lines(path):
            if not line.strip():
                yield lineno, EMPTY_LINE
                continue
            yield lineno, json_object(path, lineno, line)

    return Table(None, rows())


def _delimited(path: Path, delimiter: str, what: str) -> Table:
    lines = iter_lines(path)
    quoting = csv.QUOTE_MINIMAL if delimiter == "," else csv.QUOTE_NONE
    state = {"line": 1}

    def text() -> Iterator[str]:
        for lineno, line in lines:
            state["line"] = lineno
            yield line + "\n"

    records = csv.reader(text(), delimiter=delimiter, quoting=quoting, strict=True)

    def record() -> tuple[int, list[str]] | None:
        start = state["line"] + (1 if records.line_num else 0)
        try:
            row = next(records)
        except StopIteration:
            return None
        except csv.Error as err:
            raise ProtoembedError(f"{path}:{state['line']}: expected a {what} row ({err})") from None
        return start, row

    first = record()
    if first is None or not any(cell.strip() for cell in first[1]):
        raise ProtoembedError(f"{path}:1: expected a {what} header row naming the columns, got an empty line")
    header = tuple(cell.strip() for cell in first[1])

    def rows() -> Iterator[tuple[int, Row]]:
        while (item := record()) is not None:
            lineno, row = item
            if not any(cell.strip() for cell in row):
                yield lineno, EMPTY_LINE
            elif len(row) != len(header):
                raise ProtoembedError(
                    f"{path}:{lineno}: expected {len(header)} {what} fields (the header's "
                    f"{', '.join(header)}), got {len(row)}"
                )
            else:
                yield lineno, dict(zip(header, row))

    return Table(header, rows())


def open_csv(path: Path, **_: Any) -> Table:
    """CSV with a header row (see the module docstring)."""
    return _delimited(path, ",", "CSV")


def open_tsv(path: Path, **_: Any) -> Table:
    """Tab-separated values with a header row, no quoting (see the module docstring)."""
    return _delimited(path, "\t", "tab-separated")


def require(module: str, what: str) -> Any:
    """``import module``, or the one-line error naming :data:`DATASETS_EXTRA`."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ProtoembedError(f"{what} needs the {module.split('.')[0]} package: {DATASETS_EXTRA}") from None


def open_parquet(path: Path, **_: Any) -> Table:
    """A Parquet file, record batch by record batch (see the module docstring)."""
    pq = require("pyarrow.parquet", "reading Parquet files")
    import pyarrow as pa

    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as err:
        detail = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ProtoembedError(f"{path}: not a Parquet file ({detail})") from None
    fields = tuple(parquet.schema_arrow.names)

    def rows() -> Iterator[tuple[int, Row]]:
        number = 0
        try:
            for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS):
                for row in batch.to_pylist():
                    number += 1
                    yield number, row
        except (pa.ArrowException, OSError) as err:
            detail = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise ProtoembedError(f"{path}: row {number + 1}: unreadable Parquet data ({detail})") from None

    return Table(fields, rows(), unit="row")
