"""The reader of a retrieval task's folder in the BEIR layout (the layout of BEIR and of MTEB's retrieval
tasks):

- ``corpus.jsonl``: one JSON object a line, ``{"_id", "title", "text"}`` (``title`` may be absent);
- ``queries.jsonl``: one JSON object a line, ``{"_id", "text"}``;
- ``qrels/<split>.tsv``: a header line ``query-id<TAB>corpus-id<TAB>score``, then one judgment a line
  (an integer score; 1 and above is relevant, higher is more relevant).

As BEIR reads it: a document's text is its title joined to its text by one space, stripped
(:func:`join_title`); only the queries judged in the split are evaluated, in the order of their first
judgment; other fields of a line (``metadata``) are ignored; an integer ``_id`` is read as its text.

Judgments of ids the folder lacks, as datasets ship them (ArguAna's qrels name a document its corpus
lacks; NFCorpus's test qrels name queries its queries file lacks), are scored as BEIR scores them and
counted (:attr:`RetrievalData.missing_documents`, :attr:`RetrievalData.missing_queries`, logged once):

- a document missing from the corpus stays a relevant document of its query that no run can retrieve
  (BEIR's loader keeps the judgment; ``pytrec_eval`` counts it in nDCG's ideal ranking and in recall);
- a query missing from the queries file is left out with its judgments (BEIR's loader stops on it).

Every other problem is a one-line :class:`~protoembed.core.errors.ProtoembedError` naming the file and the line: a
line that is not a JSON object, or whose ``_id`` / ``text`` / ``title`` key is missing (the key and the
line's keys named) or not a string (the key, the JSON type and the value named), an id given twice, an empty corpus, a qrels
file without its header or whose judged queries are all missing, or a pair judged twice.
"""

from __future__ import annotations

import csv
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protoembed.core.errors import ProtoembedError
from protoembed.data.lines import iter_lines, json_object

logger = logging.getLogger(__name__)

CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"
QRELS_FOLDER = "qrels"
#: The qrels files' header.
QRELS_HEADER = ("query-id", "corpus-id", "score")
#: What joins a document's title to its text (BEIR's and MTEB's separator).
TITLE_SEPARATOR = " "


@dataclass
class RetrievalData:
    """A retrieval task's split: the corpus (ids and texts, title joined), the judged queries (ids and
    texts) and the judgments (query id -> document id -> score; documents missing from the corpus
    included), with the numbers of distinct judged ids the folder lacks (module docstring)."""

    name: str
    corpus_ids: list[str]
    corpus_texts: list[str]
    query_ids: list[str]
    query_texts: list[str]
    qrels: dict[str, dict[str, int]]
    missing_documents: int = 0
    missing_queries: int = 0


def beir_files(folder: str, split: str) -> list[str]:
    """The files of ``split`` in a BEIR folder (``/``-separated, under ``folder`` as given)."""
    return [f"{folder}/{CORPUS_FILE}", f"{folder}/{QUERIES_FILE}", f"{folder}/{QRELS_FOLDER}/{split}.tsv"]


def beir_splits(folder: Path, splits: tuple[str, ...]) -> tuple[str, ...]:
    """Those of ``splits`` whose ``qrels/<split>.tsv`` the folder has.

    Raises:
        ProtoembedError: none of them (the folder named, and what it must hold).
    """
    present = tuple(s for s in splits if (folder / QRELS_FOLDER / f"{s}.tsv").is_file())
    if not present:
        wanted = ", ".join(f"{s}.tsv" for s in splits)
        raise ProtoembedError(
            f"{folder / QRELS_FOLDER}: no qrels file ({wanted}); a BEIR folder holds {CORPUS_FILE}, "
            f"{QUERIES_FILE} and {QRELS_FOLDER}/<split>.tsv"
        )
    return present


def join_title(title: str, text: str) -> str:
    """A document's text as BEIR and MTEB encode it: ``title + " " + text``, stripped (no title: the text
    stripped)."""
    return (title + TITLE_SEPARATOR + text).strip()


#: The keys of a line of ``corpus.jsonl`` (``title`` optional) and of ``queries.jsonl``.
CORPUS_KEYS, QUERY_KEYS = ("_id", "title", "text"), ("_id", "text")
#: JSON's name of a value's type, for the error of a key of the wrong type.
_JSON_TYPES = {bool: "a boolean", int: "a number", float: "a number", list: "an array", dict: "an object"}


def _field(
    path: Path, lineno: int, record: dict[str, Any], key: str, keys: tuple[str, ...], optional: bool = False
) -> str:
    """The text of ``key`` in the line's object (``_id``: an integer read as its text; ``optional``: an
    absent or null key is ``""``); ``keys``: those a line of the file has (:data:`CORPUS_KEYS`,
    :data:`QUERY_KEYS`).

    Raises:
        ProtoembedError: the file and line, and the key: missing (the line's keys and the file's named),
            or not a string (its JSON type and value; ``_id``: empty).
    """
    value = record.get(key)
    if value is None and optional:
        return ""
    if key == "_id" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if key not in record:
        has = ", ".join(f'"{k}"' for k in record) or "none"
        raise ProtoembedError(
            f'{path}:{lineno}: no "{key}" key (the line has {has}); a line of {path.name} is an object with '
            + ", ".join(f'"{k}"' + (" (optional)" if k == "title" else "") for k in keys)
        )
    if not isinstance(value, str) or (key == "_id" and not value):
        shown = json.dumps(value, ensure_ascii=False)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        got = "null" if value is None else f"{_JSON_TYPES.get(type(value), 'an empty string')} {shown}"
        raise ProtoembedError(
            f'{path}:{lineno}: "{key}" must be a {"non-empty " * (key == "_id")}string, got {got}'
        )
    return value


def read_jsonl_texts(path: Path, titled: bool) -> dict[str, str]:
    """``_id -> text`` (with ``titled``, the title joined by :func:`join_title`) of a corpus or queries
    file, in file order (blank lines skipped; the errors of the module docstring, by ``file:line``)."""
    texts: dict[str, str] = {}
    first_line: dict[str, int] = {}
    keys = CORPUS_KEYS if titled else QUERY_KEYS
    for lineno, line in enumerate(iter_lines(path), 1):
        if not line.strip():
            continue
        record = json_object(path, lineno, line)
        doc_id = _field(path, lineno, record, "_id", keys)
        text = _field(path, lineno, record, "text", keys)
        if doc_id in texts:
            raise ProtoembedError(
                f"{path}:{lineno}: duplicate _id {doc_id!r} (first on line {first_line[doc_id]})"
            )
        texts[doc_id] = (
            join_title(_field(path, lineno, record, "title", keys, optional=True), text) if titled else text
        )
        first_line[doc_id] = lineno
    return texts


def _rows(rows: Any, path: Path) -> Iterator[list[str]]:
    """The rows of a ``csv.reader``, a malformed one (a NUL byte) the one-line error naming its line."""
    try:
        yield from rows
    except csv.Error as err:
        raise ProtoembedError(f"{path}:{rows.line_num}: {err}") from None


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """The judgments of a qrels file (query id -> document id -> score, in file order; the errors of the
    module docstring, by ``file:line``)."""
    header = "\t".join(QRELS_HEADER)
    qrels: dict[str, dict[str, int]] = {}
    first_line: dict[tuple[str, str], int] = {}
    has_header = False
    rows = csv.reader(iter_lines(path), delimiter="\t", quoting=csv.QUOTE_MINIMAL)  # as BEIR reads them
    for row in _rows(rows, path):
        lineno = rows.line_num
        if not has_header:
            has_header = True
            if tuple(cell.strip().lower() for cell in row) != QRELS_HEADER:
                raise ProtoembedError(f"{path}:1: expected the header {header!r}, got {chr(9).join(row)!r}")
            continue
        if not row or not "".join(row).strip():
            continue
        if len(row) != len(QRELS_HEADER):
            raise ProtoembedError(
                f"{path}:{lineno}: expected 3 tab-separated columns ({', '.join(QRELS_HEADER)}), got {len(row)}"
            )
        query, doc, score = row
        try:
            value = int(score)
        except ValueError:
            raise ProtoembedError(f"{path}:{lineno}: score must be an integer, got {score!r}") from None
        if (query, doc) in first_line:
            raise ProtoembedError(
                f"{path}:{lineno}: query-id {query!r} and corpus-id {doc!r} are judged twice "
                f"(first on line {first_line[query, doc]})"
            )
        first_line[query, doc] = lineno
        qrels.setdefault(query, {})[doc] = value
    if not has_header:
        raise ProtoembedError(f"{path}: empty; expected the header {header!r}, then judgments")
    if not qrels:
        raise ProtoembedError(f"{path}: no judgments after the header")
    return qrels


def read_beir(folder: Path, split: str, name: str) -> RetrievalData:
    """``split`` of the BEIR folder ``folder`` as the task ``name`` (see the module docstring).

    Raises:
        ProtoembedError: a missing or malformed file (the file and line named).
    """
    corpus = read_jsonl_texts(folder / CORPUS_FILE, titled=True)
    if not corpus:
        raise ProtoembedError(f"{folder / CORPUS_FILE}: no documents")
    queries = read_jsonl_texts(folder / QUERIES_FILE, titled=False)
    path = folder / QRELS_FOLDER / f"{split}.tsv"
    judged = read_qrels(path)
    qrels = {query: docs for query, docs in judged.items() if query in queries}
    if not qrels:
        raise ProtoembedError(
            f"{path}: none of its {len(judged)} judged queries is in {folder / QUERIES_FILE}"
        )
    missing_documents = len({doc for docs in qrels.values() for doc in docs if doc not in corpus})
    missing_queries = len(judged) - len(qrels)
    if missing_documents or missing_queries:
        logger.warning(
            "%s: the %s qrels name %d document(s) missing from %s (relevant, never retrieved) and %d "
            "query id(s) missing from %s (left out), as BEIR scores them",
            name,
            split,
            missing_documents,
            CORPUS_FILE,
            missing_queries,
            QUERIES_FILE,
        )
    return RetrievalData(
        name=name,
        corpus_ids=list(corpus),
        corpus_texts=list(corpus.values()),
        query_ids=list(qrels),
        query_texts=[queries[q] for q in qrels],
        qrels=qrels,
        missing_documents=missing_documents,
        missing_queries=missing_queries,
    )
