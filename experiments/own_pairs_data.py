"""The own-pairs study's data: two sets of (query, document) pairs standing in for an engineer's own.

Each set is written by :func:`prepare` in the same layout. Under ``OUT/<set>/``: ``train_pairs.jsonl`` (one
row per training pair, with the set's own column names, mapped to anchor / positive in the configs),
``train_texts.txt`` (every distinct text of the training split: the unlabeled in-domain text of the
unsupervised methods), ``train_pool.txt`` (the distinct training documents: the pool hard negatives are
mined from), ``<set>-retrieval/`` (the test split in the BEIR layout: ``corpus.jsonl``, ``queries.jsonl``,
``qrels/test.tsv``, score 1 for a query's relevant documents: :func:`test_dir`) and ``stats.json`` (the
counts). Beside it, ``OUT/<set>-dev/`` (:func:`dev_dir`): the dev split in the same layout with
``qrels/dev.tsv``, what a run's checkpoint and learning rate are chosen on.

- ``snli``: SNLI's entailment pairs read as hypothesis (query) -> premise (document), from SentEval's copy
  (``senteval/SNLI/{s1,s2,labels}.<split>``; SNLI's own train split is not in it). Training: the ``dev``
  split but every :data:`DEV_PREMISE_EVERY`-th premise (in the order of first appearance) with all its
  hypotheses, which are the dev split (every premise of those groups in its corpus); test: the ``test``
  split, every distinct test premise in the corpus, a hypothesis relevant to each premise it entails.
- ``googlenews``: news titles (query) -> their snippets (document), GoogleNews as GSDMM released it
  (``clustering/gsdmm_original/{T,S,TS}.jsonl``: line i of T and of S are the title and the snippet of
  article i, 152 stories; an article is kept only when its ``TS`` line is its title and snippet joined, which
  proves the alignment). Split by story: the stories whose number is divisible by :data:`TEST_STORY_EVERY`
  are the test split; of the others, in story order, every :data:`DEV_STORY_EVERY`-th from the
  :data:`DEV_STORY_OFFSET` + 1-th on is the dev split, the rest training; so no dev or test article's story
  is ever trained on. A query's relevant document is its own article's snippet (the other snippets of its
  story are the hard part).

Why it is fair: the three splits are disjoint by construction (SNLI: its own test split, other image
captions, and dev premises no training pair has; GoogleNews: by story). A test pair whose query or document
text also occurs in the training or dev split's text is dropped, as is a dev pair whose text occurs in the
training texts or the test split (both counted in ``stats.json``), so no training or mining step sees a dev
or test text and no selection sees a test text. The test split is the one the study had before it had a
dev split: the texts it is kept apart from are the same (training and dev together are the former
training split), so its queries, corpus and qrels are unchanged.
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
#: GoogleNews stories whose number is divisible by this are the test split.
TEST_STORY_EVERY = 4
#: GoogleNews dev split: of the other stories in story order, those at positions ``i`` (from 0) with
#: ``i % DEV_STORY_EVERY == DEV_STORY_OFFSET`` (14 of 114 stories, 768 articles; the offset was chosen,
#: before any model was run, for a dev split under 1,000 queries: story sizes vary from 1 to 152 articles).
DEV_STORY_EVERY = 8
DEV_STORY_OFFSET = 3
#: SNLI dev split: the premises of SentEval's dev split at positions ``i`` (from 0, in the order of first
#: appearance) with ``i % DEV_PREMISE_EVERY == DEV_PREMISE_EVERY - 1``, with every hypothesis of theirs.
DEV_PREMISE_EVERY = 5
TEST_SPLIT, DEV_SPLIT = "test", "dev"


@dataclass
class PairSet:
    """A set read: training, dev and test pairs ``(query, document)``, the training split's texts, the mining
    pool (training documents), every text of the dev split (the test split is kept apart from it as from
    training), and the dev and test corpora (every document of the split)."""

    train: list[tuple[str, str]]
    dev: list[tuple[str, str]]
    held: list[tuple[str, str]]
    texts: list[str]
    pool: list[str]
    dev_texts: list[str]
    dev_documents: list[str]
    documents: list[str]


def read_snli(data_dir: Path, split: str) -> list[tuple[str, str, str]]:
    """``(premise, hypothesis, label)`` per line of SentEval's SNLI ``split`` (texts stripped)."""
    folder = data_dir / SNLI
    columns = [
        (folder / f"{name}.{split}").read_text(encoding="utf-8").splitlines()
        for name in ("s1", "s2", "labels")
    ]
    return [(p.strip(), h.strip(), label.strip()) for p, h, label in zip(*columns)]


def _entailments(rows: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
    return [(h, p) for p, h, label in rows if label == ENTAILMENT and p and h]


def snli_pairs(data_dir: Path) -> PairSet:
    """SNLI's entailment pairs (hypothesis, premise) of dev (training and, by premise, the dev split) and
    test; the pool and the corpora are every premise of their split, whatever its label."""
    rows, test = read_snli(data_dir, "dev"), read_snli(data_dir, "test")
    premises = list(dict.fromkeys(p for p, _, _ in rows))
    held_out = {p for i, p in enumerate(premises) if i % DEV_PREMISE_EVERY == DEV_PREMISE_EVERY - 1}
    train = [r for r in rows if r[0] not in held_out]
    dev = [r for r in rows if r[0] in held_out]
    return PairSet(
        train=_entailments(train),
        dev=_entailments(dev),
        held=_entailments(test),
        texts=[t for p, h, _ in train for t in (p, h) if t],
        pool=[p for p, _, _ in train if p],
        dev_texts=[t for p, h, _ in dev for t in (p, h) if t],
        dev_documents=[p for p, _, _ in dev if p],
        documents=[p for p, _, _ in test if p],
    )


def _jsonl_texts(path: Path) -> list[tuple[str, int]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(row["text"].strip(), int(row["cluster"])) for row in rows]


def dev_stories(stories: list[int]) -> set[int]:
    """The GoogleNews dev stories among ``stories`` (see :data:`DEV_STORY_EVERY`)."""
    others = sorted({s for s in stories if s % TEST_STORY_EVERY})
    return {s for i, s in enumerate(others) if i % DEV_STORY_EVERY == DEV_STORY_OFFSET}


def googlenews_pairs(data_dir: Path) -> PairSet:
    """GoogleNews (title, snippet) pairs of the training, dev and test stories, and every training text."""
    folder = data_dir / GSDMM
    titles, snippets, joined = (_jsonl_texts(folder / f"{name}.jsonl") for name in ("T", "S", "TS"))
    dev_set = dev_stories([story for _, story in titles])
    splits: dict[str, list[tuple[str, str]]] = {"train": [], "dev": [], "test": []}
    for (title, story), (snippet, _), (both, _) in zip(titles, snippets, joined):
        if title and snippet and both == f"{title} {snippet}":
            split = "test" if story % TEST_STORY_EVERY == 0 else "dev" if story in dev_set else "train"
            splits[split].append((title, snippet))
    train, dev, held = splits["train"], splits["dev"], splits["test"]
    return PairSet(
        train=train,
        dev=dev,
        held=held,
        texts=[t for pair in train for t in pair],
        pool=[d for _, d in train],
        dev_texts=[t for pair in dev for t in pair],
        dev_documents=[d for _, d in dev],
        documents=[d for _, d in held],
    )


#: Set name -> ``(reader of its pairs, (query column, document column))``.
SETS: dict[str, tuple[Callable[[Path], PairSet], tuple[str, str]]] = {
    "snli": (snli_pairs, ("hypothesis", "premise")),
    "googlenews": (googlenews_pairs, ("title", "snippet")),
}


def test_dir(data: Path, name: str) -> Path:
    """Set ``name``'s test split (BEIR layout, ``qrels/test.tsv``) in its data folder ``data``; the folder's
    name is the task's (``protoembed eval retrieval --task-dir``)."""
    return data / f"{name}-retrieval"


def dev_dir(data: Path, name: str) -> Path:
    """Set ``name``'s dev split (BEIR layout, ``qrels/dev.tsv``): ``<set>-dev/`` beside its data folder
    ``data`` (``runs/own-pairs/data/<set>-dev``, the folder the configs' dev task names)."""
    return data.parent / f"{name}-dev"


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def write_beir(
    folder: Path,
    split: str,
    pairs: list[tuple[str, str]],
    documents: list[str],
    unseen: Callable[[str], bool],
) -> dict[str, int]:
    """Write a retrieval split in the BEIR layout: the ``documents`` and ``pairs`` whose texts are
    ``unseen`` (ids in the order of first appearance: ``d0``..., ``q0``...), qrels ``qrels/<split>.tsv``;
    returns its counts (pairs dropped for a text seen elsewhere, corpus, queries, qrels)."""
    kept = [(q, d) for q, d in pairs if unseen(q) and unseen(d)]
    doc_ids = {d: f"d{i}" for i, d in enumerate(dict.fromkeys(d for d in documents if unseen(d)))}
    query_ids = {q: f"q{i}" for i, q in enumerate(dict.fromkeys(q for q, _ in kept))}
    qrels = sorted(
        {(query_ids[q], doc_ids[d]) for q, d in kept}, key=lambda r: (int(r[0][1:]), int(r[1][1:]))
    )
    write_text(
        folder / "corpus.jsonl", _jsonl([{"_id": i, "title": "", "text": d} for d, i in doc_ids.items()])
    )
    write_text(folder / "queries.jsonl", _jsonl([{"_id": i, "text": q} for q, i in query_ids.items()]))
    write_text(
        folder / "qrels" / f"{split}.tsv",
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in qrels),
    )
    return {
        "dropped": len(pairs) - len(kept),
        "corpus": len(doc_ids),
        "queries": len(query_ids),
        "qrels": len(qrels),
    }


def prepare(name: str, data_dir: Path, out: Path) -> dict[str, Any]:
    """Write set ``name``'s files under ``out`` and its dev split in :func:`dev_dir` (see the module
    docstring); returns their counts."""
    read, (query_column, document_column) = SETS[name]
    pairs = read(data_dir)
    train = pairs.train
    texts = list(dict.fromkeys(pairs.texts))
    # the test split is kept apart from training and dev together (the former training split)
    before_dev = set(texts) | set(pairs.dev_texts)
    test = write_beir(
        test_dir(out, name), TEST_SPLIT, pairs.held, pairs.documents, lambda t: t not in before_dev
    )
    test_texts = {t for pair in pairs.held for t in pair} | set(pairs.documents)
    apart = set(texts) | test_texts
    dev = write_beir(dev_dir(out, name), DEV_SPLIT, pairs.dev, pairs.dev_documents, lambda t: t not in apart)
    write_text(out / "train_pairs.jsonl", _jsonl([{query_column: q, document_column: d} for q, d in train]))
    write_text(out / "train_texts.txt", "".join(t + "\n" for t in texts))
    pool = list(dict.fromkeys(pairs.pool))
    write_text(out / "train_pool.txt", "".join(d + "\n" for d in pool))
    stats = {
        "set": name,
        "columns": [query_column, document_column],
        "train_pairs": len(train),
        "train_texts": len(texts),
        "train_pool": len(pool),
        "test_pairs": len(pairs.held),
        "test_pairs_dropped_seen_in_training_or_dev": test["dropped"],
        "corpus": test["corpus"],
        "queries": test["queries"],
        "qrels": test["qrels"],
        "dev_pairs": len(pairs.dev),
        "dev_pairs_dropped_seen_in_training_or_test": dev["dropped"],
        "dev_corpus": dev["corpus"],
        "dev_queries": dev["queries"],
        "dev_qrels": dev["qrels"],
    }
    write_json(out / "stats.json", stats)
    return stats
