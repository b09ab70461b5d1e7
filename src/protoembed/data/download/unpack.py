"""Unpack a downloaded tar or zip archive with every member checked, and pick the folder to install.

Refused, before anything is written: absolute member names, ``..`` components, drive letters, links,
devices and FIFOs. macOS metadata (``__MACOSX/``, ``._*`` files, as in the SNLI and MultiNLI zips) is
left out. A truncated or corrupt archive is one line naming it.
"""

from __future__ import annotations

import stat
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from protoembed.core.errors import ProtoembedError


def _check_name(name: str, source: str) -> tuple[str, ...]:
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if name.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
        raise ProtoembedError(f"refusing to unpack {source}: member {name!r} would land outside the target")
    return parts


def _macos_metadata(parts: tuple[str, ...]) -> bool:
    return bool(parts) and (parts[0] == "__MACOSX" or parts[-1].startswith("._"))


def _extract_tar(archive: Path, into: Path, source: str) -> None:
    with tarfile.open(archive, "r:*") as tar:
        members = []
        for member in tar.getmembers():
            parts = _check_name(member.name, source)
            if not (member.isfile() or member.isdir()):
                raise ProtoembedError(
                    f"refusing to unpack {source}: member {member.name!r} is a link or special file"
                )
            if not _macos_metadata(parts):
                members.append(member)
        if hasattr(tarfile, "data_filter"):
            tar.extractall(into, members=members, filter="data")
        else:  # Python < 3.10.12: the checks above are the filter
            tar.extractall(into, members=members)


def _extract_zip(archive: Path, into: Path, source: str) -> None:
    with zipfile.ZipFile(archive) as zf:
        members = []
        for info in zf.infolist():
            parts = _check_name(info.filename, source)
            mode = (
                info.external_attr >> 16
            )  # Unix mode where the archiver set one; type bits 0: a plain entry
            if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise ProtoembedError(
                    f"refusing to unpack {source}: member {info.filename!r} is a link or special file"
                )
            if not _macos_metadata(parts):
                members.append(info)
        bad = zf.testzip()
        if bad is not None:
            raise ProtoembedError(f"cannot unpack {source}: member {bad!r} is corrupt (CRC mismatch)")
        zf.extractall(into, members=members)


def extract(archive: Path, into: Path, kind: str, source: str) -> None:
    """Unpack ``archive`` (``kind`` ``tar``, any compression, or ``zip``) into the folder ``into``.

    ``source`` names the archive in error messages.
    """
    try:
        if kind == "zip":
            _extract_zip(archive, into, source)
        else:
            _extract_tar(archive, into, source)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError) as err:
        raise ProtoembedError(
            f"cannot unpack {source}: not a valid {kind} archive, or truncated ({err})"
        ) from None
    except OSError as err:
        raise ProtoembedError(f"cannot unpack {source}: {err.strerror or err}") from None


def pick_folder(unpacked: Path, member: str | None, marker: str | None, source: str) -> Path:
    """The folder of the unpacked tree to install: ``member`` (``""``: the root), or, with ``member``
    ``None``, the folder that holds ``marker`` (the root or up to 2 levels down)."""
    if member is not None:
        folder = unpacked / member if member else unpacked
        if not folder.is_dir():
            raise ProtoembedError(f"{source} has no {member}/ folder: not the archive expected")
        return folder
    candidates = [unpacked]
    candidates += sorted(p for p in unpacked.iterdir() if p.is_dir())
    candidates += sorted(q for p in candidates[1:] for q in p.iterdir() if q.is_dir())
    for folder in candidates:
        if (folder / str(marker)).is_dir():
            return folder
    raise ProtoembedError(f"{source} has no {marker}/ folder: not the archive expected")
