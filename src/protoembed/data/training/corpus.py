"""The `text` training format: one sentence per line (SimCSE's unsupervised corpus).

Rules:
- leading/trailing white space is stripped; empty (or all-blank) lines are skipped and counted;
- a file that does not end with a newline may have been cut mid-sentence (the staged
  ``wiki1m_for_simcse.head-1280000B.txt`` is the first 1,280,000 bytes of SimCSE's corpus, so its last
  line is a fragment): with ``drop_unterminated_last_line`` (the default) that last line is dropped and
  the drop is reported; set it to false to keep it;
- ``max_sentences`` keeps the first N usable sentences (file order, before shuffling);
- a corpus without any usable sentence is an error.

:func:`read_corpus` reads the sentences into memory; :func:`open_text` yields them as they come, as a
one-column table (``data.streaming``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protoembed.core.errors import ProtoembedError
from protoembed.data.lines import iter_lines
from protoembed.data.paths import choose_data_dir, local_path
from protoembed.data.training.tables import EMPTY_LINE, Row, Table


@dataclass
class Corpus:
    """Sentences read from a corpus file and what was skipped."""

    path: Path
    sentences: list[str]
    empty_lines: int
    dropped_last_line: bool
    truncated_to: int | None

    def summary(self) -> dict[str, object]:
        """What ``training_log.jsonl`` records about the corpus."""
        return {
            "path": str(self.path),
            "sentences": len(self.sentences),
            "empty_lines_skipped": self.empty_lines,
            "dropped_unterminated_last_line": self.dropped_last_line,
            "max_sentences": self.truncated_to,
        }


def _directory(path: Path) -> ProtoembedError:
    """The one-line error for a corpus path that names a directory."""
    return ProtoembedError(
        f"corpus file {path.absolute()}: a directory; expected one UTF-8 text file, one sentence per line"
    )


def resolve_corpus_path(corpus: str, data_dir: str | os.PathLike[str] | None) -> Path:
    """Absolute path of the corpus: as given if absolute or existing, else under the data directory.

    A relative path is tried against the working directory first, then against the data directory
    (:func:`protoembed.data.paths.choose_data_dir` of ``data_dir``, the config's ``data.data_dir``).
    """
    local = local_path(corpus)
    if local is not None:
        if local.is_dir():
            raise _directory(local)
        if not local.is_file():
            raise ProtoembedError(f"corpus file {local} not found")
        return local
    candidate = choose_data_dir(data_dir).path / Path(corpus).expanduser()
    if candidate.is_file():
        return candidate
    if candidate.is_dir():
        raise _directory(candidate)
    raise ProtoembedError(
        f"corpus file {corpus!r} not found (tried {Path(corpus).expanduser().absolute()}, {candidate})"
    )


def _ends_with_newline(path: Path) -> bool:
    """Whether the file's last byte is ``\\n`` (an empty file counts as terminated)."""
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() == 0:
            return True
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def read_corpus(
    path: str | os.PathLike[str], max_sentences: int | None = None, drop_unterminated_last_line: bool = True
) -> Corpus:
    """Read a one-sentence-per-line UTF-8 file (see the module docstring for the rules).

    Lines are streamed by :func:`protoembed.data.lines.iter_lines` (BOM and CRLF handled there), so the
    file is held once, as the list of its sentences.
    """
    path = Path(path)
    sentences: list[str] = []
    empty = lines = 0
    last = ""
    for line in iter_lines(path):  # streamed: the file is never held whole besides its sentences
        last, lines = line, lines + 1
        line = line.strip()
        if not line:
            empty += 1
            continue
        sentences.append(line)
    dropped = False
    if lines and drop_unterminated_last_line and not _ends_with_newline(path):
        if last.strip():
            sentences.pop()
            dropped = True
        else:
            empty -= 1  # a blank unterminated last line is neither a sentence nor counted
    if not sentences:
        detail = f"{empty} empty line(s)" + (", an unterminated last line dropped" if dropped else "")
        raise ProtoembedError(f"corpus {path} has no usable sentence ({detail})")
    if max_sentences is not None and len(sentences) > max_sentences:
        sentences = sentences[:max_sentences]
    else:
        max_sentences = None
    return Corpus(path, sentences, empty, dropped, max_sentences)


#: Why a cut last line (a file not ending in a newline) is skipped.
UNTERMINATED_LAST_LINE = "unterminated_last_line"


def open_text(path: str | os.PathLike[str], drop_unterminated_last_line: bool = True, **_: Any) -> Table:
    """The ``text`` format as a one-column table (``text``), read line by line: the sentences
    :func:`read_corpus` keeps, by the same rules (a blank line skipped as ``empty_line``, an unterminated
    last line dropped as ``unterminated_last_line``), for the streamed path (``data.streaming``).
    ``max_sentences`` is the stream's business. Unknown keyword options are ignored."""
    path = Path(path)
    drop = drop_unterminated_last_line and not _ends_with_newline(path)

    def rows() -> Iterator[tuple[int, Row]]:
        held: tuple[int, Row] | None = None  # one line behind: the last one may be dropped
        for lineno, line in enumerate(iter_lines(path), start=1):
            if held is not None:
                yield held
            held = (lineno, {"text": line} if line.strip() else EMPTY_LINE)
        if held is None:
            return
        if not drop:
            yield held
        elif not isinstance(held[1], str):
            yield held[0], UNTERMINATED_LAST_LINE
        # a blank unterminated last line is neither a sentence nor counted (as read_corpus)

    return Table(("text",), rows())
