"""Fetch the SentEval benchmark data (SimCSE's ``senteval.tar``) into ``<dest>/senteval``.

Everything happens in a hidden temp folder beside ``<dest>/senteval`` (:func:`protoembed.io.replace_dir`):
the archive is streamed there (with a progress bar), checked against a sha256 when one is given or
pinned, unpacked with every member checked (no absolute paths, no ``..``, no links or devices),
checked file by file against :data:`~protoembed.data.manifest.SENTEVAL_STS_SHA256`, and only then
renamed to ``<dest>/senteval``. Any failure removes everything it wrote, so ``dest`` never holds a
half-written tree.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import re
import shutil
import sys
import tarfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from protoembed.data.manifest import SENTEVAL_STS_SHA256
from protoembed.errors import ProtoembedError
from protoembed.io import replace_dir

DEFAULT_URL = "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/senteval.tar"
#: sha256 of the archive at DEFAULT_URL, once known; ``None``: only the per-file manifest is checked.
DEFAULT_SHA256: str | None = None
#: Seconds to wait for the connection and for each read; a dead network fails instead of hanging.
TIMEOUT_S = 20.0
_CHUNK = 1 << 20


@dataclass(frozen=True)
class DownloadResult:
    """Where the data landed, the archive's sha256, and how many files matched the manifest."""

    path: Path
    sha256: str
    verified_files: int


def _check_hex(sha256: str | None) -> str | None:
    if sha256 is None:
        return None
    value = sha256.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{64}", value):
        raise ProtoembedError(f"--sha256 must be 64 hexadecimal digits, got {sha256!r}")
    return value


def _as_url(url: str) -> str:
    """``url`` as given, or a ``file://`` URL when it is a local path (an offline mirror)."""
    if "://" in url:
        return url
    path = Path(url).expanduser()
    if not path.is_file():
        raise ProtoembedError(f"{url}: neither a URL nor an existing local archive")
    return path.absolute().as_uri()


def fetch(url: str, target: Path, timeout: float = TIMEOUT_S, progress: bool = True) -> str:
    """Stream ``url`` into the file ``target``; return its sha256 (hex).

    Raises :class:`ProtoembedError` (one line) when the server cannot be reached, answers with an
    HTTP error, times out, or sends fewer bytes than it announced.
    """
    from tqdm.auto import tqdm

    request = urllib.request.Request(url, headers={"User-Agent": "protoembed-data-download"})
    digest = hashlib.sha256()
    received = 0
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            bar = tqdm(
                total=total,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=PurePosixPath(url).name or "download",
                disable=not progress,
                file=sys.stderr,
            )
            with bar, open(target, "wb") as out:
                while chunk := response.read(_CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    received += len(chunk)
                    bar.update(len(chunk))
    except urllib.error.HTTPError as err:
        raise ProtoembedError(f"cannot download {url}: HTTP {err.code} {err.reason}") from None
    except urllib.error.URLError as err:
        raise ProtoembedError(
            f"cannot download {url}: {err.reason} (network unreachable? pass --url to a mirror or a local file)"
        ) from None
    except TimeoutError:
        raise ProtoembedError(f"cannot download {url}: no answer within {timeout:g} s") from None
    except (OSError, http.client.HTTPException) as err:  # connection reset, incomplete read, disk full
        raise ProtoembedError(f"cannot download {url}: {type(err).__name__}: {err}") from None
    if total is not None and received != total:
        raise ProtoembedError(f"cannot download {url}: got {received} of {total} bytes (connection cut?)")
    return digest.hexdigest()


def safe_extract(archive: Path, into: Path, source: str) -> None:
    """Unpack the tar ``archive`` (any compression) into ``into``, refusing unsafe members.

    Refused: absolute names, ``..`` components, links, devices and FIFOs. ``source`` names the
    archive in error messages.
    """
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            for member in members:
                parts = PurePosixPath(member.name.replace("\\", "/")).parts
                if member.name.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
                    raise ProtoembedError(
                        f"refusing to unpack {source}: member {member.name!r} would land outside the target"
                    )
                if not (member.isfile() or member.isdir()):
                    raise ProtoembedError(
                        f"refusing to unpack {source}: member {member.name!r} is a link or special file"
                    )
            if hasattr(tarfile, "data_filter"):
                tar.extractall(into, members=members, filter="data")
            else:  # Python < 3.10.12: the checks above are the filter
                tar.extractall(into, members=members)
    except tarfile.TarError as err:
        raise ProtoembedError(f"cannot unpack {source}: not a valid tar archive ({err})") from None
    except OSError as err:
        raise ProtoembedError(f"cannot unpack {source}: {err}") from None


def find_senteval_root(unpacked: Path, source: str) -> Path:
    """The folder of the unpacked tree that holds ``STS/`` (the archive root or up to 2 levels down)."""
    candidates = [unpacked]
    candidates += sorted(p for p in unpacked.iterdir() if p.is_dir())
    candidates += sorted(q for p in candidates[1:] for q in p.iterdir() if q.is_dir())
    for folder in candidates:
        if (folder / "STS").is_dir():
            return folder
    raise ProtoembedError(f"{source} has no STS/ folder: not a SentEval data archive")


def verify_manifest(root: Path, source: str, manifest: dict[str, str] = SENTEVAL_STS_SHA256) -> int:
    """Check every ``manifest`` file present under ``root``; return how many were checked."""
    checked = 0
    bad: list[str] = []
    for rel, expected in manifest.items():
        path = root / rel
        if not path.is_file():
            continue
        checked += 1
        if hashlib.sha256(path.read_bytes()).hexdigest() != expected:
            bad.append(rel)
    if bad:
        raise ProtoembedError(
            f"{source}: {len(bad)} file(s) differ from the published sha256 (first: {bad[0]}); "
            "nothing was installed (pass --no-manifest to accept them anyway)"
        )
    return checked


def download_senteval(
    dest: str | os.PathLike[str],
    url: str = DEFAULT_URL,
    sha256: str | None = None,
    *,
    force: bool = False,
    check_manifest: bool = True,
    progress: bool = True,
    timeout: float = TIMEOUT_S,
) -> DownloadResult:
    """Download and install the SentEval data as ``<dest>/senteval``.

    Args:
        dest: the data directory (created if missing).
        url: the archive's URL, or a local path.
        sha256: the archive's expected sha256 (default: :data:`DEFAULT_SHA256` for the default URL).
        force: replace an existing ``<dest>/senteval``.
        check_manifest: check the STS files against their published sha256.
        progress: draw a download progress bar.
        timeout: seconds to wait for the connection and for each read.
    Returns:
        a :class:`DownloadResult`. On any error nothing is left behind in ``dest``.
    """
    expected = _check_hex(sha256) or (DEFAULT_SHA256 if url == DEFAULT_URL else None)
    source = url
    url = _as_url(url)
    dest = Path(dest).expanduser().absolute()
    target = dest / "senteval"
    if target.exists() and not force:
        raise ProtoembedError(f"{target} already exists; pass --force to replace it")
    created = [p for p in (dest, *dest.parents) if not p.exists()]  # innermost first
    digest = ""
    verified = 0

    def build(tmp: Path) -> None:
        """Fetch, check and unpack the archive inside the temp folder; leave only the data tree there."""
        nonlocal digest, verified
        archive = tmp / ".archive"
        digest = fetch(url, archive, timeout=timeout, progress=progress)
        if expected is not None and digest != expected:
            raise ProtoembedError(
                f"{source}: sha256 mismatch (expected {expected}, got {digest}); nothing was installed"
            )
        unpacked = tmp / ".unpacked"
        unpacked.mkdir()
        safe_extract(archive, unpacked, source)
        archive.unlink()
        root = find_senteval_root(unpacked, source)
        verified = verify_manifest(root, source) if check_manifest else 0
        for entry in list(root.iterdir()):
            os.rename(entry, tmp / entry.name)
        shutil.rmtree(unpacked)

    try:
        replace_dir(target, build)
        return DownloadResult(target, digest, verified)
    finally:
        if not target.exists():  # failed: remove the (empty) folders this call created
            for folder in created:
                with contextlib.suppress(OSError):
                    folder.rmdir()
