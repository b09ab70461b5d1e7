"""Running one measurement in a fresh interpreter: the benchmarks that measure memory start each case in
its own process, so that one case's allocations never count in another's peak."""

from __future__ import annotations

import json
import subprocess


def child_result(command: list[str], what: str) -> dict:
    """Run ``command``; the last line of its stdout that starts with ``{`` is its result (a JSON object).

    Raises:
        SystemExit: the child failed or printed no result (``what`` and the end of its stderr named).
    """
    done = subprocess.run(command, capture_output=True, text=True)
    lines = [x for x in done.stdout.splitlines() if x.startswith("{")]
    if done.returncode or not lines:
        raise SystemExit(f"{what} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(lines[-1])
