"""The one line reader for every text input: benchmark files, sentence lists, corpora.

Rules: the file is decoded as a whole (UTF-8 by default; a leading BOM is dropped); lines are split
on ``\\n`` only (never on the other characters ``str.splitlines`` treats as breaks, such as ``\\x0b``
or U+2028, which occur inside real sentences); a ``\\r`` before the ``\\n`` is removed (CRLF files); a
final newline does not make an extra empty line, and a last line without one is kept. Errors name the
file and, for a decoding error, the 1-based line.
"""

from __future__ import annotations

import os
from pathlib import Path

from protoembed.errors import ProtoembedError


def _encoding_name(encoding: str) -> str:
    return "UTF-8" if encoding.lower().replace("_", "-") in ("utf-8", "utf8", "utf-8-sig") else encoding


def read_lines(path: str | os.PathLike[str], encoding: str = "utf-8", missing_hint: str = "") -> list[str]:
    """Read a text file as a list of lines.

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
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ProtoembedError(
            f"{path}: file not found{'; ' + missing_hint if missing_hint else ''}"
        ) from None
    except IsADirectoryError:
        raise ProtoembedError(f"{path}: expected a file, found a directory") from None
    except OSError as err:
        raise ProtoembedError(f"{path}: cannot read ({err.strerror or type(err).__name__})") from None
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as err:
        lineno = data.count(b"\n", 0, err.start) + 1
        raise ProtoembedError(
            f"{path}:{lineno}: expected {_encoding_name(encoding)} text ({err.reason})"
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]
