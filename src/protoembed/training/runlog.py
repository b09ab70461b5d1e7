"""``training_log.jsonl``: one JSON object per logged step, evaluation and event of a run.

Only the main process writes (the others hold a disabled log). On resume, the entries of steps done after
the checkpoint are dropped, since those steps are done again.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from protoembed.core.errors import WriteError
from protoembed.outputs.run_layout import LOG_FILE

__all__ = ["LOG_FILE", "RunLog"]


class RunLog:
    """Append-only JSON-lines log in ``output_dir``; a no-op where ``enabled`` is false."""

    def __init__(self, output_dir: Path, enabled: bool = True) -> None:
        self.path = output_dir / LOG_FILE
        self.enabled = enabled

    def start(self) -> None:
        """Begin a fresh log (an empty file)."""
        if self.enabled:
            self._guarded(lambda: self.path.write_text("", encoding="utf-8"))

    def write(self, entry: dict[str, Any]) -> None:
        """Append ``entry`` as one line (a full disk: :class:`WriteError`, the line is not written)."""
        if not self.enabled:
            return
        line = json.dumps(entry) + "\n"
        size = self.path.stat().st_size if self.path.is_file() else 0

        def append() -> None:
            try:
                with open(self.path, "a", encoding="utf-8") as handle:
                    handle.write(line)
            except OSError:
                with contextlib.suppress(OSError):
                    os.truncate(self.path, size)  # no cut line: the log ends with its last whole entry
                raise

        self._guarded(append)

    def _guarded(self, write: Callable[[], object]) -> None:
        try:
            write()
        except OSError as err:
            reason = err.strerror or type(err).__name__
            raise WriteError(f"cannot write {self.path}: {reason}", self.path, reason) from None

    def truncate(self, step: int) -> None:
        """Keep only the entries of steps up to ``step`` (a line cut by a crash is dropped too)."""
        if not self.enabled or not self.path.is_file():
            return
        kept = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if entry.get("step", 0) <= step:
                kept.append(line)
        text = "".join(k + "\n" for k in kept)
        self._guarded(lambda: self.path.write_text(text, encoding="utf-8"))
