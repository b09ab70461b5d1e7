"""What every study here shares: time files, the machine's description, record folders, the exit codes.

A study trains and evaluates through ``protoembed`` subprocesses into git-ignored run folders and copies
each finished run's small files into a committed record folder. These helpers are that plumbing:
:func:`timed` sums a block's wall time over resumed attempts, written as it runs so that an attempt
killed without warning keeps it (:func:`timed_call` runs a command so), :func:`machine` describes the
machine as measured now, :func:`copy_record` copies files atomically (the file that marks a complete
record last), :func:`write_text`, :func:`write_json` and :func:`save_figure` write pages, records and
figures atomically, and :func:`guarded` turns a study's errors into its exit code.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from importlib import metadata
from pathlib import Path
from typing import Any

from protoembed import ProtoembedError, run_layout

__all__ = [
    "BEST_DIR",
    "CONFIG_FILE",
    "ENVIRONMENT_FILE",
    "LEGACY_SETTINGS",
    "LOG_FILE",
    "RESULTS_FILE",
    "TIME_FILE",
    "copy_record",
    "finished",
    "guarded",
    "legacy_settings",
    "load_average",
    "machine",
    "pyplot",
    "save_figure",
    "timed",
    "timed_call",
    "write_json",
    "write_text",
]

#: A run folder's names (``best/``, ``config.yaml``, ``training_log.jsonl``, ``results.json``):
#: :mod:`protoembed.run_layout`'s, re-exported for the studies.
BEST_DIR, CONFIG_FILE = run_layout.BEST_DIR, run_layout.CONFIG_FILE
LOG_FILE, RESULTS_FILE = run_layout.LOG_FILE, run_layout.RESULTS_FILE
#: A record's machine description and its wall time (seconds per key, summed over resumed attempts).
ENVIRONMENT_FILE = "environment.json"
#: Settings added to protoembed after some records were made, with the value that made those records (the
#: step before the setting existed): a run retrained from a recorded ``config.yaml`` that lacks one gets it
#: (:func:`legacy_settings`).
LEGACY_SETTINGS = {"training.padding": "joint", "training.dropout": "torch"}
TIME_FILE = "study_time.json"
#: Seconds between the writes of :func:`timed` while its block runs: a study killed without warning
#: (SIGKILL, as the end of a session kills it) loses at most this much of an attempt's wall time.
TIME_FLUSH_S = 30.0


def _replace(path: Path, write: Callable[[Path], object]) -> Path:
    """Write ``path`` atomically: ``write(tmp)`` on a hidden sibling, then renamed over ``path`` (its
    folder created as needed); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically: a page or table of a study."""
    return _replace(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json(path: Path, data: Any) -> Path:
    """Write ``data`` as indented strict JSON (the layout of protoembed's own results files) to ``path``
    atomically."""
    return write_text(path, json.dumps(data, indent=2, allow_nan=False) + "\n")


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend (the figures are only written to files)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path, dpi: int = 110) -> Path:
    """Write a matplotlib figure as PNG to ``path`` atomically, then close it; returns the path."""
    try:
        return _replace(path, lambda tmp: fig.savefig(tmp, format="png", dpi=dpi))
    finally:
        pyplot().close(fig)


def load_average() -> float | None:
    """The 1-minute load average (None where the platform has none)."""
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


@contextmanager
def timed(
    folder: Path, key: str = "seconds", file: str = TIME_FILE, flush_s: float = TIME_FLUSH_S
) -> Iterator[None]:
    """Add the block's wall time to ``folder/file``'s entry ``key`` (created as needed): the time of a
    resumed run summed over its attempts. It is written every ``flush_s`` seconds while the block runs
    (once ``folder`` exists: a run's command creates it) and when it ends, also when interrupted, so an
    attempt killed without warning keeps all but ``flush_s`` seconds of its time."""
    path = folder / file
    base = _times(path).get(key, 0.0)
    started, stop = time.monotonic(), threading.Event()

    def write() -> None:  # the thread's writes end (join) before the last one
        times = _times(path)
        times[key] = round(base + time.monotonic() - started, 1)
        write_json(path, times)

    def flush() -> None:
        while not stop.wait(flush_s):
            if folder.is_dir():
                with suppress(OSError):  # a full disk: the write at the end says so
                    write()

    writer = threading.Thread(target=flush, name="study-time", daemon=True)
    writer.start()
    try:
        yield
    finally:
        stop.set()
        writer.join()
        write()


def _times(path: Path) -> dict[str, float]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def timed_call(
    cmd: list[str], folder: Path, key: str = "seconds", file: str = TIME_FILE, quiet: bool = False
) -> int:
    """Run ``cmd`` (its stdout discarded if ``quiet``), its wall time added to ``folder/file``'s ``key`` as
    :func:`timed` adds it; returns its exit code."""
    with timed(folder, key, file):
        return subprocess.call(cmd, stdout=subprocess.DEVNULL if quiet else None)


def machine(load_start: float | None, load_end: float | None) -> dict[str, Any]:
    """The machine and versions as measured now (what a record's ``environment.json`` holds): the CPU's
    model and which of the features that decide its speed it has, as the benchmarks name them."""
    from protoembed.model.precision import cpu_features, cpu_model

    return {
        "cpu": cpu_model(),
        "cpu_features": [flag for flag, present in cpu_features().items() if present],
        "cpu_count": os.cpu_count(),
        "load_average_start": load_start,
        "load_average_end": load_end,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": metadata.version("torch"),
        "protoembed": metadata.version("protoembed"),
    }


def cpus_text(environments: Iterable[dict[str, Any]]) -> str | None:
    """The CPUs of the environment records (:func:`machine`) that name one, each with its features and how
    many records ran on it: ``"AMD EPYC (avx2; 8 records)"``; ``None`` when none names its CPU."""
    counts: dict[str, int] = {}
    for env in environments:
        if env.get("cpu"):
            features = ", ".join(env.get("cpu_features") or []) or "none of the speed features"
            key = f"{env['cpu']} ({features}"
            counts[key] = counts.get(key, 0) + 1
    shown = [f"{key}; {n} record{'s' if n > 1 else ''})" for key, n in sorted(counts.items())]
    return ", ".join(shown) or None


def copy_record(files: Iterable[tuple[Path, str]], record_dir: Path, env: dict[str, Any]) -> None:
    """Write ``env`` and copy each existing ``(source, name)`` into ``record_dir/name``, in order (put the
    file that marks a complete record last); every file is replaced atomically."""
    write_json(record_dir / ENVIRONMENT_FILE, env)
    for source, name in files:
        if source.is_file():
            _replace(record_dir / name, lambda tmp, source=source: tmp.write_bytes(source.read_bytes()))


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


def legacy_settings(config: dict[str, Any]) -> list[str]:
    """``key=value`` of each :data:`LEGACY_SETTINGS` entry that the recorded ``config`` (its YAML as data)
    lacks: the ``--set`` items that retrain it as it was made."""
    found = []
    for key, value in LEGACY_SETTINGS.items():
        node: Any = config
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            found.append(f"{key}={value}")
    return found
