"""benchmarks/feed_rate.py --smoke runs end to end in seconds and ends with its efficiency= and ratio=
lines (the speed itself is the benchmark's to print, never a test's to assert)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_smoke_run_prints_its_rows_and_ends_with_ratio(data_dir):
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        [sys.executable, "feed_rate.py", "--smoke", "--data-dir", str(data_dir)],
        cwd=BENCHMARKS,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("CPU: ")
    assert any(line.startswith("300 distinct SentEval STS sentences") for line in lines)
    rows = [line.split("  ")[0].strip() for line in lines if re.search(r"\d+\s+(waiting|$)", line)]
    assert rows == [
        "sentence-transformers",
        "tokenizer alone, 1 thread(s)",
        "protoembed, 1 tokenizer worker(s)",
    ]
    difference = next(
        line for line in lines if line.startswith("largest |protoembed - sentence-transformers|")
    )
    assert float(difference.rsplit(" ", 1)[1]) < 1e-5  # the same model and sentences
    assert re.fullmatch(r"efficiency=\d+\.\d{3}", lines[-2]) and re.fullmatch(r"ratio=\d+\.\d{3}", lines[-1])
