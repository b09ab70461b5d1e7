"""The registry of training-data formats and the conversions between column layouts.

A reader is registered in :data:`FORMATS` under a format name (one line per reader) and turns one file
into :class:`~protoembed.data.training.examples.Examples`; :func:`read_examples` picks the reader from the format
name or, when none is given, from the file name (:func:`infer_format`). An objective declares the
columns it needs; when the data has other columns, :func:`convert` applies a registered
:data:`CONVERSIONS` entry (e.g. NLI pairs to SimCSE triplets) or fails with a one-line error naming the
files and the columns.

Registered formats: ``text`` (:mod:`protoembed.data.training.corpus`); ``stsb`` and ``sick``
(:mod:`protoembed.data.training.pairs`, the parser the STS evaluation uses too); ``snli_jsonl``, ``nli_txt``,
``senteval_nli``, ``simcse_nli`` and ``allnli`` (:mod:`protoembed.data.training.nli`); ``clustering``
(:mod:`protoembed.data.benchmarks.clustering`). The readers import the container
(:mod:`protoembed.data.training.examples`), never this module.
"""

from __future__ import annotations

import fnmatch
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protoembed.data.benchmarks.clustering import read_clustering_texts
from protoembed.data.training.corpus import read_corpus, resolve_corpus_path
from protoembed.data.training.examples import NLI_LABELS, ColumnSpec, Examples, describe_columns, satisfies
from protoembed.data.training.nli import (
    read_allnli,
    read_nli_txt,
    read_senteval_nli,
    read_simcse_nli,
    read_snli_jsonl,
)
from protoembed.data.training.pairs import read_sick_examples, read_stsb_examples
from protoembed.errors import ProtoembedError

logger = logging.getLogger(__name__)

#: ``reader(path, **options) -> Examples``; options are keyword arguments a reader may ignore.
Reader = Callable[..., Examples]


@dataclass(frozen=True)
class Format:
    """A registered file format: its reader, the file-name patterns that select it, what it yields."""

    reader: Reader
    patterns: tuple[str, ...]
    columns: tuple[str, ...]
    description: str


def _read_text(path: Path, drop_unterminated_last_line: bool = True, **_: Any) -> Examples:
    corpus = read_corpus(path, drop_unterminated_last_line=drop_unterminated_last_line)
    source = {
        "path": str(path),
        "format": "text",
        "examples": len(corpus.sentences),
        "skipped": {"empty_line": corpus.empty_lines},
        "dropped_unterminated_last_line": corpus.dropped_last_line,
    }
    return Examples({"text": corpus.sentences}, [source])


#: Format name -> :class:`Format`. A new reader is one function plus one line here. The patterns are
#: matched against the file name, first match wins, in this order; ``text`` is the fallback.
FORMATS: dict[str, Format] = {
    "text": Format(_read_text, ("*.txt",), ("text",), "one sentence per line"),
    "clustering": Format(
        read_clustering_texts,
        ("*_true_text", "agnewsdataraw-*", "tweet-original-order.txt"),
        ("text",),
        "label<TAB>text short-text clustering file, read as unlabeled text (labels dropped)",
    ),
    "stsb": Format(
        read_stsb_examples,
        ("sts-*.csv",),
        ("sentence1", "sentence2", "score"),
        "STS Benchmark: genre, file, year, id, score, sentence1, sentence2 [, 2 sources], tab-separated",
    ),
    "sick": Format(
        read_sick_examples,
        ("SICK_*.txt",),
        ("sentence1", "sentence2", "score", "label"),
        "SICK: header, pair_ID, sentence_A, sentence_B, relatedness_score, entailment_judgment",
    ),
    "snli_jsonl": Format(
        read_snli_jsonl,
        ("snli_*.jsonl", "multinli_*.jsonl", "*nli*.jsonl", "*NLI*.jsonl"),
        ("sentence1", "sentence2", "label"),
        "SNLI / MultiNLI JSON lines with sentence1, sentence2, gold_label ('-' skipped)",
    ),
    "nli_txt": Format(
        read_nli_txt,
        ("snli_1.0_*.txt", "multinli_1.0_*.txt"),
        ("sentence1", "sentence2", "label"),
        "SNLI / MultiNLI tab-separated release with a gold_label, sentence1, sentence2 header ('-' skipped)",
    ),
    "senteval_nli": Format(
        read_senteval_nli,
        ("s1.*",),
        ("sentence1", "sentence2", "label"),
        "SentEval's SNLI copy: s1.<split>, with s2.<split> and labels.<split> beside it",
    ),
    "simcse_nli": Format(
        read_simcse_nli,
        ("nli_for_simcse*.csv", "*simcse*.csv"),
        ("anchor", "positive", "negative"),
        "SimCSE's CSV, header sent0,sent1,hard_neg (or sent0,sent1: anchor, positive only)",
    ),
    "allnli": Format(
        read_allnli,
        ("AllNLI*.tsv.gz", "AllNLI*.tsv", "allnli*.tsv.gz", "allnli*.tsv"),
        ("sentence1", "sentence2", "label"),
        "sentence-transformers' AllNLI.tsv(.gz): split, dataset, filename, sentence1, sentence2, label; "
        "option split (train, dev, test; default train)",
    ),
}


def infer_format(path: str | os.PathLike[str]) -> str:
    """The format whose file-name patterns match ``path`` (``text`` when none does)."""
    name = Path(path).name
    for format_name, spec in FORMATS.items():
        if format_name != "text" and any(fnmatch.fnmatch(name, p) for p in spec.patterns):
            return format_name
    return "text"


def read_examples(
    path: str | os.PathLike[str],
    format: str | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Examples:
    """Read one training file into :class:`Examples`.

    Args:
        path: the file (relative paths: working directory, then ``data_dir`` / ``$PROTOEMBED_DATA``).
        format: a key of :data:`FORMATS`; ``None`` = :func:`infer_format`.
        data_dir: base of relative paths.
        **options: passed to the reader (``drop_unterminated_last_line`` for ``text``, ``split`` for
            ``allnli``); readers ignore options they do not know.
    Raises:
        ProtoembedError: unknown format, missing file, or a malformed line (named as ``file:line``).
    """
    name = format or infer_format(path)
    if name not in FORMATS:
        raise ProtoembedError(f"{path}: unknown data format {name!r}; expected one of {', '.join(FORMATS)}")
    resolved = resolve_corpus_path(str(path), data_dir)
    examples = FORMATS[name].reader(resolved, **options)
    if not len(examples):
        raise ProtoembedError(f"{resolved}: no usable example ({name} format)")
    return examples


# --------------------------------------------------------------------------- conversions


@dataclass(frozen=True)
class Conversion:
    """Turns examples with ``source`` columns into examples with ``target`` columns."""

    source: frozenset[str]
    target: frozenset[str]
    apply: Callable[[Examples], Examples]
    description: str


def nli_triplets(examples: Examples) -> Examples:
    """SimCSE's supervised triplets from NLI pairs: (premise, entailment hypothesis, contradiction one).

    For every premise, each of its entailment hypotheses is paired with one of its contradiction
    hypotheses (cycled when there are fewer); premises without both are skipped and counted.
    Premises keep the order of their first appearance.
    """
    entail, contra = NLI_LABELS.index("entailment"), NLI_LABELS.index("contradiction")
    by_premise: dict[str, tuple[list[str], list[str]]] = {}
    for premise, hypothesis, label in zip(
        examples.columns["sentence1"], examples.columns["sentence2"], examples.columns["label"]
    ):
        pos, neg = by_premise.setdefault(premise, ([], []))
        if label == entail:
            pos.append(hypothesis)
        elif label == contra:
            neg.append(hypothesis)
    anchors: list[str] = []
    positives: list[str] = []
    negatives: list[str] = []
    skipped = 0
    for premise, (pos, neg) in by_premise.items():
        if not pos or not neg:
            skipped += 1
            continue
        for i, hypothesis in enumerate(pos):
            anchors.append(premise)
            positives.append(hypothesis)
            negatives.append(neg[i % len(neg)])
    sources = [
        {**s, "converted_to": "anchor, positive, negative", "premises_without_triplet": skipped}
        for s in examples.sources
    ]
    return Examples({"anchor": anchors, "positive": positives, "negative": negatives}, sources)


#: Registered conversions between column layouts (one line each).
CONVERSIONS: list[Conversion] = [
    Conversion(
        frozenset({"sentence1", "sentence2", "label"}),
        frozenset({"anchor", "positive", "negative"}),
        nli_triplets,
        "NLI pairs -> (premise, entailment, contradiction) triplets",
    ),
]


def convert(examples: Examples, needed: ColumnSpec, who: str = "the objective") -> Examples:
    """``examples`` if they have the ``needed`` columns, else a registered conversion of them.

    Raises:
        ProtoembedError: no conversion gives the needed columns (names the files, their columns and
            what ``who`` needs).
    """
    names = set(examples.names)
    if satisfies(names, needed):
        return examples
    for conversion in CONVERSIONS:
        if conversion.source <= names and satisfies(set(conversion.target), needed):
            converted = conversion.apply(examples)
            logger.info("%s: %s (%d examples)", examples.where(), conversion.description, len(converted))
            if not len(converted):
                raise ProtoembedError(f"{examples.where()}: {conversion.description} left no example")
            return converted
    raise ProtoembedError(
        f"{examples.where()} has columns {', '.join(examples.names)}; {who} needs {describe_columns(needed)}"
    )
