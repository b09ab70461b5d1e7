"""The own-pairs study's data: SNLI entailment pairs as an engineer's in-domain (query, document) pairs.

From SentEval's SNLI copy (``senteval/SNLI/s1.<split>``, ``s2.<split>``, ``labels.<split>`` under
``$PROTOEMBED_DATA``; premise, hypothesis, label per line):

- training (the ``dev`` split): ``train_pairs.jsonl`` with one row ``{"hypothesis", "premise"}`` per
  entailment pair (an engineer's column names, mapped in the configs: anchor = hypothesis, the query;
  positive = premise, the document), ``train_texts.txt`` (every distinct premise and hypothesis of the split,
  any label: the unlabeled in-domain text of the unsupervised methods) and ``train_premises.txt`` (the
  distinct premises: the pool hard negatives are mined from);
- retrieval (the ``test`` split), in the BEIR layout: ``corpus.jsonl`` (each distinct premise, ``_id``
  ``d<k>``), ``queries.jsonl`` (each distinct entailment hypothesis, ``q<k>``) and ``qrels/test.tsv``
  (a query's relevant documents: every premise it is an entailment hypothesis of, score 1).

Why it is fair: the splits are SNLI's own, drawn from different image captions, and a test premise or
hypothesis that also occurs in the training split's text is dropped from the retrieval set (counted in
``stats.json``), so no training step, unsupervised or supervised, nor the mining, sees a retrieval text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from experiments.records import write_json, write_text

SNLI = "senteval/SNLI"
TRAIN_SPLIT, TEST_SPLIT = "dev", "test"
ENTAILMENT = "entailment"


def read_snli(data_dir: Path, split: str) -> list[tuple[str, str, str]]:
    """``(premise, hypothesis, label)`` per line of SentEval's SNLI ``split`` (texts stripped)."""
    folder = data_dir / SNLI
    columns = [
        (folder / f"{name}.{split}").read_text(encoding="utf-8").splitlines()
        for name in ("s1", "s2", "labels")
    ]
    return [(p.strip(), h.strip(), label.strip()) for p, h, label in zip(*columns)]


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def prepare(data_dir: Path, out: Path) -> dict[str, Any]:
    """Write the study's files under ``out`` (see the module docstring); returns their counts."""
    train = read_snli(data_dir, TRAIN_SPLIT)
    pairs = [{"hypothesis": h, "premise": p} for p, h, label in train if label == ENTAILMENT and p and h]
    texts = list(dict.fromkeys(t for p, h, _ in train for t in (p, h) if t))
    premises = list(dict.fromkeys(p for p, _, _ in train if p))
    seen = set(texts)
    test = read_snli(data_dir, TEST_SPLIT)
    kept = [
        (p, h) for p, h, label in test if label == ENTAILMENT and p and h and p not in seen and h not in seen
    ]
    doc_ids = {p: f"d{i}" for i, p in enumerate(dict.fromkeys(p for p, _, _ in test if p and p not in seen))}
    query_ids = {h: f"q{i}" for i, h in enumerate(dict.fromkeys(h for _, h in kept))}
    qrels = sorted(
        {(query_ids[h], doc_ids[p]) for p, h in kept}, key=lambda r: (int(r[0][1:]), int(r[1][1:]))
    )
    write_text(out / "train_pairs.jsonl", _jsonl(pairs))
    write_text(out / "train_texts.txt", "".join(t + "\n" for t in texts))
    write_text(out / "train_premises.txt", "".join(p + "\n" for p in premises))
    beir = out / "snli-retrieval"
    write_text(
        beir / "corpus.jsonl", _jsonl([{"_id": i, "title": "", "text": p} for p, i in doc_ids.items()])
    )
    write_text(beir / "queries.jsonl", _jsonl([{"_id": i, "text": h} for h, i in query_ids.items()]))
    write_text(
        beir / "qrels" / "test.tsv",
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in qrels),
    )
    stats = {
        "train_split": TRAIN_SPLIT,
        "train_pairs": len(pairs),
        "train_texts": len(texts),
        "train_premises": len(premises),
        "test_split": TEST_SPLIT,
        "test_entailment_pairs": sum(label == ENTAILMENT for _, _, label in test),
        "test_pairs_dropped_seen_in_training": sum(label == ENTAILMENT for _, _, label in test) - len(kept),
        "corpus": len(doc_ids),
        "queries": len(query_ids),
        "qrels": len(qrels),
    }
    write_json(out / "stats.json", stats)
    return stats
