"""The texts of a corpus file, streamed row by row: text lines, JSON lines, CSV or Parquet.

A :class:`CorpusSource` names a file, its format and (for a table) the field or column holding the text;
:meth:`CorpusSource.rows` reads it again each time it is called, one ``(position, text)`` pair at a time,
so memory never holds the whole file. The formats and their readers:

- ``text`` (``txt`` is the same): one sentence per line, by :func:`protoembed.data.lines.iter_lines` (the
  rules of every text input: UTF-8, lines split on ``\\n`` only, CRLF ends removed); every line is a row,
  empty ones too (they are refused when encoded, unless empty sentences are allowed);
- the table formats of the training-data registry (:func:`protoembed.data.training.formats.table_formats`:
  ``jsonl``, ``csv``, ``tsv``, ``parquet``), by their openers (blank lines and blank CSV rows are skipped,
  not rows); the text is the named field / column of each row, which must hold a string.

One table, :data:`protoembed.data.training.formats.FORMATS`, names them, their file-name patterns and their
openers for training and for ``encode`` alike. ``auto`` picks a table format by the file name (its
patterns), text lines for any other name.

:func:`scan` reads a source once to check and count its rows and to digest its texts (:func:`texts_digest`:
what an encoded corpus's manifest records of its input, so a resume on other texts is refused).
Errors are one line naming the file and the line (``file:12``) or row (``file: row 12``). Nothing here
imports torch.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from protoembed.core.errors import ProtoembedError
from protoembed.data.lines import iter_lines
from protoembed.data.training.formats import FORMATS as DATA_FORMATS
from protoembed.data.training.formats import TEXT, table_formats
from protoembed.data.training.tables import EMPTY_LINE, Table, position

#: The formats a corpus is read in: text lines, then the table formats (their names and patterns come from
#: the training-data registry).
FORMATS = (TEXT, *table_formats())
#: Other names of formats (``txt``: this module's name for text lines before the registry's).
ALIASES = {"txt": TEXT}
#: The format that picks one of :data:`FORMATS` by the file name.
AUTO = "auto"
#: What a corpus file may be, for help and messages.
CORPUS_FILES = "UTF-8 text (one sentence per line), " + ", ".join(
    pattern for name in table_formats() for pattern in DATA_FORMATS[name].patterns
)


def _kind(value: object) -> str:
    """What a non-string cell holds, for messages."""
    if value is None:
        return "null"
    return {bool: "a boolean", list: "a list", dict: "an object"}.get(type(value), f"{value!r:.40}")


#: What a row's id may be: a string or an integer (a JSON ``_id``, a CSV cell, a Parquet key column).
Id = str | int
#: How messages name :data:`Id`.
ID_KINDS = "a string or an integer"


@dataclass(frozen=True)
class CorpusSource:
    """One corpus file: ``path``, its ``format`` (one of :data:`FORMATS`), for a table the ``field``
    (JSONL) or column (CSV, Parquet) that holds the text (``None`` for text lines), and the ``id_field``
    (or column) that holds each row's id (``None``: a row's id is its row number, from 0)."""

    path: Path
    format: str
    field: str | None = None
    id_field: str | None = None

    @property
    def unit(self) -> str:
        """``row`` for Parquet (messages say ``file: row N``), else ``line`` (``file:N``)."""
        return "row" if self.format == "parquet" else "line"

    def where(self, number: int) -> str:
        """The position ``number`` (a line or row number) as messages write it."""
        return position(self.path, self.unit, number)

    def rows(self) -> Iterator[tuple[int, str]]:
        """``(line or row number, text)`` of every row, in file order, read as it goes.

        Raises:
            ProtoembedError: as :meth:`records`.
        """
        for number, _, text in self.records():
            yield number, text

    def records(self) -> Iterator[tuple[int, Id, str]]:
        """``(line or row number, id, text)`` of every row, in file order, read as it goes; the id is
        the row's ``id_field`` (a string or an integer), or without one the row's number from 0.

        Raises:
            ProtoembedError: a line that is not UTF-8 / not a JSON object, a row without the field or
                with a non-string value, an id that is not a string or an integer, a table without
                the column (its columns listed).
        """
        if self.format == TEXT:
            for row, (number, text) in enumerate(enumerate(iter_lines(self.path), start=1)):
                yield number, row, text
            return
        opener = DATA_FORMATS[self.format].table
        assert opener is not None
        table: Table = opener(self.path)
        for name in (self.field, self.id_field):
            if name is not None and table.fields is not None and name not in table.fields:
                raise ProtoembedError(
                    f"{self.path}: no column {name!r}; its columns are {', '.join(table.fields) or 'none'}"
                )
        count = 0
        for number, row in table.rows:
            if row == EMPTY_LINE:
                continue
            assert not isinstance(row, str)
            value = self._cell(number, row, self.field, "a string", (str,))
            key = (
                count
                if self.id_field is None
                else self._cell(number, row, self.id_field, ID_KINDS, (str, int))
            )
            count += 1
            yield number, key, value

    def _cell(self, number: int, row: dict, name: str | None, expected: str, kinds: tuple[type, ...]) -> Any:
        """The value of field ``name`` of ``row`` (at ``number``), checked to be one of ``kinds``
        (``expected``: what messages call them; a boolean is none of them).

        Raises:
            ProtoembedError: the row lacks the field, or its value is not ``expected``."""
        if name not in row:
            keys = ", ".join(map(str, row)) or "none"
            raise ProtoembedError(f"{self.where(number)}: no field {name!r} (the row has {keys})")
        value = row[name]
        if not isinstance(value, kinds) or isinstance(value, bool):
            raise ProtoembedError(
                f"{self.where(number)}: field {name!r}: expected {expected}, got {_kind(value)}"
            )
        return value


def format_of(path: str | os.PathLike[str]) -> str:
    """The format ``auto`` picks for ``path``: the first table format whose file-name patterns match it
    (case ignored), else text lines."""
    name = Path(path).name.lower()
    matches = (fmt for fmt in table_formats() if any(fnmatch(name, p) for p in DATA_FORMATS[fmt].patterns))
    return next(matches, TEXT)


def corpus_source(
    path: str | os.PathLike[str],
    format: str | None = None,
    field: str | None = None,
    column: str | None = None,
    id_field: str | None = None,
    id_column: str | None = None,
) -> CorpusSource:
    """Check a corpus file and how to read it; nothing is read yet.

    Args:
        path: the file.
        format: one of :data:`FORMATS` (or an alias, :data:`ALIASES`), or ``auto`` / ``None`` (by the file
            name: :func:`format_of`).
        field: the JSONL field holding the text; ``column``: the CSV / Parquet column (either name is
            taken for any table format; both must agree when both are given).
        id_field, id_column: the field or column holding each row's id (as ``field`` / ``column``;
            ``None``: a row's id is its row number).
    Raises:
        ProtoembedError: a missing file, a folder, an unknown format, a field or column (of the text or
            the id) for text lines, a table format without the text's.
    """
    path = Path(path).expanduser()
    if path.is_dir():
        raise ProtoembedError(
            f"{path}: a directory; expected one corpus file: {CORPUS_FILES} (encode each file of the "
            "directory, or join them into one)"
        )
    if not path.exists():
        raise ProtoembedError(f"{path}: file not found")
    if format in (None, AUTO):
        format = format_of(path)
    format = ALIASES.get(format, format)
    if format not in FORMATS:
        raise ProtoembedError(
            f"unknown corpus format {format!r}: expected {AUTO} or one of {', '.join(FORMATS)}"
        )
    name = _one_name(path, "text", field, column)
    id_name = _one_name(path, "id", id_field, id_column)
    if format == TEXT:
        for given, flags in (
            (name, "--field / --column name the text"),
            (id_name, "--id-field / --id-column name the id"),
        ):
            if given is not None:
                raise ProtoembedError(
                    f"{path}: {flags} of {', '.join(table_formats())} input; this file is read as text lines "
                    "(format text), one sentence per line (a line's id: its row number, from 0)"
                )
        return CorpusSource(path, format)
    if name is None:
        flag = "--field" if format == "jsonl" else "--column"
        raise ProtoembedError(
            f"{path}: {format} input needs the {'field' if format == 'jsonl' else 'column'} "
            f"that holds the text ({flag} NAME)"
        )
    return CorpusSource(path, format, name, id_name)


def _one_name(path: Path, what: str, field: str | None, column: str | None) -> str | None:
    """The field or column named for ``what`` (the text, the id): either given, or both equal.

    Raises:
        ProtoembedError: both given and different."""
    if field is not None and column is not None and field != column:
        raise ProtoembedError(
            f"{path}: give the {what}'s field or its column, not both ({field!r}, {column!r})"
        )
    return field if field is not None else column


@dataclass(frozen=True)
class Scan:
    """What one pass over a source found: ``rows`` (the row count), ``blank`` (the positions of empty or
    blank texts, at most :data:`BLANKS_KEPT`), ``blank_count`` (all of them), the file's ``size`` in
    bytes and ``texts_sha256``, the digest of its texts (:func:`texts_digest`)."""

    rows: int
    blank: tuple[int, ...]
    blank_count: int
    size: int
    texts_sha256: str


#: Positions of blank texts a :class:`Scan` keeps for its message.
BLANKS_KEPT = 10


def texts_digest(texts: Iterable[str]) -> str:
    """SHA-256 (hex) of ``texts`` in order, each fed as the length of its UTF-8 bytes (8 bytes,
    little-endian) then the bytes (lone surrogates, which a JSON escape can give, as themselves), so
    that no two lists of texts give the same stream.

    It digests what is encoded, not the file: a file whose texts are the same (another line end, a
    BOM, another column of a table edited, the same rows in another format) gives the same digest, and
    any edit of a text another one."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def scan(source: CorpusSource) -> Scan:
    """Read ``source`` once (checking every row, :meth:`CorpusSource.rows`), count it and digest its texts
    (:func:`texts_digest`) in that one pass.

    Raises:
        ProtoembedError: as :meth:`CorpusSource.rows`, or no row at all (``file: no rows to encode``).
    """
    rows, blank_count = 0, 0
    blank: list[int] = []

    def texts() -> Iterator[str]:
        nonlocal rows, blank_count
        for number, text in source.rows():
            rows += 1
            if not text.strip():
                blank_count += 1
                if len(blank) < BLANKS_KEPT:
                    blank.append(number)
            yield text

    digest = texts_digest(texts())
    if rows == 0:
        raise no_rows_error(source)
    return Scan(rows, tuple(blank), blank_count, source.path.stat().st_size, digest)


def no_rows_error(source: CorpusSource) -> ProtoembedError:
    """The one-line error for an input without rows (``file: no lines to encode``)."""
    return ProtoembedError(f"{source.path}: no {'lines' if source.format == TEXT else 'rows'} to encode")


def blank_error(source: CorpusSource, positions: list[int] | tuple[int, ...], count: int) -> ProtoembedError:
    """The one-line error for ``count`` empty or blank texts (the first of them at ``positions``): which
    lines or rows, and that ``allow_empty`` / ``--allow-empty`` encodes them as the template alone."""
    shown = ", ".join(map(str, positions[:BLANKS_KEPT])) + (
        " ..." if count > len(positions[:BLANKS_KEPT]) else ""
    )
    what = "line" if source.format == TEXT else source.unit
    return ProtoembedError(
        f"{source.path}: {count} empty or blank {'line' if source.format == TEXT else 'text'}(s) ({what} "
        f"{shown}); remove them or pass --allow-empty to encode them as the template alone"
    )
