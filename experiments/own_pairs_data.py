"""The own-pairs study's data: two sets of (query, document) pairs standing in for an engineer's own.

Each set is written under ``OUT/<set>/`` by :func:`prepare` in the same layout: ``train_pairs.jsonl`` (one
row per training pair, with the set's own column names, mapped to anchor / positive in the configs),
``train_texts.txt`` (every distinct text of the training split: the unlabeled in-domain text of the
unsupervised methods), ``train_pool.txt`` (the distinct training documents: the pool hard negatives are
mined from), ``<set>-retrieval/`` (the retrieval split in the BEIR layout: ``corpus.jsonl``, ``queries.jsonl``,
``qrels/test.tsv``, score 1 for a query's relevant documents) and ``stats.json`` (the counts).

- ``snli``: SNLI's entailment pairs read as hypothesis (query) -> premise (document), from SentEval's copy
  (``senteval/SNLI/{s1,s2,labels}.<split>``). Training: the ``dev`` split; retrieval: the ``test`` split,
  every distinct test premise in the corpus, a hypothesis relevant to each premise it entails.
- ``googlenews``: news titles (query) -> their snippets (document), GoogleNews as GSDMM released it
  (``clustering/gsdmm_original/{T,S,TS}.jsonl``: line i of T and of S are the title and the snippet of
  article i, 152 stories; an article is kept only when its ``TS`` line is its title and snippet joined, which
  proves the alignment). Split by story: the stories whose number is divisible by 4 are the retrieval split,
  the others training, so no test article's story is ever trained on; a query's relevant document is its own
  article's snippet (the other snippets of its story are the hard part).

Why it is fair: the retrieval split is disjoint from training by construction (SNLI's own splits, other
image captions; GoogleNews by story), and a retrieval pair whose query or document text also occurs in the
training split's text is dropped (counted in ``stats.json``), so no training or mining step sees a
retrieval text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.records import write_json, write_text

SNLI = "senteval/SNLI"
GSDMM = "clustering/gsdmm_original"
ENTAILMENT = "entailment"
#: GoogleNews stories whose number is divisible by this are the retrieval split.
TEST_STORY_EVERY = 4


@dataclass
class PairSet:
    """A set read: training and retrieval pairs ``(query, document)``, the training split's texts, the
    mining pool (training documents) and the retrieval corpus (every retrieval-split document)."""

    train: list[tuple[str, str]]
    held: list[tuple[str, str]]
    texts: list[str]
    pool: list[str]
    documents: list[str]


def read_snli(data_dir: Path, split: str) -> list[tuple[str, str, str]]:
    """``(premise, hypothesis, label)`` per line of SentEval's SNLI ``split`` (texts stripped)."""
    folder = data_dir / SNLI
    columns = [
        (folder / f"{name}.{split}").read_text(encoding="utf-8").splitlines()
        for name in ("s1", "s2", "labels")
    ]
    return [(p.strip(), h.strip(), label.strip()) for p, h, label in zip(*columns)]


def snli_pairs(data_dir: Path) -> PairSet:
    """SNLI's entailment pairs (hypothesis, premise) of dev (training) and test; the pool and the corpus
    are every premise of their split, whatever its label."""
    dev, test = read_snli(data_dir, "dev"), read_snli(data_dir, "test")
    return PairSet(
        train=[(h, p) for p, h, label in dev if label == ENTAILMENT and p and h],
        held=[(h, p) for p, h, label in test if label == ENTAILMENT and p and h],
        texts=[t for p, h, _ in dev for t in (p, h) if t],
        pool=[p for p, _, _ in dev if p],
        documents=[p for p, _, _ in test if p],
    )


def _jsonl_texts(path: Path) -> list[tuple[str, int]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(row["text"].strip(), int(row["cluster"])) for row in rows]


def googlenews_pairs(data_dir: Path) -> PairSet:
    """GoogleNews (title, snippet) pairs of the training and retrieval stories, and every training text."""
    folder = data_dir / GSDMM
    titles, snippets, joined = (_jsonl_texts(folder / f"{name}.jsonl") for name in ("T", "S", "TS"))
    train: list[tuple[str, str]] = []
    held: list[tuple[str, str]] = []
    for (title, story), (snippet, _), (both, _) in zip(titles, snippets, joined):
        if title and snippet and both == f"{title} {snippet}":
            (held if story % TEST_STORY_EVERY == 0 else train).append((title, snippet))
    return PairSet(
        train=train,
        held=held,
        texts=[t for pair in train for t in pair],
        pool=[d for _, d in train],
        documents=[d for _, d in held],
    )


#: Set name -> ``(reader of its pairs, (query column, document column))``.
SETS: dict[str, tuple[Callable[[Path], PairSet], tuple[str, str]]] = {
    "snli": (snli_pairs, ("hypothesis", "premise")),
    "googlenews": (googlenews_pairs, ("title", "snippet")),
}


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def prepare(name: str, data_dir: Path, out: Path) -> dict[str, Any]:
    """Write set ``name``'s files under ``out`` (see the module docstring); returns their counts."""
    read, (query_column, document_column) = SETS[name]
    pairs = read(data_dir)
    train, held = pairs.train, pairs.held
    texts = list(dict.fromkeys(pairs.texts))
    seen = set(texts)
    kept = [(q, d) for q, d in held if q not in seen and d not in seen]
    doc_ids = {d: f"d{i}" for i, d in enumerate(dict.fromkeys(d for d in pairs.documents if d not in seen))}
    query_ids = {q: f"q{i}" for i, q in enumerate(dict.fromkeys(q for q, _ in kept))}
    qrels = sorted(
        {(query_ids[q], doc_ids[d]) for q, d in kept}, key=lambda r: (int(r[0][1:]), int(r[1][1:]))
    )
    write_text(out / "train_pairs.jsonl", _jsonl([{query_column: q, document_column: d} for q, d in train]))
    write_text(out / "train_texts.txt", "".join(t + "\n" for t in texts))
    pool = list(dict.fromkeys(pairs.pool))
    write_text(out / "train_pool.txt", "".join(d + "\n" for d in pool))
    beir = out / f"{name}-retrieval"
    write_text(
        beir / "corpus.jsonl", _jsonl([{"_id": i, "title": "", "text": d} for d, i in doc_ids.items()])
    )
    write_text(beir / "queries.jsonl", _jsonl([{"_id": i, "text": q} for q, i in query_ids.items()]))
    write_text(
        beir / "qrels" / "test.tsv",
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in qrels),
    )
    stats = {
        "set": name,
        "columns": [query_column, document_column],
        "train_pairs": len(train),
        "train_texts": len(texts),
        "train_pool": len(pool),
        "test_pairs": len(held),
        "test_pairs_dropped_seen_in_training": len(held) - len(kept),
        "corpus": len(doc_ids),
        "queries": len(query_ids),
        "qrels": len(qrels),
    }
    write_json(out / "stats.json", stats)
    return stats
