"""One run per output folder: an exclusive OS file lock on ``output_dir/.protoembed.lock``.

Training runs (``train --output-dir``) and corpus encodings (``encode -o OUT_DIR``) hold it. The main
process of a run takes ``fcntl.flock(LOCK_EX | LOCK_NB)`` on the lock file for the whole run
and writes its process id into it. The kernel releases the lock when the process ends however it ends
(``kill -9`` included), so a killed run never leaves a stale lock: the file may stay, the lock does not.
A second run on a held folder is refused at once with a one-line error naming the folder and the
process holding it. A run that leaves nothing in the folder but the lock file (refused, failed at start)
removes the lock file and the folders it created. This module imports no torch.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from protoembed.core.errors import ProtoembedError

LOCK_FILE = ".protoembed.lock"


def _holder(path: Path) -> str:
    """What the lock file says about the process holding it (``process 1234``), best effort."""
    try:
        pid = path.read_text(encoding="utf-8").split()[0]
    except (OSError, IndexError):
        return "another process"
    return f"process {pid}" if pid.isdigit() else "another process"


def _created_top(folder: Path) -> Path | None:
    """The outermost folder of ``folder``'s path that does not exist yet (``None``: ``folder`` exists), i.e.
    what ``folder.mkdir(parents=True)`` creates."""
    created = None
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            break
        created = candidate
    return created


def _lock(path: Path, folder: Path, run: str, option: str) -> int:
    """Open ``path`` and take its exclusive lock; returns the file descriptor. Retried while the file
    taken was unlinked by a run that just left the folder (:func:`_release`), so that two runs never hold
    locks on two different files of one name."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as err:
            raise ProtoembedError(f"cannot write the output folder {folder}: {err.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise ProtoembedError(f"cannot lock the output folder {folder}: {err.strerror}") from None
            raise ProtoembedError(
                f"{folder} is in use by another {run} ({_holder(path)}); wait for it to end or "
                f"choose another {option}"
            ) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except OSError:
            same = False
        if same:
            return fd
        os.close(fd)


def _release(fd: int, path: Path, folder: Path, created: Path | None) -> None:
    """Drop the lock; when the run left nothing in ``folder`` but the lock file, remove the lock file,
    and the folders the run created for it (``created``: the outermost, from :func:`_created_top`) that
    are empty now."""
    try:
        if [entry.name for entry in folder.iterdir()] == [LOCK_FILE]:
            path.unlink()  # still locked: a run that opens it now finds another inode and retries
            if created is not None:
                _remove_empty(folder, created)
    except OSError:
        pass
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def hold_output_dir(
    output_dir: str | os.PathLike[str], run: str = "training run", option: str = "--output-dir"
) -> Iterator[Path]:
    """Hold the exclusive lock of ``output_dir`` (created if missing) while the ``with`` block runs.

    In: the run folder; ``run`` and ``option``: how the refusal names the kind of run and the flag that
    picks the folder. Out (yielded): the lock file's path.
    Raises :class:`ProtoembedError` naming the folder and the running process when another process
    holds the lock, or naming the folder when it cannot be created or written.
    A run that ends (however: refused, failed at start, finished) with nothing in the folder but the lock
    file removes the lock file and the folders it created, so a refused run leaves no empty folder.
    """
    folder = Path(output_dir)
    path = folder / LOCK_FILE
    created = _created_top(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ProtoembedError(f"cannot write the output folder {folder}: {err.strerror}") from None
    try:
        fd = _lock(path, folder, run, option)
    except ProtoembedError:
        if created is not None:
            _remove_empty(folder, created)
        raise
    try:
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError:
            pass  # the lock is held; the pid is only for the message of a refused run
        yield path
    finally:
        _release(fd, path, folder, created)


def _remove_empty(folder: Path, created: Path) -> None:
    """Remove ``folder`` and its parents up to ``created`` while they are empty."""
    for empty in (folder, *folder.parents):
        try:
            empty.rmdir()
        except OSError:
            return
        if empty == created:
            return


def main_process() -> bool:
    """Whether this is a run's main process (``RANK`` 0 or unset; the others of a ``torchrun`` /
    ``accelerate launch`` run share its folder)."""
    return int(os.environ.get("RANK", "0")) == 0


@contextlib.contextmanager
def hold_output_dirs(
    folders: Sequence[str | os.PathLike[str]], run: str = "training run", option: str = "--output-dir"
) -> Iterator[None]:
    """:func:`hold_output_dir` of each of ``folders`` (in order) while the ``with`` block runs, in the
    main process only (:func:`main_process`)."""
    with contextlib.ExitStack() as stack:
        if main_process():
            for folder in folders:
                stack.enter_context(hold_output_dir(folder, run, option))
        yield
