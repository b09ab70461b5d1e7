"""A small folder in the BEIR layout, written by the tests that read one (the reader's, the suite's)."""

from __future__ import annotations

import json
from pathlib import Path

#: ``_id -> (title, text)``: d3 has no title; q2 is also a document's id (the identical-id rule).
CORPUS = {
    "d1": ("Cats", "cats purr and sleep"),
    "d2": ("Dogs", "dogs bark at night"),
    "d3": ("", "  birds sing in the morning  "),
    "q2": ("Fish", "fish swim in the sea"),
    "d5": ("Cats again", "a cat chases mice"),
}
#: ``_id -> text``: q4 is never judged in the test split.
QUERIES = {"q1": "what do cats do", "q2": "where do fish live", "q3": "which animal sings", "q4": "unjudged"}
#: ``(query-id, corpus-id, score)``: graded; q3 has a score-0 judgment only (no relevant document).
QRELS = [("q1", "d1", 2), ("q1", "d5", 1), ("q2", "q2", 1), ("q2", "d3", 0), ("q3", "d2", 0)]


def write_beir(
    folder: Path,
    corpus: dict[str, tuple[str, str]] | None = None,
    queries: dict[str, str] | None = None,
    qrels: list[tuple[str, str, int]] | None = None,
    split: str = "test",
) -> Path:
    """Write ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv`` (with its header) into ``folder``."""
    corpus = CORPUS if corpus is None else corpus
    queries = QUERIES if queries is None else queries
    qrels = QRELS if qrels is None else qrels
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"_id": i, "title": title, "text": text}) for i, (title, text) in corpus.items()]
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    lines = [json.dumps({"_id": i, "text": text, "metadata": {}}) for i, text in queries.items()]
    (folder / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows = ["query-id\tcorpus-id\tscore", *(f"{q}\t{d}\t{s}" for q, d, s in qrels)]
    (folder / "qrels" / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder
