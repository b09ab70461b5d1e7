"""Stream one URL into a file, resuming after a cut connection and retrying transient failures.

:func:`fetch` appends to a ``.part`` file: when the transfer breaks (connection reset, time-out, a
response shorter than its ``Content-Length``, HTTP 5xx / 429) it waits (exponential backoff) and asks
for the rest with an HTTP ``Range: bytes=<have>-`` request, so the bytes already received are never
fetched again; a server that ignores the range (answers 200) sends the whole file and the ``.part`` is
rewritten. After ``retries`` such failures it stops with one line naming the URL; the ``.part`` stays,
and the next call continues from it. A 4xx answer, a refused connection or an unknown host fail at once.
The line's hint depends on whether the URL is a ``--mirror``'s (:func:`_hint`).

Why not ``huggingface_hub.hf_hub_download`` for the Hugging Face files: it needs the Hub's own response
headers (ETag, X-Repo-Commit), which an offline mirror laid out by host (``--mirror``) does not send; it
obeys ``HF_HUB_OFFLINE``, which protoembed's users set to keep model loading offline; and it installs
into its cache layout, not the data directory's. One downloader for every source gives every dataset the
same resume, retry, progress and manifest behaviour; ``HF_ENDPOINT`` is honoured here (:func:`source_url`).
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import os
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from protoembed.core.errors import ProtoembedError
from protoembed.core.progress import BYTES, Progress

logger = logging.getLogger(__name__)

#: Seconds to wait for the connection and for each read; a dead network fails instead of hanging.
TIMEOUT_S = 30.0
#: Transient failures retried (with a Range request) before giving up.
RETRIES = 5
#: First wait after a transient failure, in seconds; doubled after each further one.
BACKOFF_S = 1.0
HF_HOST = "https://huggingface.co"
_CHUNK = 1 << 20


class _Transient(Exception):
    """A failure worth retrying: the reason, for the final message."""


def check_mirror(mirror: str | None) -> str | None:
    """``mirror`` without a trailing ``/``; one line when it is not an ``http(s)://`` or ``file://`` URL."""
    if mirror is None:
        return None
    parts = urlsplit(mirror)
    if parts.scheme not in ("http", "https", "file") or (parts.scheme != "file" and not parts.netloc):
        raise ProtoembedError(
            f"--mirror {mirror!r} is not a URL: expected http://HOST/PATH, https://... or file:///PATH "
            "(a folder laid out as HOST/PATH of each source)"
        )
    return mirror.rstrip("/")


def source_url(url: str, mirror: str | None = None) -> str:
    """Where ``url`` is fetched from: ``MIRROR/<host>/<path>`` with a mirror; else ``url``, with the
    Hugging Face host replaced by ``$HF_ENDPOINT`` when that is set."""
    if mirror:
        parts = urlsplit(url)
        return f"{mirror}/{parts.netloc}{parts.path}" + (f"?{parts.query}" if parts.query else "")
    endpoint = os.environ.get("HF_ENDPOINT")
    if endpoint and url.startswith(HF_HOST + "/"):
        return endpoint.rstrip("/") + url[len(HF_HOST) :]
    return url


def sha256_file(path: Path, algorithm: str = "sha256") -> str:
    """The hex digest (``algorithm``: a :mod:`hashlib` name; sha256 by default) of a file, read in 1 MiB
    chunks."""
    digest = hashlib.new(algorithm)
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _hint(mirror: str | None, reason: object = None) -> str:
    """What to try when a URL cannot be fetched: without a mirror, a mirror; with one (the ``--mirror``
    URL the source's URL was built from), that mirror named and what to check about it."""
    if mirror is None:
        return "network unreachable? pass --mirror URL to fetch from a mirror"
    if isinstance(reason, ConnectionRefusedError):
        return f"the mirror {mirror} refused the connection: is it running at that address? check --mirror"
    if isinstance(reason, FileNotFoundError):
        return f"not in the mirror {mirror}, which must be laid out as HOST/PATH of each source"
    return f"the mirror {mirror} could not be reached: check --mirror"


def _open(url: str, have: int, timeout: float):
    headers = {"User-Agent": "protoembed-data-download"}
    if have:
        headers["Range"] = f"bytes={have}-"
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)


def _attempt(url: str, part: Path, timeout: float, progress: bool, mirror: str | None) -> None:
    """One request: append the rest of ``url`` to ``part`` (or rewrite it). Raises :class:`_Transient`."""
    have = part.stat().st_size if part.exists() else 0
    try:
        response = _open(url, have, timeout)
    except urllib.error.HTTPError as err:
        if err.code == 416 and have:  # nothing left to send: the .part may be complete; the caller checks
            return
        if err.code >= 500 or err.code == 429:
            raise _Transient(f"HTTP {err.code} {err.reason}") from None
        raise ProtoembedError(f"cannot download {url}: HTTP {err.code} {err.reason}") from None
    except urllib.error.URLError as err:
        reason = err.reason
        if isinstance(reason, (TimeoutError, socket.timeout, ConnectionResetError)):
            raise _Transient(f"{type(reason).__name__}: {reason}") from None
        raise ProtoembedError(f"cannot download {url}: {reason} ({_hint(mirror, reason)})") from None
    except (TimeoutError, ConnectionError, http.client.HTTPException) as err:
        raise _Transient(f"{type(err).__name__}: {err}") from None
    with response:
        status = getattr(response, "status", 200)
        length = response.headers.get("Content-Length")
        if have and status == 206:
            mode, start = "ab", have
        else:
            mode, start = "wb", 0  # no range support (or a fresh start): the whole file comes
        total = start + int(length) if length and length.isdigit() else None
        received = start
        bar = Progress(total, part.name.removesuffix(".part"), BYTES, initial=start, show=progress)
        try:
            with bar, part.open(mode) as out:
                while True:
                    try:
                        chunk = response.read(_CHUNK)
                    except (TimeoutError, ConnectionError, http.client.HTTPException) as err:
                        raise _Transient(f"{type(err).__name__}: {err}") from None
                    if not chunk:
                        break
                    out.write(chunk)
                    received += len(chunk)
                    bar.update(len(chunk))
                if total is not None and received < total:  # raised inside: the progress says no "in all"
                    raise _Transient(f"connection cut after {received} of {total} bytes")
        except OSError as err:  # disk full, read-only: the .part keeps what was written
            raise ProtoembedError(f"cannot write {part}: {err.strerror or err}") from None


def fetch(
    url: str,
    part: Path,
    *,
    timeout: float = TIMEOUT_S,
    retries: int = RETRIES,
    backoff: float = BACKOFF_S,
    progress: bool = True,
    sleep: Callable[[float], None] | None = None,
    mirror: str | None = None,
) -> None:
    """Download ``url`` into ``part`` (resumed from what ``part`` already holds; see the module docstring).
    ``mirror``: the ``--mirror`` URL that ``url`` lies under, named in the error's hint.

    Raises:
        ProtoembedError: one line naming ``url`` (an HTTP error, an unreachable host, or ``retries``
            transient failures in a row); ``part`` keeps the bytes received so far.
    """
    part.parent.mkdir(parents=True, exist_ok=True)
    failures = 0
    while True:
        try:
            _attempt(url, part, timeout, progress, mirror)
            return
        except _Transient as err:
            failures += 1
            if failures > retries:
                have = part.stat().st_size if part.exists() else 0
                other = f"check the mirror {mirror}" if mirror else "pass --mirror URL"
                raise ProtoembedError(
                    f"cannot download {url}: {err} ({failures} attempts; {have} bytes kept, rerun the same "
                    f"command to continue, or {other})"
                ) from None
            wait = backoff * 2 ** (failures - 1)
            logger.warning(
                "%s: %s; retrying in %.1f s (attempt %d of %d)", url, err, wait, failures + 1, retries + 1
            )
            (sleep or time.sleep)(wait)
