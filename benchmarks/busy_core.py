"""Encoding while another process holds a core: protoembed's thread sizing against torch's default,
``OMP_NUM_THREADS=1`` and sentence-transformers, in the same conditions.

    python benchmarks/busy_core.py [--sentences 2000] [--runs 2] [--smoke]

A spinning process pinned to the last usable core runs for the whole benchmark. Each case encodes the
same sentences (the STS-B test sentences of the staged data, else a fixed list; ``--smoke``: 64 of them,
one run, a tiny random model in place of the default one: benchmarks/smoke.py) with the default model on the CPU, batch 64, in a fresh interpreter (OpenMP reads its settings
once, when torch loads): the best of ``--runs`` timed passes after one warm-up batch. Cases:

- ``protoembed (protoembed.threads)``: what ``protoembed encode`` does (threads = the free usable cores,
  OpenMP waiting passively; ``protoembed.core.threads.configure_process`` before torch is imported);
- ``protoembed, torch's default threads``: torch's own choice (a thread per core, OpenMP spinning): what
  ran before;
- ``protoembed, OMP_NUM_THREADS=1``;
- ``sentence-transformers`` (torch's default threads, as it runs out of the box).

Prints the CPU and load, one line per case (sentences/s and torch's threads), and ends with
``ratio=`` protoembed's sentences/s over sentence-transformers'.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import smoke  # noqa: E402
from machine import cpu_line, load_line  # noqa: E402

CASES = {
    "protoembed (protoembed.threads)": ("protoembed", True, {}),
    "protoembed, torch's default threads": ("protoembed", False, {}),
    "protoembed, OMP_NUM_THREADS=1": ("protoembed", False, {"OMP_NUM_THREADS": "1"}),
    "sentence-transformers": ("sentence-transformers", False, {}),
}
FALLBACK = [
    "A man is playing a guitar.",
    "A woman is slicing an onion.",
    "Two dogs are running through a field of grass while the children watch them from the fence.",
    "Stocks fell sharply after the report on Monday.",
    "The cat sat on the mat and looked out of the window at the birds in the garden.",
    "A child is riding a horse.",
    "The committee will meet again next week to discuss the budget for the coming year.",
    "Rain is expected tomorrow.",
]


def sentences(data_dir: Path, count: int) -> list[str]:
    """The first ``count`` distinct STS-B test sentences of the staged data, else :data:`FALLBACK`
    repeated with a number (so that they stay distinct)."""
    path = data_dir / "senteval" / "STS" / "STSBenchmark" / "sts-test.csv"
    if path.is_file():
        seen: dict[str, None] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            seen.update(dict.fromkeys(line.split("\t")[5:7]))
        return list(seen)[:count]
    return [f"{FALLBACK[i % len(FALLBACK)]} ({i})" for i in range(count)]


def spin() -> None:
    """Hold a core: pinned to the last usable one, busy until killed."""
    os.sched_setaffinity(0, [max(os.sched_getaffinity(0))])
    while True:
        pass


def child(library: str, configure: bool, texts: list[str], runs: int) -> dict:
    """One case in this (fresh) interpreter: its sentences/s (best of ``runs``) and torch's threads."""
    if configure:
        from protoembed.core.threads import configure_process

        configure_process()
    import torch

    if library == "protoembed":
        import protoembed

        model = protoembed.load(smoke.model_name(), device="cpu")
    else:
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(smoke.model_dir(), device="cpu")
    model.encode(texts[:64], batch_size=64)
    best = 0.0
    for _ in range(runs):
        start = time.perf_counter()
        model.encode(texts, batch_size=64)
        best = max(best, len(texts) / (time.perf_counter() - start))
    return {"rate": best, "threads": torch.get_num_threads()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=2)
    smoke.add_argument(parser)
    parser.add_argument("--data-dir", default=os.environ.get("PROTOEMBED_DATA", "../shared/data"))
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    count, runs = (64, 1) if args.smoke else (args.sentences, args.runs)
    texts = sentences(Path(args.data_dir), count)
    if args.child is not None:
        library, configure, _ = CASES[args.child]
        print(json.dumps(child(library, configure, texts, runs)))
        return 0
    if args.smoke:
        smoke.enable()
        smoke.tiny_model()  # built once, for the children too
    print(cpu_line())
    print(load_line())
    print(f"{len(texts)} sentences, batch 64, best of {runs}; one core held by a spinning process")
    spinner = multiprocessing.Process(target=spin, daemon=True)
    spinner.start()
    rates = {}
    try:
        for case, (_, _, env) in CASES.items():
            clean = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
            command = [sys.executable, __file__, "--child", case, "--data-dir", args.data_dir]
            command += ["--smoke"] if args.smoke else ["--sentences", str(count), "--runs", str(runs)]
            done = subprocess.run(command, capture_output=True, text=True, env={**clean, **env})
            lines = [x for x in done.stdout.splitlines() if x.startswith("{")]
            if done.returncode or not lines:
                raise SystemExit(f"{case} failed: {done.stderr.strip()[-2000:]}")
            result = json.loads(lines[-1])
            rates[case] = result["rate"]
            print(f"{case}: {result['rate']:.1f} sentences/s, {result['threads']} torch threads")
    finally:
        spinner.kill()
        spinner.join()
    print(load_line())
    ratio = rates["protoembed (protoembed.threads)"] / rates["sentence-transformers"]
    print(f"ratio={ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
