"""Retrieval with quantised document vectors against float32, on the own-pairs study's GoogleNews test split.

The split (title -> snippet; ``experiments/own_pairs_data.py``'s ``prepare``, from the GSDMM GoogleNews
files in the data directory) is written into a temporary folder; the default model's query and document
vectors are encoded once and every row is scored from them by ``protoembed eval retrieval``'s own search
(:func:`protoembed.evaluation.retrieval.evaluate_retrieval`, cosine, a title's own snippet relevant):
float32, int8 with the best 100 x ``--rescore-multiplier`` rescored by the float query, binary with the same
rescoring, and binary without rescoring. Each row: nDCG@10 x100, its share of float32's, bytes per vector.

Then the query latency of each row over a larger corpus: the test split's snippet vectors repeated to
``--latency-rows`` rows (100,000 by default; the vectors are quantised once, as a stored corpus is), all
2,402 queries searched in one call (``protoembed.retrieval.semantic_search.rank``: the search of ``protoembed
search`` and ``eval retrieval``), exact (numpy) and FAISS (flat indexes), the best of ``--latency-rounds``;
each row: milliseconds per query and the corpus's bytes.

    python benchmarks/quantized_search.py [--rescore-multiplier 4] [--latency-rows 100000]

Last line: ``ratio=<binary + rescoring nDCG@10 / float32 nDCG@10>``. ``--smoke``: the tiny random model on the
same split (checks that the script runs; measures nothing).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import smoke
from machine import cpu_line, load_line

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: The rows: (label, vector type, rescore multiplier or None for --rescore-multiplier).
ROWS = (
    ("float32", "float32", 0),
    ("int8, rescored", "int8", None),
    ("binary, rescored", "binary", None),
    ("binary, not rescored", "binary", 0),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rescore-multiplier", type=int, default=4, metavar="K")
    parser.add_argument("--latency-rows", type=int, default=100_000, help="corpus rows of the latency rows")
    parser.add_argument("--latency-rounds", type=int, default=3)
    smoke.add_argument(parser)
    args = parser.parse_args()
    if args.smoke:
        smoke.enable()
        args.latency_rows, args.latency_rounds = 3_000, 1
    import numpy as np
    from experiments.own_pairs_data import prepare, test_dir

    import protoembed
    from protoembed.evaluation.retrieval import evaluate_retrieval
    from protoembed.evaluation.tasks import beir_folder_task
    from protoembed.model.quantize import bytes_per_vector

    model = protoembed.load(smoke.model_name())
    cache: dict[tuple[str | None, str], np.ndarray] = {}

    def encode(texts: list[str], prompt_name: str | None = None) -> np.ndarray:
        """The model's vectors, each distinct text encoded once for every row."""
        missing = [t for t in dict.fromkeys(texts) if (prompt_name, t) not in cache]
        if missing:
            for text, vector in zip(missing, model.encode(missing, prompt_name=prompt_name)):
                cache[(prompt_name, text)] = vector
        return np.stack([cache[(prompt_name, t)] for t in texts])

    with tempfile.TemporaryDirectory() as tmp:
        stats = prepare("googlenews", protoembed.resolve_data_dir(None), Path(tmp))
        task_dir = test_dir(Path(tmp), "googlenews")
        task = beir_folder_task(task_dir)
        print(f"GoogleNews test split: {stats}")
        scores = {}
        for label, vectors, multiplier in ROWS:
            k = args.rescore_multiplier if multiplier is None else multiplier
            result = evaluate_retrieval(encode, None, [task], vectors=vectors, rescore_multiplier=k)
            scores[label] = result["avg"]
            share = scores[label] / scores["float32"] * 100
            size = bytes_per_vector(vectors, model.dimension)
            note = f" x{k}" if k and vectors != "float32" else ""
            print(
                f"{label}{note}: nDCG@10 {scores[label]:.2f} ({share:.1f}% of float32), {size} bytes per vector"
            )
        queries = [json.loads(line)["text"] for line in (task_dir / "queries.jsonl").open(encoding="utf-8")]
        documents = [json.loads(line)["text"] for line in (task_dir / "corpus.jsonl").open(encoding="utf-8")]
    latency(encode(queries), encode(documents), args)
    print(cpu_line())
    print(load_line())
    print(f"ratio={scores['binary, rescored'] / scores['float32']:.4f}")


def latency(queries: Any, documents: Any, args: argparse.Namespace) -> None:
    """Print each row's milliseconds per query over ``documents`` repeated to ``args.latency_rows`` rows,
    all ``queries`` in one :func:`~protoembed.retrieval.semantic_search.rank` call, exact and FAISS."""
    import numpy as np

    from protoembed.model.quantize import bytes_per_vector, calibration_ranges, needs_ranges, quantize
    from protoembed.retrieval.quantized_search import search_stored
    from protoembed.retrieval.semantic_search import rank

    corpus = np.resize(documents, (args.latency_rows, documents.shape[1])).astype(np.float32)
    corpus /= np.linalg.norm(corpus, axis=1, keepdims=True)
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    ranges = calibration_ranges(corpus)
    print(f"latency: {len(q)} queries in one call over {len(corpus)} rows (the snippets repeated)")
    for label, vectors, multiplier in ROWS:
        k = args.rescore_multiplier if multiplier is None else multiplier
        stored = corpus if vectors == "float32" else quantize(corpus, vectors, ranges)
        for index in ("exact", "faiss"):
            best = float("inf")
            for _ in range(args.latency_rounds):
                start = time.perf_counter()
                if vectors == "float32":
                    rank(q, stored, 10, "dot", index=index)
                else:
                    search_stored(q, stored, vectors, 10, k, ranges if needs_ranges(vectors) else None, index)
                best = min(best, time.perf_counter() - start)
            size = bytes_per_vector(vectors, corpus.shape[1]) * len(corpus) / 2**20
            print(f"{label} ({index}): {best / len(q) * 1e3:.3f} ms per query, corpus {size:.1f} MiB")


if __name__ == "__main__":
    main()
