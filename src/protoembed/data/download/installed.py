"""The data directory's manifest, ``.protoembed-data.json``: what was installed from where, and its hashes.

One record per installed target (a file or folder of a :class:`~protoembed.data.download.registry.Source`)::

    {"version": 1, "targets": {"nli/snli_1.0": {"dataset": "snli", "url": "...", "sha256": "<download>",
      "size": <download bytes>, "installed_at": "...", "files": {"snli_1.0_train.jsonl": ["<sha256>", <bytes>]}}}}

``files`` holds every installed file, relative to the target (``""`` for a file target). ``protoembed
data verify`` re-hashes them; a later download of the target is checked against the recorded ``sha256``.
A data directory staged by hand has no manifest: its datasets count as installed when their targets are
there, and ``verify`` checks the pinned hashes only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protoembed.core.errors import ProtoembedError
from protoembed.data.download.fetch import sha256_file
from protoembed.data.download.registry import Dataset, Size
from protoembed.outputs.io import write_json_atomic

MANIFEST = ".protoembed-data.json"
VERSION = 1


def read_manifest(data_dir: Path) -> dict[str, dict[str, Any]]:
    """The manifest's target records (``{}`` when there is no manifest).

    Raises:
        ProtoembedError: the file is not valid JSON or not a manifest (one line naming it).
    """
    path = data_dir / MANIFEST
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ProtoembedError(
            f"{path}:{err.lineno}: not valid JSON ({err.msg}); fix it or delete it (the hashes are recorded "
            "again at the next download)"
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise ProtoembedError(f"cannot read {path}: {err}") from None
    targets = data.get("targets") if isinstance(data, dict) else None
    if not isinstance(targets, dict) or not all(isinstance(v, dict) for v in targets.values()):
        raise ProtoembedError(
            f"{path}: expected {{'version': 1, 'targets': {{TARGET: {{...}}}}}}; fix it or delete it"
        )
    return targets


def write_manifest(data_dir: Path, targets: dict[str, dict[str, Any]]) -> None:
    """Write the manifest atomically (temp file, then rename)."""
    write_json_atomic(data_dir / MANIFEST, {"version": VERSION, "targets": dict(sorted(targets.items()))})


def hash_tree(path: Path) -> dict[str, list[Any]]:
    """``{relative path: [sha256, bytes]}`` of every file under ``path`` (``""`` when ``path`` is a file)."""
    if path.is_file():
        return {"": [sha256_file(path), path.stat().st_size]}
    return {
        p.relative_to(path).as_posix(): [sha256_file(p), p.stat().st_size]
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def recorded_size(manifest: dict[str, dict[str, Any]], target: str) -> int | None:
    """The download bytes the manifest recorded for ``target`` (``None``: no record)."""
    size = manifest.get(target, {}).get("size")
    return size if isinstance(size, int) else None


@dataclass(frozen=True)
class Status:
    """A dataset's state in a data directory: ``state`` installed | missing | corrupt, why, and its download
    size (exact once a download recorded it: :meth:`Dataset.download_size`)."""

    dataset: Dataset
    state: str
    detail: str
    size: Size | None


def _present(path: Path) -> bool:
    return path.is_file() or (path.is_dir() and any(path.iterdir()))


def status(data_dir: Path, dataset: Dataset, manifest: dict[str, dict[str, Any]]) -> Status:
    """Installed when every target is there and each recorded file has its recorded size; corrupt when a
    recorded file is missing or of another size, or only some targets are there; else missing. Cheap:
    sizes, not hashes (``verify`` re-hashes)."""
    present = [t for t in dataset.targets if _present(data_dir / t)]
    download = dataset.download_size({t: recorded_size(manifest, t) for t in dataset.targets})
    if not present:
        return Status(dataset, "missing", "", download)
    for target in present:
        for rel, (_, nbytes) in (manifest.get(target, {}).get("files") or {}).items():
            path = data_dir / target / rel if rel else data_dir / target
            if not path.is_file():
                return Status(dataset, "corrupt", f"{path.relative_to(data_dir)} is missing", download)
            if path.stat().st_size != nbytes:
                return Status(dataset, "corrupt", f"{path.relative_to(data_dir)} changed size", download)
    if len(present) < len(dataset.targets):
        missing = [t for t in dataset.targets if t not in present]
        detail = f"{len(present)} of {len(dataset.targets)} parts; missing {', '.join(missing)}"
        return Status(dataset, "corrupt", detail, download)
    hand = [t for t in present if t not in manifest]
    return Status(dataset, "installed", "not downloaded by protoembed" if hand else "", download)


def verify(data_dir: Path, dataset: Dataset, manifest: dict[str, dict[str, Any]]) -> tuple[bool, str]:
    """Re-hash what is installed of ``dataset``: every recorded file against the manifest and every
    pinned file (a pinned download, a pinned file inside an archive) against its pin.

    Returns:
        ``(ok, detail)``: ``ok`` False when a file differs or is missing; ``detail`` says how many files
        were checked, or the first that differs.
    """
    checked = 0
    for source in dataset.sources:
        target = data_dir / source.target
        if not _present(target):
            continue
        expected: dict[Path, str] = {}
        for rel, (digest, _) in (manifest.get(source.target, {}).get("files") or {}).items():
            expected[target / rel if rel else target] = digest
        if source.sha256 and source.unpack == "file":
            expected[target] = source.sha256
        for rel, digest in source.file_sha256.items():
            path = data_dir / rel
            if path.is_file() or source.target in manifest:  # a recorded install must have its pinned files
                expected.setdefault(path, digest)
        for path, digest in expected.items():
            name = path.relative_to(data_dir).as_posix()
            if not path.is_file():
                return False, f"{name} is missing"
            if sha256_file(path) != digest:
                return False, f"{name} differs from its recorded sha256"
            checked += 1
    return True, f"{checked} file(s) match"
