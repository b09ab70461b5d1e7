"""Encoding a corpus to disk: ``protoembed encode INPUT -o OUT_DIR`` (streamed, sharded) against
sentence-transformers' multi-process encode, on the same model (the default backbone, all-MiniLM-L6-v2),
the same lines and the same cores: sentences/s and the peak memory of each side's process tree.

The corpus is generated in a temporary folder (deleted afterwards) from the staged Wikipedia sample
(``$PROTOEMBED_DATA/unsup/wiki1m_sample``): line ``i`` is the first ``--words`` words of the sample's
sentence ``i mod n``, followed by `` (c)`` from its second cycle on (``c`` the cycle), so that every line
is distinct. With the default 6 words a line is about 33 characters, 9 word pieces with [CLS] and [SEP]
(printed with each run). On a 2-core AVX2 CPU shared with other jobs, protoembed encoded such lines at
about 200 a second and sentence-transformers at about 120, so the default run (50,000 lines on each side
and 5,000 more on protoembed's, plus each command's start) takes about 12 to 15 minutes; a million lines
would take about 1.5 hours on protoembed's side and 2.5 on sentence-transformers' (``--lines 1000000``).

Each measurement is one fresh command, timed from its start to its exit (interpreter start, imports,
model load, reading, encoding and writing included):

- ``protoembed``: ``python -m protoembed encode INPUT -o OUT_DIR --runtime R --workers W --batch-size B
  --shard-size S`` (shard-00000.npy ... and manifest.json; shards of 2,500 rows by default, so that every
  worker has shards to encode at both sizes: the two peaks then compare the same processes, all busy; its fp32 ONNX export is made once before, by a small
  untimed run, as any later run finds it cached); at ``--lines`` and at ``--small-lines`` (default a
  tenth), to show whether its peak memory stays flat as the corpus grows;
- ``sentence-transformers``: this file in a child process: the lines read into a list (its ``encode``
  takes one), ``SentenceTransformer(model, device="cpu")``, ``start_multi_process_pool(["cpu"] * W)``,
  ``encode(lines, pool=pool, batch_size=B)``, ``np.save`` of the (N, D) float32 array; torch backend
  (sentence-transformers 6's ONNX backend needs optimum, which the main install has not).

Peak memory of a process tree: every 0.1 s the benchmark lists the command's process and all its
descendants (``/proc/*/stat``) and reads each one's ``VmRSS`` and ``VmHWM`` (``/proc/PID/status``).
Printed: the highest sum of ``VmRSS`` over the tree seen at any sample ("tree peak", what the machine
had to hold at once, up to the sampling), and the sum over the processes of their last seen ``VmHWM``
("sum of peaks", an upper bound: each process's own high-water mark, whenever it was reached). Pages
shared between processes (a forked parent's, the model file's) count in every process that maps them,
alike on both sides.

Also checked: the vectors of both sides agree (largest absolute difference over ``--check-rows`` rows
drawn at random).

    python benchmarks/encode_corpus.py [--lines 50000] [--small-lines N] [--words 6] [--workers 2]
        [--batch-size 64] [--runtime onnx] [--shard-size 2500] [--data-dir ../shared/data]

Prints the CPU line and the load average before and after. Last line:
``ratio=<protoembed's / sentence-transformers' sentences/s at --lines>``.

``--smoke`` (checks that the script runs; measures nothing): 200 and 100 lines on a tiny random model, one
worker a side, ``--runtime torch``, no warm-up run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import smoke
from corpus import generate
from machine import cpu_line, load_line

SAMPLE_SECONDS = 0.1


# ------------------------------------------------------------------------------------------------ the corpus
def word_pieces(path: Path, model_dir: str, count: int = 10000) -> float:
    """Mean word pieces (with [CLS] and [SEP]) of the first ``count`` lines of ``path``."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    with path.open(encoding="utf-8") as handle:
        head = [line.rstrip("\n") for _, line in zip(range(count), handle)]
    return float(np.mean([len(ids) for ids in tokenizer(head)["input_ids"]]))


# ------------------------------------------------------------------------------------- a process tree's memory
def _status_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of ``pid`` in KiB; (0, 0) when it is gone (or a kernel thread)."""
    rss = hwm = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    except OSError:
        pass
    return rss, hwm


def descendants(root: int) -> list[int]:
    """``root`` and every process below it (from the parent ids in ``/proc/*/stat``)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state
            children.setdefault(parent, []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


@dataclass
class Measured:
    """One command's wall time and its process tree's memory."""

    seconds: float
    tree_peak_mib: float  # highest sampled sum of VmRSS over the tree
    sum_of_peaks_mib: float  # sum of the processes' last seen VmHWM
    processes: int


def run_measured(command: list[str], what: str, env: dict[str, str] | None = None) -> Measured:
    """Run ``command`` to its end while sampling its process tree. Raises SystemExit when it fails."""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peaks: dict[int, int] = {}
    tree_peak = 0
    done = threading.Event()
    output: dict[str, str] = {}

    def drain() -> None:  # the pipes read while the command runs, so that it never blocks on them
        output["out"], output["err"] = process.communicate()
        done.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    while not done.wait(SAMPLE_SECONDS):
        total = 0
        for pid in descendants(process.pid):
            rss, hwm = _status_kib(pid)
            total += rss
            peaks[pid] = max(peaks.get(pid, 0), hwm)
        tree_peak = max(tree_peak, total)
    seconds = time.perf_counter() - start
    reader.join()
    if process.returncode:
        raise SystemExit(f"{what} failed ({process.returncode}): {output['err'].strip()[-3000:]}")
    print(f"  {what}: {seconds:.1f} s, tree peak {tree_peak / 1024:.0f} MiB", flush=True)
    return Measured(seconds, tree_peak / 1024, sum(peaks.values()) / 1024, len(peaks))


# --------------------------------------------------------------------------------------------- the two sides
def protoembed_command(corpus: Path, out: Path, args: argparse.Namespace) -> list[str]:
    command = [sys.executable, "-m", "protoembed", "encode", str(corpus), "-o", str(out), "--no-progress"]
    command += ["--model", smoke.model_name()]
    command += [
        "--runtime",
        args.runtime,
        "--workers",
        str(args.workers),
        "--batch-size",
        str(args.batch_size),
    ]
    return command + ["--shard-size", str(args.shard_size)]


def st_child(corpus: str, out: str, workers: int, batch_size: int, model_dir: str) -> None:
    """(The sentence-transformers side, in its own process.) Encode every line of ``corpus`` with a
    multi-process pool of ``workers`` CPU processes; save the (N, D) array to ``out``."""
    from sentence_transformers import SentenceTransformer

    with open(corpus, encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for line in handle]
    model = SentenceTransformer(model_dir, device="cpu")
    pool = model.start_multi_process_pool(["cpu"] * workers)
    try:
        vectors = model.encode(lines, pool=pool, batch_size=batch_size, show_progress_bar=False)
    finally:
        model.stop_multi_process_pool(pool)
    np.save(out, np.asarray(vectors, dtype=np.float32))


def shard_rows(folder: Path, rows: np.ndarray) -> np.ndarray:
    """Rows ``rows`` (sorted) of the vectors in ``folder``'s shards (``shard-*.npy``, in name order)."""
    parts, offset = [], 0
    for shard in sorted(folder.glob("shard-*.npy")):
        array = np.load(shard, mmap_mode="r")
        inside = rows[(rows >= offset) & (rows < offset + len(array))]
        parts.append(np.asarray(array[inside - offset]))
        offset += len(array)
    return np.concatenate(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument(
        "--small-lines", type=int, default=None, help="the second protoembed size (default lines/10)"
    )
    parser.add_argument("--words", type=int, default=6, help="words of a sample sentence per line")
    parser.add_argument("--workers", type=int, default=2, help="processes on each side")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--runtime", default="onnx", help="protoembed encode's --runtime")
    parser.add_argument("--shard-size", type=int, default=2_500, help="protoembed encode's --shard-size")
    parser.add_argument("--check-rows", type=int, default=1000)
    parser.add_argument("--data-dir", default=os.environ.get("PROTOEMBED_DATA", "../shared/data"))
    parser.add_argument("--st-child", nargs=2, help=argparse.SUPPRESS)
    smoke.add_argument(parser)
    args = parser.parse_args()
    if args.st_child:
        return st_child(*args.st_child, args.workers, args.batch_size, smoke.model_dir())
    if args.smoke:
        smoke.enable()
        args.lines, args.small_lines, args.workers, args.runtime = 200, 100, 1, "torch"
        args.shard_size, args.check_rows = 100, 50
        smoke.tiny_model()  # built once, for the commands too
    small_lines = args.small_lines or max(1, args.lines // 10)

    print(cpu_line())
    print(f"before: {load_line()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="protoembed-bench-corpus-") as tmp:
        tmp = Path(tmp)
        corpus, small = tmp / "corpus.txt", tmp / "small.txt"
        size = generate(corpus, args.lines, Path(args.data_dir), args.words)
        generate(small, small_lines, Path(args.data_dir), args.words)
        generate(tmp / "warm.txt", 200, Path(args.data_dir), args.words)
        print(
            f"{args.lines} lines, {size / 2**20:.1f} MiB ({size / args.lines:.1f} bytes a line, "
            f"{word_pieces(corpus, smoke.model_dir()):.1f} word pieces with [CLS] and [SEP]); first {args.words} words of "
            "Wikipedia sample sentences",
            flush=True,
        )
        if not args.smoke:
            run_measured(
                protoembed_command(tmp / "warm.txt", tmp / "warm", args), "protoembed encode (warm-up)"
            )
        results = {}
        print("measuring ...", flush=True)
        results["protoembed", small_lines] = run_measured(
            protoembed_command(small, tmp / "ours-small", args), f"protoembed encode, {small_lines} lines"
        )
        results["protoembed", args.lines] = run_measured(
            protoembed_command(corpus, tmp / "ours", args), f"protoembed encode, {args.lines} lines"
        )
        st = [sys.executable, __file__, "--st-child", str(corpus), str(tmp / "st.npy")]
        st += ["--workers", str(args.workers), "--batch-size", str(args.batch_size)]
        results["sentence-transformers", args.lines] = run_measured(st, "sentence-transformers encode")

        rng = np.random.default_rng(0)
        rows = np.sort(rng.choice(args.lines, size=min(args.check_rows, args.lines), replace=False))
        ours = shard_rows(tmp / "ours", rows)
        theirs = np.load(tmp / "st.npy", mmap_mode="r")[rows]
        diff = float(np.abs(ours - theirs).max())

    print(
        f"\nworkers {args.workers} on each side, batch size {args.batch_size}; protoembed --runtime "
        f"{args.runtime}, sentence-transformers torch; {len(os.sched_getaffinity(0))} cores\n"
    )
    print("| side | lines | seconds | sentences/s | tree peak MiB | sum of peaks MiB | processes |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (side, n), m in results.items():
        print(
            f"| {side} | {n} | {m.seconds:.1f} | {n / m.seconds:.1f} | {m.tree_peak_mib:.0f} "
            f"| {m.sum_of_peaks_mib:.0f} | {m.processes} |"
        )
    a, b = results["protoembed", small_lines], results["protoembed", args.lines]
    print(
        f"\nprotoembed's tree peak at {args.lines} lines / at {small_lines}: "
        f"{b.tree_peak_mib / a.tree_peak_mib:.2f}x (sum of peaks {b.sum_of_peaks_mib / a.sum_of_peaks_mib:.2f}x)"
    )
    st_m = results["sentence-transformers", args.lines]
    print(
        f"sentence-transformers' tree peak / protoembed's at {args.lines} lines: {st_m.tree_peak_mib / b.tree_peak_mib:.2f}x"
    )
    print(f"vectors: largest absolute difference {diff:.1e} over {len(rows)} random rows")
    print(f"after: {load_line()}")
    print(f"ratio={(args.lines / b.seconds) / (args.lines / st_m.seconds):.3f}")


if __name__ == "__main__":
    main()
