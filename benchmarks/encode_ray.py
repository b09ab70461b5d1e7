"""``protoembed encode --engine ray --workers 2`` against the local ``--workers 2`` encode on the same cores.

Writes N lines (100,000 by default; ``--smoke``: 200 on a tiny random model), then encodes them with the
default model alternately by each engine (``--rounds`` each, 2 CPU workers a side, or with ``--device cuda``
one GPU worker a side; Ray's local cluster started once, outside the timing; each Ray run starts its
actors, inside it), and prints
sentences/s per run, the CPU (``lscpu``'s model and flags) and the load average before and after, and last
``ratio=`` (Ray's best sentences/s / the local best: the aim is >= 0.85).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import smoke
from corpus import generate
from machine import cpu_line, load_line
from protoembed.corpus import encode_corpus
from protoembed.corpus.ray_engine import encode_corpus_on_ray
from protoembed.data.paths import resolve_data_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="cpu: 2 workers a side on the CPU; cuda: one worker a side on one GPU (Ray: one actor, "
        "--gpus-per-worker 1; local: --devices cuda:0)",
    )
    smoke.add_argument(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        smoke.enable()
        args.lines, args.rounds = 200, 1
    model = smoke.model_dir()
    work = Path(tempfile.mkdtemp(prefix="encode-ray-"))
    try:
        src = work / "corpus.txt"
        generate(src, args.lines, resolve_data_dir(None))
        import ray

        gpu = args.device == "cuda"
        ray.init(num_cpus=2, num_gpus=1 if gpu else 0, log_to_driver=False)
        sides = {
            "local": {"workers": 1, "devices": ["cuda:0"]} if gpu else {"workers": 2},
            "ray": {"workers": 1, "gpus_per_worker": 1} if gpu else {"workers": 2},
        }
        print(cpu_line())
        print(f"before: {load_line()}")
        best = {"local": 0.0, "ray": 0.0}
        shard = max(1, args.lines // 20)
        for round_ in range(args.rounds):
            for engine in ("local", "ray"):
                out = work / f"{engine}-{round_}"
                start = time.perf_counter()
                encode = encode_corpus_on_ray if engine == "ray" else encode_corpus
                encode(model, src, out, shard_size=shard, show_progress=False, **sides[engine])
                rate = args.lines / (time.perf_counter() - start)
                best[engine] = max(best[engine], rate)
                print(f"{engine} round {round_ + 1}: {rate:.1f} sentences/s")
                shutil.rmtree(out)
        print(f"after: {load_line()}")
        print(f"ratio={best['ray'] / best['local']:.3f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
