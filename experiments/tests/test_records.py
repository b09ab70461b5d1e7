"""experiments/records.py: a study's wall time survives a hard kill of an attempt (:func:`timed` writes it
while its block runs), and resumed attempts add up."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from experiments.records import TIME_FILE, timed

REPO = Path(__file__).resolve().parents[2]


def _seconds(folder: Path, key: str = "seconds") -> float | None:
    path = folder / TIME_FILE
    return json.loads(path.read_text())[key] if path.is_file() else None


def test_a_block_s_time_is_written_and_resumed_attempts_add_up(tmp_path) -> None:
    folder = tmp_path / "run"
    started = time.monotonic()
    with timed(folder, flush_s=60):
        time.sleep(0.3)
    first = time.monotonic() - started
    assert _seconds(folder) == pytest.approx(first, abs=0.06)  # written once, rounded to 0.1 s
    (folder / TIME_FILE).write_text(json.dumps({"seconds": 10.0, "other": 2.0}))
    with pytest.raises(KeyboardInterrupt), timed(folder, flush_s=60):
        time.sleep(0.2)
        raise KeyboardInterrupt  # an interrupted attempt keeps its time too
    data = json.loads((folder / TIME_FILE).read_text())
    assert data["other"] == 2.0 and data["seconds"] == pytest.approx(10.2, abs=0.11)


def test_an_attempt_killed_without_warning_keeps_its_time_but_the_last_flush(tmp_path) -> None:
    """A child process inside ``timed`` (flush every 0.2 s) is SIGKILLed: the file holds the time it ran
    to its last flush, which only the writes during the block can have put there."""
    folder = tmp_path / "run"
    folder.mkdir()
    code = (
        "import time; from pathlib import Path; from experiments.records import timed\n"
        f"with timed(Path({str(folder)!r}), flush_s=0.2):\n    time.sleep(60)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    try:
        deadline = time.monotonic() + 60
        while (_seconds(folder) or 0.0) < 0.6 and time.monotonic() < deadline:
            time.sleep(0.05)
        seen = _seconds(folder)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    assert seen is not None and seen >= 0.6
    assert _seconds(folder) >= seen  # nothing was lost after it was read
