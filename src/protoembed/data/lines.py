"""The one line reader for every text input: benchmark files, sentence lists, corpora.

Rules: the file is decoded as UTF-8 by default (a leading BOM is dropped); lines are split
on ``\\n`` only (never on the other characters ``str.splitlines`` treats as breaks, such as ``\\x0b``
or U+2028, which occur inside real sentences); a ``\\r`` before the ``\\n`` is removed (CRLF files); a
final newline does not make an extra empty line, and a last line without one is kept. Errors name the
file and, for a decoding error, the 1-based line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from protoembed.core.errors import ProtoembedError


def _encoding_name(encoding: str) -> str:
    return "UTF-8" if encoding.lower().replace("_", "-") in ("utf-8", "utf8", "utf-8-sig") else encoding


def not_text(
    path: str | os.PathLike[str], line: int, offset: int, err: UnicodeDecodeError, encoding: str = "utf-8"
) -> ProtoembedError:
    """The one-line error for bytes of ``path`` that are not ``encoding`` text: the file, the line and
    the byte ``offset`` in the file where decoding failed (``err``: the decoder's error)."""
    return ProtoembedError(
        f"{path}:{line}: expected {_encoding_name(encoding)} text ({err.reason} at byte {offset})"
    )


def decode_text(path: str | os.PathLike[str], data: bytes, encoding: str = "utf-8") -> str:
    """The whole of ``data`` (the bytes of the file ``path``) decoded; bytes that are not ``encoding``
    text are a one-line error naming the file, line and byte offset (:func:`not_text`)."""
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        raise not_text(path, data.count(b"\n", 0, err.start) + 1, err.start, err, encoding) from None


def iter_lines(
    path: str | os.PathLike[str], encoding: str = "utf-8", missing_hint: str = ""
) -> Iterator[str]:
    """The lines of a text file one at a time (the rules of the module docstring), streamed: the file is
    never held whole, as bytes or as text, so a 1M-line corpus costs one copy of its sentences.

    Lines are split on ``b"\\n"`` before decoding, which gives the same text as decoding the whole file:
    in UTF-8 (and Latin-1) a ``\\n`` byte is never part of another character.

    Raises:
        ProtoembedError: as :func:`read_lines` (raised when the faulty line is reached).
    """
    path = Path(path)
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise ProtoembedError(
            f"{path}: file not found{'; ' + missing_hint if missing_hint else ''}"
        ) from None
    except IsADirectoryError:
        raise ProtoembedError(f"{path}: expected a file, found a directory") from None
    except OSError as err:
        raise ProtoembedError(f"{path}: cannot read ({err.strerror or type(err).__name__})") from None
    with handle:
        lineno = 0
        offset = 0  # of the line's first byte in the file
        try:
            for raw in handle:
                lineno += 1
                try:
                    line = raw.decode(encoding)
                except UnicodeDecodeError as err:
                    raise not_text(path, lineno, offset + err.start, err, encoding) from None
                offset += len(raw)
                if lineno == 1 and line.startswith("\ufeff"):
                    line = line[1:]
                if lineno == 1 and not line:
                    return  # the file was a lone BOM
                if line.endswith("\n"):
                    line = line[:-1]
                yield line[:-1] if line.endswith("\r") else line
        except IsADirectoryError:
            raise ProtoembedError(f"{path}: expected a file, found a directory") from None
        except OSError as err:
            raise ProtoembedError(f"{path}: cannot read ({err.strerror or type(err).__name__})") from None


def read_lines(path: str | os.PathLike[str], encoding: str = "utf-8", missing_hint: str = "") -> list[str]:
    """Read a text file as a list of lines (:func:`iter_lines`, collected).

    Args:
        path: the file.
        encoding: its encoding (``utf-8``; ``latin-1`` for the one SentEval file written in it).
        missing_hint: appended to the missing-file error (e.g. how to fetch the data).
    Returns:
        the lines without their ``\\n`` / ``\\r\\n`` ends.
    Raises:
        ProtoembedError: the file is missing, is a folder, cannot be read, or is not in ``encoding``
            (the message names the file and the line).
    """
    return list(iter_lines(path, encoding, missing_hint))


def _json_kind(value: Any) -> str:
    kinds = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")


def json_object(path: str | os.PathLike[str], lineno: int, line: str) -> dict[str, Any]:
    """One line of a JSON Lines file, which must hold a JSON object.

    Raises:
        ProtoembedError: ``file:line: expected a JSON object (<the parser's message>)`` for a line that is
            not JSON; ``file:line: expected a JSON object, got an array '[...]'`` for other JSON.
    """
    try:
        value = json.loads(line)
    except json.JSONDecodeError as err:
        raise ProtoembedError(f"{path}:{lineno}: expected a JSON object ({err.msg})") from None
    if not isinstance(value, dict):
        raise ProtoembedError(
            f"{path}:{lineno}: expected a JSON object, got {_json_kind(value)} {line.strip()[:40]!r}"
        )
    return value
