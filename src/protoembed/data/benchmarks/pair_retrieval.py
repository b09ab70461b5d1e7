"""A retrieval split made from (query, document) pairs: the dev or test part of one's own training pairs,
read by the training data's readers (:func:`protoembed.data.training.formats.read_examples`: JSONL, CSV,
TSV, Parquet, a saved Hugging Face dataset; a column mapping names the file's own columns).

Each row is a query (its ``anchor`` column) and a relevant document (``positive``), with an optional
``negative`` document that joins the corpus as a distractor. The queries are the distinct anchors, in
the order of their first row; the corpus is the distinct positives and negatives; a query's relevant
documents (judgment 1) are the positives of every row with its text. Retrieval then scores it as it scores a
BEIR folder (:mod:`protoembed.evaluation.retrieval`): the same :class:`~protoembed.data.benchmarks.beir.RetrievalData`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from protoembed.core.errors import ProtoembedError
from protoembed.data.benchmarks.beir import RetrievalData

#: The columns a pairs file gives (after its column mapping): the query, its relevant document, and an
#: optional distractor.
QUERY, RELEVANT, DISTRACTOR = "anchor", "positive", "negative"


def read_pair_retrieval(
    path: str | os.PathLike[str], name: str, columns: Mapping[str, str] | None = None
) -> RetrievalData:
    """The retrieval split of the pairs in ``path`` (module docstring); ``name`` names the task.

    Raises:
        ProtoembedError: what the training readers raise for the file (missing, malformed, a missing
            cell), or a file without ``anchor`` and ``positive`` columns (those it has named).
    """
    from protoembed.data.training.formats import read_examples

    examples = read_examples(Path(path), columns=dict(columns) if columns else None)
    missing = [c for c in (QUERY, RELEVANT) if c not in examples.columns]
    if missing:
        raise ProtoembedError(
            f"{path}: task {name!r} reads (query, document) pairs: columns {QUERY} and {RELEVANT} "
            f"(optional {DISTRACTOR}; map the file's own with columns), it has {', '.join(examples.names)}"
        )
    queries: dict[str, str] = {}  # text -> id
    documents: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}

    def document(text: str) -> str:
        return documents.setdefault(text, f"d{len(documents)}")

    for i, (query, relevant) in enumerate(
        zip(examples.columns[QUERY], examples.columns[RELEVANT], strict=True)
    ):
        qid = queries.setdefault(query, f"q{len(queries)}")
        qrels.setdefault(qid, {})[document(relevant)] = 1
        if DISTRACTOR in examples.columns:
            document(examples.columns[DISTRACTOR][i])
    return RetrievalData(
        name=name,
        corpus_ids=list(documents.values()),
        corpus_texts=list(documents),
        query_ids=list(queries.values()),
        query_texts=list(queries),
        qrels=qrels,
    )
