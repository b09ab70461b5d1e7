"""benchmarks/gpu_check.sh checks what it needs before it runs anything: each thing missing is one line
naming it and the one command that brings it (exit 1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPT = BENCHMARKS / "gpu_check.sh"


def _run(tmp_path: Path, python: str, data: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": python, "PROTOEMBED_DATA": str(data)}
    return subprocess.run(
        ["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
    )


def _fake_python(tmp_path: Path, absent: list[str]) -> str:
    """A stand-in interpreter: runs, and reports ``absent`` as the packages it cannot import."""
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\n[ "$2" = "" ] && exit 0\nprintf "%s\\n" ' + " ".join(absent) + "\n")
    fake.chmod(0o755)
    return str(fake)


def _data_files() -> list[str]:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "gpu_encode.py"), "--data-files"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()


@pytest.fixture
def staged(tmp_path: Path) -> Path:
    """Every file gpu_check.sh reads, one line each (a folder entry gets one file inside)."""
    data = tmp_path / "data"
    for name in _data_files():
        path = data / name
        if "." not in path.name:  # a folder: the Wikipedia sample's
            path = path / "wiki.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("a sentence .\n", encoding="utf-8")
    return data


def test_no_python_is_said(tmp_path):
    done = _run(tmp_path, str(tmp_path / "nowhere" / "python"), tmp_path / "empty", "--device", "cpu")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"gpu_check: no Python at {tmp_path / 'nowhere' / 'python'}: run 'make install' in the repository "
        "(or set PYTHON=/path/to/python)",
    ]


def test_missing_packages_name_the_one_install_command(tmp_path, staged):
    python = _fake_python(tmp_path, ["datasets"])
    done = _run(tmp_path, python, staged, "--device", "cpu")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"gpu_check: {python} lacks datasets: {python} -m pip install -e '.[bench]' (in the repository)\n"
    )
    python = _fake_python(tmp_path, ["torch", "accelerate"])
    done = _run(tmp_path, python, staged, "--device", "cpu")
    assert done.stderr == (
        f"gpu_check: {python} lacks torch, accelerate: run 'make install' in the repository (or {python} "
        "-m pip install -e '.[bench]')\n"
    )


def test_each_missing_data_file_is_named_with_the_staging_command(tmp_path, staged):
    (staged / "senteval" / "MR" / "rt-polarity.neg").unlink()
    (staged / "senteval" / "STS" / "STSBenchmark" / "sts-dev.csv").unlink()
    done = _run(tmp_path, sys.executable, staged, "--device", "cpu")
    assert (done.returncode, done.stdout) == (1, "")
    fix = (
        "benchmarks/stage_gpu_data.sh copies it into .gpu-data (then --data .gpu-data), or protoembed data "
        "download senteval wiki1m-sample"
    )
    assert done.stderr.splitlines() == [
        f"gpu_check: no {staged}/senteval/MR/rt-polarity.neg: {fix}",
        f"gpu_check: no {staged}/senteval/STS/STSBenchmark/sts-dev.csv: {fix}",
    ]


def test_this_environment_passes_the_checks(tmp_path, staged):
    """The test interpreter has every package and the data is staged: the CUDA check comes next."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device: the benchmark itself would run")
    done = _run(tmp_path, sys.executable, staged)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "gpu_check: no CUDA device (use --device cpu)\n"


def test_stage_gpu_data_copies_exactly_those_files(tmp_path, staged):
    """benchmarks/stage_gpu_data.sh copies every file gpu_check.sh reads, and only those, into .gpu-data."""
    root = tmp_path / "repo"
    (root / "benchmarks").mkdir(parents=True)
    for name in ("stage_gpu_data.sh", "gpu_encode.py", "smoke.py", "machine.py"):
        (root / "benchmarks" / name).write_bytes((BENCHMARKS / name).read_bytes())
    (staged / "senteval" / "SICK").mkdir()
    (staged / "senteval" / "SICK" / "SICK_train.txt").write_text("not needed\n")
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(root / "benchmarks" / "stage_gpu_data.sh"), str(staged)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    copied = sorted(
        str(p.relative_to(root / ".gpu-data")) for p in (root / ".gpu-data").rglob("*") if p.is_file()
    )
    expected = sorted(
        str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file() and "SICK" not in str(p)
    )
    assert copied == expected
