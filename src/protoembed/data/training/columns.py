"""Column mappings: which column of a user's table feeds which of protoembed's example columns.

A mapping is ``{protoembed column: the file's column}`` (``{"anchor": "question", "positive": "answer"}``),
given in a config (``data.columns``, or ``columns`` of one ``data.corpus`` entry) or on a command line as
``anchor=question`` items (:func:`parse_columns`). Both are checked by :func:`mapping_problem` (one rule).

Reading a table (:func:`resolve_columns`): the mapped columns are taken, and so is every column of the
file already named like protoembed's (:data:`~protoembed.data.training.examples.COLUMN_NAMES`) that the
mapping neither reads nor fills; the file's other columns are ignored (logged). A cell becomes an example
value by :func:`column_value`: sentence columns must hold non-empty strings (stripped), ``score`` a
finite number, ``label`` an NLI label name or its index into
:data:`~protoembed.data.training.examples.NLI_LABELS` (``-``: no gold label, the row is skipped).
Every error is one line naming the file, the line or row, and the column as the file calls it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

from protoembed.core.errors import ProtoembedError
from protoembed.data.training.examples import COLUMN_NAMES, NLI_LABELS, SENTENCE_COLUMNS

#: A ``label`` cell meaning "no gold label" (SNLI's ``-``): the row is skipped and counted.
NO_LABEL = "-"


def mapping_problem(target: Any, source: Any) -> str | None:
    """What is wrong with one mapping entry ``target: source`` (``None``: nothing)."""
    if target not in COLUMN_NAMES:
        return f"unknown column {target!r}; expected one of {', '.join(COLUMN_NAMES)}"
    if not isinstance(source, str) or not source.strip():
        return f"column {target!r} must be mapped to a column name of the file, got {source!r}"
    return None


def check_columns(mapping: Mapping[str, Any], where: str = "column mapping") -> dict[str, str]:
    """``mapping`` checked (:func:`mapping_problem`) as a plain dict.

    Raises:
        ProtoembedError: ``{where}: unknown column 'anchr'; expected one of text, ...``.
    """
    for target, source in mapping.items():
        problem = mapping_problem(target, source)
        if problem:
            raise ProtoembedError(f"{where}: {problem}")
    return {target: source.strip() for target, source in mapping.items()}


def parse_columns(items: Sequence[str]) -> dict[str, str]:
    """``["anchor=question", "positive=answer"]`` -> ``{"anchor": "question", "positive": "answer"}``.

    Raises:
        ProtoembedError: an item that is not ``COLUMN=FILE_COLUMN``, a column given twice, or an unknown
            protoembed column (the message names the item).
    """
    mapping: dict[str, str] = {}
    for item in items:
        target, sep, source = item.partition("=")
        target, source = target.strip(), source.strip()
        if not sep or not target or not source:
            raise ProtoembedError(
                f"column mapping {item!r}: expected COLUMN=FILE_COLUMN, e.g. anchor=question"
            )
        if target in mapping:
            raise ProtoembedError(f"column mapping {item!r}: column {target!r} is mapped twice")
        problem = mapping_problem(target, source)
        if problem:
            raise ProtoembedError(f"column mapping {item!r}: {problem}")
        mapping[target] = source
    return mapping


def resolve_columns(
    where: str, fields: Sequence[str], mapping: Mapping[str, str] | None, require_mapped: bool = True
) -> tuple[dict[str, str], list[str]]:
    """``(columns, ignored)``: the example columns a table gives (``{protoembed column: file column}``, in
    :data:`COLUMN_NAMES` order) and the file's columns left out (the caller logs them).

    Args:
        where: the file, for messages.
        fields: the file's column names (a header, a schema, the first JSON object's keys).
        mapping: the column mapping (``None``: the columns named like protoembed's only).
        require_mapped: every mapped column must be in ``fields`` (tables with a header or a schema;
            JSON lines check each row instead).
    Raises:
        ProtoembedError: a mapped column the file lacks, or no usable column (names the file's columns
            and the names expected).
    """
    mapping = dict(mapping or {})
    if require_mapped:
        for target, source in mapping.items():
            if source not in fields:
                raise ProtoembedError(
                    f"{where}: no column {source!r} (mapped to {target}); the file's columns are "
                    f"{', '.join(map(str, fields)) or 'none'}"
                )
    taken = dict(mapping)
    for name in fields:
        if name in COLUMN_NAMES and name not in taken and name not in mapping.values():
            taken[name] = name
    if not taken:
        raise ProtoembedError(
            f"{where}: no usable column (the file has {', '.join(map(str, fields)) or 'none'}); expected "
            f"columns named {', '.join(COLUMN_NAMES)}, or a column mapping such as anchor: question"
        )
    columns = {target: taken[target] for target in COLUMN_NAMES if target in taken}
    ignored = [str(name) for name in fields if name not in columns.values()]
    return columns, ignored


def column_value(where: str, target: str, source: str, row: Mapping[str, Any]) -> Any:
    """The example value of column ``target`` from cell ``row[source]`` (see the module docstring);
    ``None`` for a ``label`` without gold label (the row is skipped).

    Raises:
        ProtoembedError: ``{where}: column 'answer' is missing`` / ``is empty`` / ``: expected ...``.
    """
    value = row.get(source)
    if value is None:
        raise ProtoembedError(f"{where}: column {source!r} is missing")
    if isinstance(value, str) and not value.strip():
        raise ProtoembedError(f"{where}: column {source!r} is empty")
    if target in SENTENCE_COLUMNS:
        if not isinstance(value, str):
            raise ProtoembedError(f"{where}: column {source!r}: expected a string, got {value!r:.40}")
        return value.strip()
    if target == "score":
        return _number(where, source, value)
    return _label(where, source, value)


def _number(where: str, source: str, value: Any) -> float:
    number = math.nan
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        with contextlib.suppress(ValueError):
            number = float(value)
    if not math.isfinite(number):
        raise ProtoembedError(f"{where}: column {source!r}: expected a finite number, got {value!r:.40}")
    return number


def _label(where: str, source: str, value: Any) -> int | None:
    text = value.strip().lower() if isinstance(value, str) else value
    if text == NO_LABEL:
        return None
    if text in NLI_LABELS:
        return NLI_LABELS.index(text)
    if isinstance(text, str) and text.isdigit():
        text = int(text)
    if isinstance(text, int) and not isinstance(text, bool) and 0 <= text < len(NLI_LABELS):
        return text
    raise ProtoembedError(
        f"{where}: column {source!r}: expected an NLI label ({', '.join(NLI_LABELS)}) or its index "
        f"0-{len(NLI_LABELS) - 1}, got {value!r:.40}"
    )
