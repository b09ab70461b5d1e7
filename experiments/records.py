"""What every study here shares: time files, the machine's description, record folders, the exit codes.

A study trains and evaluates through ``protoembed`` subprocesses into git-ignored run folders and copies
each finished run's small files into a committed record folder. These helpers are that plumbing:
:func:`add_time` sums wall time over resumed attempts (:func:`timed_call` runs a command and adds its
wall time), :func:`machine` describes the machine as measured now, :func:`copy_record` copies files
atomically (the file that marks a complete record last), and :func:`guarded` turns a study's errors
into its exit code.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

from protoembed.errors import ProtoembedError
from protoembed.io import write_json_atomic
from protoembed.run_layout import BEST_DIR, CONFIG_FILE, LOG_FILE, RESULTS_FILE

__all__ = [
    "BEST_DIR",
    "CONFIG_FILE",
    "ENVIRONMENT_FILE",
    "LOG_FILE",
    "RESULTS_FILE",
    "TIME_FILE",
    "add_time",
    "copy_record",
    "finished",
    "guarded",
    "load_average",
    "machine",
    "timed_call",
]

#: A run folder's names (``best/``, ``config.yaml``, ``training_log.jsonl``, ``results.json``) are
#: :mod:`protoembed.run_layout`'s, re-exported for the studies.
#: A record's machine description and its wall time (seconds per key, summed over resumed attempts).
ENVIRONMENT_FILE = "environment.json"
TIME_FILE = "study_time.json"


def load_average() -> float | None:
    """The 1-minute load average (None where the platform has none)."""
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def add_time(folder: Path, seconds: float, key: str = "seconds", file: str = TIME_FILE) -> None:
    """Add ``seconds`` to ``folder/file``'s entry ``key`` (created as needed): wall time summed over the
    attempts of a resumed run."""
    path = folder / file
    times = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    times[key] = round(times.get(key, 0.0) + seconds, 1)
    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, times)


def timed_call(
    cmd: list[str], folder: Path, key: str = "seconds", file: str = TIME_FILE, quiet: bool = False
) -> int:
    """Run ``cmd`` (its stdout discarded if ``quiet``), add its wall time to ``folder/file``'s ``key``
    (also when interrupted); returns its exit code."""
    started = time.monotonic()
    try:
        return subprocess.call(cmd, stdout=subprocess.DEVNULL if quiet else None)
    finally:
        add_time(folder, time.monotonic() - started, key, file)


def machine(load_start: float | None, load_end: float | None) -> dict[str, Any]:
    """The machine and versions as measured now (what a record's ``environment.json`` holds)."""
    return {
        "cpu_count": os.cpu_count(),
        "load_average_start": load_start,
        "load_average_end": load_end,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": metadata.version("torch"),
        "protoembed": metadata.version("protoembed"),
    }


def copy_record(files: Iterable[tuple[Path, str]], record_dir: Path, env: dict[str, Any]) -> None:
    """Write ``env`` and copy each existing ``(source, name)`` into ``record_dir/name``, in order (put the
    file that marks a complete record last); every file is replaced atomically."""
    record_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(record_dir / ENVIRONMENT_FILE, env)
    for source, name in files:
        if source.is_file():
            tmp = record_dir / f".{name}.tmp"
            tmp.write_bytes(source.read_bytes())
            os.replace(tmp, record_dir / name)


def finished(failed: list[str], say: Callable[[str], None]) -> int:
    """0, or 1 after naming the failed runs."""
    if failed:
        say(f"{len(failed)} run(s) failed: {', '.join(failed)}")
        return 1
    return 0


def guarded(study: Callable[[], int], say: Callable[[str], None]) -> int:
    """Run ``study``; a :class:`ProtoembedError` is one line and exit 2, Ctrl-C exit 130 (rerun resumes)."""
    try:
        return study()
    except ProtoembedError as err:
        say(f"error: {err}")
        return 2
    except KeyboardInterrupt:
        say("interrupted; rerun to resume")
        return 130
