"""Encoding throughput: protoembed (torch, ONNX fp32, ONNX int8) vs sentence-transformers (torch, ONNX fp32,
ONNX int8) on the same model, batch size and sentences.

Encodes every distinct STS-B test sentence with the default backbone (all-MiniLM-L6-v2), one row after
the other in rounds (alternating, so other load on the machine hits every row alike), and prints each
row's best throughput over the rounds, its ratio to the baseline (sentence-transformers' torch fp32
``encode``), the fraction of the machine's fp32 matrix-multiply peak (a 2048^3 torch GEMM timed in the
same run) that the fp32 rows reach, and where the time goes (tokenisation, padding, attention vs dense
GEMM FLOPs). Last line: ``ratio=<protoembed ONNX int8 / sentence-transformers torch fp32>``.

sentence-transformers' ONNX backend needs ``optimum-onnx``, whose only release requires
transformers < 4.58 while sentence-transformers 6 requires transformers >= 5. Its two ONNX rows therefore
run sentence-transformers 5.x (its own ``backend="onnx"`` export and
``export_dynamic_quantized_onnx_model(..., "avx2")``) in a worker process over a side install
(``--st-onnx-env``, made by ``make bench-env``), driven row by row from here like the other rows.

    python benchmarks/encode.py [--runs 3] [--batch-size 64] [--data-dir ../shared/data] [--st-onnx-env .venv/st-onnx]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

BASELINE = "sentence-transformers torch fp32"
ROWS = [
    BASELINE,
    "sentence-transformers ONNX fp32",
    "sentence-transformers ONNX int8",
    "protoembed torch fp32",
    "protoembed ONNX fp32",
    "protoembed ONNX int8",
]
MATCHING = {  # protoembed row -> the sentence-transformers row it must beat
    "protoembed torch fp32": BASELINE,
    "protoembed ONNX fp32": "sentence-transformers ONNX fp32",
    "protoembed ONNX int8": "sentence-transformers ONNX int8",
}


def stsb_test_sentences(data_dir: Path) -> list[str]:
    """Distinct sentences of STS-B test (SentEval copy: 7 tab-separated columns, sentences last)."""
    path = data_dir / "senteval" / "STS" / "STSBenchmark" / "sts-test.csv"
    seen: dict[str, None] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        columns = line.split("\t")
        seen.update(dict.fromkeys(columns[5:7]))
    return list(seen)


# ----------------------------------------------------------------- worker (sentence-transformers 5 + optimum)
def worker(args: argparse.Namespace) -> None:
    """Serve the sentence-transformers ONNX rows: ``run NAME`` -> seconds, ``save NAME FILE``, ``quit``."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.backend import export_dynamic_quantized_onnx_model

    from protoembed.backbones import default_model_path

    sentences = stsb_test_sentences(Path(args.data_dir))[: args.limit]
    folder = Path(args.worker) / "st-onnx"
    fp32 = SentenceTransformer(default_model_path(), backend="onnx", device="cpu")  # its own export
    fp32.save(str(folder))
    export_dynamic_quantized_onnx_model(fp32, "avx2", str(folder))
    quantized = next((folder / "onnx").glob("model_*_avx2.onnx"))  # avx2: uint8 weights
    int8 = SentenceTransformer(
        str(folder), backend="onnx", device="cpu", model_kwargs={"file_name": f"onnx/{quantized.name}"}
    )
    models = {"fp32": fp32, "int8": int8}

    def encode(model, texts=sentences) -> np.ndarray:
        return model.encode(texts, batch_size=args.batch_size, show_progress_bar=False)

    for model in models.values():
        encode(model)  # warm-up
    print("ready", flush=True)
    for line in sys.stdin:
        command, *rest = line.split()
        if command == "run":
            start = time.perf_counter()
            encode(models[rest[0]])
            print(f"{time.perf_counter() - start:.6f}", flush=True)
        elif command == "save":
            np.save(rest[1], encode(models[rest[0]]))
            print("ok", flush=True)
        elif command == "load-export":  # sentence-transformers' ONNX backend on a protoembed export
            models[rest[0]] = SentenceTransformer(rest[1], backend="onnx", device="cpu")
            print("ok", flush=True)
        else:
            return


class Worker:
    """The worker process, spoken to line by line."""

    def __init__(self, env_dir: Path, args: argparse.Namespace, workdir: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(env_dir.resolve())}
        command = [sys.executable, __file__, "--worker", workdir, "--batch-size", str(args.batch_size)]
        command += ["--data-dir", str(args.data_dir)] + (["--limit", str(args.limit)] if args.limit else [])
        self.process = subprocess.Popen(
            command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        if self.ask("") != "ready":
            raise RuntimeError("the sentence-transformers ONNX worker did not start (see its output above)")

    def ask(self, line: str) -> str:
        if line:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        while True:
            answer = self.process.stdout.readline()
            if not answer:
                raise RuntimeError("the sentence-transformers ONNX worker stopped")
            if answer.strip() in ("ready", "ok") or answer.strip().replace(".", "").isdigit():
                return answer.strip()

    def close(self) -> None:
        self.process.stdin.write("quit\n")
        self.process.stdin.flush()
        self.process.wait(timeout=60)


# ----------------------------------------------------------------- cost model
def batch_shapes(lengths: list[int], order: np.ndarray, batch_size: int) -> list[tuple[int, int]]:
    """(rows, padded length) of each batch when ``order`` is cut into batches padded to their longest."""
    return [
        (len(chunk), max(lengths[i] for i in chunk))
        for chunk in (order[s : s + batch_size] for s in range(0, len(order), batch_size))
    ]


def flops(shapes: list[tuple[int, int]], config) -> tuple[float, float]:
    """(dense GEMM FLOPs, attention FLOPs) of a BERT encoder over padded batches: per layer and token
    2(4H^2 + 2HI) for the projections and feed-forward, and 4TH for the scores and the weighted sum."""
    hidden, inner, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    tokens = sum(b * t for b, t in shapes)
    dense = layers * tokens * 2 * (4 * hidden * hidden + 2 * hidden * inner)
    attention = layers * sum(b * t * t for b, t in shapes) * 4 * hidden
    return float(dense), float(attention)


def gemm_peak(n: int = 2048, repeats: int = 5) -> float:
    """Best fp32 FLOP/s of an n x n x n torch matrix product on this machine, now."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best = min(_timed(lambda: torch.mm(a, b)) for _ in range(repeats))
    return 2 * n**3 / best


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    """Run the alternating benchmark and print the table, the breakdown and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--data-dir", default=os.environ.get("PROTOEMBED_DATA", "../shared/data"))
    parser.add_argument("--st-onnx-env", default=".venv/st-onnx", help="side install for the ST ONNX rows")
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences (a smoke run)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    from sentence_transformers import SentenceTransformer

    import protoembed
    from protoembed.backbones import default_model_path

    sentences = stsb_test_sentences(Path(args.data_dir))[: args.limit]
    bs = args.batch_size
    workdir = tempfile.mkdtemp(prefix="protoembed-bench-")
    ours = protoembed.load("default", device="cpu")
    onnx32 = protoembed.load(str(ours.export(Path(workdir) / "fp32")))
    onnx8 = protoembed.load(str(ours.export(Path(workdir) / "int8", quantize="int8")))
    peer = SentenceTransformer(default_model_path(), device="cpu")
    env = Path(args.st_onnx_env)
    st_worker = Worker(env, args, workdir) if env.is_dir() else None
    if st_worker is None:
        print(f"no {env}: the sentence-transformers ONNX rows are skipped (make bench-env)")

    runners: dict[str, Callable[[], None]] = {
        BASELINE: lambda: peer.encode(sentences, batch_size=bs, show_progress_bar=False),
        "protoembed torch fp32": lambda: ours.encode(sentences, batch_size=bs, show_progress_bar=False),
        "protoembed ONNX fp32": lambda: onnx32.encode(sentences, batch_size=bs, show_progress_bar=False),
        "protoembed ONNX int8": lambda: onnx8.encode(sentences, batch_size=bs, show_progress_bar=False),
    }
    if st_worker is not None:
        runners["sentence-transformers ONNX fp32"] = lambda: st_worker.ask("run fp32")
        runners["sentence-transformers ONNX int8"] = lambda: st_worker.ask("run int8")
    rows = [r for r in ROWS if r in runners]

    # vectors of every row against the baseline (also the warm-up)
    reference = peer.encode(sentences, batch_size=bs, show_progress_bar=False)
    vectors: dict[str, np.ndarray] = {}
    vectors["protoembed torch fp32"] = ours.encode(sentences, batch_size=bs, show_progress_bar=False)
    vectors["protoembed ONNX fp32"] = onnx32.encode(sentences, batch_size=bs, show_progress_bar=False)
    vectors["protoembed ONNX int8"] = onnx8.encode(sentences, batch_size=bs, show_progress_bar=False)
    if st_worker is not None:
        st_worker.ask("load-export ours " + str(Path(workdir) / "fp32"))
        for name in ("fp32", "int8", "ours"):
            st_worker.ask(f"save {name} {workdir}/{name}.npy")
        vectors["sentence-transformers ONNX fp32"] = np.load(f"{workdir}/fp32.npy")
        vectors["sentence-transformers ONNX int8"] = np.load(f"{workdir}/int8.npy")
        compat = float(np.abs(np.load(f"{workdir}/ours.npy") - reference).max())

    peak = gemm_peak()
    times: dict[str, list[float]] = {r: [] for r in rows}
    for _ in range(args.runs):
        for row in rows:
            if row.startswith("sentence-transformers ONNX"):
                times[row].append(float(runners[row]()))
            else:
                times[row].append(_timed(runners[row]))
    if st_worker is not None:
        st_worker.close()

    # cost model: executed (padded) FLOPs of each batching
    tokenize_s = min(_timed(lambda: ours.encoder.tokenize_ids(sentences)) for _ in range(3))
    ids, _ = ours.encoder.tokenize_ids(sentences)
    lengths = [len(x) for x in ids]
    ours_order = np.argsort([-n for n in lengths], kind="stable")
    st_order = np.argsort([-len(s) for s in sentences], kind="stable")  # ST sorts by characters
    config = ours.encoder.auto_model.config
    cost = {
        "protoembed": batch_shapes(lengths, ours_order, bs),
        "sentence-transformers": batch_shapes(lengths, st_order, bs),
    }
    row_flops = {r: sum(flops(cost[r.split(" ")[0]], config)) for r in rows}

    rates = {r: len(sentences) / min(t) for r, t in times.items()}
    load = os.getloadavg()
    print(
        f"{len(sentences)} distinct STS-B test sentences, batch size {bs}, CPU, {len(os.sched_getaffinity(0))} "
        f"cores, torch threads {torch.get_num_threads()}, best of {args.runs} alternating rounds; "
        f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}"
    )
    print(f"fp32 matmul peak (2048^3 torch GEMM, best of 5): {peak / 1e9:.1f} GFLOP/s\n")
    print("| row | sentences/s | x baseline | GFLOP/s executed | % of fp32 peak | max abs diff to baseline |")
    print("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        gflops = row_flops[row] / min(times[row]) / 1e9
        share = f"{100 * gflops * 1e9 / peak:.0f}%" if "fp32" in row else "-"
        diff = 0.0 if row == BASELINE else float(np.abs(vectors[row] - reference).max())
        print(
            f"| {row} | {rates[row]:.1f} | {rates[row] / rates[BASELINE]:.2f} | {gflops:.1f} | {share} | {diff:.1e} |"
        )
    print()
    for name, shapes in cost.items():
        real, padded = sum(lengths), sum(b * t for b, t in shapes)
        dense, attention = flops(shapes, config)
        print(
            f"{name} batching: {padded} padded tokens for {real} real ({100 * (padded - real) / padded:.1f}% "
            f"padding); attention {100 * attention / (dense + attention):.1f}% of the FLOPs, dense GEMM the rest"
        )
    int8_s = min(times["protoembed ONNX int8"])
    print(
        f"tokenisation (protoembed, all sentences): {tokenize_s:.3f} s = {100 * tokenize_s / int8_s:.1f}% of "
        "the protoembed ONNX int8 row"
    )
    if st_worker is not None:
        print(
            f"sentence-transformers' ONNX backend reading protoembed's fp32 export: max abs diff {compat:.1e}"
        )
    for ours_row, st_row in MATCHING.items():
        if st_row in rates:
            verdict = "ahead of" if rates[ours_row] > rates[st_row] else "BEHIND"
            print(f"{ours_row} is {verdict} {st_row} ({rates[ours_row] / rates[st_row]:.2f}x)")
    shutil.rmtree(workdir, ignore_errors=True)
    print(f"ratio={rates['protoembed ONNX int8'] / rates[BASELINE]:.3f}")


if __name__ == "__main__":
    main()
