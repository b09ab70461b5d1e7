"""The registry of training-data formats and the conversions between column layouts.

A reader is registered in :data:`FORMATS` (a :class:`~protoembed.core.registry.Registry`) under a format
name (one line per reader) and turns one file
into :class:`~protoembed.data.training.examples.Examples`; :func:`read_examples` picks the reader from the format
name or, when none is given, from the file name (:func:`infer_format`). An objective declares the
columns it needs; when the data has other columns, :func:`convert` applies a registered
:data:`CONVERSIONS` entry (e.g. NLI pairs to SimCSE triplets) or fails with a one-line error naming the
files and the columns.

Registered formats: ``text`` (:mod:`protoembed.data.training.corpus`); ``stsb`` and ``sick``
(:mod:`protoembed.data.training.pairs`, the parser the STS evaluation uses too); ``snli_jsonl``, ``nli_txt``,
``senteval_nli``, ``simcse_nli`` and ``allnli`` (:mod:`protoembed.data.training.nli`); ``clustering``
(:mod:`protoembed.data.benchmarks.clustering`); the tables ``jsonl``, ``csv``, ``tsv`` and ``parquet``
(:mod:`protoembed.data.training.tables`) and ``hf_dataset`` (:mod:`protoembed.data.training.hf`), whose columns are the file's own, named like protoembed's or
given by a column mapping (:mod:`protoembed.data.training.columns`), and which can also be streamed
(:func:`open_stream`; ``text`` can be streamed too). The readers import the container (:mod:`protoembed.data.training.examples`), never
this module.
"""

from __future__ import annotations

import fnmatch
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protoembed.core.errors import ProtoembedError
from protoembed.core.registry import Registry
from protoembed.data.benchmarks.clustering import read_clustering_texts
from protoembed.data.training.corpus import open_text, read_corpus, resolve_corpus_path
from protoembed.data.training.examples import NLI_LABELS, ColumnSpec, Examples, describe_columns, satisfies
from protoembed.data.training.hf import locate_dataset, open_hf_dataset
from protoembed.data.training.nli import (
    read_allnli,
    read_nli_txt,
    read_senteval_nli,
    read_simcse_nli,
    read_snli_jsonl,
)
from protoembed.data.training.pairs import read_sick_examples, read_stsb_examples
from protoembed.data.training.tables import (
    ExampleStream,
    Table,
    open_csv,
    open_jsonl,
    open_parquet,
    open_tsv,
    reader,
    streamer,
)

logger = logging.getLogger(__name__)

#: ``reader(path, **options) -> Examples``; options are keyword arguments a reader may ignore.
Reader = Callable[..., Examples]


#: ``stream(path, columns=None, **options) -> ExampleStream``: the examples read as they come.
Streamer = Callable[..., ExampleStream]


@dataclass(frozen=True)
class Format:
    """A registered file format: its reader, the file-name patterns that select it, the columns it yields
    (``()``: the file's own, named like protoembed's or mapped: a table format, which takes a column
    mapping), a description, optionally the streamed reader (``data.streaming``) and, for a table read
    from one file, its opener (``path -> Table``: what ``protoembed encode`` reads a corpus with)."""

    reader: Reader
    patterns: tuple[str, ...]
    columns: tuple[str, ...]
    description: str
    stream: Streamer | None = None
    table: Callable[..., Table] | None = None

    @property
    def mapped(self) -> bool:
        """Whether the format's columns are the file's own (a column mapping applies)."""
        return not self.columns


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
FORMATS: Registry[Format] = Registry(
    "data format",
    {
        "text": Format(
            _read_text, ("*.txt",), ("text",), "one sentence per line", streamer("text", open_text)
        ),
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
        "jsonl": Format(
            reader("jsonl", open_jsonl),
            ("*.jsonl", "*.jsonl.gz"),
            (),
            "JSON lines: one object per line, keys named like the example columns or mapped",
            streamer("jsonl", open_jsonl),
            open_jsonl,
        ),
        "csv": Format(
            reader("csv", open_csv),
            ("*.csv", "*.csv.gz"),
            (),
            "CSV with a header row naming the columns (named like the example columns or mapped)",
            streamer("csv", open_csv),
            open_csv,
        ),
        "tsv": Format(
            reader("tsv", open_tsv),
            ("*.tsv", "*.tsv.gz"),
            (),
            "tab-separated values (no quoting) with a header row naming the columns",
            streamer("tsv", open_tsv),
            open_tsv,
        ),
        "parquet": Format(
            reader("parquet", open_parquet),
            ("*.parquet",),
            (),
            "Parquet (pyarrow: pip install 'protoembed[datasets]'), columns named or mapped",
            streamer("parquet", open_parquet),
            open_parquet,
        ),
        "hf_dataset": Format(
            reader("hf_dataset", open_hf_dataset),
            (),  # a save_to_disk folder or a hub:owner/name id is recognised by locate_dataset, not by name
            (),
            "Hugging Face datasets: a save_to_disk folder, hub:owner/name, or a data file through "
            "datasets.load_dataset; option split (default train)",
            streamer("hf_dataset", open_hf_dataset),
        ),
    },
)


#: The format of text lines, one sentence a line (the fallback of :func:`infer_format`).
TEXT = "text"


def table_formats() -> list[str]:
    """The formats of tables read from one file (:attr:`Format.table`): ``jsonl``, ``csv``, ``tsv``,
    ``parquet``."""
    return [name for name, spec in FORMATS.items() if spec.table is not None]


def infer_format(path: str | os.PathLike[str], columns: Mapping[str, str] | None = None) -> str:
    """The format whose file-name patterns match ``path`` (``text`` when none does); with a column
    ``columns`` mapping, only the formats that take one (:attr:`Format.mapped`) are tried, so that
    ``my_nli.jsonl`` with a mapping is read as ``jsonl``, not ``snli_jsonl``."""
    name = Path(path).name
    for format_name, spec in FORMATS.items():
        if columns and not spec.mapped:
            continue
        if format_name != "text" and any(fnmatch.fnmatch(name, p) for p in spec.patterns):
            return format_name
    return "text"


def mapped_formats() -> list[str]:
    """The formats whose columns are the file's own (they take a column mapping)."""
    return [name for name, spec in FORMATS.items() if spec.mapped]


def _source(
    path: str | os.PathLike[str],
    format: str | None,
    data_dir: str | os.PathLike[str] | None,
    columns: Mapping[str, str] | None,
) -> tuple[str, Path | str]:
    """``(format, what its reader opens)``: the format given, else ``hf_dataset`` for a ``save_to_disk``
    folder or a ``hub:`` id (:func:`~protoembed.data.training.hf.locate_dataset`), else inferred from the
    name; checked to exist and to take ``columns``; the file resolved (:func:`resolve_corpus_path`)."""
    located = locate_dataset(path, data_dir) if format in (None, "hf_dataset") else None
    name = format or ("hf_dataset" if located is not None else infer_format(path, columns))
    if name not in FORMATS:
        raise ProtoembedError(f"{path}: {FORMATS.unknown(name)}")
    if columns and not FORMATS[name].mapped:
        if located is None:  # a directory or a missing file is said first: the mapping is not the mistake
            resolve_corpus_path(str(path), data_dir)
        raise ProtoembedError(
            f"{path}: format {name!r} has fixed columns ({', '.join(FORMATS[name].columns)}); a column "
            f"mapping applies to {', '.join(mapped_formats())}"
        )
    return name, located if located is not None else resolve_corpus_path(str(path), data_dir)


def format_of(
    path: str | os.PathLike[str],
    format: str | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    columns: Mapping[str, str] | None = None,
) -> str:
    """The format :func:`read_examples` reads ``path`` in (arguments and errors as there)."""
    return _source(path, format, data_dir, columns)[0]


def read_examples(
    path: str | os.PathLike[str],
    format: str | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    columns: Mapping[str, str] | None = None,
    **options: Any,
) -> Examples:
    """Read one training file into :class:`Examples`.

    Args:
        path: the file (relative paths: working directory, then the data directory of ``data_dir``:
            :func:`protoembed.data.paths.choose_data_dir`).
        format: a key of :data:`FORMATS`; ``None`` = :func:`infer_format`.
        data_dir: base of relative paths.
        columns: a column mapping ``{example column: the file's column}`` (table formats only; see
            :mod:`protoembed.data.training.columns`); ``None``: the columns named like protoembed's.
        **options: passed to the reader (``drop_unterminated_last_line`` for ``text``, ``split`` for
            ``allnli``); readers ignore options they do not know.
    Raises:
        ProtoembedError: unknown format, a mapping for a format with fixed columns, missing file, a
            malformed line (named as ``file:line``), a missing or empty cell (file, row and column).
    """
    name, resolved = _source(path, format, data_dir, columns)
    examples = FORMATS[name].reader(resolved, **({"columns": columns} if columns else {}), **options)
    if not len(examples):
        raise ProtoembedError(f"{resolved}: no usable example ({name} format)")
    return examples


def streamed_formats() -> list[str]:
    """The formats that can be streamed (:attr:`Format.stream`)."""
    return [name for name, spec in FORMATS.items() if spec.stream is not None]


def open_stream(
    path: str | os.PathLike[str],
    format: str | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    columns: Mapping[str, str] | None = None,
    **options: Any,
) -> ExampleStream:
    """The examples of one training file as a re-iterable stream (:class:`ExampleStream`): nothing is
    read until it is iterated, and each iteration reads the file again. Arguments as :func:`read_examples`.

    Raises:
        ProtoembedError: as :func:`read_examples`, or a format that cannot be streamed.
    """
    name, resolved = _source(path, format, data_dir, columns)
    spec = FORMATS[name]
    if spec.stream is None:
        raise ProtoembedError(
            f"{path}: format {name!r} cannot be streamed (data.streaming); streamed formats: "
            f"{', '.join(streamed_formats())}"
        )
    return spec.stream(resolved, columns, **options)


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
    raise columns_error(examples.where(), examples.names, needed, who)


def columns_error(
    where: str, names: Sequence[str], needed: ColumnSpec, who: str = "the objective"
) -> ProtoembedError:
    """The one-line error for examples from ``where`` with columns ``names`` that lack the ``needed`` ones."""
    return ProtoembedError(f"{where} has columns {', '.join(names)}; {who} needs {describe_columns(needed)}")


def check_streamed_columns(
    where: str, names: Sequence[str], needed: ColumnSpec, who: str = "the objective"
) -> None:
    """Streamed examples must have the ``needed`` columns themselves: a conversion (:data:`CONVERSIONS`)
    groups the whole corpus, which a stream never holds.

    Raises:
        ProtoembedError: the columns are missing (saying so when a conversion would give them in memory).
    """
    if satisfies(set(names), needed):
        return
    for conversion in CONVERSIONS:
        if conversion.source <= set(names) and satisfies(set(conversion.target), needed):
            raise ProtoembedError(
                f"{where} has columns {', '.join(names)}; {who} needs {describe_columns(needed)}, which "
                f"the conversion '{conversion.description}' makes from the whole corpus; set "
                "data.streaming: false, or give files with those columns"
            )
    raise columns_error(where, names, needed, who)
