"""Serving throughput and latency: ``protoembed serve`` against Infinity and a naive server, on the same
model (the default backbone, all-MiniLM-L6-v2), on this CPU.

Servers, each started as a subprocess on 127.0.0.1, waited for by its health endpoint, stopped at the end:

- ``protoembed onnx`` / ``protoembed openvino``: ``python -m protoembed serve MODEL --runtime R`` (its
  fp32 export on ONNX Runtime / OpenVINO at fp32, the lossless runtimes on a CPU without native bf16;
  ``--serve-args`` are passed on, e.g. ``--max-batch-tokens 8192 --max-wait-ms 2``);
- ``Infinity torch`` / ``Infinity optimum``: ``infinity_emb v2`` (infinity-emb 0.0.78, from the side install
  ``make bench-serve-env`` makes, ``--infinity-env``), engine torch (sentence-transformers) and optimum (ONNX
  Runtime), batch size 32 (its default), no vector cache, ``HF_HUB_OFFLINE=1``; the optimum engine with
  ``--pooling-method mean`` (the model's pooling: that engine's ``auto`` pools the CLS token, whose vectors
  are far from the model's). Infinity loads ONNX files
  only from a model folder that holds them, so the benchmark prepares one in a temporary folder: the model
  folder with its fp32 ONNX export by optimum (``model.onnx``, what the hub's copy ships); Infinity's own
  graph optimisation (ONNX Runtime's level 99 fusions for CPU, fp32) fails on the optimum 2.x release
  it installs with (``OptimizationConfig`` lost ``optimize_with_onnxruntime_only``), so the benchmark runs
  the same optimisation with the options optimum 2.x takes and puts the result where Infinity looks for it
  (``$HF_HUB_CACHE/infinity_onnx/CPUExecutionProvider``): Infinity then serves its optimised graph, as
  intended;
- ``naive``: benchmarks/naive_server.py (FastAPI + sentence-transformers, ``model.encode`` per request,
  no batching across requests), under uvicorn, on ``--device``;
- any other ``protoembed-<runtime>`` (``protoembed-torch`` on a GPU, with ``--serve-args "--device cuda"``).

The model: the default backbone (or the folder ``$PROTOEMBED_BENCH_DEFAULT_MODEL`` names: benchmarks/smoke.py).

Load: ``--concurrency`` connections (default 1, 8, 32, keep-alive HTTP/1.1), each sending a request as soon
as its previous one is answered, for ``--duration`` seconds (or ``--requests`` requests) per cell; every
request carries ``--inputs`` short inputs (default 4) or ``--long-inputs`` long ones (default 1), all
distinct within a cell where the pool allows:

- short: the distinct sentences of STS-B (train, dev and test, SentEval's copy; about 12 word pieces);
- long: consecutive sentences of the staged Wikipedia sample (``$PROTOEMBED_DATA/unsup/wiki1m_sample``)
  joined into passages of about 200 word pieces (at least 190).

Cells run in ``--rounds`` rounds, each round visiting every (length, concurrency) cell and, within it,
every server in turn, so that other load on the machine hits all servers alike; all servers are up
during the rounds (an idle server takes no CPU). No request is sent after a cell's deadline, and the
requests in flight then are waited for: sentences/s is the inputs of all answered requests over the
time from the cell's first request to its last answer, summed over the rounds; tokens/s the same inputs' word pieces (with
[CLS] and [SEP], truncated at the model's 256). p50 / p99: of all requests' latencies (send to last
byte of the answer), rounds pooled. A non-200 answer counts as an error and not as throughput.

Also checked: every server's vectors against ``protoembed onnx``'s for 8 short and 2 long inputs
(cosine > 0.9999).

    python benchmarks/serve.py [--duration 8] [--rounds 2] [--requests 5000] [--concurrency 1,8,32]
        [--inputs 4] [--long-inputs 1] [--servers protoembed-onnx,protoembed-openvino,infinity-torch,infinity-optimum,naive]
        [--infinity-env .venv/infinity] [--serve-args "..."] [--data-dir ../shared/data]

The default run (5 servers, 2 lengths, 3 concurrencies, 2 rounds of 8 s) takes about 10 minutes.
``--smoke`` (checks that the script runs; measures nothing): ``protoembed-onnx`` and ``naive`` on a tiny
random model, concurrency 1, one round of half a second per cell; Infinity's engines are left out (their
side install needs a download), and the ratio is then against the naive server.
Prints a table per input length, the CPU line and the load average before and after; the fastest
protoembed runtime and the fastest Infinity engine are the ones with the higher geometric mean of their
sentences/s at the largest concurrency over the two lengths. Last line: ``ratio=<protoembed's / Infinity's
sentences/s at the largest concurrency, mean of the short-input and the long-input ratio>`` (against the
naive server when no Infinity engine ran).

Infinity runs in its own virtual environment (``--infinity-env``), started without ``PYTHONPATH`` or the
user's site-packages (:func:`side_env`), so that none of the main environment's packages reach it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import smoke
from machine import device_line, load_line

HERE = Path(__file__).resolve().parent
ALL_SERVERS = ["protoembed-onnx", "protoembed-openvino", "infinity-torch", "infinity-optimum", "naive"]
LENGTHS = ("short", "long")
LONG_TOKENS = 190  # a long passage: consecutive sentences joined until at least this many word pieces
AGREE = 0.9999  # cosine to protoembed onnx's vector above which a server's vector agrees
INFINITY_NAME = "minilm"
PORT = "{port}"  # in a server's command: its port


# ----------------------------------------------------------------------------------------------- statistics
def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0 to 100) of ``values`` by linear interpolation between the closest ranks
    (numpy's default method); nan for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class Cell:
    """What the requests of one (server, length, concurrency) cell gave, rounds pooled."""

    seconds: float = 0.0  # the windows' total
    sentences: int = 0  # inputs answered within the windows
    tokens: int = 0
    latencies: list[float] = field(default_factory=list)  # seconds, every answered request
    errors: int = 0

    @property
    def rate(self) -> float:
        return self.sentences / self.seconds if self.seconds else float("nan")

    def row(self, server: str, concurrency: int) -> str:
        """One markdown table row: server, concurrency, sentences/s, tokens/s, p50 ms, p99 ms, errors."""
        tokens = self.tokens / self.seconds if self.seconds else float("nan")
        p50, p99 = (1000 * percentile(self.latencies, q) for q in (50, 99))
        return f"| {server} | {concurrency} | {self.rate:.1f} | {tokens:.0f} | {p50:.1f} | {p99:.1f} | {self.errors} |"


TABLE_HEAD = "| server | concurrency | sentences/s | tokens/s | p50 ms | p99 ms | errors |\n|---|---:|---:|---:|---:|---:|---:|"


# ------------------------------------------------------------------------------------------------ the inputs
def inputs(data_dir: Path, model_dir: Path) -> dict[str, tuple[list[str], list[int]]]:
    """``{"short": (texts, word pieces), "long": (...)}``; word pieces with [CLS] and [SEP], truncated at
    the model's ``max_seq_length``."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    limit = json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"]
    seen: dict[str, None] = {}
    for split in ("train", "dev", "test"):
        path = data_dir / "senteval" / "STS" / "STSBenchmark" / f"sts-{split}.csv"
        for line in path.read_text(encoding="utf-8").splitlines():
            seen.update(dict.fromkeys(c for c in line.split("\t")[5:7] if c.strip()))
    short = list(seen)
    lines = []
    for path in sorted((data_dir / "unsup" / "wiki1m_sample").glob("*.txt")):
        lines += [x.strip() for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    if not lines:
        raise SystemExit(f"no Wikipedia sample under {data_dir / 'unsup' / 'wiki1m_sample'}")
    pieces = [len(ids) - 2 for ids in tokenizer(lines, add_special_tokens=True)["input_ids"]]
    long, current, count = [], [], 0
    for line, n in zip(lines, pieces):
        current.append(line)
        count += n
        if count >= LONG_TOKENS:
            long.append(" ".join(current))
            current, count = [], 0

    def counted(texts: list[str]) -> tuple[list[str], list[int]]:
        ids = tokenizer(texts, truncation=True, max_length=limit)["input_ids"]
        return texts, [len(x) for x in ids]

    return {"short": counted(short), "long": counted(long)}


# ------------------------------------------------------------------------------------------------- servers
@dataclass
class Server:
    """A server subprocess: its name, command (``PORT`` in it: the port, picked at start), embeddings
    path and model name in requests."""

    name: str
    command: list[str]
    path: str
    model: str
    env: dict[str, str]
    cwd: str | None = None
    port: int = 0
    process: subprocess.Popen | None = None
    log: Path | None = None

    def start(self, workdir: Path, timeout: float, tries: int = 3) -> float:
        """Start the server on a free port and wait until it is ready; seconds taken. A port taken by
        another process between its pick and the server's bind (the machine is shared) is picked again."""
        for attempt in range(tries):
            self.port = free_port()
            self.log = workdir / f"{self.name}.log"
            self.process = subprocess.Popen(
                [str(self.port) if part == PORT else part for part in self.command],
                cwd=self.cwd,
                env=self.env,
                stdout=self.log.open("w"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                return self.wait_ready(timeout)
            except SystemExit:
                if attempt + 1 == tries or "in use" not in self.tail():
                    raise
        raise AssertionError("unreachable")

    def wait_ready(self, timeout: float) -> float:
        """Seconds until GET /health answers 200. Raises SystemExit when the process ends or time runs out."""
        start = time.perf_counter()
        while time.perf_counter() - start < timeout:
            if self.process.poll() is not None:
                raise SystemExit(
                    f"{self.name} exited ({self.process.returncode}) before ready:\n{self.tail()}"
                )
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as answer:
                    if answer.status == 200:
                        return time.perf_counter() - start
            except OSError:
                pass
            time.sleep(0.5)
        raise SystemExit(f"{self.name} not ready within {timeout:.0f} s:\n{self.tail()}")

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:]) if self.log else ""

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def embed(self, texts: list[str]) -> list[list[float]]:
        """The vectors the server answers for ``texts`` (one request)."""
        body = json.dumps({"model": self.model, "input": texts}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{self.path}", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as answer:
            data = json.loads(answer.read())["data"]
        return [d["embedding"] for d in sorted(data, key=lambda d: d["index"])]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def side_env(base: dict[str, str] | os._Environ) -> dict[str, str]:
    """The environment of a process in Infinity's virtual environment: ``base`` without ``PYTHONPATH`` (which
    could name the main environment's packages) and without the user's site-packages, offline."""
    env = {k: v for k, v in base.items() if k != "PYTHONPATH"}
    return {**env, "PYTHONNOUSERSITE": "1", "HF_HUB_OFFLINE": "1"}


def prepare_infinity(env_dir: Path, model_dir: Path, workdir: Path) -> tuple[Path, Path]:
    """(model folder with ``model.onnx``, hub cache holding Infinity's optimised graph), made by this file's
    ``--prepare-infinity`` in the side install's interpreter."""
    folder, cache = workdir / "infinity-model", workdir / "hub"
    command = [
        str(env_dir / "bin" / "python"),
        __file__,
        "--prepare-infinity",
        str(model_dir),
        str(folder),
        str(cache),
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=side_env(os.environ))
    if done.returncode:
        raise SystemExit(f"preparing Infinity's ONNX model failed: {done.stderr.strip()[-3000:]}")
    return folder, cache


def _prepare_infinity(model_dir: str, folder: str, cache: str) -> None:
    """(In the side install.) The model folder with optimum's fp32 ONNX export, and the graph Infinity's
    ``optimize_model`` would write (level 99, CPU, fp32) where Infinity looks for it."""
    from optimum.onnxruntime import ORTModelForFeatureExtraction, ORTOptimizer
    from optimum.onnxruntime.configuration import OptimizationConfig

    shutil.copytree(model_dir, folder)
    ORTModelForFeatureExtraction.from_pretrained(model_dir, export=True).save_pretrained(folder)
    onnx = ORTModelForFeatureExtraction.from_pretrained(folder, file_name="model.onnx")
    target = Path(cache) / "infinity_onnx" / "CPUExecutionProvider"
    config = OptimizationConfig(optimization_level=99, optimize_for_gpu=False, fp16=False)
    ORTOptimizer.from_pretrained(onnx).optimize(
        optimization_config=config, save_dir=str(target), one_external_file=True
    )
    if not list(target.glob("*_optimized.onnx")):
        raise RuntimeError(f"no optimised graph written to {target}")


def make_servers(args: argparse.Namespace, model_dir: Path, workdir: Path) -> list[Server]:
    """The servers of ``--servers``, not started."""
    base = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    servers = []
    infinity = None
    for name in args.servers:
        if name.startswith("protoembed-"):
            command = [sys.executable, "-m", "protoembed", "serve", str(model_dir), "--host", "127.0.0.1"]
            command += [
                "--port",
                PORT,
                "--runtime",
                name.split("-", 1)[1],
                *shlex.split(args.serve_args),
            ]
            servers.append(Server(name, command, "/v1/embeddings", model_dir.name, base))
        elif name.startswith("infinity-"):
            env_dir = Path(args.infinity_env).resolve()
            if not (env_dir / "bin" / "infinity_emb").is_file():
                raise SystemExit(
                    f"no Infinity in {env_dir}: make bench-serve-env (or leave the infinity servers out)"
                )
            infinity = infinity or prepare_infinity(env_dir, model_dir, workdir)
            folder, cache = infinity
            command = [str(env_dir / "bin" / "infinity_emb"), "v2", "--model-id", ".", "--served-model-name"]
            command += [
                INFINITY_NAME,
                "--engine",
                name.split("-", 1)[1],
                "--device",
                "cpu",
                "--host",
                "127.0.0.1",
            ]
            command += ["--port", PORT, "--no-vector-disk-cache", "--log-level", "warning"]
            if name == "infinity-optimum":  # its "auto" pooling is CLS on this engine; the model's is mean
                command += ["--pooling-method", "mean"]
            env = {
                **side_env(base),
                "HF_HUB_CACHE": str(cache),
                "DO_NOT_TRACK": "1",
                "INFINITY_ANONYMOUS_USAGE_STATS": "0",
            }
            # the model id "." (run in the folder): Infinity passes the ONNX file's path as found under
            # the model id to optimum, which matches it against file names relative to the folder
            servers.append(Server(name, command, "/embeddings", INFINITY_NAME, env, cwd=str(folder)))
        elif name == "naive":
            command = [sys.executable, "-m", "uvicorn", "naive_server:app", "--app-dir", str(HERE)]
            command += ["--host", "127.0.0.1", "--port", PORT, "--log-level", "warning"]
            servers.append(
                Server(
                    name,
                    command,
                    "/v1/embeddings",
                    "naive",
                    {**base, "NAIVE_MODEL": str(model_dir), "NAIVE_DEVICE": args.device},
                )
            )
        else:
            raise SystemExit(f"unknown server {name!r}: expected some of {', '.join(ALL_SERVERS)}")
    return servers


# --------------------------------------------------------------------------------------------- the load
def request_bytes(server: Server, texts: list[str]) -> bytes:
    body = json.dumps({"model": server.model, "input": texts}).encode()
    head = (
        f"POST {server.path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _answer(reader: asyncio.StreamReader) -> int:
    """Read one HTTP/1.1 response (Content-Length or chunked); returns its status."""
    status = int((await reader.readline()).split()[1])
    length, chunked = 0, False
    while (line := await reader.readline()) not in (b"\r\n", b""):
        key, _, value = line.decode("latin-1").partition(":")
        if key.lower() == "content-length":
            length = int(value)
        elif key.lower() == "transfer-encoding" and "chunked" in value.lower():
            chunked = True
    if chunked:
        while size := int((await reader.readline()).split(b";")[0], 16):
            await reader.readexactly(size + 2)
        await reader.readline()
    else:
        await reader.readexactly(length)
    return status


async def load(
    server: Server,
    texts: list[str],
    tokens: list[int],
    per_request: int,
    concurrency: int,
    seconds: float,
    cap: int,
    start_at: int,
) -> tuple[Cell, int]:
    """``concurrency`` connections sending requests of ``per_request`` consecutive inputs (from index
    ``start_at``, cycling) for ``seconds`` or ``cap`` requests; returns the cell and the next index."""
    cell = Cell()
    next_index = start_at
    issued = 0
    answered: list[tuple[float, int, int]] = []  # (time answered, inputs, tokens)
    begin = time.perf_counter()
    deadline = begin + seconds

    async def connection() -> None:
        nonlocal next_index, issued
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            while issued < cap and time.perf_counter() < deadline:
                issued += 1
                picks = [(next_index + k) % len(texts) for k in range(per_request)]
                next_index += per_request
                payload = request_bytes(server, [texts[i] for i in picks])
                sent = time.perf_counter()
                writer.write(payload)
                await writer.drain()
                status = await _answer(reader)
                done = time.perf_counter()
                if status != 200:
                    cell.errors += 1
                    continue
                cell.latencies.append(done - sent)
                answered.append((done, per_request, sum(tokens[i] for i in picks)))
        finally:
            writer.close()

    await asyncio.gather(*(connection() for _ in range(concurrency)))
    cell.seconds = max((a[0] for a in answered), default=begin) - begin
    cell.sentences = sum(a[1] for a in answered)
    cell.tokens = sum(a[2] for a in answered)
    return cell, next_index


def merge(total: Cell, part: Cell) -> None:
    total.seconds += part.seconds
    total.sentences += part.sentences
    total.tokens += part.tokens
    total.latencies += part.latencies
    total.errors += part.errors


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


# ------------------------------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per cell and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--requests", type=int, default=5000, help="at most this many requests per cell and round"
    )
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--inputs", type=int, default=4, help="short inputs per request")
    parser.add_argument("--long-inputs", type=int, default=1, help="long inputs per request")
    parser.add_argument(
        "--warmup", type=float, default=3.0, help="seconds of load per server and length first"
    )
    parser.add_argument("--servers", default=None, help=f"default: {','.join(ALL_SERVERS)}")
    parser.add_argument("--infinity-env", default=".venv/infinity")
    parser.add_argument("--serve-args", default="", help="more flags for protoembed serve")
    parser.add_argument(
        "--device", default="cpu", help="the naive server's device (give protoembed's in --serve-args)"
    )
    parser.add_argument("--start-timeout", type=float, default=300.0)
    parser.add_argument("--data-dir", default=os.environ.get("PROTOEMBED_DATA", "../shared/data"))
    parser.add_argument("--prepare-infinity", nargs=3, help=argparse.SUPPRESS)
    smoke.add_argument(parser)
    args = parser.parse_args()
    if args.prepare_infinity:
        return _prepare_infinity(*args.prepare_infinity)
    if args.smoke:
        smoke.enable()
        args.servers = args.servers or "protoembed-onnx,naive"
        args.concurrency, args.duration, args.rounds = "1", 0.5, 1
        args.warmup, args.requests = 0.3, 20
    args.servers = [s for s in (args.servers or ",".join(ALL_SERVERS)).split(",") if s]
    levels = [int(c) for c in args.concurrency.split(",")]
    per_request = {"short": args.inputs, "long": args.long_inputs}

    model_dir = Path(smoke.model_dir())
    pools = inputs(Path(args.data_dir), model_dir)
    print(device_line(args.device))
    print(f"before: {load_line()}")
    for length, (texts, tokens) in pools.items():
        print(
            f"{length} inputs: {len(texts)} distinct, {sum(tokens) / len(tokens):.1f} word pieces on average"
        )
    workdir = Path(tempfile.mkdtemp(prefix="protoembed-bench-serve-"))
    servers = make_servers(args, model_dir, workdir)
    results: dict[tuple[str, str, int], Cell] = {}
    try:
        for server in servers:  # one at a time: a loading server takes the cores
            print(f"{server.name}: ready in {server.start(workdir, args.start_timeout):.1f} s", flush=True)
        positions = {(s.name, length): 0 for s in servers for length in LENGTHS}
        for length in LENGTHS:
            for server in servers:
                texts, tokens = pools[length]
                _, positions[server.name, length] = asyncio.run(
                    load(server, texts, tokens, per_request[length], 8, args.warmup, args.requests, 0)
                )
        for _ in range(args.rounds):
            for length in LENGTHS:
                texts, tokens = pools[length]
                for c in levels:
                    for server in servers:
                        key = (server.name, length)
                        cell, positions[key] = asyncio.run(
                            load(
                                server,
                                texts,
                                tokens,
                                per_request[length],
                                c,
                                args.duration,
                                args.requests,
                                positions[key],
                            )
                        )
                        merge(results.setdefault((server.name, length, c), Cell()), cell)
                        print(f"  {length}, concurrency {c}, {server.name}: {cell.rate:.1f}/s", flush=True)
        probe = pools["short"][0][:8] + pools["long"][0][:2]
        vectors = {s.name: s.embed(probe) for s in servers}
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    print(
        f"\n{args.inputs} short or {args.long_inputs} long inputs per request; {args.rounds} rounds of {args.duration:g} s per cell "
        f"(at most {args.requests} requests); {len(os.sched_getaffinity(0))} cores; protoembed serve "
        f"flags: {args.serve_args or '(defaults)'}"
    )
    for length in LENGTHS:
        print(f"\n{length} inputs\n{TABLE_HEAD}")
        for c in levels:
            for server in servers:
                print(results[server.name, length, c].row(server.name, c))
    reference = next((n for n in vectors if n.startswith("protoembed")), None)
    if reference:
        print()
        for name, vs in vectors.items():
            if name != reference:
                low = min(cosine(a, b) for a, b in zip(vs, vectors[reference]))
                verdict = "agree" if low > AGREE else "DISAGREE"
                print(
                    f"{name} against {reference}: lowest cosine {low:.6f} over {len(probe)} inputs ({verdict})"
                )
    print(f"after: {load_line()}")

    top = levels[-1]

    def best(prefix: str) -> str | None:
        names = [s.name for s in servers if s.name.startswith(prefix)]
        score = {n: math.prod(results[n, length, top].rate for length in LENGTHS) for n in names}
        return max(names, key=score.get, default=None)

    ours, infinity, naive = best("protoembed"), best("infinity"), best("naive")
    ratios, against_naive = [], []
    for length in LENGTHS:
        if ours and infinity:
            a, b = results[ours, length, top], results[infinity, length, top]
            ratios.append(a.rate / b.rate)
            p99 = (percentile(a.latencies, 99), percentile(b.latencies, 99))
            print(
                f"{length}, concurrency {top}: {ours} / {infinity} = {ratios[-1]:.2f}x sentences/s, "
                f"p99 {1000 * p99[0]:.0f} ms against {1000 * p99[1]:.0f} ms"
            )
        if ours and naive:
            against_naive.append(results[ours, length, top].rate / results[naive, length, top].rate)
            print(f"{length}, concurrency {top}: {ours} / naive = {against_naive[-1]:.2f}x sentences/s")
    ratios = ratios or against_naive
    print(f"ratio={sum(ratios) / len(ratios) if ratios else float('nan'):.3f}")


if __name__ == "__main__":
    main()
