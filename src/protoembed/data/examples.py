"""Training examples as named columns, the readers that yield them, and the conversions between layouts.

An example is one row of named columns, as sentence-transformers' losses name their inputs and as
SimCSE's one/two/three-column files lay them out. The column names used across protoembed:

========================  ===============================================================
columns                   data
========================  ===============================================================
``text``                  unlabeled sentences (one per line; SimCSE's unsupervised corpus)
``sentence1, sentence2,   sentence pairs with a gold similarity in [0, 5] (STS Benchmark,
score``                   SICK relatedness)
``sentence1, sentence2,   premise / hypothesis with an NLI label: an index into
label``                   :data:`NLI_LABELS` (SNLI, MultiNLI, SICK entailment)
``anchor, positive,       SimCSE's supervised triplets (premise, entailment hypothesis,
negative``                contradiction hypothesis)
========================  ===============================================================

A reader is registered in :data:`FORMATS` under a format name (one line per reader) and turns one file
into :class:`Examples`; :func:`read_examples` picks the reader from the format name or, when none is
given, from the file name (:func:`infer_format`). An objective declares the columns it needs; when the
data has other columns, :func:`convert` applies a registered :data:`CONVERSIONS` entry (e.g. NLI pairs
to SimCSE triplets) or fails with a one-line error naming the files and the columns.

Registered formats: ``text``; ``stsb`` and ``sick`` (:mod:`protoembed.data.pairs`, the parser the STS
evaluation uses too); ``snli_jsonl``, ``nli_txt``, ``senteval_nli``, ``simcse_nli`` and ``allnli``
(:mod:`protoembed.data.nli`); ``clustering`` (:mod:`protoembed.data.clustering`).
"""

from __future__ import annotations

import fnmatch
import importlib
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protoembed.data.clustering import read_clustering_texts
from protoembed.data.corpus import read_corpus, resolve_corpus_path
from protoembed.errors import ProtoembedError

logger = logging.getLogger(__name__)

#: NLI label names; the ``label`` column holds their index (sentence-transformers' SoftmaxLoss order).
NLI_LABELS = ("contradiction", "entailment", "neutral")

#: The columns that hold sentences (the others hold gold scores or labels).
SENTENCE_COLUMNS = frozenset({"text", "sentence1", "sentence2", "anchor", "positive", "negative"})

#: A column requirement: a name, or a tuple of alternatives of which one must be present.
ColumnSpec = Sequence[str | tuple[str, ...]]


@dataclass
class Examples:
    """Rows of named columns read from one or more files.

    ``columns[name][i]`` is column ``name`` of example ``i`` (``str`` for text columns, ``float`` for
    ``score``, ``int`` for ``label``); every column has the same length. ``sources`` has one entry per
    file read: ``{"path", "format", "examples", "skipped": {reason: count}, ...}`` (what the training
    log records).
    """

    columns: dict[str, list[Any]]
    sources: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        lengths = {name: len(values) for name, values in self.columns.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"columns of different lengths: {lengths}")

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    @property
    def names(self) -> tuple[str, ...]:
        """The column names, in order."""
        return tuple(self.columns)

    def select(self, indices: Sequence[int]) -> dict[str, list[Any]]:
        """The examples at ``indices`` as a batch: ``{column: [value, ...]}`` (a dict of lists)."""
        return {name: [values[i] for i in indices] for name, values in self.columns.items()}

    def head(self, n: int) -> Examples:
        """The first ``n`` examples (all of them if there are fewer)."""
        return Examples({name: values[:n] for name, values in self.columns.items()}, self.sources)

    def where(self) -> str:
        """The files the examples came from, for messages."""
        return ", ".join(str(s["path"]) for s in self.sources) or "<in memory>"

    def summary(self) -> dict[str, Any]:
        """What ``training_log.jsonl`` records: the example count, the columns and each file's counts."""
        return {"examples": len(self), "columns": list(self.names), "files": self.sources}

    @staticmethod
    def concat(parts: Sequence[Examples]) -> Examples:
        """The examples of ``parts`` one after the other, with the columns all parts share.

        Parts with other column sets keep only the common columns (in the first part's order): SNLI
        pairs (``sentence1, sentence2, label``) and SICK (``sentence1, sentence2, score, label``)
        concatenate to ``sentence1, sentence2, label``. What each part loses is logged and recorded in
        its sources as ``dropped_columns``.

        Raises:
            ValueError: no parts.
            ProtoembedError: the common columns hold no sentence column (e.g. ``text`` files with
                sentence pairs); the message names each file's columns.
        """
        if not parts:
            raise ValueError("no examples to concatenate")
        common = [name for name in parts[0].names if all(name in part.columns for part in parts[1:])]
        if not set(common) & SENTENCE_COLUMNS:
            described = "; ".join(f"{part.where()} has {', '.join(part.names)}" for part in parts)
            raise ProtoembedError(
                f"the files of one training corpus share no sentence column ({described}); "
                "combine files with the same kind of examples"
            )
        sources: list[dict[str, Any]] = []
        for part in parts:
            dropped = [name for name in part.names if name not in common]
            if dropped:
                logger.warning(
                    "%s: column(s) %s dropped (not in every file)", part.where(), ", ".join(dropped)
                )
                sources.extend({**s, "dropped_columns": dropped} for s in part.sources)
            else:
                sources.extend(part.sources)
        columns = {name: [v for part in parts for v in part.columns[name]] for name in common}
        return Examples(columns, sources)


# --------------------------------------------------------------------------- readers

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


def _lazy(module: str, function: str) -> Reader:
    """The reader ``protoembed.data.<module>.<function>``, imported on first use (those modules build
    :class:`Examples`, so they cannot be imported while this one is)."""

    def reader(path: Path, **options: Any) -> Examples:
        return getattr(importlib.import_module(f"protoembed.data.{module}"), function)(path, **options)

    reader.__name__ = reader.__qualname__ = function
    return reader


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
        _lazy("pairs", "read_stsb_examples"),
        ("sts-*.csv",),
        ("sentence1", "sentence2", "score"),
        "STS Benchmark: genre, file, year, id, score, sentence1, sentence2 [, 2 sources], tab-separated",
    ),
    "sick": Format(
        _lazy("pairs", "read_sick_examples"),
        ("SICK_*.txt",),
        ("sentence1", "sentence2", "score", "label"),
        "SICK: header, pair_ID, sentence_A, sentence_B, relatedness_score, entailment_judgment",
    ),
    "snli_jsonl": Format(
        _lazy("nli", "read_snli_jsonl"),
        ("snli_*.jsonl", "multinli_*.jsonl", "*nli*.jsonl", "*NLI*.jsonl"),
        ("sentence1", "sentence2", "label"),
        "SNLI / MultiNLI JSON lines with sentence1, sentence2, gold_label ('-' skipped)",
    ),
    "nli_txt": Format(
        _lazy("nli", "read_nli_txt"),
        ("snli_1.0_*.txt", "multinli_1.0_*.txt"),
        ("sentence1", "sentence2", "label"),
        "SNLI / MultiNLI tab-separated release with a gold_label, sentence1, sentence2 header ('-' skipped)",
    ),
    "senteval_nli": Format(
        _lazy("nli", "read_senteval_nli"),
        ("s1.*",),
        ("sentence1", "sentence2", "label"),
        "SentEval's SNLI copy: s1.<split>, with s2.<split> and labels.<split> beside it",
    ),
    "simcse_nli": Format(
        _lazy("nli", "read_simcse_nli"),
        ("nli_for_simcse*.csv", "*simcse*.csv"),
        ("anchor", "positive", "negative"),
        "SimCSE's CSV, header sent0,sent1,hard_neg (or sent0,sent1: anchor, positive only)",
    ),
    "allnli": Format(
        _lazy("nli", "read_allnli"),
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


def _satisfies(names: set[str], needed: ColumnSpec) -> bool:
    return all((set(n) & names) if isinstance(n, tuple) else n in names for n in needed)


def describe_columns(needed: ColumnSpec) -> str:
    """``"sentence1, sentence2, score or label"`` for messages."""
    return ", ".join(" or ".join(n) if isinstance(n, tuple) else n for n in needed)


def convert(examples: Examples, needed: ColumnSpec, who: str = "the objective") -> Examples:
    """``examples`` if they have the ``needed`` columns, else a registered conversion of them.

    Raises:
        ProtoembedError: no conversion gives the needed columns (names the files, their columns and
            what ``who`` needs).
    """
    names = set(examples.names)
    if _satisfies(names, needed):
        return examples
    for conversion in CONVERSIONS:
        if conversion.source <= names and _satisfies(set(conversion.target), needed):
            converted = conversion.apply(examples)
            logger.info("%s: %s (%d examples)", examples.where(), conversion.description, len(converted))
            if not len(converted):
                raise ProtoembedError(f"{examples.where()}: {conversion.description} left no example")
            return converted
    raise ProtoembedError(
        f"{examples.where()} has columns {', '.join(examples.names)}; {who} needs {describe_columns(needed)}"
    )
