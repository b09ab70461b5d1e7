"""Where retrieval on GoogleNews title -> snippet goes wrong: the story or the article within it.

A GoogleNews query (an article's title) has one relevant document, its own article's snippet; the other
snippets of its story (:mod:`experiments.own_pairs_data`: 1 to 152 articles a story, reporting one event)
are ranked as misses. :func:`story_measures` ranks a split's corpus for each query by cosine similarity and
separates the two kinds of error:

- ``top1_same_story``: the fraction of queries whose rank-1 document is a snippet of the query's story;
- ``top10_same_story``: the mean fraction of the 10 best-ranked documents that are of the query's story;
- ``exact_top1``: the fraction whose rank-1 document is the relevant one (precision@1);
- ``chance_top1``: the mean over queries of 1 / (the corpus's snippets of the query's story): the
  precision@1 of a ranking that finds the story every time and orders its snippets at random;
- ``story_documents_median``: the median of those counts.

A model near ``top1_same_story`` = 1 has only the order within a story left to learn.

``python experiments/own_pairs_story.py --model MODEL --task-dir FOLDER [--split test] --output OUT.json``
(the story of a text from ``clustering/gsdmm_original/{T,S}.jsonl`` under the data directory).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: python experiments/own_pairs_story.py
    import script_path  # noqa: F401  (puts the repository root on sys.path)

from experiments.own_pairs_data import GSDMM, _jsonl_texts  # noqa: E402
from experiments.records import write_json  # noqa: E402

#: The ranks of ``top10_same_story``.
TOP = 10


def story_measures(
    queries: np.ndarray,
    documents: np.ndarray,
    query_story: Sequence[int],
    document_story: Sequence[int],
    relevant: Sequence[int],
) -> dict[str, float]:
    """The measures of the module docstring. ``queries`` (n, d) and ``documents`` (m, d): vectors, ranked
    by cosine similarity (ties: the lower document index first); ``query_story`` / ``document_story``:
    each text's story; ``relevant``: each query's relevant document (an index into ``documents``)."""
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    d = documents / np.linalg.norm(documents, axis=1, keepdims=True)
    order = np.argsort(-(q @ d.T), axis=1, kind="stable")[:, :TOP]
    stories = np.asarray(document_story)
    own = np.asarray(query_story)[:, None]
    counts = np.array([int(np.sum(stories == s)) for s in query_story])
    return {
        "queries": len(query_story),
        "top1_same_story": float(np.mean(stories[order[:, 0]] == own[:, 0])),
        "top10_same_story": float(np.mean(stories[order] == own)),
        "exact_top1": float(np.mean(order[:, 0] == np.asarray(relevant))),
        "chance_top1": float(np.mean(1.0 / counts)),
        "story_documents_median": float(np.median(counts)),
    }


def googlenews_stories(data_dir: Path) -> tuple[dict[str, int], dict[str, int]]:
    """Title -> story and snippet -> story, from GSDMM's GoogleNews files (a text of several articles: the
    first article's story)."""
    maps: list[dict[str, int]] = []
    for part in ("T", "S"):
        texts: dict[str, int] = {}
        for text, story in _jsonl_texts(data_dir / GSDMM / f"{part}.jsonl"):
            texts.setdefault(text, story)
        maps.append(texts)
    return maps[0], maps[1]


def measure(model: str, folder: Path, split: str, data_dir: Path) -> dict[str, Any]:
    """:func:`story_measures` of ``model`` (loaded by :func:`protoembed.load`) on the BEIR folder's
    ``split``, read as protoembed's retrieval suite reads it (a query without judgments left out)."""
    import protoembed
    from protoembed.data.benchmarks.beir import read_beir

    titles, snippets = googlenews_stories(data_dir)
    data = read_beir(folder, split, folder.name)
    index = {doc: i for i, doc in enumerate(data.corpus_ids)}
    relevant = [next(index[d] for d, score in data.qrels[q].items() if score > 0) for q in data.query_ids]
    vectors = protoembed.load(model).encode(data.query_texts + data.corpus_texts)
    n = len(data.query_texts)
    return {
        "model": model,
        "split": split,
        **story_measures(
            vectors[:n],
            vectors[n:],
            [titles[text] for text in data.query_texts],
            [snippets[text] for text in data.corpus_texts],
            relevant,
        ),
    }


def main(argv: list[str] | None = None) -> int:
    """Measure one model (see the module docstring); returns the exit code."""
    from protoembed import resolve_data_dir

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--task-dir", type=Path, required=True)
    parser.add_argument("--split", default="test")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    write_json(args.output, measure(args.model, args.task_dir, args.split, resolve_data_dir(None)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
