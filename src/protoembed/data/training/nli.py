"""Natural language inference data as released, read into ``sentence1, sentence2, label`` examples.

SimCSE's supervised model and SBERT train on SNLI + MultiNLI. The formats read here:

- ``snli_jsonl``: the SNLI / MultiNLI ``*.jsonl`` releases, one JSON object per line with
  ``sentence1``, ``sentence2`` and ``gold_label``;
- ``nli_txt``: the ``snli_1.0_*.txt`` / ``multinli_1.0_*.txt`` releases, tab-separated with a header
  naming ``gold_label``, ``sentence1``, ``sentence2`` (among parses and ids); split on tabs only, as
  the sentences contain unbalanced quotes;
- ``senteval_nli``: SentEval's copy, ``s1.<split>``, ``s2.<split>`` and ``labels.<split>`` aligned line
  by line (the reader is given ``s1.<split>`` and reads the other two beside it);
- ``simcse_nli``: SimCSE's ``nli_for_simcse.csv`` (CSV with real quoting, header ``sent0, sent1,
  hard_neg``), read as ``anchor, positive, negative`` triplets; a two-column ``sent0, sent1`` file gives
  ``anchor, positive``;
- ``allnli``: sentence-transformers' ``AllNLI.tsv.gz`` (or ``.tsv``): header ``split, dataset, filename,
  sentence1, sentence2, label``; the ``split`` option (default ``train``) selects the rows.

A pair whose gold label is ``-`` (the annotators did not agree) is skipped and counted under
``skipped["no_gold_label"]`` of the file's source record. A file ending in ``.gz`` is decompressed
while it is read. Any other label, an empty sentence, a missing column or header field, or
misaligned SentEval files is a :class:`ProtoembedError` naming ``file:line`` (or the files) and what
was expected.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from protoembed.core.errors import ProtoembedError
from protoembed.data.lines import iter_lines as stream_lines
from protoembed.data.lines import read_lines
from protoembed.data.training.examples import NLI_LABELS, Examples

#: The gold label of a pair the annotators did not agree on (SNLI, MultiNLI); such pairs are skipped.
NO_GOLD_LABEL = "-"


def parse_nli_label(path: str | os.PathLike[str], lineno: int, text: str) -> int | None:
    """The index in :data:`NLI_LABELS` of ``text`` (case ignored), or ``None`` for ``-`` (no gold label).

    Raises:
        ProtoembedError: ``file:line: expected an NLI label (contradiction, entailment, neutral; '-' = no
            gold label), got 'x'``.
    """
    if text.strip() == NO_GOLD_LABEL:
        return None
    return _label_index(path, lineno, text, f"; {NO_GOLD_LABEL!r} = no gold label")


def nli_label(path: str | os.PathLike[str], lineno: int, text: str) -> int:
    """The index in :data:`NLI_LABELS` of ``text`` (case ignored: SICK writes ``ENTAILMENT``); a
    gold label is required.

    Raises:
        ProtoembedError: ``file:line: expected an NLI label (contradiction, entailment, neutral), got 'x'``.
    """
    return _label_index(path, lineno, text, "")


def _label_index(path: str | os.PathLike[str], lineno: int, text: str, also: str) -> int:
    name = text.strip().lower()
    if name not in NLI_LABELS:
        raise ProtoembedError(
            f"{path}:{lineno}: expected an NLI label ({', '.join(NLI_LABELS)}{also}), got {text[:40]!r}"
        )
    return NLI_LABELS.index(name)


class _Pairs:
    """Collects premise / hypothesis / label rows of one file and what was skipped."""

    def __init__(self, path: Path, fmt: str) -> None:
        self.path, self.format = path, fmt
        self.sentence1: list[str] = []
        self.sentence2: list[str] = []
        self.label: list[int] = []
        self.skipped: Counter[str] = Counter()

    def add(self, lineno: int, premise: Any, hypothesis: Any, label: Any) -> None:
        index = parse_nli_label(self.path, lineno, str(label))
        if index is None:
            self.skipped["no_gold_label"] += 1
            return
        self.sentence1.append(_sentence(self.path, lineno, premise, "sentence1"))
        self.sentence2.append(_sentence(self.path, lineno, hypothesis, "sentence2"))
        self.label.append(index)

    def examples(self, **extra: Any) -> Examples:
        source = {
            "path": str(self.path),
            "format": self.format,
            "examples": len(self.label),
            "skipped": dict(self.skipped),
            **extra,
        }
        columns = {"sentence1": self.sentence1, "sentence2": self.sentence2, "label": self.label}
        return Examples(columns, [source])


def _sentence(path: Path, lineno: int, value: Any, which: str) -> str:
    sentence = value.strip() if isinstance(value, str) else ""
    if not sentence:
        raise ProtoembedError(f"{path}:{lineno}: expected a non-empty {which}, got {value!r:.40}")
    return sentence


def iter_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a UTF-8 text file, decompressing a ``.gz`` file on the fly.

    The rules of :func:`protoembed.data.lines.read_lines` (BOM dropped, lines split on ``\\n`` only,
    CRLF ends removed, an unterminated last line kept); plain files are streamed with
    :func:`protoembed.data.lines.iter_lines`, gzip files line by line here (AllNLI is large): the file is
    never held whole.
    """
    path = Path(path)
    if not path.name.endswith(".gz"):
        yield from enumerate(stream_lines(path), start=1)
        return
    lineno = 0
    try:
        with gzip.open(path, "rb") as f:
            for lineno, raw in enumerate(f, start=1):  # binary lines end at b"\n" only
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise ProtoembedError(f"{path}:{lineno}: expected UTF-8 text ({err.reason})") from None
                if lineno == 1 and line.startswith("\ufeff"):
                    line = line[1:]
                line = line[:-1] if line.endswith("\n") else line
                yield lineno, line[:-1] if line.endswith("\r") else line
    except FileNotFoundError:
        raise ProtoembedError(f"{path}: file not found") from None
    except (OSError, EOFError, zlib.error) as err:  # gzip.BadGzipFile is an OSError
        raise ProtoembedError(f"{path}:{lineno + 1}: expected gzip-compressed text ({err})") from None


def _header(path: Path, lines: Iterator[tuple[int, str]], needed: Sequence[str], sep: str) -> dict[str, int]:
    """Column index of each header field; ``needed`` fields must be present."""
    first = next(lines, None)
    fields = [f.strip() for f in first[1].split(sep)] if first else []
    missing = [name for name in needed if name not in fields]
    if missing:
        got = repr(first[1][:80]) if first else "an empty file"
        raise ProtoembedError(
            f"{path}:1: expected a header with the {'tab' if sep == chr(9) else sep}-separated fields "
            f"{', '.join(needed)} (missing {', '.join(missing)}), got {got}"
        )
    return {name: fields.index(name) for name in fields}


def _fields(path: Path, lineno: int, line: str, index: dict[str, int], names: Sequence[str]) -> list[str]:
    cols = line.split("\t")
    need = max(index[n] for n in names) + 1
    if len(cols) < need:
        raise ProtoembedError(
            f"{path}:{lineno}: expected at least {need} tab-separated columns (up to {names[-1]}), got {len(cols)}"
        )
    return [cols[index[n]] for n in names]


# --------------------------------------------------------------------------- readers


def read_snli_jsonl(path: str | os.PathLike[str], **_: Any) -> Examples:
    """The ``snli_jsonl`` format: SNLI / MultiNLI ``.jsonl`` (``sentence1``, ``sentence2``,
    ``gold_label`` per object); blank lines are skipped and counted. Unknown keyword options are ignored."""
    path = Path(path)
    pairs = _Pairs(path, "snli_jsonl")
    for lineno, line in iter_lines(path):
        if not line.strip():
            pairs.skipped["empty_line"] += 1
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ProtoembedError(f"{path}:{lineno}: expected a JSON object ({err.msg})") from None
        missing = [
            k for k in ("gold_label", "sentence1", "sentence2") if not isinstance(row, dict) or k not in row
        ]
        if missing:
            raise ProtoembedError(f"{path}:{lineno}: expected a JSON object with {', '.join(missing)}")
        pairs.add(lineno, row["sentence1"], row["sentence2"], row["gold_label"])
    return pairs.examples()


def read_nli_txt(path: str | os.PathLike[str], **_: Any) -> Examples:
    """The ``nli_txt`` format: ``snli_1.0_*.txt`` / ``multinli_1.0_*.txt`` (tab-separated, header with
    ``gold_label``, ``sentence1``, ``sentence2``). Unknown keyword options are ignored."""
    path = Path(path)
    pairs = _Pairs(path, "nli_txt")
    lines = iter_lines(path)
    names = ("gold_label", "sentence1", "sentence2")
    index = _header(path, lines, names, "\t")
    for lineno, line in lines:
        label, premise, hypothesis = _fields(path, lineno, line, index, names)
        pairs.add(lineno, premise, hypothesis, label)
    return pairs.examples()


def read_senteval_nli(path: str | os.PathLike[str], **_: Any) -> Examples:
    """The ``senteval_nli`` format: SentEval's ``s1.<split>`` with ``s2.<split>`` and ``labels.<split>``
    beside it, aligned line by line. Unknown keyword options are ignored."""
    path = Path(path)
    if not path.name.startswith("s1."):
        raise ProtoembedError(
            f"{path}: expected SentEval's s1.<split> file (s2.<split>, labels.<split> beside it)"
        )
    split = path.name[len("s1.") :]
    s2_path, labels_path = path.with_name(f"s2.{split}"), path.with_name(f"labels.{split}")
    s1, s2, labels = read_lines(path), read_lines(s2_path), read_lines(labels_path)
    if not len(s1) == len(s2) == len(labels):
        raise ProtoembedError(
            f"{path} has {len(s1)} lines, {s2_path} {len(s2)}, {labels_path} {len(labels)}: "
            "expected the premises, hypotheses and labels to align line by line"
        )
    pairs = _Pairs(path, "senteval_nli")
    for lineno, (premise, hypothesis, label) in enumerate(zip(s1, s2, labels), start=1):
        index = parse_nli_label(labels_path, lineno, label)
        if index is None:
            pairs.skipped["no_gold_label"] += 1
            continue
        pairs.sentence1.append(_sentence(path, lineno, premise, "premise"))
        pairs.sentence2.append(_sentence(s2_path, lineno, hypothesis, "hypothesis"))
        pairs.label.append(index)
    return pairs.examples(hypotheses=str(s2_path), labels=str(labels_path))


#: SimCSE's CSV header fields -> column names (``sent0`` is the anchor, ``hard_neg`` the negative).
SIMCSE_COLUMNS = {"sent0": "anchor", "sent1": "positive", "hard_neg": "negative"}


def read_simcse_nli(path: str | os.PathLike[str], **_: Any) -> Examples:
    """The ``simcse_nli`` format: SimCSE's ``nli_for_simcse.csv`` (CSV quoting, header ``sent0, sent1,
    hard_neg``) as ``anchor, positive, negative``; a ``sent0, sent1`` file gives ``anchor, positive``.
    Unknown keyword options are ignored."""
    path = Path(path)
    lines = read_lines(path)
    reader = csv.reader(line + "\n" for line in lines)  # quoted fields may span lines
    header = next(reader, [])
    fields = [f.strip() for f in header]
    if fields not in (["sent0", "sent1"], ["sent0", "sent1", "hard_neg"]):
        raise ProtoembedError(
            f"{path}:1: expected the CSV header sent0,sent1,hard_neg or sent0,sent1, got {','.join(header)[:80]!r}"
        )
    columns: dict[str, list[str]] = {SIMCSE_COLUMNS[f]: [] for f in fields}
    skipped: Counter[str] = Counter()
    start = reader.line_num + 1
    for row in reader:
        if not any(cell.strip() for cell in row):
            skipped["empty_line"] += 1
        elif len(row) != len(fields):
            raise ProtoembedError(
                f"{path}:{start}: expected {len(fields)} CSV fields ({', '.join(fields)}), got {len(row)}"
            )
        else:
            for name, cell in zip(fields, row):
                columns[SIMCSE_COLUMNS[name]].append(_sentence(path, start, cell, name))
        start = reader.line_num + 1
    n = len(columns["anchor"])
    source = {"path": str(path), "format": "simcse_nli", "examples": n, "skipped": dict(skipped)}
    return Examples(dict(columns), [source])


#: AllNLI's split names.
ALLNLI_SPLITS = ("train", "dev", "test")


def read_allnli(path: str | os.PathLike[str], split: str = "train", **_: Any) -> Examples:
    """The ``allnli`` format: sentence-transformers' ``AllNLI.tsv.gz`` / ``.tsv`` (header ``split, dataset,
    filename, sentence1, sentence2, label``), the rows of ``split`` (``train``, ``dev`` or ``test``).

    Rows of the other splits are counted under ``skipped["other_split"]``. Unknown keyword options are
    ignored.
    """
    path = Path(path)
    if split not in ALLNLI_SPLITS:
        raise ProtoembedError(
            f"{path}: unknown AllNLI split {split!r}; expected one of {', '.join(ALLNLI_SPLITS)}"
        )
    pairs = _Pairs(path, "allnli")
    lines = iter_lines(path)
    names = ("split", "sentence1", "sentence2", "label")
    index = _header(path, lines, names, "\t")
    seen: Counter[str] = Counter()
    for lineno, line in lines:
        row_split, premise, hypothesis, label = _fields(path, lineno, line, index, names)
        seen[row_split] += 1
        if row_split != split:
            pairs.skipped["other_split"] += 1
            continue
        pairs.add(lineno, premise, hypothesis, label)
    if not seen[split]:
        found = ", ".join(f"{name} ({n})" for name, n in seen.items()) or "none"
        raise ProtoembedError(f"{path}: no row of split {split!r}; the file has the splits {found}")
    return pairs.examples(split=split)
