"""Readers for the STS benchmarks: STS12-16, STS Benchmark and SICK-Relatedness.

Every reader returns an :class:`StsPairs` (two aligned sentence lists and their gold scores). Two data
variants sit in the data directory:

- ``senteval``: SentEval's copy (``senteval/STS/...``), Moses-tokenised and lower-cased; what the
  papers evaluate on. Whitespace is normalised (``" ".join(s.split())``) exactly as SentEval splits
  the sentences into tokens and SimCSE's batcher joins them back.
- ``raw``: the original cased releases (``sts_raw/...``); sentences are only stripped.

SICK has one copy (``senteval/SICK``), read for both variants. Format quirks handled here: blank
gold lines in STS15/16 (unscored pairs, skipped as SentEval does), CRLF line ends, a UTF-8 BOM, the
SICK header, STS16 raw inputs with 4 columns, and raw STS-B lines with 7 or 9 columns and unbalanced
quotes (split on tabs only, never CSV quoting). Lines are split on ``\\n`` only, never on the other
characters ``str.splitlines`` treats as line breaks. STS Benchmark and SICK lines are parsed by
:mod:`protoembed.data.training.pairs`, the parser of the ``stsb`` and ``sick`` training formats: gold scores must
lie in [0, 5], sentences must not be empty, SICK's entailment judgments must be NLI labels.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import numpy as np

from protoembed.core.errors import ProtoembedError
from protoembed.data.lines import read_lines as _read_lines
from protoembed.data.paths import resolve_data_dir
from protoembed.data.training.pairs import parse_score as _score
from protoembed.data.training.pairs import parse_sick_lines, parse_stsb_lines
from protoembed.data.training.pairs import split_columns as _columns

#: The data variants of the STS tasks (``--variant``).
Variant = Literal["senteval", "raw"]
VARIANTS: tuple[str, ...] = get_args(Variant)

#: Subsets of each STS year, as SentEval evaluates them (STS13 without the unlicensed SMT subset).
STS_YEAR_SUBSETS: dict[str, tuple[str, ...]] = {
    "STS12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    "STS13": ("FNWN", "headlines", "OnWN"),
    "STS14": ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    "STS15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "STS16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}

#: Splits of the two tasks that have them; ``trial`` is SICK's name for its dev split.
SPLITS = ("train", "dev", "test")
_SICK_FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}


@dataclass(frozen=True)
class StsPairs:
    """Sentence pairs with gold similarity scores.

    ``sentences1[i]`` and ``sentences2[i]`` form pair ``i`` with gold score ``scores[i]`` (float64).
    """

    name: str
    sentences1: list[str]
    sentences2: list[str]
    scores: np.ndarray

    def __len__(self) -> int:
        return len(self.scores)


def concat_pairs(name: str, parts: Iterable[StsPairs]) -> StsPairs:
    """Pool several :class:`StsPairs` into one named ``name`` (SentEval's "all" setting)."""
    parts = list(parts)
    s1 = [s for p in parts for s in p.sentences1]
    s2 = [s for p in parts for s in p.sentences2]
    scores = np.concatenate([p.scores for p in parts]) if parts else np.zeros(0)
    return StsPairs(name, s1, s2, scores.astype(np.float64))


# --------------------------------------------------------------------------- low-level helpers


def check_variant(variant: str) -> None:
    """The one-line error for a data variant that is not one of :data:`VARIANTS`."""
    if variant not in VARIANTS:
        raise ProtoembedError(f"unknown STS data variant {variant!r}; choose one of: {', '.join(VARIANTS)}")


#: How to get a missing benchmark file (the task's entry names its ``protoembed data`` dataset when the
#: task is read through it: :meth:`protoembed.evaluation.tasks.Task.load`).
MISSING_HINT = "`protoembed data download --for TASK` fetches a task's files (or point --data-dir / PROTOEMBED_DATA at a directory that has them)"


def read_lines(path: Path, encoding: str = "utf-8") -> list[str]:
    """Read a benchmark file with :func:`protoembed.data.lines.read_lines` (:data:`MISSING_HINT` when
    it is missing)."""
    return _read_lines(path, encoding, MISSING_HINT)


def _clean(sentence: str, variant: str) -> str:
    return " ".join(sentence.split()) if variant == "senteval" else sentence.strip()


def _cleaner(variant: str) -> Callable[[str], str]:
    return lambda sentence: _clean(sentence, variant)


def _root(data_dir: str | os.PathLike[str] | None) -> Path:
    return resolve_data_dir(data_dir)


# --------------------------------------------------------------------------- STS12-16


def sts_subset_files(data_dir: Path, year: str, subset: str, variant: str) -> tuple[Path, Path]:
    """Return ``(input_file, gold_file)`` for one subset of an STS year in ``variant``."""
    if variant == "senteval":
        folder = data_dir / "senteval" / "STS" / f"{year}-en-test"
        prefix = "STS"
    else:
        folder = data_dir / "sts_raw" / f"{year}-en-test"
        prefix = "STS2016" if year == "STS16" else "STS"
    return folder / f"{prefix}.input.{subset}.txt", folder / f"{prefix}.gs.{subset}.txt"


def read_sts_subset(
    data_dir: str | os.PathLike[str] | None, year: str, subset: str, variant: str = "senteval"
) -> StsPairs:
    """Read one subset of an STS year (e.g. ``("STS15", "belief")``).

    Args:
        data_dir: the data directory (``None``: ``$PROTOEMBED_DATA``, else the user data directory).
        year: ``STS12``..``STS16``.
        subset: a subset name from :data:`STS_YEAR_SUBSETS`.
        variant: ``senteval`` or ``raw``.
    Returns:
        the scored pairs, named ``"STS15/belief"``; pairs whose gold line is blank are skipped.
    """
    check_variant(variant)
    if year not in STS_YEAR_SUBSETS:
        raise ProtoembedError(f"unknown STS year {year!r}; choose one of: {', '.join(STS_YEAR_SUBSETS)}")
    if subset not in STS_YEAR_SUBSETS[year]:
        raise ProtoembedError(
            f"unknown {year} subset {subset!r}; choose one of: {', '.join(STS_YEAR_SUBSETS[year])}"
        )
    raw = variant == "raw"
    input_path, gold_path = sts_subset_files(_root(data_dir), year, subset, variant)
    inputs = read_lines(input_path)
    golds = read_lines(gold_path)
    if len(inputs) != len(golds):
        raise ProtoembedError(
            f"{gold_path} has {len(golds)} lines but {input_path} has {len(inputs)}; "
            "gold scores and sentence pairs must align line by line"
        )
    n_cols = (4,) if raw and year == "STS16" else (2,)
    what = "sentence1, sentence2, source1, source2" if n_cols == (4,) else "sentence1, sentence2"
    s1: list[str] = []
    s2: list[str] = []
    scores: list[float] = []
    for lineno, (line, gold) in enumerate(zip(inputs, golds), start=1):
        cols = _columns(input_path, lineno, line, n_cols, what)
        gold = gold.strip()
        if not gold:  # unscored pair (STS15/16)
            continue
        scores.append(_score(gold_path, lineno, gold))
        s1.append(_clean(cols[0], variant))
        s2.append(_clean(cols[1], variant))
    return StsPairs(f"{year}/{subset}", s1, s2, np.asarray(scores, dtype=np.float64))


def read_sts_year(data_dir: str | os.PathLike[str] | None, year: str, variant: str = "senteval") -> StsPairs:
    """Read every subset of an STS year and pool them in SentEval's order (the "all" setting)."""
    check_variant(variant)
    if year not in STS_YEAR_SUBSETS:
        raise ProtoembedError(f"unknown STS year {year!r}; choose one of: {', '.join(STS_YEAR_SUBSETS)}")
    root = _root(data_dir)
    return concat_pairs(year, (read_sts_subset(root, year, s, variant) for s in STS_YEAR_SUBSETS[year]))


# --------------------------------------------------------------------------- STS-B and SICK


def _split(split: str, task: str) -> str:
    split = "dev" if split == "trial" else split
    if split not in SPLITS:
        raise ProtoembedError(f"unknown {task} split {split!r}; choose one of: train, dev (= trial), test")
    return split


def read_stsb(
    data_dir: str | os.PathLike[str] | None, split: str = "test", variant: str = "senteval"
) -> StsPairs:
    """Read an STS Benchmark split (``train``/``dev``/``test``).

    Lines are ``genre, file, year, id, score, sentence1, sentence2`` (the raw release adds two source
    columns on some lines).

    Returns:
        the pairs, named ``"STSBenchmark/<split>"``.
    """
    check_variant(variant)
    split = _split(split, "STSBenchmark")
    raw = variant == "raw"
    path = _root(data_dir) / stsb_file(split, variant)
    clean = _cleaner(variant)
    pairs = parse_stsb_lines(path, read_lines(path), (7, 9) if raw else (7,), clean)
    s1, s2, scores = pairs.sentences1, pairs.sentences2, pairs.scores
    return StsPairs(f"STSBenchmark/{split}", s1, s2, np.asarray(scores, dtype=np.float64))


def read_sick(
    data_dir: str | os.PathLike[str] | None, split: str = "test", variant: str = "senteval"
) -> StsPairs:
    """Read a SICK relatedness split (``train``/``dev`` (= ``trial``)/``test``).

    One copy (``senteval/SICK``) serves both variants. Lines are ``pair_ID, sentence_A, sentence_B,
    relatedness_score, entailment_judgment`` after a header.

    Returns:
        the pairs, named ``"SICKRelatedness/<split>"``.
    """
    check_variant(variant)
    split = _split(split, "SICKRelatedness")
    path = _root(data_dir) / sick_file(split)
    pairs = parse_sick_lines(path, read_lines(path), _cleaner(variant))
    s1, s2, scores = pairs.sentences1, pairs.sentences2, pairs.scores
    return StsPairs(f"SICKRelatedness/{split}", s1, s2, np.asarray(scores, dtype=np.float64))


def stsb_file(split: str, variant: str) -> str:
    """The STS Benchmark file of ``split`` in ``variant``, relative to the data directory."""
    folder = "sts_raw/stsbenchmark" if variant == "raw" else "senteval/STS/STSBenchmark"
    return f"{folder}/sts-{split}.csv"


def sick_file(split: str) -> str:
    """The SICK file of ``split`` (``train`` / ``dev`` / ``test``), relative to the data directory (one
    copy serves both variants)."""
    return f"senteval/SICK/{_SICK_FILES[split]}"


def read_pairs_file(path: Path, name: str, layout: str = "stsb", variant: str = "senteval") -> StsPairs:
    """An STS-like file in STS Benchmark's layout (``layout="stsb"``: 7 tab-separated columns, score in the
    5th) or SICK's (``"sick"``: a header, then ``pair_ID, sentence_A, sentence_B, relatedness_score,
    entailment_judgment``), gold in [0, 5]; ``senteval`` normalises whitespace, ``raw`` strips.

    Returns:
        the pairs, named ``name``.
    """
    check_variant(variant)
    lines = read_lines(path)
    if layout == "stsb":
        pairs = parse_stsb_lines(path, lines, (7,), _cleaner(variant))
    else:
        pairs = parse_sick_lines(path, lines, _cleaner(variant))
    return StsPairs(name, pairs.sentences1, pairs.sentences2, np.asarray(pairs.scores, dtype=np.float64))
