"""``protoembed data``: every registry dataset fetched through ``--mirror`` from a local HTTP server that
serves archives built here in each source's real layout; resume, retries, checksums, bad input."""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import http.server
import io
import json
import os
import re
import socket
import subprocess
import sys
import tarfile
import threading
import urllib.parse
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from protoembed.cli import main
from protoembed.core.errors import ProtoembedError
from protoembed.core.progress import format_size
from protoembed.data.download.fetch import fetch
from protoembed.data.download.registry import DATASETS

REPO = Path(__file__).resolve().parents[1]


class _State:
    """What the server serves and what it did: bytes sent per path, cuts and injected errors."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sent: collections.Counter[str] = collections.Counter()
        self.requests: collections.Counter[str] = collections.Counter()
        self.cut: dict[str, int] = {}  # path -> cut the next response after this many body bytes
        self.fail: dict[str, list[int]] = {}  # path -> statuses answered first
        self.ranges = True


class _Handler(http.server.BaseHTTPRequestHandler):
    """GET with ``Range: bytes=N-`` support; HTTP/1.0, so the connection closes after each response."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        state: _State = self.server.state  # type: ignore[attr-defined]
        path = urllib.parse.unquote(self.path.split("?", 1)[0]).lstrip("/")
        state.requests[path] += 1
        if state.fail.get(path):
            self.send_error(state.fail[path].pop(0))
            return
        file = state.root / path
        if not file.is_file():
            self.send_error(404)
            return
        data = file.read_bytes()
        start = 0
        match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
        if match and state.ranges:
            start = int(match[1])
            if start >= len(data):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        limit = state.cut.pop(path, None)
        if limit is not None:
            body = body[:limit]
        state.sent[path] += len(body)  # counted first: the client may assert as soon as it has the bytes
        self.wfile.write(body)


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[tuple[str, _State]]:
    """``(mirror URL, state)``: a 127.0.0.1 HTTP server (in a thread) serving ``tmp_path/mirror``."""
    root = tmp_path / "mirror"
    root.mkdir()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.state = _State(root)  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", httpd.state  # type: ignore[attr-defined]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def mirror_path(root: Path, url: str) -> Path:
    """Where a mirror laid out by host keeps ``url``: ``root/<host>/<path>``."""
    parts = urllib.parse.urlsplit(url)
    return root / parts.netloc / parts.path.lstrip("/")


def _tar(path: Path, files: dict[str, bytes], mode: str = "w") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, mode) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _zip(path: Path, files: dict[str, bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)


def _tree(folder: Path, prefix: str) -> dict[str, bytes]:
    return {
        f"{prefix}{p.relative_to(folder).as_posix()}": p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file()
    }


def _nli_jsonl(rows: int, extra: dict[str, str]) -> bytes:
    labels = ["entailment", "neutral", "contradiction", "-"]
    lines = [
        json.dumps(
            {
                "annotator_labels": [labels[i % 4]],
                "gold_label": labels[i % 4],
                "pairID": f"{i}e",
                "sentence1": f"A man plays a guitar number {i}.",
                "sentence1_binary_parse": "( ( A man ) ... )",
                "sentence2": f"Someone makes music {i}.",
                **extra,
            }
        )
        for i in range(rows)
    ]
    return ("\n".join(lines) + "\n").encode()


def _beir_zip(folder: str, missing_document: bool) -> bytes:
    """A BEIR zip in the real layout (``<folder>/corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``, and
    macOS metadata), small; with ``missing_document``, the qrels name a document the corpus lacks (as
    ArguAna's do). Fixed timestamps: the same bytes every run."""
    corpus = [
        {"_id": "d1", "title": "Cats", "text": "cats purr and sleep"},
        {"_id": "d2", "text": "dogs bark"},
    ]
    queries = [{"_id": "q1", "text": "what do cats do"}, {"_id": "q2", "text": "which animal barks"}]
    qrels = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n" + ("q2\td-gone\t1\n" * missing_document)
    files = {
        f"{folder}/corpus.jsonl": "".join(json.dumps(r) + "\n" for r in corpus),
        f"{folder}/queries.jsonl": "".join(json.dumps(r) + "\n" for r in queries),
        f"{folder}/qrels/test.tsv": qrels,
        f"__MACOSX/{folder}/._corpus.jsonl": "\x00\x05\x16\x07",
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, text in files.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=(2021, 1, 1, 0, 0, 0)), text)
    return buffer.getvalue()


#: dataset -> the stand-in zip the mirror serves for each BEIR entry (ArguAna's with its missing document)
BEIR_ZIPS = {
    d.name: _beir_zip(d.sources[0].member, d.name == "beir-arguana")
    for d in DATASETS.values()
    if d.format == "retrieval"
}


@pytest.fixture(autouse=True)
def beir_md5s(monkeypatch: pytest.MonkeyPatch) -> None:
    """The BEIR entries pin the md5 BEIR publishes for its zips; the mirror here serves small stand-ins in
    the same layout, so for these tests the pins are the stand-ins' own."""
    for name, data in BEIR_ZIPS.items():
        dataset = DATASETS[name]
        source = dataclasses.replace(dataset.sources[0], md5=hashlib.md5(data).hexdigest())
        monkeypatch.setitem(DATASETS, name, dataclasses.replace(dataset, sources=(source,)))


def build_mirror(root: Path, data_dir: Path) -> dict[str, bytes]:
    """Lay out every registry source under ``root`` in its real layout; returns the bytes of each
    single-file source by URL. Pinned files get the staged copies' bytes (the same bytes as the sources)."""
    hf = "huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main"
    wiki_lines = (data_dir / "unsup/wiki1m_sample/wiki1m_for_simcse.head-1280000B.txt").read_bytes()
    wiki = b"\n".join(wiki_lines.split(b"\n")[:300]) + b"\n"
    singles = {f"https://{hf}/wiki1m_for_simcse.txt": wiki}
    csv = b"sent0,sent1,hard_neg\n" + b"".join(
        f'"A dog runs, fast {i}.",An animal moves {i}.,A cat sleeps {i}.\n'.encode() for i in range(64)
    )
    singles[f"https://{hf}/nli_for_simcse.csv"] = csv
    for url, data in singles.items():
        target = mirror_path(root, url)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    senteval = data_dir / "senteval"
    tar_files = {**_tree(senteval / "STS", "STS/"), **_tree(senteval / "SICK", "SICK/")}
    tar_files.update(_tree(senteval / "SNLI", "SNLI/"))
    _tar(mirror_path(root, f"https://{hf}/senteval.tar"), tar_files)
    for dataset in DATASETS.values():
        for source in dataset.sources:
            if source.sha256:  # a pinned single file: the staged copy
                target = mirror_path(root, source.url)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes((data_dir / source.target).read_bytes())
                singles[source.url] = target.read_bytes()
            elif dataset.name == "sts-raw":
                staged = data_dir / source.target
                if source.unpack == "zip":
                    files = _tree(staged, f"{source.member}/")
                    files[f"__MACOSX/{source.member}/._readme.txt"] = b"\x00\x05\x16\x07 mac metadata"
                    _zip(mirror_path(root, source.url), files)
                else:
                    _tar(mirror_path(root, source.url), _tree(staged, "stsbenchmark/"), "w:gz")
    snli = {
        "snli_1.0/README.txt": b"SNLI 1.0\n",
        "snli_1.0/snli_1.0_train.jsonl": _nli_jsonl(48, {}),
        "snli_1.0/snli_1.0_dev.jsonl": _nli_jsonl(8, {}),
        "snli_1.0/snli_1.0_test.jsonl": _nli_jsonl(8, {}),
        "snli_1.0/snli_1.0_train.txt": b"gold_label\tsentence1_binary_parse\n",
        "__MACOSX/snli_1.0/._snli_1.0_train.jsonl": b"\x00\x05\x16\x07",
    }
    _zip(mirror_path(root, "https://nlp.stanford.edu/projects/snli/snli_1.0.zip"), snli)
    genre = {"genre": "fiction", "promptID": "1"}
    mnli = {
        "multinli_1.0/README.txt": b"MultiNLI 1.0\n",
        "multinli_1.0/multinli_1.0_train.jsonl": _nli_jsonl(48, genre),
        "multinli_1.0/multinli_1.0_dev_matched.jsonl": _nli_jsonl(8, genre),
        "multinli_1.0/multinli_1.0_dev_mismatched.jsonl": _nli_jsonl(8, genre),
        "__MACOSX/multinli_1.0/._multinli_1.0_train.jsonl": b"\x00\x05\x16\x07",
    }
    _zip(mirror_path(root, "https://cims.nyu.edu/~sbowman/multinli/multinli_1.0.zip"), mnli)
    for name, data in BEIR_ZIPS.items():
        target = mirror_path(root, DATASETS[name].sources[0].url)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return singles


def _one_line_error(capsys: pytest.CaptureFixture[str], code: int, *needles: str) -> str:
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


# --------------------------------------------------------------------------- every dataset, through --mirror


def test_every_dataset_through_the_mirror(server, data_dir: Path, tmp_path: Path, capsys) -> None:
    base, state = server
    singles = build_mirror(state.root, data_dir)
    dest = tmp_path / "data"
    code = main(["data", "download", "--all", "--data-dir", str(dest), "--mirror", base, "--quiet"])
    assert code == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    for name in DATASETS:
        assert f"{name}: " in out
    # single files land byte for byte where the readers look
    for dataset in DATASETS.values():
        for source in dataset.sources:
            if source.unpack == "file":
                assert (dest / source.target).read_bytes() == singles[source.url], source.target
    # archives: the member folder becomes the target; macOS metadata is left out
    assert (dest / "nli/snli_1.0/snli_1.0_train.jsonl").is_file()
    assert (dest / "nli/multinli_1.0/multinli_1.0_dev_matched.jsonl").is_file()
    assert not list(dest.rglob("__MACOSX")) and not list(dest.rglob("._*"))
    for rel in (
        "STS/STS12-en-test/STS.input.MSRpar.txt",
        "STS/STSBenchmark/sts-dev.csv",
        "SICK/SICK_train.txt",
    ):
        assert (dest / "senteval" / rel).read_bytes() == (data_dir / "senteval" / rel).read_bytes()
    for rel in ("STS16-en-test/STS2016.input.headlines.txt", "stsbenchmark/sts-test.csv"):
        assert (dest / "sts_raw" / rel).read_bytes() == (data_dir / "sts_raw" / rel).read_bytes()
    # nothing but the datasets and the manifest; no partial-download folder left
    assert sorted(p.name for p in dest.iterdir()) == sorted(
        [".protoembed-data.json", "beir", "clustering", "nli", "senteval", "sts_raw", "unsup"]
    )
    manifest = json.loads((dest / ".protoembed-data.json").read_text())["targets"]
    snli = manifest["nli/snli_1.0"]
    zip_bytes = mirror_path(state.root, "https://nlp.stanford.edu/projects/snli/snli_1.0.zip").read_bytes()
    assert snli["sha256"] == hashlib.sha256(zip_bytes).hexdigest() and snli["size"] == len(zip_bytes)
    assert snli["url"] == f"{base}/nlp.stanford.edu/projects/snli/snli_1.0.zip"
    train = (dest / "nli/snli_1.0/snli_1.0_train.jsonl").read_bytes()
    assert snli["files"]["snli_1.0_train.jsonl"] == [hashlib.sha256(train).hexdigest(), len(train)]

    # list and verify see it; a changed file is corrupt for both
    assert main(["data", "list", "--data-dir", str(dest)]) == 0
    listing = capsys.readouterr().out
    assert all(re.search(rf"^{re.escape(n)}\s+installed", listing, re.M) for n in DATASETS), listing
    assert main(["data", "verify", "--data-dir", str(dest)]) == 0
    capsys.readouterr()
    (dest / "nli/snli_1.0/snli_1.0_dev.jsonl").write_bytes(b"edited\n")
    assert main(["data", "list", "--data-dir", str(dest)]) == 0
    assert re.search(r"^snli\s+corrupt.*snli_1.0_dev.jsonl changed size", capsys.readouterr().out, re.M)
    assert main(["data", "verify", "--data-dir", str(dest), "snli"]) == 1
    assert "snli: CORRUPT, nli/snli_1.0/snli_1.0_dev.jsonl differs" in capsys.readouterr().out
    # the download of a damaged dataset is refused without --force, before anything is fetched
    before = sum(state.sent.values())
    code = main(["data", "download", "--all", "--data-dir", str(dest), "--mirror", base])
    _one_line_error(capsys, code, "snli is installed but its files differ", "pass --force to download snli")
    assert sum(state.sent.values()) == before
    assert main(["data", "download", "snli", "--force", "--data-dir", str(dest), "--mirror", base]) == 0
    assert main(["data", "verify", "--data-dir", str(dest), "snli"]) == 0
    capsys.readouterr()

    # a second run fetches nothing: every target is there
    before = sum(state.sent.values())
    assert main(["data", "download", "--all", "--data-dir", str(dest), "--mirror", base]) == 0
    assert sum(state.sent.values()) == before
    assert capsys.readouterr().out.count("already installed") == sum(
        len(d.sources) for d in DATASETS.values()
    )


def test_installed_data_trains_two_steps(
    server, data_dir: Path, tiny_model_dirs, tmp_path: Path, capsys
) -> None:
    """The readers load what was installed: SimCSE on the mirrored wiki1m, SBERT on SNLI + MultiNLI, each
    selected on the installed STS-B dev."""
    base, state = server
    build_mirror(state.root, data_dir)
    dest = tmp_path / "data"
    names = ["wiki1m", "snli", "multinli", "senteval"]
    assert main(["data", "download", *names, "--data-dir", str(dest), "--mirror", base, "--quiet"]) == 0
    capsys.readouterr()
    runs = {
        "simcse": ("simcse", "cls", "unsup/wiki1m_for_simcse.txt"),
        "sbert": (
            "nli_softmax",
            "mean",
            "[nli/snli_1.0/snli_1.0_train.jsonl, nli/multinli_1.0/multinli_1.0_train.jsonl]",
        ),
    }
    for name, (objective, head, corpus) in runs.items():
        config = tmp_path / f"{name}.yaml"
        config.write_text(
            f"model: {tiny_model_dirs['bert']}\nhead: {head}\nmax_seq_length: 16\nobjective: {{name: {objective}}}\n"
            f"data: {{corpus: {corpus}, data_dir: {dest}}}\ntraining: {{batch_size: 8, max_steps: 2, eval_steps: 2, "
            "eval_batch_size: 256, test_tasks: [STSBenchmark]}\n",
            encoding="utf-8",
        )
        out = tmp_path / f"run-{name}"
        code = main(
            ["train", "--config", str(config), "--output-dir", str(out), "--set", f"data.data_dir={dest}"]
        )
        assert code == 0, capsys.readouterr().err[-2000:]
        results = json.loads((out / "results.json").read_text())
        assert results["best_step"] == 2 and "STSBenchmark" in results["tasks"]


# --------------------------------------------------------------------------- the data directory; data list

DEFAULT_WHY = "the default: neither --data-dir nor $PROTOEMBED_DATA is set"


@pytest.fixture()
def user_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """platformdirs' user data directory moved under ``tmp_path``, ``$PROTOEMBED_DATA`` unset: the default
    data directory applies; returns it (not created)."""
    import platformdirs

    home = tmp_path / "user-data"
    monkeypatch.setattr(platformdirs, "user_data_dir", lambda appname=None, *a, **k: str(home / appname))
    monkeypatch.delenv("PROTOEMBED_DATA", raising=False)
    return home / "protoembed"


def test_without_flag_or_env_every_command_uses_the_user_data_directory(
    server, data_dir: Path, user_data: Path, monkeypatch, capsys
) -> None:
    from protoembed.data.training.corpus import resolve_corpus_path
    from protoembed.evaluation.tasks import get_task

    base, state = server
    build_mirror(state.root, data_dir)
    header = f"data directory: {user_data} ({DEFAULT_WHY})"
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == header and re.search(r"^tweet\s+missing", out, re.M)
    _one_line_error(
        capsys,
        main(["data", "verify"]),
        f"benchmark data directory {user_data} ({DEFAULT_WHY}) does not exist",
    )
    # a reader names the file, where it looked (and why there), and the command that fetches it
    with pytest.raises(ProtoembedError) as info:
        get_task("Tweet").load()
    assert str(info.value) == (
        f"task Tweet: 'clustering/tweet/tweet-original-order.txt' not found under {user_data} ({DEFAULT_WHY}); "
        "fetch it with `protoembed data download tweet`"
    )
    assert main(["data", "download", "tweet", "wiki1m-sample", "--mirror", base, "--quiet"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == header
    assert main(["data", "verify", "tweet"]) == 0
    assert capsys.readouterr().out.splitlines() == [header, "tweet: ok, 1 file(s) match"]
    # the readers: an evaluation task, a training corpus
    tweet = get_task("Tweet").load()
    assert (len(tweet.texts), tweet.n_classes) == (2472, 89)
    corpus = "unsup/wiki1m_sample/wiki1m_for_simcse.head-1280000B.txt"
    assert resolve_corpus_path(corpus, None) == user_data / corpus
    # $PROTOEMBED_DATA, then --data-dir, come first
    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))
    assert main(["data", "list"]) == 0
    assert (
        capsys.readouterr().out.splitlines()[0]
        == f"data directory: {data_dir.resolve()} (from $PROTOEMBED_DATA)"
    )
    assert main(["data", "list", "--data-dir", str(user_data)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"data directory: {user_data} (from --data-dir)"


def test_a_new_user_s_data_list_reads_platformdirs(tmp_path: Path, monkeypatch) -> None:
    """The real command in a fresh environment (no PROTOEMBED_DATA, no XDG_DATA_HOME, HOME elsewhere)."""
    import platformdirs

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.delenv("PROTOEMBED_DATA", raising=False)
    expected = Path(platformdirs.user_data_dir("protoembed")).resolve()
    assert expected.is_relative_to(tmp_path.resolve())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "protoembed", "data", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == f"data directory: {expected} ({DEFAULT_WHY})"


def test_format_size() -> None:
    assert [format_size(n) for n in (512, 156_097, 1_280_000, 2_500_000_000)] == [
        "512 B",
        "156.1 KB",
        "1.3 MB",
        "2.5 GB",
    ]
    assert [format_size(n, exact=False) for n in (94_550_081, 226_850_426, 1_676_000, 900)] == [
        "~95 MB",
        "~227 MB",
        "~1.7 MB",
        "~900 B",
    ]


def test_list_shows_every_size_says_it_checks_sizes_and_tidies_the_path(
    server, data_dir: Path, tmp_path: Path, capsys
) -> None:
    base, state = server
    build_mirror(state.root, data_dir)
    (tmp_path / "a").mkdir()
    dest = tmp_path / "data"
    given = ["--data-dir", str(tmp_path / "a" / ".." / "data")]
    assert main(["data", "list", *given]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        f"data directory: {dest} (from --data-dir)",
        "state: files present with their recorded sizes (sizes only: `protoembed data verify` checks the sha256)",
        "size: the download's (~: approximate, until a download records the exact bytes)",
    ]
    sizes = {line.split()[0]: line.split(maxsplit=2)[2].split("  ")[0] for line in lines[4:]}
    assert set(sizes) == set(DATASETS)
    assert {n: sizes[n] for n in ("senteval", "sts-raw", "wiki1m", "nli-simcse", "snli", "multinli")} == {
        "senteval": "~90 MB",
        "sts-raw": "~1.7 MB",
        "wiki1m": "~121 MB",
        "nli-simcse": "~47 MB",
        "snli": "~95 MB",
        "multinli": "~227 MB",
    }
    assert sizes["tweet"] == "156.1 KB" and not any("?" in s for s in sizes.values())
    # once downloaded: the exact bytes
    assert main(["data", "download", "snli", *given, "--mirror", base, "--quiet"]) == 0
    zip_bytes = mirror_path(state.root, "https://nlp.stanford.edu/projects/snli/snli_1.0.zip").stat().st_size
    capsys.readouterr()
    assert main(["data", "list", *given]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"^snli\s+installed\s+{re.escape(format_size(zip_bytes))}  CC BY-SA 4.0$", out, re.M), (
        out
    )

    # a same-size edit: list (sizes only, as its header says) still says installed; verify and download do not
    dev = dest / "nli/snli_1.0/snli_1.0_dev.jsonl"
    dev.write_bytes(dev.read_bytes().replace(b"guitar", b"violin"))
    assert main(["data", "list", *given]) == 0
    assert re.search(r"^snli\s+installed\s", capsys.readouterr().out, re.M)
    assert main(["data", "verify", "snli", *given]) == 1
    assert "snli: CORRUPT, nli/snli_1.0/snli_1.0_dev.jsonl differs from its recorded sha256" in (
        capsys.readouterr().out
    )
    assert main(["data", "download", "snli", *given, "--mirror", base, "--dry-run"]) == 0
    assert "(installed but its files differ: --force downloads it again)" in capsys.readouterr().out
    sent = state.sent.copy()
    code = main(["data", "download", "snli", *given, "--mirror", base])
    err = _one_line_error(capsys, code)
    assert err == (
        "protoembed: error: snli is installed but its files differ from the download: "
        "nli/snli_1.0/snli_1.0_dev.jsonl differs from its recorded sha256; nothing was fetched; "
        "pass --force to download snli again (replacing its installed files)"
    )
    assert state.sent == sent
    assert main(["data", "download", "snli", *given, "--mirror", base, "--force", "--quiet"]) == 0
    assert main(["data", "verify", "snli", *given]) == 0


# --------------------------------------------------------------------------- the network as it is


def test_resume_after_a_cut_fetches_each_byte_once(server, tmp_path: Path) -> None:
    base, state = server
    payload = bytes(range(256)) * 4096  # 1 MiB
    (state.root / "big.bin").write_bytes(payload)
    state.cut["big.bin"] = 400_000
    waits: list[float] = []
    part = tmp_path / "big.part"
    fetch(f"{base}/big.bin", part, progress=False, sleep=waits.append, backoff=0.5)
    assert part.read_bytes() == payload
    assert state.requests["big.bin"] == 2 and waits == [0.5]
    assert state.sent["big.bin"] == len(payload)  # 400,000 + 648,576: nothing before the cut sent twice


def test_a_download_into_a_log_writes_progress_lines(server, tmp_path, capsys, monkeypatch) -> None:
    """stderr not a terminal: lines of bytes (here one per read, LINE_EVERY 0); the attempt cut short
    writes no "in all" line, the resumed one ends with the whole file."""
    from protoembed.core import progress

    monkeypatch.setattr(progress, "LINE_EVERY", 0)
    base, state = server
    (state.root / "big.bin").write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    state.cut["big.bin"] = 400_000
    fetch(f"{base}/big.bin", tmp_path / "big.bin.part", sleep=lambda s: None, backoff=0.5)
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(line.startswith("big.bin: ") and "/1.0 MB (" in line for line in lines)
    assert [line.endswith(" in all)") for line in lines].count(True) == 1 and lines[-1].endswith(" in all)")
    assert lines[-1].startswith("big.bin: 1.0 MB/1.0 MB (") and "/s, " in lines[-1]


def test_server_without_ranges_restarts_and_5xx_are_retried(server, tmp_path: Path) -> None:
    base, state = server
    payload = b"x" * 300_000
    (state.root / "f.bin").write_bytes(payload)
    state.ranges = False
    state.cut["f.bin"] = 1000
    state.fail["f.bin"] = [503, 502]
    waits: list[float] = []
    fetch(f"{base}/f.bin", tmp_path / "f.part", progress=False, sleep=waits.append, backoff=1.0)
    assert (tmp_path / "f.part").read_bytes() == payload
    assert waits == [1.0, 2.0, 4.0]  # two 5xx, one cut; the backoff doubles
    assert state.sent["f.bin"] == 1000 + len(payload)


def test_retries_are_bounded_and_the_part_is_kept(server, tmp_path: Path) -> None:
    base, state = server
    (state.root / "f.bin").write_bytes(b"y" * 10)
    state.fail["f.bin"] = [503] * 10
    waits: list[float] = []
    with pytest.raises(ProtoembedError, match=r"cannot download .*f\.bin: HTTP 503 .*3 attempts.*rerun"):
        fetch(f"{base}/f.bin", tmp_path / "f.part", progress=False, sleep=waits.append, retries=2)
    assert len(waits) == 2


def test_interrupted_download_leaves_no_dataset_and_a_rerun_continues(
    server, data_dir: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    """Ctrl-C while waiting to retry after a cut: no target, no manifest; the rerun fetches only the rest."""
    base, state = server
    build_mirror(state.root, data_dir)
    url_path = "nlp.stanford.edu/projects/snli/snli_1.0.zip"
    size = (state.root / url_path).stat().st_size
    state.cut[url_path] = size // 2
    import protoembed.data.download.fetch as fetch_module

    def interrupt(_: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(fetch_module.time, "sleep", interrupt)
    dest = tmp_path / "data"
    assert main(["data", "download", "snli", "--data-dir", str(dest), "--mirror", base, "--quiet"]) == 130
    assert "interrupted; rerun the same command to continue" in capsys.readouterr().err
    assert not (dest / "nli").exists() and not (dest / ".protoembed-data.json").exists()
    assert [p.stat().st_size for p in (dest / ".protoembed-partial").iterdir()] == [size // 2]
    monkeypatch.undo()
    assert main(["data", "download", "snli", "--data-dir", str(dest), "--mirror", base, "--quiet"]) == 0
    assert state.sent[url_path] == size and (dest / "nli/snli_1.0/snli_1.0_train.jsonl").is_file()
    assert not (dest / ".protoembed-partial").exists()


def test_checksum_mismatch_is_refused_with_nothing_kept(
    server, data_dir: Path, tmp_path: Path, capsys
) -> None:
    base, state = server
    build_mirror(state.root, data_dir)
    source = DATASETS["tweet"].sources[0]
    mirror_path(state.root, source.url).write_bytes(b"1\tnot the tweet set\n")
    dest = tmp_path / "data"
    code = main(["data", "download", "tweet", "--data-dir", str(dest), "--mirror", base])
    _one_line_error(capsys, code, "differs from the one pinned", "nothing was installed")
    assert not dest.exists()  # no target, no .part, no manifest: not even the folder the call created


def test_a_beir_dataset_downloads_and_evaluates_as_shipped(
    server, data_dir: Path, tiny_model_dirs, tmp_path: Path, capsys
) -> None:
    """``data download beir-arguana`` through the mirror (its md5 checked), then ``eval retrieval --tasks
    ArguAna``: the document its qrels name but its corpus lacks is counted, never an error; a zip whose md5
    is not the published one is refused with nothing installed."""
    base, state = server
    build_mirror(state.root, data_dir)
    dest = tmp_path / "data"
    assert main(["data", "download", "beir-arguana", "--data-dir", str(dest), "--mirror", base]) == 0
    assert "md5 as published" in capsys.readouterr().out
    assert sorted(p.name for p in (dest / "beir" / "arguana").rglob("*")) == [
        "corpus.jsonl",
        "qrels",
        "queries.jsonl",
        "test.tsv",
    ]
    out = tmp_path / "r.json"
    argv = ["eval", "retrieval", "--tasks", "ArguAna", "--model", str(tiny_model_dirs["bert"])]
    assert main([*argv, "--data-dir", str(dest), "--output", str(out)]) == 0
    task = json.loads(out.read_text(encoding="utf-8"))["tasks"]["ArguAna"]
    assert (task["missing_documents"], task["missing_queries"], task["queries"]) == (1, 0, 2)
    capsys.readouterr()
    source = DATASETS["beir-scifact"].sources[0]
    mirror_path(state.root, source.url).write_bytes(BEIR_ZIPS["beir-nfcorpus"])
    code = main(["data", "download", "beir-scifact", "--data-dir", str(dest), "--mirror", base])
    _one_line_error(capsys, code, "md5", "differs from the one its host publishes", "nothing was installed")
    assert not (dest / "beir" / "scifact").exists()


def test_recorded_sha256_is_checked_on_a_later_download(
    server, data_dir: Path, tmp_path: Path, capsys
) -> None:
    base, state = server
    build_mirror(state.root, data_dir)
    dest = tmp_path / "data"
    assert main(["data", "download", "nli-simcse", "--data-dir", str(dest), "--mirror", base, "--quiet"]) == 0
    recorded = json.loads((dest / ".protoembed-data.json").read_text())["targets"]["nli/nli_for_simcse.csv"]
    url = DATASETS["nli-simcse"].sources[0].url
    mirror_path(state.root, url).write_bytes(b"sent0,sent1,hard_neg\na,b,c\n")
    capsys.readouterr()
    code = main(["data", "download", "nli-simcse", "--force", "--data-dir", str(dest), "--mirror", base])
    _one_line_error(capsys, code, "recorded at its first download", recorded["sha256"])
    assert (dest / "nli/nli_for_simcse.csv").stat().st_size == recorded["size"]  # the old file stays


def test_http_endpoint_is_honoured_for_the_hugging_face_files(
    server, data_dir, tmp_path, monkeypatch, capsys
):
    base, state = server
    build_mirror(state.root, data_dir)
    monkeypatch.setenv("HF_ENDPOINT", f"{base}/huggingface.co")
    dest = tmp_path / "data"
    assert main(["data", "download", "wiki1m", "--data-dir", str(dest), "--quiet"]) == 0
    assert (dest / "unsup/wiki1m_for_simcse.txt").stat().st_size > 1000


# --------------------------------------------------------------------------- --for: what a config reads

#: Hand-written: the datasets each paper config reads (its corpus, STS-B dev, the STS test sets).
FOR_CONFIGS = {
    "bert-base-uncased/conpvp.yaml": {"wiki1m", "senteval"},
    "roberta-large/simcse.yaml": {"wiki1m", "senteval"},
    "bert-base-uncased/promptbert-authors.yaml": {"wiki1m", "senteval"},
    "bert-base-uncased/sbert-nli-stsb.yaml": {"snli", "multinli", "senteval"},
    "albert-base-v2/cnn-salbert-nli.yaml": {"snli", "multinli", "senteval"},
    "bert-base-uncased/cross-encoder-stsb.yaml": {"senteval"},
    "bert-base-uncased/simcse-sup-nli-stsb.yaml": {"nli-simcse", "senteval"},
    "cpu/conpvp-paper.yaml": {"wiki1m-sample", "senteval"},
    "cpu/sbert-nli-stsb.yaml": {"senteval"},
    "cpu/adapt/conpvp-tweet.yaml": {"tweet", "senteval"},
}


@pytest.mark.parametrize("config", sorted(FOR_CONFIGS))
def test_for_picks_exactly_what_a_config_reads(config: str, tmp_path: Path, capsys) -> None:
    dest = tmp_path / "data"
    assert (
        main(
            [
                "data",
                "download",
                "--for",
                str(REPO / "configs" / config),
                "--dry-run",
                "--data-dir",
                str(dest),
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    names = {line.split()[0] for line in lines}
    assert names == FOR_CONFIGS[config], lines
    assert not dest.exists()  # a dry run writes nothing


def _configs() -> list[Path]:
    return sorted(p for p in (REPO / "configs").rglob("*.yaml") if p.parent.name != "base")


#: Folders of files a study writes from registry data before it trains (the configs of that study read
#: them) -> the study's script that writes them.
STUDY_DATA = {"runs/own-pairs/data/": "experiments/own_pairs_data.py"}


def test_every_config_reads_only_registry_data() -> None:
    """Each data path of every config is provided by a registry entry, or written by a study's script from
    registry data (:data:`STUDY_DATA`); no config reads a user's own file."""
    from protoembed.training.needs import config_needs
    from protoembed.training.stages import load_run

    assert len(_configs()) > 60
    for config in _configs():
        for need in config_needs(load_run(config)):
            # a study's folder, once written, is found from the working directory (the repository)
            path = (
                Path(need.path).relative_to(REPO).as_posix()
                if need.path.startswith(f"{REPO}/")
                else need.path
            )
            study = next((s for folder, s in STUDY_DATA.items() if path.startswith(folder)), None)
            if study is not None:
                assert need.dataset is None and (REPO / study).is_file(), f"{config}: {need.path}"
                continue
            assert need.dataset is not None, f"{config}: {need.what}: {need.path}"
            assert any(need.path == t or need.path.startswith(t + "/") for t in need.dataset.targets)


def test_train_and_eval_name_the_missing_file_and_the_command(tmp_path: Path, monkeypatch, capsys) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PROTOEMBED_DATA", str(empty))
    config = REPO / "configs/bert-base-uncased/conpvp.yaml"
    code = main(["train", "--config", str(config), "--output-dir", str(tmp_path / "out")])
    _one_line_error(
        capsys,
        code,
        "'unsup/wiki1m_for_simcse.txt' not found under",
        "`protoembed data download wiki1m senteval`",
        f"--for {config}",
    )
    code = main(["eval", "clustering", "--model", "default", "--tasks", "Tweet"])
    _one_line_error(
        capsys, code, "'clustering/tweet/tweet-original-order.txt'", "`protoembed data download tweet`"
    )
    code = main(["eval", "sts", "--model", "default", "--variant", "raw", "--tasks", "STS16"])
    _one_line_error(capsys, code, "sts_raw/STS16-en-test/STS2016.input.answer-answer.txt", "download sts-raw")


# --------------------------------------------------------------------------- bad input: one line, exit 2


def test_bad_input_is_one_line(server, tmp_path: Path, capsys) -> None:
    base, state = server
    dest = tmp_path / "data"
    cases = [
        (["data", "download", "wiki2m"], "unknown dataset 'wiki2m': expected one of senteval, sts-raw"),
        (["data", "download", "--for", str(REPO / "README.md")], "not a training config"),
        (["data", "download", "--for", str(tmp_path / "none.yaml")], "no such config file"),
        (
            ["data", "download", "wiki1m", "--mirror", "mirror.example"],
            "--mirror 'mirror.example' is not a URL",
        ),
        (["data", "download"], "name the datasets to fetch"),
    ]
    for argv, needle in cases:
        _one_line_error(capsys, main([*argv, "--data-dir", str(dest)]), needle)
    # a 404 and a refused connection
    _one_line_error(
        capsys,
        main(["data", "download", "snli", "--data-dir", str(dest), "--mirror", base]),
        "cannot download",
        "HTTP 404",
    )
    _one_line_error(
        capsys,
        main(["data", "download", "snli", "--data-dir", str(dest), "--mirror", _refusing_url()]),
        "cannot download",
        "refused",
    )
    assert not dest.exists()


def _refusing_url() -> str:
    """An http:// URL on 127.0.0.1 where nothing listens (the connection is refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_a_refused_connection_names_the_mirror_that_refused(tmp_path: Path, monkeypatch, capsys) -> None:
    """With --mirror, the hint names that mirror (never "pass --mirror"); without, it suggests one."""
    dest = tmp_path / "data"
    mirror = _refusing_url()
    code = main(["data", "download", "tweet", "--data-dir", str(dest), "--mirror", mirror + "/"])
    err = _one_line_error(
        capsys, code, f"the mirror {mirror} refused the connection: is it running at that address?"
    )
    assert "pass --mirror" not in err
    monkeypatch.setenv("HF_ENDPOINT", _refusing_url())  # no mirror: the Hugging Face host refuses
    code = main(["data", "download", "wiki1m", "--data-dir", str(dest)])
    err = _one_line_error(capsys, code, "refused", "network unreachable? pass --mirror URL")
    assert "the mirror" not in err
    assert not dest.exists()


def test_unwritable_data_directory(tmp_path: Path, capsys) -> None:
    code = main(["data", "download", "wiki1m", "--data-dir", "/sys/protoembed-data"])
    _one_line_error(capsys, code, "cannot write", "/sys")


def test_truncated_and_unsafe_archives(server, data_dir: Path, tmp_path: Path, capsys) -> None:
    base, state = server
    build_mirror(state.root, data_dir)
    snli = mirror_path(state.root, "https://nlp.stanford.edu/projects/snli/snli_1.0.zip")
    whole = snli.read_bytes()
    snli.write_bytes(whole[: len(whole) // 2])
    dest = tmp_path / "data"
    code = main(["data", "download", "snli", "--data-dir", str(dest), "--mirror", base])
    _one_line_error(capsys, code, "cannot unpack", "snli_1.0.zip")
    _zip(snli, {"snli_1.0/ok.jsonl": b"{}\n", "snli_1.0/../../evil.txt": b"x"})
    code = main(["data", "download", "snli", "--data-dir", str(dest), "--mirror", base])
    _one_line_error(capsys, code, "refusing to unpack", "would land outside the target")
    senteval = DATASETS["senteval"].sources[0].url
    _tar(mirror_path(state.root, senteval), {"STS/a.txt": b"a"})
    with tarfile.open(mirror_path(state.root, senteval), "a") as tar:
        info = tarfile.TarInfo("STS/link")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
    code = main(["data", "download", "senteval", "--data-dir", str(dest), "--mirror", base])
    _one_line_error(capsys, code, "link or special file")
    assert not (dest / "tmp").exists() and not (tmp_path / "evil.txt").exists()
    assert not dest.exists()


def test_a_hand_edited_invalid_manifest(tmp_path: Path, capsys) -> None:
    dest = tmp_path / "data"
    dest.mkdir()
    (dest / ".protoembed-data.json").write_text('{"version": 1,\n "targets": {,}}\n')
    for argv in (["data", "list"], ["data", "verify"], ["data", "download", "wiki1m"]):
        _one_line_error(
            capsys, main([*argv, "--data-dir", str(dest)]), ".protoembed-data.json:2: not valid JSON"
        )
    assert sorted(p.name for p in dest.iterdir()) == [".protoembed-data.json"]
