"""protoembed's retrieval metrics against pytrec_eval (the reference BEIR and MTEB use), on one random run.

The run: ``--queries`` queries, each with ``--depth`` retrieved documents out of ``--docs`` (scores rounded
to one decimal, so ties are common) and 1-5 judged documents with graded scores 0-3 (some queries have no
relevant one). Both compute nDCG, MRR, Recall, MAP and Precision at 1, 3, 5, 10, 100, averaged the BEIR
way (the reference: ``tests/test_retrieval_metrics.py``'s :func:`reference`).

    python benchmarks/retrieval_metrics.py [--queries 2000] [--depth 100] [--docs 5000] [--seed 0]

Prints the CPU, the load average, the largest absolute difference over every metric (x1, in 0..1) and the
two times; last line: ``ratio=<pytrec_eval seconds / protoembed seconds>``. ``--smoke``: 50 queries of
depth 20 over 500 documents (checks that the script runs; measures nothing).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.test_retrieval_metrics import reference  # noqa: E402

import smoke  # noqa: E402
from machine import cpu_line, load_line  # noqa: E402
from protoembed.evaluation.retrieval_metrics import retrieval_scores  # noqa: E402


def random_run(queries: int, depth: int, docs: int, seed: int) -> tuple[dict, dict]:
    """``(qrels, run)`` (see the module docstring)."""
    rng = random.Random(seed)
    qrels, run = {}, {}
    for q in range(queries):
        judged = rng.sample(range(docs), rng.randint(1, 5))
        qrels[f"q{q}"] = {f"d{d}": rng.randint(0, 3) for d in judged}
        retrieved = set(rng.sample(range(docs), depth)) | set(judged[: rng.randint(0, len(judged))])
        run[f"q{q}"] = {f"d{d}": round(rng.random(), 1) for d in retrieved}
    return qrels, run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--docs", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    smoke.add_argument(parser)
    args = parser.parse_args()
    if args.smoke:
        smoke.enable()
        args.queries, args.depth, args.docs = 50, 20, 500
    qrels, run = random_run(args.queries, args.depth, args.docs, args.seed)
    start = time.perf_counter()
    ours = retrieval_scores(qrels, run)
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    theirs = reference(qrels, run)
    theirs_s = time.perf_counter() - start
    worst = max(ours, key=lambda key: abs(ours[key] - theirs[key]))
    print(cpu_line())
    print(load_line())
    print(f"run: {args.queries} queries x {len(next(iter(run.values())))}+ documents, seed {args.seed}")
    print(f"largest difference: {abs(ours[worst] - theirs[worst]):.3g} ({worst}: {ours[worst]:.9f})")
    print(f"protoembed {ours_s:.3f} s, pytrec_eval {theirs_s:.3f} s (its five measure calls)")
    print(f"ratio={theirs_s / ours_s:.3f}")
    return 0 if abs(ours[worst] - theirs[worst]) <= 1e-6 else 1


if __name__ == "__main__":
    sys.exit(main())
