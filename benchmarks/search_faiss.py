"""Exact search against the FAISS inverted-file index on a corpus beyond exact search's comfort.

Vectors: synthetic, clustered to mimic sentence embeddings (encoding 200k real sentences takes too long
on a small CPU): ``--clusters`` centres drawn from a standard normal in ``--dim`` dimensions, each corpus
vector a centre plus Gaussian noise of ``--spread`` per coordinate (relative to the centres' scale),
L2-normalised; each query a corpus vector plus the same noise again (before normalising), so that it has
close neighbours (mean cosine of a query's exact top 1 and top 10: printed).
Both searches score by cosine:

- exact: :func:`protoembed.retrieval.semantic_search.rank` with ``index="exact"`` (block-wise, torch matmul);
- faiss: :class:`protoembed.retrieval.faiss_index.FaissIndex` (IVF-Flat, inner product over the normalised
  vectors, ``nlist`` about sqrt(n)), built once (k-means training + adding the corpus, timed apart),
  then searched at several ``nprobe`` (the default first).

recall@10: the share of the exact top 10 that FAISS returns, averaged over queries.

    python benchmarks/search_faiss.py [--n 200000] [--queries 1000] [--dim 384] [--clusters 2000]

Last line: ``ratio=<exact search seconds / faiss search seconds at the default nprobe> recall@10=<..>``.
``--smoke``: 5,000 vectors of width 32 in 50 clusters, 50 queries (checks that the script runs; measures
nothing).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import smoke
from machine import cpu_line, load_line


def synthetic(
    n: int, queries: int, dim: int, clusters: int, spread: float, seed: int
) -> tuple[np.ndarray, ...]:
    """``(queries, corpus)`` float32 vectors, L2-normalised (see the module docstring)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim), dtype=np.float32)
    corpus = centres[rng.integers(0, clusters, n)] + spread * rng.standard_normal((n, dim), dtype=np.float32)
    q = corpus[rng.choice(n, queries, replace=False)] + spread * rng.standard_normal(
        (queries, dim), dtype=np.float32
    )
    corpus /= np.linalg.norm(corpus, axis=1, keepdims=True)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return q, corpus


def recall(found: list[list[tuple[int, float]]], exact: list[list[tuple[int, float]]], k: int) -> float:
    """Mean share of each exact top ``k`` that ``found`` holds."""
    return float(
        np.mean([len({i for i, _ in f[:k]} & {i for i, _ in e[:k]}) / k for f, e in zip(found, exact)])
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000, help="corpus vectors")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--dim", type=int, default=384, help="width (all-MiniLM-L6-v2's: 384)")
    parser.add_argument("--clusters", type=int, default=2000)
    parser.add_argument("--spread", type=float, default=1.0, help="noise around the centres")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    smoke.add_argument(parser)
    args = parser.parse_args()
    if args.smoke:
        smoke.enable()
        args.n, args.queries, args.dim, args.clusters = 5000, 50, 32, 50

    import faiss
    import torch

    from protoembed.retrieval.faiss_index import FaissIndex
    from protoembed.retrieval.semantic_search import rank

    print(cpu_line())
    print(load_line())
    print(
        f"threads: torch {torch.get_num_threads()}, faiss {faiss.omp_get_max_threads()}; faiss {faiss.__version__}"
    )
    print(
        f"vectors: synthetic clustered (clusters {args.clusters}, spread {args.spread}), corpus {args.n} x "
        f"{args.dim}, {args.queries} queries, k {args.k}"
    )
    q, c = synthetic(args.n, args.queries, args.dim, args.clusters, args.spread, args.seed)

    start = time.perf_counter()
    exact = rank(q, c, args.k, "cosine")
    exact_s = time.perf_counter() - start
    print(f"exact: {exact_s:.3f} s ({args.queries / exact_s:.0f} queries/s)")
    top1, topk = np.mean([r[0][1] for r in exact]), np.mean([r[-1][1] for r in exact])
    print(f"exact scores: mean cosine of the top 1 {top1:.3f}, of the top {args.k}th {topk:.3f}")

    start = time.perf_counter()
    index = FaissIndex(c, exact_below=0)  # the vectors are normalised: inner product = cosine
    build_s = time.perf_counter() - start
    print(f"faiss IVF-Flat: nlist {index.nlist}, built (train + add) in {build_s:.3f} s")
    default_nprobe = index.nprobe
    results = {}
    for nprobe in sorted(
        {max(1, default_nprobe // 2), default_nprobe, 2 * default_nprobe, 4 * default_nprobe}
    ):
        index.index.nprobe = nprobe
        index.search(q[:10], args.k)  # warm up
        start = time.perf_counter()
        found = index.search(q, args.k)
        search_s = time.perf_counter() - start
        results[nprobe] = (search_s, recall(found, exact, args.k))
        mark = " (default)" if nprobe == default_nprobe else ""
        print(
            f"faiss nprobe {nprobe:>4}{mark}: {search_s:.3f} s, exact/faiss {exact_s / search_s:.1f}x, "
            f"recall@{args.k} {results[nprobe][1]:.4f}"
        )
    search_s, hit = results[default_nprobe]
    print(
        f"ratio={exact_s / search_s:.2f} recall@{args.k}={hit:.4f} (nprobe {default_nprobe} of {index.nlist})"
    )


if __name__ == "__main__":
    main()
