"""Download, check and install registry datasets into a data directory, never leaving half a dataset.

For each :class:`~protoembed.data.download.registry.Source` of a dataset (a target already there is skipped unless
``force``; without ``force``, a dataset whose installed files differ from their recorded or pinned sha256,
as ``protoembed data verify`` finds them, stops the run before anything is fetched: :func:`damaged`):

1. :func:`~protoembed.data.download.fetch.fetch` streams it into ``<data>/.protoembed-partial/<file>.part`` (the
   only place a partial download lives; a rerun resumes from it).
2. Its sha256 is checked against the pin, else against the manifest's record of an earlier download; a
   mismatch deletes the ``.part`` and installs nothing.
3. A file target is renamed into place; an archive is unpacked in a hidden temp folder beside its target
   (:func:`protoembed.outputs.io.replace_dir`), its pinned files checked, and the folder renamed into place.
4. The manifest (:mod:`protoembed.data.download.installed`) records URL, sha256, size and the installed files'
   hashes, written atomically.

Any failure or Ctrl-C leaves each target either absent or complete.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protoembed.core.errors import ProtoembedError
from protoembed.data.download.fetch import BACKOFF_S, RETRIES, TIMEOUT_S, fetch, sha256_file, source_url
from protoembed.data.download.installed import MANIFEST, hash_tree, read_manifest, verify, write_manifest
from protoembed.data.download.registry import Dataset, Source
from protoembed.data.download.unpack import extract, pick_folder
from protoembed.outputs.io import check_writable, replace_dir

logger = logging.getLogger(__name__)

PARTIAL_DIR = ".protoembed-partial"


@dataclass(frozen=True)
class Step:
    """One source of a planned download: where from (``mirror``: the ``--mirror`` that ``url`` lies under),
    where to, and whether it is there already."""

    dataset: Dataset
    source: Source
    url: str
    target: Path
    installed: bool
    mirror: str | None = None


@dataclass(frozen=True)
class Installed:
    """A source that was installed: its target, the download's sha256 and size, and how it was checked."""

    step: Step
    sha256: str
    size: int
    checked: str


def install_steps(datasets: list[Dataset], data_dir: Path, mirror: str | None = None) -> list[Step]:
    """Every source of ``datasets`` with the URL it is fetched from and its target in ``data_dir``."""
    return [
        Step(d, s, source_url(s.url, mirror), data_dir / s.target, (data_dir / s.target).exists(), mirror)
        for d in datasets
        for s in d.sources
    ]


def damaged(
    datasets: list[Dataset], data_dir: Path, manifest: dict[str, dict[str, Any]]
) -> list[tuple[Dataset, str]]:
    """The datasets whose installed files differ from their recorded or pinned sha256 (re-hashed as
    ``protoembed data verify`` does: :func:`~protoembed.data.download.installed.verify`), each with the
    first difference."""
    out = []
    for dataset in datasets:
        ok, detail = verify(data_dir, dataset, manifest)
        if not ok:
            out.append((dataset, detail))
    return out


def damaged_error(bad: list[tuple[Dataset, str]]) -> ProtoembedError:
    """The one-line refusal to skip (or silently replace) damaged datasets: the first difference, and
    ``--force``."""
    names = " ".join(d.name for d, _ in bad)
    first, detail = bad[0]
    more = f" ({len(bad) - 1} more damaged: {' '.join(d.name for d, _ in bad[1:])})" if len(bad) > 1 else ""
    whose = "its" if len(bad) == 1 else "their"
    return ProtoembedError(
        f"{first.name} is installed but its files differ from the download: {detail}{more}; nothing was "
        f"fetched; pass --force to download {names} again (replacing {whose} installed files)"
    )


def _partial(data_dir: Path, step: Step) -> Path:
    tag = hashlib.sha1(step.url.encode()).hexdigest()[:10]
    return data_dir / PARTIAL_DIR / f"{step.dataset.name}-{tag}-{step.source.filename}.part"


def _check_pinned_files(root: Path, target: str, pins: dict[str, str], source: str) -> int:
    """Check the pinned files (paths relative to the data directory) present under the unpacked ``root``
    (which becomes ``target``); return how many were checked."""
    checked = 0
    bad: list[str] = []
    for rel, digest in pins.items():
        path = root / rel[len(target) + 1 :]
        if not path.is_file():
            continue
        checked += 1
        if sha256_file(path) != digest:
            bad.append(rel)
    if bad:
        raise ProtoembedError(
            f"{source}: {len(bad)} file(s) differ from their pinned sha256 (first: {bad[0]}); nothing was "
            "installed (pass --no-verify to accept them anyway)"
        )
    return checked


def install_step(
    step: Step,
    data_dir: Path,
    manifest: dict[str, dict[str, Any]],
    *,
    verify_hashes: bool = True,
    progress: bool = True,
    timeout: float = TIMEOUT_S,
    retries: int = RETRIES,
    backoff: float = BACKOFF_S,
    sleep: Callable[[float], None] | None = None,
) -> Installed:
    """Fetch, check and install one source (see the module docstring); updates ``manifest`` in place and
    on disk."""
    created = [p for p in (step.target.parent, *step.target.parent.parents) if not p.exists()]
    try:
        return _install_step(
            step, data_dir, manifest, verify_hashes, progress, timeout, retries, backoff, sleep
        )
    finally:
        if not step.target.exists():  # failed: the folders this call created go again, innermost first
            for folder in [data_dir / PARTIAL_DIR, *created]:
                with contextlib.suppress(OSError):
                    folder.rmdir()


def _install_step(
    step: Step,
    data_dir: Path,
    manifest: dict[str, dict[str, Any]],
    verify_hashes: bool,
    progress: bool,
    timeout: float,
    retries: int,
    backoff: float,
    sleep: Callable[[float], None] | None,
) -> Installed:
    source = step.source
    part = _partial(data_dir, step)
    fetch(
        step.url,
        part,
        timeout=timeout,
        retries=retries,
        backoff=backoff,
        progress=progress,
        sleep=sleep,
        mirror=step.mirror,
    )
    digest, size = sha256_file(part), part.stat().st_size
    if verify_hashes and source.md5 and (md5 := sha256_file(part, "md5")) != source.md5:
        part.unlink()
        raise ProtoembedError(
            f"{step.url}: md5 {md5} differs from the one its host publishes ({source.md5}); the download was "
            "deleted and nothing was installed"
        )
    recorded = manifest.get(source.target, {}).get("sha256")
    expected = source.sha256 or recorded
    if verify_hashes and expected and digest != expected:
        part.unlink()
        kind = "pinned" if source.sha256 else "recorded at its first download"
        raise ProtoembedError(
            f"{step.url}: sha256 {digest} differs from the one {kind} ({expected}); the download was deleted "
            "and nothing was installed"
            + ("" if source.sha256 else " (pass --no-verify to accept the new file)")
        )
    checked = "sha256 pinned" if source.sha256 else ("sha256 as recorded" if recorded else "sha256 recorded")
    if verify_hashes and source.md5:
        checked = f"md5 as published, {checked}"
    if source.unpack == "file":
        try:
            step.target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(part, step.target)
        except OSError as err:
            raise ProtoembedError(f"cannot write {step.target}: {err.strerror or err}") from None
    else:

        def build(tmp: Path) -> None:
            nonlocal checked
            unpacked = tmp / ".unpacked"
            unpacked.mkdir()
            extract(part, unpacked, source.unpack, step.url)
            root = pick_folder(unpacked, source.member, source.marker, step.url)
            if verify_hashes and source.file_sha256:
                n = _check_pinned_files(root, source.target, dict(source.file_sha256), step.url)
                checked += f", {n} pinned file(s) match"
            for entry in list(root.iterdir()):
                os.rename(entry, tmp / entry.name)
            shutil.rmtree(unpacked)

        try:
            replace_dir(step.target, build)
        except ProtoembedError:  # a complete download that is not the archive expected: fetch anew next time
            part.unlink(missing_ok=True)
            raise
        part.unlink()
    with contextlib.suppress(OSError):
        part.parent.rmdir()  # only when no other partial download waits there
    manifest[source.target] = {
        "dataset": step.dataset.name,
        "url": step.url,
        "sha256": digest,
        "size": size,
        "installed_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        # a file target is the download itself: its hash is known; an unpacked folder is hashed once
        "files": {"": [digest, size]} if source.unpack == "file" else hash_tree(step.target),
    }
    write_manifest(data_dir, manifest)
    return Installed(step, digest, size, checked)


def install(
    datasets: list[Dataset],
    data_dir: Path,
    *,
    mirror: str | None = None,
    force: bool = False,
    on_step: Callable[[Step, Installed | None], None] | None = None,
    **kwargs: Any,
) -> list[Installed]:
    """Install every source of ``datasets`` into ``data_dir`` (skipping targets already there unless
    ``force``); ``on_step(step, result)`` after each (``result`` None: skipped). ``kwargs`` go to
    :func:`install_step`.

    Raises:
        ProtoembedError: the data directory is not writable, the manifest is invalid, a dataset's installed
            files differ from their sha256 and ``force`` is not set (:func:`damaged`; nothing is fetched), or
            a download fails (the targets installed before it stay).
    """
    data_dir = Path(data_dir).expanduser().absolute()
    check_writable(data_dir / MANIFEST)
    manifest = read_manifest(data_dir)
    if not force and (bad := damaged(datasets, data_dir, manifest)):
        raise damaged_error(bad)
    done: list[Installed] = []
    for step in install_steps(datasets, data_dir, mirror):
        if step.installed and not force:
            if on_step:
                on_step(step, None)
            continue
        result = install_step(step, data_dir, manifest, **kwargs)
        done.append(result)
        if on_step:
            on_step(step, result)
    return done
