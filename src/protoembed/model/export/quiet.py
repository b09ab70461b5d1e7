"""Converters that write to stdout: what they print is logged, never mixed into a command's output.

OpenVINO's converter prints its arguments and timings (with ``--verbose`` anywhere in ``sys.argv``), NNCF
draws its progress bars and its own logger's lines there, and ONNX Runtime's fusion tool prints its
statistics: a user piping ``protoembed export ... > file`` or reading a command's JSON would get them.
:func:`stdout_to_log` captures file descriptor 1 itself (native code writes there too, below Python's
``sys.stdout``) and logs each captured line at DEBUG.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Iterator


def _flush() -> None:
    for stream in (sys.stdout, sys.__stdout__):
        with contextlib.suppress(Exception):  # a closed or replaced stream
            if stream is not None:
                stream.flush()


@contextlib.contextmanager
def stdout_to_log(log: logging.Logger, source: str) -> Iterator[None]:
    """Run the ``with`` block with file descriptor 1 (and ``sys.stdout``) sent to a temp file; then log
    each non-blank line written there at DEBUG on ``log`` as ``<source>: <line>``. Without a usable
    descriptor 1 (closed), the block runs as it is."""
    _flush()
    try:
        saved = os.dup(1)
    except OSError:
        yield
        return
    with tempfile.TemporaryFile() as capture:
        try:
            os.dup2(capture.fileno(), 1)
            # sys.stdout may not be descriptor 1 (a test's capture, an embedding app): send it there too
            text = open(os.dup(1), "w", encoding="utf-8", errors="replace")  # noqa: SIM115 (closed below)
            try:
                with contextlib.redirect_stdout(text):
                    yield
            finally:
                text.flush()
                _flush()
                text.close()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        capture.seek(0)
        for line in capture.read().decode("utf-8", errors="replace").splitlines():
            if line.strip():
                log.debug("%s: %s", source, line.rstrip())
