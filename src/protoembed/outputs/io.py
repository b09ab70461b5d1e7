"""Atomic output: files and folders are built under a hidden temp name beside the target, then renamed.

- :func:`write_atomic` / :func:`write_json_atomic`: one file (temp file, then ``os.replace``).
- :func:`replace_dir`: one folder (a saved model, a checkpoint, unpacked data): built in a hidden temp
  sibling, then swapped in by rename; temp siblings left by a killed process are removed on the next call.
  Its steps (:func:`clean_stale_siblings`, :func:`shared_temp_sibling`, :func:`swap_dir`) serve folders
  that several processes write together.
- :func:`check_writable`: a cheap probe that an output path can be written, run before hours of work.

Everything written here gets the permissions a plain ``open()`` / ``mkdir()`` would give under the
current umask (``tempfile`` alone would make it owner-only).
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from protoembed.core.errors import ProtoembedError, WriteError

_TMP_TAG = "tmp"
_OLD_TAG = "old"


def current_umask() -> int:
    """The process umask (read by setting it and restoring it at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _reason(err: OSError) -> str:
    return err.strerror or type(err).__name__


#: what torch's zip writer and safetensors say when a write fails (they raise no ``OSError``)
_LIBRARY_WRITE_FAILURES = ("inline_container", "PytorchStreamWriter", "No space left on device", "I/O error")


def write_failure(err: BaseException, folder: str | os.PathLike | None = None) -> str | None:
    """The reason a write failed (``No space left on device``), or ``None`` if ``err`` is no write failure.

    In: the exception raised while writing (an :class:`OSError`, or the ``RuntimeError`` of torch's zip
    writer / the ``SafetensorError`` of safetensors, which wrap the OS error in text), and the folder
    written into (looked at for free space when the library's message names no cause; call it before
    the partial file is removed).
    """
    if isinstance(err, WriteError):  # a nested folder's write failed (a model saved inside another)
        return err.reason
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:  # an OSError anywhere in the chain
        seen.add(id(current))
        if isinstance(current, OSError) and not isinstance(current, FileNotFoundError):
            # numpy's writer says "N requested and M written" with no errno: the folder's free space says why
            return current.strerror or _full_disk(folder) or _reason(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    text = str(err)
    if not any(marker in text for marker in _LIBRARY_WRITE_FAILURES):
        return None
    if "No space left on device" in text:
        return "No space left on device"
    return _full_disk(folder) or f"write error ({text.splitlines()[0][:120]})"


def _full_disk(folder: str | os.PathLike | None) -> str | None:
    """``No space left on device`` when ``folder``'s file system has less than 1 MiB free, else ``None``."""
    if folder is not None:
        with contextlib.suppress(OSError):
            stat = os.statvfs(folder)
            if stat.f_bavail * stat.f_frsize < 1 << 20:
                return "No space left on device"
    return None


def _kept(target: Path, existed: bool, kind: str = "file") -> str:
    return f"the previous {target.name} is kept" if existed else f"no partial {kind} is left"


def _write_error(target: Path, reason: str, existed: bool, kind: str = "file") -> WriteError:
    return WriteError(f"cannot write {target}: {reason}; {_kept(target, existed, kind)}", target, reason)


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(path.anchor or ".")


def cache_dir(kind: str) -> Path:
    """protoembed's cache folder for ``kind`` (``onnx``, ``embeddings``): ``$PROTOEMBED_CACHE/<kind>``, or
    ``~/.cache/protoembed/<kind>``; not created here."""
    return Path(os.environ.get("PROTOEMBED_CACHE") or Path.home() / ".cache" / "protoembed") / kind


def check_writable(path: str | os.PathLike, suffix: str | None = None, create_parents: bool = True) -> Path:
    """Check, before any work, that a file can be written at ``path``; return it as a :class:`Path`.

    A temp file is created and removed in the folder that would hold it (the nearest existing one when
    ``create_parents``, since :func:`write_json_atomic` creates missing folders), so read-only folders,
    read-only file systems (``/sys``) and permission problems are caught whoever runs it, root included.

    Args:
        path: the output file.
        suffix: the required file-name ending (e.g. ``".npy"``), or ``None``.
        create_parents: missing parent folders will be created by the writer.
    Returns:
        ``path`` as a :class:`Path`.
    Raises:
        ProtoembedError: wrong suffix, ``path`` is a folder, or its folder cannot be written.
    """
    target = Path(path).expanduser()
    if suffix is not None and not target.name.endswith(suffix):
        raise ProtoembedError(f"output {str(path)!r}: expected a {suffix} file name")
    if target.is_dir():
        raise ProtoembedError(f"cannot write {target}: it is a directory (expected a file name)")
    parent = target.parent
    if not parent.is_dir():
        if not create_parents:
            raise ProtoembedError(f"cannot write {target}: directory {parent} does not exist")
        parent = _nearest_existing(parent)
        if not parent.is_dir():
            raise ProtoembedError(f"cannot write {target}: {parent} is not a directory")
    refused = _probe(parent, target.name)
    if refused is not None:
        raise ProtoembedError(f"cannot write {target}: {parent} is not writable ({refused})")
    return target


def check_writable_folder(folder: str | os.PathLike) -> Path:
    """Check, before any work, that files can be written in the folder ``folder``, made with its missing
    parents when it does not exist; return it as a :class:`Path`.

    The probe of :func:`check_writable` (a temp file created and removed) in ``folder``, or, when it does
    not exist yet, in its nearest existing parent, which must let it be made.

    Raises:
        ProtoembedError: ``folder`` or a parent is a file, or the folder that would hold the new files
            (or folder) is not writable: one line naming ``folder`` and the folder that refused.
    """
    target = Path(folder).expanduser()
    if target.exists() and not target.is_dir():
        raise _file_in_the_way(target)
    parent = _nearest_existing(target)
    if not parent.is_dir():
        raise ProtoembedError(f"cannot create the folder {target}: {parent} is a file (expected a folder)")
    refused = _probe(parent, target.name or "folder")
    if refused is None:
        return target
    if parent == target:
        raise ProtoembedError(
            f"cannot write the folder {target}: it is not writable ({refused}); expected a writable folder"
        )
    raise ProtoembedError(
        f"cannot create the folder {target}: {parent} is not writable ({refused}); expected a writable parent folder"
    )


def _file_in_the_way(target: Path) -> ProtoembedError:
    """The one-line error for a folder to write whose name a file holds."""
    return ProtoembedError(
        f"cannot write the folder {target}: a file of that name exists (expected a folder)"
    )


def _probe(folder: Path, name: str) -> str | None:
    """Why a file cannot be created in ``folder`` (a temp file named after ``name`` is created and
    removed), or ``None`` when it can."""
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{name}.probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        return _reason(err)
    return None


def sync_file(path: str | os.PathLike) -> None:
    """``fsync`` the file or folder ``path`` (a folder: its entries, e.g. a rename into it), so it
    survives a power cut; a file system that cannot sync a folder (``EINVAL``) is left as it is."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike, write: Callable[[str], None], suffix: str = "") -> Path:
    """Call ``write(temp_path)`` on a temp file in ``path``'s folder, then rename it to ``path``; durable:
    the file is fsynced before the rename and its folder after it (:func:`sync_file`), so a reader that
    finds ``path`` after a power cut finds it whole.

    The file gets the mode a plain ``open(path, "w")`` would give (an existing file keeps its mode).

    Args:
        path: the target file.
        write: writes the content to the path it is given.
        suffix: ending of the temp file's name (some writers append their own, e.g. ``.npy``).
    Returns:
        the target path.
    Raises:
        ProtoembedError: the target's folder does not exist, the target is a folder, or the write fails.
    """
    target = Path(path)
    if not target.parent.is_dir():
        raise ProtoembedError(f"cannot write {target}: directory {target.parent} does not exist")
    if target.is_dir():
        raise ProtoembedError(f"cannot write {target}: it is a directory (expected a file name)")
    try:
        mode = target.stat().st_mode & 0o7777 if target.exists() else 0o666 & ~current_umask()
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix or ".tmp", dir=target.parent)
        os.close(fd)
    except OSError as err:
        raise ProtoembedError(f"cannot write {target}: {_reason(err)}") from None
    existed = target.exists()
    try:
        write(tmp)
        os.chmod(tmp, mode)
        sync_file(tmp)
        os.replace(tmp, target)
        sync_file(target.parent)
    except Exception as err:  # a full disk: OSError, or a library's own error wrapping it
        reason = write_failure(err, target.parent)
        if reason is None:
            raise
        raise _write_error(target, reason, existed) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def _sibling_prefix(target: Path, tag: str) -> str:
    return f".{target.name}.{tag}-"


def _owner_pid(name: str, prefix: str) -> int | None:
    """The process id written into a temp sibling's name (``.<name>.<tag>-<pid>-<random>``)."""
    head = name[len(prefix) :].split("-", 1)[0]
    return int(head) if head.isdigit() else None


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def clean_stale_siblings(target: str | os.PathLike) -> None:
    """Remove the hidden temp siblings of ``target`` left by a killed process.

    A sibling counts as stale when the process id in its name is no longer running. If ``target`` is
    missing but a moved-aside previous copy survived (a kill between the two renames of
    :func:`replace_dir`), that copy is renamed back to ``target`` first.
    """
    target = Path(target)
    parent = target.parent
    if not parent.is_dir():
        return
    stale: list[tuple[str, Path]] = []
    for tag in (_TMP_TAG, _OLD_TAG):
        prefix = _sibling_prefix(target, tag)
        for entry in parent.iterdir():
            if entry.name.startswith(prefix) and not _alive(_owner_pid(entry.name, prefix)):
                stale.append((tag, entry))
    if not target.exists():
        for tag, entry in stale:
            if tag == _OLD_TAG and entry.is_dir():
                with contextlib.suppress(OSError):
                    os.rename(entry, target)
                    break
    for _, entry in stale:
        if entry.exists():
            shutil.rmtree(entry, ignore_errors=True)


_STALE_NAME = re.compile(rf"^\.(?P<name>.+)\.(?:{_TMP_TAG}|{_OLD_TAG})-\d+-")


def clean_stale_temp(folder: str | os.PathLike) -> None:
    """Remove every hidden temp folder in ``folder`` left by a killed process, whatever its target.

    :func:`clean_stale_siblings` for each target named by a ``.<name>.tmp-<pid>-...`` or
    ``.<name>.old-<pid>-...`` entry (a moved-aside copy whose target is gone is renamed back), so an
    export killed by ``kill -9`` leaves its space behind only until the next export into the same
    folder, of any name. Entries of live processes are kept.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return
    names = {m.group("name") for entry in folder.iterdir() if (m := _STALE_NAME.match(entry.name))}
    for name in sorted(names):
        clean_stale_siblings(folder / name)


def _chmod_like_mkdir(path: Path) -> None:
    """Give the folder ``path`` the mode ``mkdir`` would under the current umask."""
    os.chmod(path, 0o777 & ~current_umask())


def _chmod_tree_like_open(root: Path) -> None:
    """Give every folder and file under ``root`` the mode ``mkdir`` / ``open`` would under the umask.

    Libraries that write through their own temp files (``tempfile`` makes them 0600) would otherwise
    leave owner-only files in a folder meant to be shared; executable files keep their execute bits.
    """
    umask = current_umask()
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            os.chmod(os.path.join(folder, name), 0o777 & ~umask)
        for name in files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                continue
            executable = os.stat(path).st_mode & 0o100
            os.chmod(path, (0o777 if executable else 0o666) & ~umask)


def replace_dir(target: str | os.PathLike, build: Callable[[Path], None]) -> Path:
    """Build a folder with ``build(temp_dir)`` and put it at ``target`` (replacing an existing one).

    The folder is built in a hidden sibling ``.<name>.tmp-<pid>-<random>`` and renamed over ``target``:
    an existing ``target`` is first moved aside to ``.<name>.old-<pid>-<random>`` and deleted last, so
    at every moment ``target`` is either the complete old folder or the complete new one (or, between
    the two renames, the old one sits moved aside and :func:`clean_stale_siblings` restores it).
    Temp siblings left by a killed process are removed at the start of the next call. Missing parent
    folders are created. Every folder and file of the result gets the mode ``mkdir`` / ``open`` would
    give under the current umask.

    Args:
        target: the folder to write.
        build: fills the (empty, existing) temp folder it is given.
    Returns:
        ``target`` as a :class:`Path`.
    Raises:
        ProtoembedError: ``target`` exists and is not a folder, or the folder cannot be written.
    """
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise _file_in_the_way(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        clean_stale_siblings(target)
        tmp = Path(
            tempfile.mkdtemp(prefix=f"{_sibling_prefix(target, _TMP_TAG)}{os.getpid()}-", dir=target.parent)
        )
        _chmod_like_mkdir(tmp)
    except OSError as err:
        raise ProtoembedError(f"cannot write {target}: {_reason(err)}") from None
    existed = target.is_dir()
    try:
        build(tmp)
        swap_dir(tmp, target)
    except Exception as err:  # permission, full disk, read-only file system (or a library's error)
        reason = write_failure(err, tmp)
        if reason is None:
            raise
        raise _write_error(target, reason, existed, "folder") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def shared_temp_sibling(target: str | os.PathLike) -> Path:
    """A fixed hidden temp name beside ``target`` (``.<name>.tmp-shared``) for several processes.

    For a folder that several processes write into (a distributed checkpoint, where every rank must
    compute the same path): the main process calls :func:`clean_stale_siblings`, every process writes
    into this path, then the main process calls :func:`swap_dir`. A copy left by a kill is removed by
    the next :func:`clean_stale_siblings` (the name carries no live process id).
    """
    target = Path(target)
    return target.parent / f"{_sibling_prefix(target, _TMP_TAG)}shared"


def swap_dir(built: str | os.PathLike, target: str | os.PathLike) -> Path:
    """Put the complete folder ``built`` at ``target``: the last step of :func:`replace_dir`.

    Modes are set as ``mkdir`` / ``open`` would under the umask; an existing ``target`` is moved aside
    to ``.<name>.old-<pid>-<random>``, ``built`` renamed to ``target``, and the old copy deleted.

    Args:
        built: the finished folder, on the same file system as ``target`` (a sibling).
        target: where it goes.
    Returns:
        ``target`` as a :class:`Path`.
    """
    built, target = Path(built), Path(target)
    _chmod_tree_like_open(built)
    old: Path | None = None
    if target.exists():
        prefix = f"{_sibling_prefix(target, _OLD_TAG)}{os.getpid()}-"
        old = Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))
        os.replace(target, old)  # an empty folder is replaced by the rename
    os.replace(built, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return target


def json_safe(value: Any) -> Any:
    """Copy of ``value`` for strict JSON: NaN / inf become ``None``, numpy scalars Python numbers."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _with_parent(path: str | os.PathLike) -> Path:
    """``path`` with its parent folders created.

    Raises:
        ProtoembedError: a folder that cannot be made (``cannot write PATH: reason``).
    """
    target = Path(path).expanduser()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ProtoembedError(f"cannot write {target}: {_reason(err)}") from None
    return target


def write_json_atomic(path: str | os.PathLike, data: Any) -> Path:
    """Write ``data`` as indented strict JSON to ``path`` atomically (parent folders are created)."""
    text = json.dumps(json_safe(data), indent=2, allow_nan=False) + "\n"
    return write_atomic(_with_parent(path), lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_jsonl_atomic(path: str | os.PathLike, rows: Iterable[dict[str, Any]], suffix: str = "") -> Path:
    """Write ``rows`` as JSON lines (one object a line, UTF-8 kept as it is) to ``path`` atomically (parent
    folders are created; ``suffix``: as :func:`write_atomic`'s)."""

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)

    return write_atomic(_with_parent(path), write, suffix=suffix)


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (figures are only written to files)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str | os.PathLike, dpi: int = 110) -> Path:
    """Write a matplotlib figure as PNG to ``path`` atomically, then close it; returns the path."""
    try:
        return write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", dpi=dpi), suffix=".png")
    finally:
        pyplot().close(fig)
