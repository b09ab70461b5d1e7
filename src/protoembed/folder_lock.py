"""One run per output folder: an exclusive OS file lock on ``output_dir/.protoembed.lock``.

Training runs (``train --output-dir``) and corpus encodings (``encode -o OUT_DIR``) hold it. The main
process of a run takes ``fcntl.flock(LOCK_EX | LOCK_NB)`` on the lock file for the whole run
and writes its process id into it. The kernel releases the lock when the process ends however it ends
(``kill -9`` included), so a killed run never leaves a stale lock: the file may stay, the lock does not.
A second run on a held folder is refused at once with a one-line error naming the folder and the
process holding it. This module imports no torch.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from protoembed.errors import ProtoembedError

LOCK_FILE = ".protoembed.lock"


def _holder(path: Path) -> str:
    """What the lock file says about the process holding it (``process 1234``), best effort."""
    try:
        pid = path.read_text(encoding="utf-8").split()[0]
    except (OSError, IndexError):
        return "another process"
    return f"process {pid}" if pid.isdigit() else "another process"


@contextlib.contextmanager
def hold_output_dir(
    output_dir: str | os.PathLike[str], run: str = "training run", option: str = "--output-dir"
) -> Iterator[Path]:
    """Hold the exclusive lock of ``output_dir`` (created if missing) while the ``with`` block runs.

    In: the run folder; ``run`` and ``option``: how the refusal names the kind of run and the flag that
    picks the folder. Out (yielded): the lock file's path.
    Raises :class:`ProtoembedError` naming the folder and the running process when another process
    holds the lock, or naming the folder when it cannot be created or written.
    """
    folder = Path(output_dir)
    path = folder / LOCK_FILE
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as err:
        raise ProtoembedError(f"cannot write the output folder {folder}: {err.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise ProtoembedError(f"cannot lock the output folder {folder}: {err.strerror}") from None
            raise ProtoembedError(
                f"{folder} is in use by another {run} ({_holder(path)}); wait for it to end or "
                f"choose another {option}"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError:
            pass  # the lock is held; the pid is only for the message of a refused run
        yield path
    finally:
        os.close(fd)  # releases the lock
