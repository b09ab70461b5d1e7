"""Scored sentence pairs: the one STS Benchmark and SICK line parser, and their training readers.

The evaluation readers (:func:`protoembed.data.benchmarks.sts.read_stsb`, :func:`protoembed.data.benchmarks.sts.read_sick`)
and the training formats ``stsb`` and ``sick`` parse lines with the same functions
(:func:`parse_stsb_lines`, :func:`parse_sick_lines`), so a split read for training is the split the
benchmark scores.

Layouts:

- STS Benchmark ``sts-*.csv``: no header, tab-separated ``genre, file, year, id, score, sentence1,
  sentence2``; the original release adds two source columns on some lines (9 columns) and has
  unbalanced double quotes, so lines are split on tabs only, never with CSV quoting.
- SICK ``SICK_*.txt``: a header ``pair_ID, sentence_A, sentence_B, relatedness_score,
  entailment_judgment``, then one pair per line with an upper-case NLI label; the test file has CRLF
  line ends (handled by :func:`protoembed.data.lines.read_lines`, as a UTF-8 BOM is).

Gold similarity scores must be numbers in [0, 5] (the STS annotation scale; SICK's relatedness runs
from 1 to 5); sentences must not be empty. A malformed line is a :class:`ProtoembedError` naming
``file:line`` and what was expected.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protoembed.core.errors import ProtoembedError
from protoembed.data.lines import read_lines
from protoembed.data.training.examples import Examples
from protoembed.data.training.nli import nli_label

#: The gold similarity scale of STS (0 = unrelated .. 5 = equivalent).
SCORE_RANGE = (0.0, 5.0)

STSB_COLUMNS = "genre, file, year, id, score, sentence1, sentence2"
SICK_COLUMNS = "pair_ID, sentence_A, sentence_B, relatedness_score, entailment_judgment"


def strip(sentence: str) -> str:
    """The sentence without leading/trailing white space (the training readers' cleaning)."""
    return sentence.strip()


def split_columns(
    path: str | os.PathLike[str], lineno: int, line: str, expected: Sequence[int], what: str
) -> list[str]:
    """``line`` split on tabs; its column count must be one of ``expected``.

    Raises:
        ProtoembedError: ``file:line: expected 7 or 9 tab-separated columns (what), got N``.
    """
    cols = line.split("\t")
    if len(cols) not in expected:
        want = " or ".join(str(n) for n in expected)
        raise ProtoembedError(
            f"{path}:{lineno}: expected {want} tab-separated columns ({what}), got {len(cols)}"
        )
    return cols


def parse_score(
    path: str | os.PathLike[str], lineno: int, text: str, bounds: tuple[float, float] | None = SCORE_RANGE
) -> float:
    """A gold similarity score: a finite number, within ``bounds`` (``None``: any finite number).

    Raises:
        ProtoembedError: ``file:line: expected a numeric similarity score in [0, 5], got 'x'``.
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    inside = bounds is None or bounds[0] <= value <= bounds[1]
    if not math.isfinite(value) or not inside:
        scale = f" in [{bounds[0]:g}, {bounds[1]:g}]" if bounds else ""
        raise ProtoembedError(
            f"{path}:{lineno}: expected a numeric similarity score{scale}, got {text[:40]!r}"
        )
    return value


def parse_sentence(
    path: str | os.PathLike[str], lineno: int, text: str, which: str, clean: Callable[[str], str]
) -> str:
    """``clean(text)``, which must not be empty.

    Raises:
        ProtoembedError: ``file:line: expected a non-empty sentence2``.
    """
    sentence = clean(text)
    if not sentence:
        raise ProtoembedError(f"{path}:{lineno}: expected a non-empty {which}, got {text[:40]!r}")
    return sentence


@dataclass
class ScoredPairs:
    """Parsed pairs: ``sentences1[i]``, ``sentences2[i]``, gold ``scores[i]`` and, for SICK, ``labels[i]``
    (an index into :data:`NLI_LABELS`)."""

    sentences1: list[str] = field(default_factory=list)
    sentences2: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)


def parse_stsb_lines(
    path: str | os.PathLike[str],
    lines: Sequence[str],
    columns: Sequence[int] = (7, 9),
    clean: Callable[[str], str] = strip,
) -> ScoredPairs:
    """Parse STS Benchmark lines (``genre, file, year, id, score, sentence1, sentence2 [, source1, source2]``).

    Args:
        path: the file (for messages).
        lines: its lines (from :func:`protoembed.data.lines.read_lines`).
        columns: the allowed column counts (7 for SentEval's copy, 7 or 9 for the original release).
        clean: applied to each sentence.
    Raises:
        ProtoembedError: a line with another column count, a score not in [0, 5], an empty sentence.
    """
    what = STSB_COLUMNS + (" [, source1, source2]" if 9 in columns else "")
    pairs = ScoredPairs()
    for lineno, line in enumerate(lines, start=1):
        cols = split_columns(path, lineno, line, columns, what)
        pairs.scores.append(parse_score(path, lineno, cols[4].strip()))
        pairs.sentences1.append(parse_sentence(path, lineno, cols[5], "sentence1", clean))
        pairs.sentences2.append(parse_sentence(path, lineno, cols[6], "sentence2", clean))
    return pairs


def parse_sick_lines(
    path: str | os.PathLike[str], lines: Sequence[str], clean: Callable[[str], str] = strip
) -> ScoredPairs:
    """Parse SICK lines (header, then ``pair_ID, sentence_A, sentence_B, relatedness_score,
    entailment_judgment``); the header line is skipped when present.

    Raises:
        ProtoembedError: a line without 5 columns, a score not in [0, 5], an empty sentence, an
            entailment judgment other than NEUTRAL / ENTAILMENT / CONTRADICTION.
    """
    pairs = ScoredPairs()
    for lineno, line in enumerate(lines, start=1):
        if lineno == 1 and line.startswith("pair_ID"):
            continue
        cols = split_columns(path, lineno, line, (5,), SICK_COLUMNS)
        pairs.scores.append(parse_score(path, lineno, cols[3].strip()))
        pairs.sentences1.append(parse_sentence(path, lineno, cols[1], "sentence_A", clean))
        pairs.sentences2.append(parse_sentence(path, lineno, cols[2], "sentence_B", clean))
        pairs.labels.append(nli_label(path, lineno, cols[4]))
    return pairs


def _examples(path: Path, fmt: str, columns: dict[str, list[Any]]) -> Examples:
    n = len(next(iter(columns.values())))
    return Examples(columns, [{"path": str(path), "format": fmt, "examples": n, "skipped": {}}])


def read_stsb_examples(path: str | os.PathLike[str], **_: Any) -> Examples:
    """The ``stsb`` training format: an STS Benchmark ``sts-*.csv`` (either copy) as
    ``sentence1, sentence2, score`` examples (sentences stripped, scores in [0, 5]).

    Unknown keyword options are ignored.
    """
    path = Path(path)
    pairs = parse_stsb_lines(path, read_lines(path))
    columns = {"sentence1": pairs.sentences1, "sentence2": pairs.sentences2, "score": pairs.scores}
    return _examples(path, "stsb", columns)


def read_sick_examples(path: str | os.PathLike[str], **_: Any) -> Examples:
    """The ``sick`` training format: a SICK ``SICK_*.txt`` file as ``sentence1, sentence2, score,
    label`` examples (relatedness score and entailment label of each pair).

    Unknown keyword options are ignored.
    """
    path = Path(path)
    pairs = parse_sick_lines(path, read_lines(path))
    columns = {
        "sentence1": pairs.sentences1,
        "sentence2": pairs.sentences2,
        "score": pairs.scores,
        "label": pairs.labels,
    }
    return _examples(path, "sick", columns)
