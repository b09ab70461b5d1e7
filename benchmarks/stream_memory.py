"""Peak memory of a 2M-row JSONL corpus read in memory against the same corpus streamed (data.streaming).

The corpus (``anchor`` / ``positive`` pairs, distinct sentences made from a small vocabulary) is generated in
a temporary folder, deleted afterwards. Each measurement runs in a fresh subprocess, libraries imported
before the baseline; the peak is the rise of the resident set's high-water mark (``VmHWM``, reset through
``/proc/self/clear_refs`` before):

- ``in memory``: :func:`protoembed.training.components.read_training_examples` (the in-memory path:
  :func:`protoembed.data.training.formats.read_examples`), the examples kept until measured;
- ``streamed``: what training with ``data.streaming: true`` runs: the counting pass
  (:meth:`~protoembed.data.training.streaming.StreamedExamples.count`), then one epoch of
  :class:`~protoembed.training.streaming.StreamedBatches` (batches of ``--batch-size``, shuffle buffer
  ``--shuffle-buffer``) through its DataLoader and :class:`~protoembed.training.step.Collator`.

    python benchmarks/stream_memory.py [--rows 2000000] [--batch-size 64] [--shuffle-buffer 10000]

Prints the CPU and the load average; last line: ``ratio=<in-memory peak rise / streamed peak rise>``.
``--smoke``: 2,000 rows, batches of 8, a shuffle buffer of 100 (checks that the script runs; measures
nothing).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import smoke
from child import child_result
from machine import cpu_line, load_line

WORDS = [
    "the",
    "a",
    "man",
    "woman",
    "child",
    "dog",
    "cat",
    "plays",
    "runs",
    "reads",
    "sees",
    "a",
    "small",
    "large",
    "red",
    "green",
    "house",
    "park",
    "river",
]


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def generate(path: Path, rows: int) -> int:
    """Write ``rows`` JSON lines ``{"anchor", "positive"}`` to ``path``; returns its size in bytes."""
    n = len(WORDS)
    with path.open("w", encoding="utf-8") as handle:
        for i in range(rows):
            words = [WORDS[(i // n**k) % n] for k in range(6)]
            anchor = " ".join(words) + f" number {i} ."
            positive = " ".join(reversed(words)) + f" , item {i} ."
            handle.write(json.dumps({"anchor": anchor, "positive": positive}) + "\n")
    return path.stat().st_size


def _config(corpus: Path, batch: int, buffer: int, streaming: bool):
    from protoembed.training.config import config_from_dict

    return config_from_dict(
        {
            "model": "default",
            "objective": {"name": "simcse_sup"},
            "data": {"corpus": str(corpus), "streaming": streaming, "shuffle_buffer": buffer},
            "training": {"batch_size": batch, "test_tasks": ["STSBenchmark"]},
            "output_dir": str(corpus.parent / "run"),
        }
    )


def child(mode: str, corpus: Path, batch: int, buffer: int) -> dict:
    """One measurement in this (fresh) process."""
    import torch  # noqa: F401 - the streamed path's DataLoader; imported before the baseline

    from protoembed.training.components import read_training_examples
    from protoembed.training.step import Collator
    from protoembed.training.streaming import StreamedBatches, stream_loader, streamed_examples

    cfg = _config(corpus, batch, buffer, mode == "streamed")
    Path("/proc/self/clear_refs").write_text("5")
    base = _status_kib("VmHWM")
    start = time.perf_counter()
    if mode == "in memory":
        examples = read_training_examples(cfg)
        n, batches = len(examples), None
    else:
        examples = streamed_examples(cfg)
        n = examples.count()
        stream = StreamedBatches(examples, batch, buffer, cfg.training.seed, Collator(None, None))
        stream.set_epoch(0)
        batches = sum(1 for _ in stream_loader(stream))
    seconds = time.perf_counter() - start
    rise = (_status_kib("VmHWM") - base) * 1024
    return {
        "mode": mode,
        "examples": n,
        "batches": batches,
        "seconds": seconds,
        "peak_rise_mib": rise / 2**20,
    }


def run_child(mode: str, corpus: Path, args: argparse.Namespace) -> dict:
    command = [sys.executable, __file__, "--child", mode, "--corpus", str(corpus)]
    command += ["--batch-size", str(args.batch_size), "--shuffle-buffer", str(args.shuffle_buffer)]
    return child_result(command, mode)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--shuffle-buffer", type=int, default=10_000)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--corpus", help=argparse.SUPPRESS)
    smoke.add_argument(parser)
    args = parser.parse_args()
    if args.smoke:
        smoke.enable()
        args.rows, args.batch_size, args.shuffle_buffer = 2000, 8, 100
    if args.child:
        print(json.dumps(child(args.child, Path(args.corpus), args.batch_size, args.shuffle_buffer)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "pairs.jsonl"
        size = generate(corpus, args.rows)
        print(f"{args.rows} rows (anchor, positive), {size / 2**20:.0f} MiB of JSON lines")
        results = {mode: run_child(mode, corpus, args) for mode in ("in memory", "streamed")}
    for mode, r in results.items():
        what = f", {r['batches']} batches of {args.batch_size}" if r["batches"] is not None else ""
        print(
            f"{mode:>9}: {r['examples']} examples{what} in {r['seconds']:.1f} s, "
            f"peak resident set +{r['peak_rise_mib']:.0f} MiB"
        )
    print(cpu_line())
    print(load_line())
    print(f"ratio={results['in memory']['peak_rise_mib'] / results['streamed']['peak_rise_mib']:.2f}")


if __name__ == "__main__":
    main()
