"""benchmarks/serve.py's own logic: its percentiles equal numpy's (linear interpolation), a cell's rates and
table row come from its counts, and its HTTP/1.1 reader takes both framings a server may answer with
(Content-Length and chunked), leaving the connection at the next response."""

from __future__ import annotations

import asyncio
import importlib
import random
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    """benchmarks/serve.py as a module (benchmarks/ on sys.path for its own imports)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))
        yield importlib.import_module("serve")


@pytest.mark.parametrize("size", [1, 2, 3, 10, 101, 1000])
def test_percentiles_equal_numpys(bench, size: int) -> None:
    rng = random.Random(size)
    values = [rng.expovariate(1.0) for _ in range(size)]
    for q in (0, 1, 25, 50, 90, 99, 99.9, 100):
        assert bench.percentile(values, q) == pytest.approx(
            float(np.percentile(values, q)), rel=1e-12, abs=1e-15
        )


def test_percentile_of_nothing_is_nan(bench) -> None:
    assert np.isnan(bench.percentile([], 50))


def test_cell_rates_and_row(bench) -> None:
    cell = bench.Cell(seconds=2.0, sentences=50, tokens=700, latencies=[0.010, 0.030, 0.020], errors=1)
    part = bench.Cell(seconds=2.0, sentences=30, tokens=100, latencies=[0.040], errors=0)
    bench.merge(cell, part)
    assert cell.rate == pytest.approx(20.0)
    latencies_ms = [10.0, 30.0, 20.0, 40.0]
    p50, p99 = np.percentile(latencies_ms, 50), np.percentile(latencies_ms, 99)
    assert cell.row("x", 8) == f"| x | 8 | 20.0 | 200 | {p50:.1f} | {p99:.1f} | 1 |"


def _read_all(bench, data: bytes, count: int) -> tuple[list[int], bytes]:
    async def go() -> tuple[list[int], bytes]:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        statuses = [await bench._answer(reader) for _ in range(count)]
        return statuses, await reader.read()

    return asyncio.run(go())


def test_answer_reads_content_length_and_chunked_responses(bench) -> None:
    body = b'{"data": [1, 2, 3]}'
    first = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )
    second = (
        b"HTTP/1.1 429 Too Many Requests\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n"
    )
    statuses, rest = _read_all(bench, first + second + b"NEXT", 2)
    assert statuses == [200, 429]
    assert rest == b"NEXT"


def test_request_bytes_frame_the_json_body(bench) -> None:
    server = bench.Server("s", [], "/v1/embeddings", "m", {}, port=8123)
    payload = bench.request_bytes(server, ["a", "b é"])
    head, body = payload.split(b"\r\n\r\n", 1)
    assert head.startswith(b"POST /v1/embeddings HTTP/1.1\r\n")
    assert f"Content-Length: {len(body)}".encode() in head
    assert body.decode() == '{"model": "m", "input": ["a", "b \\u00e9"]}'
