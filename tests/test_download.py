"""``protoembed data download`` against a local HTTP server serving tar files made here."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import socket
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from protoembed.cli import main
from protoembed.data.download import download_senteval
from protoembed.data.manifest import SENTEVAL_STS_SHA256
from protoembed.errors import ProtoembedError

GOLD = "STS/STS12-en-test/STS.gs.MSRpar.txt"  # a manifest file; its real bytes come from the data dir


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``(base_url, folder)``: a 127.0.0.1 HTTP server (in a thread) serving ``folder``."""
    folder = tmp_path / "served"
    folder.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", folder
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def make_tar(path: Path, files: dict[str, bytes], links: dict[str, str] | None = None) -> str:
    """Write a tar of ``files`` (name -> bytes) and symlinks ``links`` (name -> target); return sha256."""
    with tarfile.open(path, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def gold_bytes(data_dir: Path) -> bytes:
    data = (data_dir / "senteval" / GOLD).read_bytes()
    assert hashlib.sha256(data).hexdigest() == SENTEVAL_STS_SHA256[GOLD]
    return data


def _leftovers(dest: Path) -> list[str]:
    return sorted(p.name for p in dest.iterdir()) if dest.exists() else []


@pytest.mark.parametrize("prefix", ["", "downstream/"])
def test_success(served: tuple[str, Path], tmp_path: Path, gold_bytes: bytes, prefix: str) -> None:
    base, folder = served
    files = {prefix + GOLD: gold_bytes, prefix + "SICK/SICK_train.txt": b"pair_ID\n"}
    digest = make_tar(folder / "senteval.tar", files)
    dest = tmp_path / "data"
    result = download_senteval(dest, f"{base}/senteval.tar", sha256=digest.upper(), progress=False)
    assert result.path == dest / "senteval"
    assert result.sha256 == digest and result.verified_files == 1
    assert (dest / "senteval" / GOLD).read_bytes() == gold_bytes
    assert (dest / "senteval" / "SICK" / "SICK_train.txt").read_bytes() == b"pair_ID\n"
    assert _leftovers(dest) == ["senteval"]  # no temp folder or archive left


def test_sha256_mismatch_leaves_nothing(served: tuple[str, Path], tmp_path: Path, gold_bytes: bytes) -> None:
    base, folder = served
    make_tar(folder / "senteval.tar", {GOLD: gold_bytes})
    dest = tmp_path / "data"
    with pytest.raises(ProtoembedError, match="sha256 mismatch") as info:
        download_senteval(dest, f"{base}/senteval.tar", sha256="0" * 64, progress=False)
    assert "\n" not in str(info.value)
    assert not dest.exists()
    existing = tmp_path / "existing"
    existing.mkdir()
    with pytest.raises(ProtoembedError, match="sha256 mismatch"):
        download_senteval(existing, f"{base}/senteval.tar", sha256="f" * 64, progress=False)
    assert _leftovers(existing) == []


def test_manifest_mismatch_leaves_nothing(served: tuple[str, Path], tmp_path: Path) -> None:
    base, folder = served
    make_tar(folder / "senteval.tar", {GOLD: b"4.0\n3.0\n", "STS/STS99/other.txt": b"x"})
    dest = tmp_path / "data"
    dest.mkdir()
    with pytest.raises(ProtoembedError, match=rf"differ from the published sha256 \(first: {GOLD}\)"):
        download_senteval(dest, f"{base}/senteval.tar", progress=False)
    assert _leftovers(dest) == []
    result = download_senteval(dest, f"{base}/senteval.tar", progress=False, check_manifest=False)
    assert result.verified_files == 0 and (dest / "senteval" / GOLD).read_bytes() == b"4.0\n3.0\n"


@pytest.mark.parametrize(
    ("files", "links", "match"),
    [
        ({"STS/a.txt": b"a", "../evil.txt": b"x"}, None, "outside the target"),
        ({"STS/a.txt": b"a", "/tmp/evil.txt": b"x"}, None, "outside the target"),
        ({"STS/a.txt": b"a"}, {"STS/link": "../../../etc/passwd"}, "link or special file"),
        ({"MR/a.txt": b"a"}, None, "no STS/ folder"),
    ],
)
def test_unsafe_or_wrong_archives(
    served: tuple[str, Path],
    tmp_path: Path,
    files: dict[str, bytes],
    links: dict[str, str] | None,
    match: str,
) -> None:
    base, folder = served
    make_tar(folder / "bad.tar", files, links)
    dest = tmp_path / "nested" / "data"
    with pytest.raises(ProtoembedError, match=match):
        download_senteval(dest, f"{base}/bad.tar", progress=False)
    assert _leftovers(tmp_path) == ["served"]  # not even the "nested" parent, nor ../evil.txt


def test_not_a_tar_and_http_errors(served: tuple[str, Path], tmp_path: Path) -> None:
    base, folder = served
    (folder / "junk.tar").write_bytes(b"this is not a tar archive" * 100)
    with pytest.raises(ProtoembedError, match="not a valid tar archive"):
        download_senteval(tmp_path / "a", f"{base}/junk.tar", progress=False)
    with pytest.raises(ProtoembedError, match="HTTP 404"):
        download_senteval(tmp_path / "b", f"{base}/missing.tar", progress=False)
    assert _leftovers(tmp_path) == ["served"]


def test_unreachable_server_is_quick_one_line_error(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(ProtoembedError, match="cannot download") as info:
        download_senteval(tmp_path / "data", f"http://127.0.0.1:{port}/senteval.tar", progress=False)
    assert time.monotonic() - start < 10
    assert "\n" not in str(info.value)
    assert not (tmp_path / "data").exists()


def test_silent_server_times_out(tmp_path: Path) -> None:
    with socket.socket() as sock:  # accepts connections (backlog) but never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/senteval.tar"
        with pytest.raises(ProtoembedError, match="cannot download"):
            download_senteval(tmp_path / "data", url, progress=False, timeout=0.5)
    assert not (tmp_path / "data").exists()


def test_existing_target_needs_force(served: tuple[str, Path], tmp_path: Path, gold_bytes: bytes) -> None:
    base, folder = served
    make_tar(folder / "senteval.tar", {GOLD: gold_bytes})
    dest = tmp_path / "data"
    (dest / "senteval").mkdir(parents=True)
    (dest / "senteval" / "old.txt").write_text("old", encoding="utf-8")
    with pytest.raises(ProtoembedError, match="--force"):
        download_senteval(dest, f"{base}/senteval.tar", progress=False)
    download_senteval(dest, f"{base}/senteval.tar", progress=False, force=True)
    assert not (dest / "senteval" / "old.txt").exists()
    assert (dest / "senteval" / GOLD).is_file()
    assert _leftovers(dest) == ["senteval"]


def test_local_file_url(tmp_path: Path, gold_bytes: bytes) -> None:
    archive = tmp_path / "senteval.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo(GOLD)
        info.size = len(gold_bytes)
        tar.addfile(info, io.BytesIO(gold_bytes))
    result = download_senteval(tmp_path / "data", str(archive), progress=False)
    assert result.verified_files == 1


def test_cli(
    served: tuple[str, Path],
    tmp_path: Path,
    gold_bytes: bytes,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    base, folder = served
    make_tar(folder / "senteval.tar", {GOLD: gold_bytes})
    dest = tmp_path / "data"
    url = f"{base}/senteval.tar"
    assert main(["data", "download", "--dest", str(dest), "--url", url, "--sha256", "1" * 64, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("protoembed: error: ") and "sha256 mismatch" in err and err.count("\n") == 1
    assert not dest.exists()
    monkeypatch.delenv("PROTOEMBED_DATA", raising=False)
    assert main(["data", "download", "--url", url, "--quiet"]) == 2
    assert "--dest" in capsys.readouterr().err
    monkeypatch.setenv("PROTOEMBED_DATA", str(dest))
    assert main(["data", "download", "--url", url, "--quiet"]) == 0
    assert "1 STS files matched" in capsys.readouterr().out
    assert (dest / "senteval" / GOLD).is_file()
