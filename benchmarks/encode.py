"""Encoding throughput: protoembed vs sentence-transformers on the same model, batch size and sentences.

Encodes every distinct STS-B test sentence with the default backbone (all-MiniLM-L6-v2), alternating
``protoembed.Embedder.encode`` and ``SentenceTransformer.encode`` runs in one process, and prints both
throughputs (best of the runs: the least disturbed by other load). Last line: ``ratio=<protoembed / sentence-transformers>`` (> 1 = faster).

    python benchmarks/encode.py [--runs 3] [--batch-size 64] [--data-dir ../shared/data] [--device cpu]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch


def stsb_test_sentences(data_dir: Path) -> list[str]:
    """Distinct sentences of STS-B test (SentEval copy: 7 tab-separated columns, sentences last)."""
    path = data_dir / "senteval" / "STS" / "STSBenchmark" / "sts-test.csv"
    seen: dict[str, None] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        columns = line.split("\t")
        seen.update(dict.fromkeys(columns[5:7]))
    return list(seen)


def main() -> None:
    """Run the alternating benchmark and print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--data-dir", default=os.environ.get("PROTOEMBED_DATA", "../shared/data"))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    from sentence_transformers import SentenceTransformer

    import protoembed
    from protoembed.backbones import default_model_path

    sentences = stsb_test_sentences(Path(args.data_dir))
    ours = protoembed.load("default", device=args.device)
    peer = SentenceTransformer(default_model_path(), device=args.device)
    print(
        f"{len(sentences)} distinct STS-B test sentences, batch size {args.batch_size}, device {args.device}, "
        f"torch threads {torch.get_num_threads()}"
    )

    def run_ours() -> np.ndarray:
        return ours.encode(sentences, batch_size=args.batch_size, show_progress_bar=False)

    def run_peer() -> np.ndarray:
        return peer.encode(sentences, batch_size=args.batch_size, show_progress_bar=False)

    # warm-up, and a check that both compute the same vectors
    diff = float(np.abs(run_ours() - run_peer()).max())
    times: dict[str, list[float]] = {"protoembed": [], "sentence-transformers": []}
    for _ in range(args.runs):
        for name, fn in (("protoembed", run_ours), ("sentence-transformers", run_peer)):
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            start = time.perf_counter()
            fn()
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            times[name].append(time.perf_counter() - start)
    rates = {
        name: len(sentences) / min(values) for name, values in times.items()
    }  # best run: least disturbed
    for name, rate in rates.items():
        print(f"{name:>22}: {rate:8.1f} sentences/s (best of {args.runs} runs)")
    print(f"max abs difference between the two: {diff:.2e}")
    print(f"ratio={rates['protoembed'] / rates['sentence-transformers']:.3f}")


if __name__ == "__main__":
    main()
