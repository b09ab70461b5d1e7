"""benchmarks/device_check.sh checks what it needs before it runs anything: each thing missing is one line
naming it and the one command that brings it (exit 1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "device_check.sh"


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


@pytest.fixture
def staged(tmp_path: Path) -> Path:
    sample = tmp_path / "data" / "unsup" / "wiki1m_sample"
    sample.mkdir(parents=True)
    (sample / "wiki.txt").write_text("a sentence .\n", encoding="utf-8")
    return tmp_path / "data"


def test_no_python_and_no_data_are_both_said(tmp_path):
    done = _run(tmp_path, str(tmp_path / "nowhere" / "python"), tmp_path / "empty", "--device", "cpu")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"device_check: no Python at {tmp_path / 'nowhere' / 'python'}: run 'make install' in the repository "
        "(or set PYTHON=/path/to/python)",
        f"device_check: no Wikipedia sample under {tmp_path / 'empty'}/unsup/wiki1m_sample: protoembed data "
        "download wiki1m-sample (or set PROTOEMBED_DATA)",
    ]


def test_missing_packages_name_the_one_install_command(tmp_path, staged):
    python = _fake_python(tmp_path, ["datasets"])
    done = _run(tmp_path, python, staged, "--device", "cpu")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"device_check: {python} lacks datasets: {python} -m pip install -e '.[bench]' (in the repository)\n"
    )
    python = _fake_python(tmp_path, ["torch", "accelerate"])
    done = _run(tmp_path, python, staged, "--device", "cpu")
    assert done.stderr == (
        f"device_check: {python} lacks torch, accelerate: run 'make install' in the repository (or {python} "
        "-m pip install -e '.[bench]')\n"
    )


def test_this_environment_passes_the_checks(tmp_path, staged):
    """The test interpreter has every package: the checks pass and the CUDA check comes next."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device: the benchmark itself would run")
    done = _run(tmp_path, sys.executable, staged)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "device_check: no CUDA device (use --device cpu)\n"
