"""Corpus-scale encoding (:mod:`protoembed.corpus`): shards equal the model's own ``encode``; every format;
shard boundaries; resume after an interruption, a full disk or ``kill -9`` gives the same bytes as an
uninterrupted run; another model's resume, another run's folder and a corrupt shard are caught; 2 worker
processes write the same shards as one process; a torchrun launch is refused."""

from __future__ import annotations

import csv
import errno
import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import protoembed
from protoembed.cli import main
from protoembed.core import progress
from protoembed.core.errors import ProtoembedError
from protoembed.corpus import CorpusVectors, encode_corpus, open_corpus, verify
from protoembed.corpus import encoding as corpus_encoding
from protoembed.corpus.manifest import read_manifest
from protoembed.outputs.folder_lock import LOCK_FILE
from tiny_models import CORPUS

#: 23 distinct sentences of different lengths (23 = 4 shards of 5 and one of 3)
SENTENCES = [f"{CORPUS[i % 11]} number {i}" if i % 3 else f"short {i}" for i in range(23)]


@pytest.fixture(scope="module")
def model_dir(tiny_model_dirs) -> str:
    return str(tiny_model_dirs["bert"])


@pytest.fixture(scope="module")
def model(model_dir):
    return protoembed.load(model_dir, device="cpu")


def write_txt(path: Path, texts: list[str] = SENTENCES) -> Path:
    path.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    return path


def texts_sha256(texts: list[str]) -> str:
    """The digest of ``texts`` as the manifest documents it, computed here in one piece: each text's
    UTF-8 byte count (8 bytes, little-endian), then its bytes."""
    data = [text.encode("utf-8") for text in texts]
    return hashlib.sha256(b"".join(len(d).to_bytes(8, "little") + d for d in data)).hexdigest()


def shard_hashes(folder: Path) -> dict[str, str]:
    """Shard name -> SHA-256, from the manifest, after checking the files against it."""
    manifest = verify(folder)
    return {shard.name: shard.sha256 for shard in manifest.shards}


def shard_hashes_on_disk(folder: Path) -> dict[str, str]:
    """Shard file name -> its SHA-256, of the files in ``folder``."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("shard-*.npy"))}


def folder_files(folder: Path) -> list[str]:
    """The files of ``folder`` but the lock file a run leaves (:mod:`protoembed.outputs.folder_lock`)."""
    return sorted(p.name for p in folder.iterdir() if p.name != LOCK_FILE)


def test_shards_equal_the_model_encode_and_read_back_as_one_array(
    model, tmp_path, one_thread, capsys, monkeypatch
):
    src = write_txt(tmp_path / "in.txt")
    out = tmp_path / "out"
    monkeypatch.setattr(progress, "LINE_EVERY", 0)  # stderr is no terminal: a line per batch, then the last
    vectors = encode_corpus(model, src, out, shard_size=5, batch_size=4, show_progress=True)
    lines = capsys.readouterr().err.splitlines()
    assert all(line.startswith("Encoding: ") and "/23 sentences" in line for line in lines)
    done = [int(line.split()[1].split("/")[0]) for line in lines]
    assert done[:-1] == sorted(set(done[:-1])) and {5, 10, 15, 20, 23} <= set(done) and done[-1] == 23
    assert lines[0].endswith(" left)") and lines[-1].endswith(" in all)") and "/s, " in lines[-1]
    expected = model.encode(SENTENCES, batch_size=4)
    assert folder_files(out) == ["manifest.json", *(f"shard-{i:05d}.npy" for i in range(5))]
    shards = [np.load(out / f"shard-{i:05d}.npy") for i in range(5)]
    assert [s.shape for s in shards] == [(5, 32)] * 4 + [(3, 32)] and all(
        s.dtype == np.float32 for s in shards
    )
    np.testing.assert_allclose(np.concatenate(shards), expected, atol=1e-6, rtol=0)

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] and manifest["rows"] == 23 and manifest["dimension"] == 32
    assert manifest["input"] == {
        "path": str(src.resolve()),
        "format": "text",
        "field": None,
        "rows": 23,
        "size": src.stat().st_size,
        "texts_sha256": texts_sha256(SENTENCES),
        "id_field": None,
    }
    assert manifest["format_version"] == 2 and manifest["output_format"] == "npy" and manifest["ids"] is None
    assert [(s["start"], s["stop"]) for s in manifest["shards"]] == [
        (0, 5),
        (5, 10),
        (10, 15),
        (15, 20),
        (20, 23),
    ]
    assert manifest["runtime"] == "torch" and manifest["precision"] == "fp32" and manifest["shard_size"] == 5
    assert manifest["settings"]["head"] == "mean" and manifest["settings"]["batch_size"] == 4

    # the memory-mapped view, and the same folder reopened
    for view in (vectors, open_corpus(out), open_corpus(out, verify=True)):
        assert isinstance(view, CorpusVectors)
        assert len(view) == 23 and view.shape == (23, 32) and view.dimension == 32
        assert all(isinstance(s, np.memmap) for s in view)  # iteration by shard
        assert [len(s) for s in view] == [5, 5, 5, 5, 3]
        whole = np.concatenate(shards)
        np.testing.assert_array_equal(np.asarray(view), whole)
        np.testing.assert_array_equal(view[7], whole[7])
        np.testing.assert_array_equal(view[-1], whole[-1])
        np.testing.assert_array_equal(view[3:17], whole[3:17])  # across three shards
        np.testing.assert_array_equal(view[::4], whole[::4])
        np.testing.assert_array_equal(view[20:], whole[20:])
        index = np.array([22, 0, 5, 5, -2, 13])
        np.testing.assert_array_equal(view[index], whole[index])
        np.testing.assert_array_equal(view[[[1, 2], [3, 4]]], whole[[[1, 2], [3, 4]]])
        mask = np.arange(23) % 3 == 0
        np.testing.assert_array_equal(view[mask], whole[mask])
        np.testing.assert_array_equal(view[4:9, :3], whole[4:9, :3])
        np.testing.assert_array_equal(view[6, 1:4], whole[6, 1:4])
        assert view[10:10].shape == (0, 32)
        with pytest.raises(IndexError):
            view[23]
        with pytest.raises(IndexError):
            view[np.array([0, 23])]


@pytest.mark.parametrize(("rows", "shard_size"), [(12, 5), (1, 5), (10, 5), (7, 7), (3, 1)])
def test_shard_boundaries(model, tmp_path, one_thread, rows, shard_size):
    texts = SENTENCES[:rows]
    out = tmp_path / "out"
    vectors = encode_corpus(
        model, write_txt(tmp_path / "in.txt", texts), out, shard_size=shard_size, batch_size=4
    )
    count = -(-rows // shard_size)
    assert folder_files(out) == ["manifest.json", *(f"shard-{i:05d}.npy" for i in range(count))]
    sizes = [min(shard_size, rows - start) for start in range(0, rows, shard_size)]
    assert [len(s) for s in vectors] == sizes
    np.testing.assert_allclose(vectors[:], model.encode(texts, batch_size=4), atol=1e-6, rtol=0)


def test_every_format_gives_the_same_shards(model, tmp_path, one_thread):
    """JSON lines (a blank line skipped, other fields ignored), CSV (quoted commas), Parquet: byte-equal
    shards to the text-lines run of the same texts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [*SENTENCES[:10], 'with "quotes", and a comma', *SENTENCES[10:]]
    runs = {"text": write_txt(tmp_path / "in.txt", texts)}
    lines = [json.dumps({"id": i, "text": t}) for i, t in enumerate(texts)]
    lines.insert(4, "")
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    runs["jsonl"] = tmp_path / "in.jsonl"
    with open(tmp_path / "in.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "sentence"])
        writer.writerows(enumerate(texts))
    runs["csv"] = tmp_path / "in.csv"
    with open(tmp_path / "in.tsv", "w", newline="", encoding="utf-8") as handle:
        handle.write("id\tsentence\n" + "".join(f"{i}\t{t}\n" for i, t in enumerate(texts)))
    runs["tsv"] = tmp_path / "in.tsv"
    pq.write_table(pa.table({"sentence": texts, "n": list(range(len(texts)))}), tmp_path / "in.parquet")
    runs["parquet"] = tmp_path / "in.parquet"
    hashes = {}
    for fmt, path in runs.items():
        options = {"field": "text"} if fmt == "jsonl" else {"column": "sentence"} if fmt != "text" else {}
        out = tmp_path / f"out-{fmt}"
        encode_corpus(model, path, out, shard_size=6, batch_size=4, **options)
        assert read_manifest(out).input.format == fmt  # picked by the file name
        assert read_manifest(out).input.texts_sha256 == texts_sha256(texts)  # the texts', not the file's
        hashes[fmt] = shard_hashes(out)
    assert len(hashes["text"]) == 4
    assert all(hashes[fmt] == hashes["text"] for fmt in ("jsonl", "csv", "tsv", "parquet"))
    # a folder whose manifest says txt (this format's name before the formats had one table) resumes
    manifest = read_manifest(tmp_path / "out-text")
    manifest.input.format, manifest.complete = "txt", False
    corpus_encoding.write_manifest(tmp_path / "out-text", manifest)
    encode_corpus(model, runs["text"], tmp_path / "out-text", shard_size=6, batch_size=4, resume=True)
    assert read_manifest(tmp_path / "out-text").input.format == "text"
    # an explicit format overrides the name
    (tmp_path / "lines.data").write_text("\n".join(lines) + "\n", encoding="utf-8")
    encode_corpus(
        model,
        tmp_path / "lines.data",
        tmp_path / "o2",
        format="jsonl",
        field="text",
        shard_size=6,
        batch_size=4,
    )
    assert shard_hashes(tmp_path / "o2") == hashes["text"]


def test_bad_input_is_one_line_naming_the_file_and_line(model, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "a.jsonl").write_text('{"text": "fine"}\n{"body": "no text", "id": 2}\n', encoding="utf-8")
    (tmp_path / "b.jsonl").write_text('{"text": "fine"}\n{"text": 3}\n', encoding="utf-8")
    (tmp_path / "a.csv").write_text("id,body\n1,hello\n", encoding="utf-8")
    pq.write_table(pa.table({"body": ["x"], "id": [1]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"text": ["x", None]}), tmp_path / "b.parquet")
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    (tmp_path / "blank.txt").write_text("one\n\nthree\n  \n", encoding="utf-8")
    txt = write_txt(tmp_path / "in.txt", ["x"])
    cases = [
        (
            tmp_path / "a.jsonl",
            {"field": "text"},
            f"{tmp_path / 'a.jsonl'}:2: no field 'text' (the row has body, id)",
        ),
        (
            tmp_path / "b.jsonl",
            {"field": "text"},
            f"{tmp_path / 'b.jsonl'}:2: field 'text': expected a string, got 3",
        ),
        (tmp_path / "a.jsonl", {}, "jsonl input needs the field that holds the text (--field NAME)"),
        (
            tmp_path / "a.csv",
            {"column": "text"},
            f"{tmp_path / 'a.csv'}: no column 'text'; its columns are id, body",
        ),
        (tmp_path / "a.parquet", {"column": "text"}, "a.parquet: no column 'text'; its columns are body, id"),
        (
            tmp_path / "b.parquet",
            {"column": "text"},
            "b.parquet: row 2: field 'text': expected a string, got null",
        ),
        (tmp_path / "empty.txt", {}, f"{tmp_path / 'empty.txt'}: no lines to encode"),
        (
            tmp_path / "blank.txt",
            {},
            "2 empty or blank line(s) (line 2, 4); remove them or pass --allow-empty",
        ),
        (tmp_path / "missing.txt", {}, f"{tmp_path / 'missing.txt'}: file not found"),
        (
            tmp_path,
            {},
            f"{tmp_path}: a directory; expected one corpus file: UTF-8 text (one sentence per line), *.jsonl, *.jsonl.gz, *.csv, *.csv.gz, *.tsv, *.tsv.gz, *.parquet",
        ),
        (txt, {"field": "text"}, "--field / --column name the text of jsonl, csv, tsv, parquet input"),
        (txt, {"format": "xml"}, "unknown corpus format 'xml'"),
    ]
    for path, options, message in cases:
        with pytest.raises(ProtoembedError) as caught:
            encode_corpus(model, path, tmp_path / "out", **options)
        assert message in str(caught.value) and "\n" not in str(caught.value), (path, options)
    assert not (tmp_path / "out").exists()  # every input error comes before the folder is made
    # blank lines pass with allow_empty
    vectors = encode_corpus(model, tmp_path / "blank.txt", tmp_path / "out", allow_empty=True)
    assert vectors.shape == (4, 32)


def test_a_text_without_tokens_is_named_by_its_line(model, tmp_path, one_thread):
    """A line of control characters is not blank, but has no token: found when its shard is encoded, and
    named by its line in the file (shard 2, line 13); the shards before it are kept."""
    texts = [*SENTENCES[:12], "\x01\x02", *SENTENCES[12:]]
    src = write_txt(tmp_path / "in.txt", texts)
    with pytest.raises(ProtoembedError) as caught:
        encode_corpus(model, src, tmp_path / "out", shard_size=5, batch_size=4)
    assert str(caught.value) == (
        f"{src}: 1 empty or blank line(s) (line 13); remove them or pass --allow-empty to encode them as the "
        "template alone"
    )
    assert len(read_manifest(tmp_path / "out").shards) == 2


class CountingModel:
    """A stand-in model for the memory test: a text's vector is its length and a hash of it (no torch
    forward: the test measures the reading and the shards, not a model)."""

    head, normalize, runtime, precision, prompts, dimension = "mean", False, "torch", "fp32", {}, 4
    max_seq_length = truncate_dim = None
    encoder = type(
        "Encoder", (), {"template": None, "max_seq_length": None, "n_soft_prompt": 0, "do_lower_case": False}
    )()
    tokenizer: list = []
    similarity_fn_name = "cosine"

    def __init__(self) -> None:
        self.calls: list[int] = []

    def state_dict(self) -> dict:
        return {}

    def encode(self, texts, batch_size, **_) -> np.ndarray:
        self.calls.append(len(texts))
        return np.array([[len(t), hash(t) % 97, 0, 1] for t in texts], dtype=np.float32)


def test_memory_is_bounded_by_the_shard_not_the_corpus(tmp_path):
    """60,000 lines (over 6 MB as Python strings): the peak of traced memory while encoding them in shards
    of 1,000 stays under 3 MB; each ``encode`` call gets one shard (its pipeline tokenises ahead)."""
    import tracemalloc

    src = tmp_path / "big.txt"
    rows = 60_000
    with open(src, "w", encoding="utf-8") as handle:
        for i in range(rows):
            handle.write(f"line {i:07d} of a corpus too large to hold at once\n")
    fake = CountingModel()
    encode_corpus(fake, write_txt(tmp_path / "warm.txt"), tmp_path / "warm")  # imports done before tracing
    fake.calls.clear()
    tracemalloc.start()
    try:
        vectors = encode_corpus(fake, src, tmp_path / "out", shard_size=1000, batch_size=50)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * 2**20, peak
    assert len(vectors) == rows and len(vectors.shards) == 60
    assert fake.calls == [1000] * 60
    np.testing.assert_array_equal(
        vectors[[0, 43_456, rows - 1], 0], [len("line 0000000 of a corpus too large to hold at once")] * 3
    )


class Interrupted(KeyboardInterrupt):
    pass


def _stop_after(monkeypatch, shards: int) -> None:
    """Make the run stop (as on Ctrl-C) once ``shards`` shards are written."""
    real = corpus_encoding.write_shard
    written = []

    def write_shard(*args, **kwargs):
        if len(written) == shards:
            raise Interrupted
        written.append(real(*args, **kwargs))
        return written[-1]

    monkeypatch.setattr(corpus_encoding, "write_shard", write_shard)


def test_resume_after_an_interruption_gives_the_same_bytes(model, tmp_path, one_thread, monkeypatch):
    src = write_txt(tmp_path / "in.txt")
    reference = tmp_path / "ref"
    encode_corpus(model, src, reference, shard_size=5, batch_size=4)
    out = tmp_path / "out"
    with monkeypatch.context() as patch:
        _stop_after(patch, 2)
        with pytest.raises(Interrupted):
            encode_corpus(model, src, out, shard_size=5, batch_size=4)
    manifest = read_manifest(out)
    assert not manifest.complete and [s.name for s in manifest.shards] == [
        "shard-00000.npy",
        "shard-00001.npy",
    ]
    with pytest.raises(ProtoembedError, match="pass --resume to continue that run"):
        encode_corpus(model, src, out, shard_size=5, batch_size=4)
    with pytest.raises(ProtoembedError, match=r"unfinished \(2 of 5 shards\)"):
        open_corpus(out)
    encode_corpus(model, src, out, shard_size=5, batch_size=4, resume=True)
    assert shard_hashes(out) == shard_hashes(reference)
    assert folder_files(out) == folder_files(reference)
    # a finished folder: refused without --resume, kept as it is with it
    with pytest.raises(ProtoembedError, match="already holds a finished encoded corpus .* or choose another"):
        encode_corpus(model, src, out, shard_size=5, batch_size=4)
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("shard-*")}
    encode_corpus(model, src, out, shard_size=5, batch_size=4, resume=True)
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("shard-*")} == before


def test_a_resume_with_another_model_setting_or_input_is_refused(
    model, tiny_model_dirs, tmp_path, one_thread, monkeypatch
):
    """Each value named as recorded and now, on one line; the folder left as it was."""
    src = write_txt(tmp_path / "in.txt")
    out = tmp_path / "out"
    with monkeypatch.context() as patch:
        _stop_after(patch, 1)
        with pytest.raises(Interrupted):
            encode_corpus(model, src, out, shard_size=5, batch_size=4)
    before = (out / "manifest.json").read_bytes(), shard_hashes_on_disk(out)
    other = protoembed.load(str(tiny_model_dirs["albert"]), device="cpu")
    refusals = [
        (
            dict(model=model, normalize=True),
            "digest mismatch: .*; settings.normalize: recorded False, now True;",
        ),
        (dict(model=model, batch_size=8), "digest mismatch: .*; settings.batch_size: recorded 4, now 8;"),
        (dict(model=model, batch_size=2), "digest mismatch: .*; settings.batch_size: recorded 4, now 2;"),
        (
            dict(model=model, max_tokens_per_batch=64),
            "digest mismatch: .*; settings.max_tokens_per_batch: recorded None, now 64;",
        ),
        (
            dict(model=protoembed.load(str(tiny_model_dirs["bert"]), device="cpu", truncate_dim=8)),
            "digest mismatch: .*; settings.truncate_dim: recorded None, now 8;",
        ),
        (dict(model=other), r"digest mismatch: .*\(other weights\); resume with the same model"),
        (dict(model=model, shard_size=6), ": cannot resume: shard_size: recorded 5, now 6; resume with"),
    ]
    for options, message in refusals:
        options = {"shard_size": 5, "batch_size": 4, **options}
        with pytest.raises(ProtoembedError, match=message) as caught:
            encode_corpus(options.pop("model"), src, out, resume=True, **options)
        assert "\n" not in str(caught.value) and str(caught.value).endswith("or choose another output folder")
    # an edited corpus of the same size and rows (one letter of one line)
    edited = [*SENTENCES]
    edited[12] = edited[12].replace("short", "shirt")
    assert edited[12] != SENTENCES[12]
    size = src.stat().st_size
    write_txt(src, edited)
    assert src.stat().st_size == size
    with pytest.raises(ProtoembedError) as caught:
        encode_corpus(model, src, out, shard_size=5, batch_size=4, resume=True)
    assert str(caught.value) == (
        f"{out}: cannot resume: the input's texts differ; input.texts_sha256: recorded "
        f"{texts_sha256(SENTENCES)[:12]}..., now {texts_sha256(edited)[:12]}...; resume with the same model, "
        "settings and input, or choose another output folder"
    )
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("".join(json.dumps({"text": t}) + "\n" for t in SENTENCES[:-1]), encoding="utf-8")
    with pytest.raises(
        ProtoembedError, match="input.rows: recorded 23, now 22; input.format: recorded 'text', now"
    ):
        encode_corpus(model, jsonl, out, field="text", shard_size=5, batch_size=4, resume=True)
    assert ((out / "manifest.json").read_bytes(), shard_hashes_on_disk(out)) == before


def test_a_resume_may_change_what_changes_no_vector(model, tmp_path, one_thread, monkeypatch):
    """The input's path, format, line ends and other fields, ``allow_empty`` and the tokenizer threads
    change no vector: a resume with all of them changed ends with the bytes of an uninterrupted run."""
    src = write_txt(tmp_path / "in.txt")
    options = {"shard_size": 5, "batch_size": 4, "max_tokens_per_batch": 200}
    encode_corpus(model, src, tmp_path / "ref", **options)
    out = tmp_path / "out"
    with monkeypatch.context() as patch:
        _stop_after(patch, 2)
        with pytest.raises(Interrupted):
            encode_corpus(model, src, out, **options)
    moved = tmp_path / "elsewhere" / "corpus.jsonl"
    moved.parent.mkdir()
    moved.write_bytes(
        b"".join(json.dumps({"n": i, "text": t}).encode() + b"\r\n" for i, t in enumerate(SENTENCES))
    )
    encode_corpus(
        model, moved, out, field="text", allow_empty=True, tokenizer_workers=2, resume=True, **options
    )
    assert shard_hashes(out) == shard_hashes(tmp_path / "ref")
    manifest = read_manifest(out)
    assert (
        manifest.input.texts_sha256 == texts_sha256(SENTENCES)
        and manifest.settings.max_tokens_per_batch == 200
    )


def test_a_version_1_folder_is_read_but_never_resumed(model, tmp_path, one_thread):
    """A manifest written before the texts digest (format version 1: no ``texts_sha256``, no token budget,
    ``allow_empty`` among the settings) opens as a finished corpus; its resume is refused."""
    src = write_txt(tmp_path / "in.txt")
    out = tmp_path / "out"
    whole = np.asarray(encode_corpus(model, src, out, shard_size=5, batch_size=4))
    data = json.loads((out / "manifest.json").read_text())
    data.update(format_version=1, protoembed_version="0.9.0")
    del data["input"]["texts_sha256"], data["settings"]["max_tokens_per_batch"]
    data["settings"]["allow_empty"] = False
    (out / "manifest.json").write_text(json.dumps(data))
    np.testing.assert_array_equal(np.asarray(open_corpus(out, verify=True)), whole)
    data.update(complete=False, shards=data["shards"][:2])
    (out / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(ProtoembedError) as caught:
        encode_corpus(model, src, out, shard_size=5, batch_size=4, resume=True)
    assert str(caught.value) == (
        f"{out}: cannot resume: manifest.json was written by protoembed 0.9.0 (format version 1), which "
        "records no digest of the input's texts, so this run's input cannot be checked against it; encode "
        "into another output folder"
    )
    assert json.loads((out / "manifest.json").read_text()) == data


def test_a_corrupt_shard_is_found_and_encoded_again(model, tmp_path, one_thread, caplog):
    src = write_txt(tmp_path / "in.txt")
    out = tmp_path / "out"
    encode_corpus(model, src, out, shard_size=5, batch_size=4)
    good = shard_hashes(out)
    shard = out / "shard-00002.npy"
    data = bytearray(shard.read_bytes())
    data[-5] ^= 0xFF  # one float of the last row
    shard.write_bytes(bytes(data))
    for check in (lambda: verify(out), lambda: open_corpus(out, verify=True)):
        with pytest.raises(
            ProtoembedError, match=r"1 bad shard\(s\): .*shard-00002.npy: sha256 .* \(corrupt\)"
        ):
            check()
    with caplog.at_level(logging.WARNING, logger="protoembed"):
        encode_corpus(model, src, out, shard_size=5, batch_size=4, resume=True)
    assert "shard-00002.npy: sha256" in caplog.text and "encoding it again" in caplog.text
    assert shard_hashes(out) == good


def test_a_shard_the_manifest_does_not_record_is_never_adopted(model, tmp_path, one_thread, caplog):
    """A file of the right shape that the manifest does not record (a copied shard, a truncated one) is
    encoded again; the resumed folder equals an uninterrupted run's, byte for byte."""
    src = write_txt(tmp_path / "in.txt")
    reference = tmp_path / "ref"
    encode_corpus(model, src, reference, shard_size=5, batch_size=4)
    out = tmp_path / "out"
    with pytest.MonkeyPatch.context() as patch:
        _stop_after(patch, 2)
        with pytest.raises(Interrupted):
            encode_corpus(model, src, out, shard_size=5, batch_size=4)
    # shard 0's bytes under shard 3's name: the same shape (5 rows), other rows' vectors
    (out / "shard-00003.npy").write_bytes((out / "shard-00000.npy").read_bytes())
    # half of shard 2's true bytes: a write a power cut stopped, never recorded
    whole = (reference / "shard-00002.npy").read_bytes()
    (out / "shard-00002.npy").write_bytes(whole[: len(whole) // 2])
    with caplog.at_level(logging.WARNING, logger="protoembed"):
        encode_corpus(model, src, out, shard_size=5, batch_size=4, resume=True)
    for name in ("shard-00002.npy", "shard-00003.npy"):
        assert f"{name}: not recorded in manifest.json; encoding it again" in caplog.text
    assert shard_hashes(out) == shard_hashes(reference)


def test_a_shard_is_durable_before_the_manifest_names_it(model, tmp_path, one_thread, monkeypatch):
    """Each shard file is fsynced, then renamed, then its folder fsynced, all before the manifest that
    records it is written; a manifest that names a shard a power cut left empty re-encodes it."""
    src = write_txt(tmp_path / "in.txt")
    reference = tmp_path / "ref"
    encode_corpus(model, src, reference, shard_size=5, batch_size=4)
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append("fsync " + Path(os.readlink(f"/proc/self/fd/{fd}")).name)
        return real_fsync(fd)

    def replace(a, b):
        events.append(f"rename {Path(b).name}")
        return real_replace(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    out = tmp_path / "out"
    encode_corpus(model, src, out, shard_size=5, batch_size=4)
    monkeypatch.undo()
    first_manifest_after_shard_1 = events.index(
        "rename manifest.json", events.index("rename shard-00001.npy")
    )
    shard_1 = events.index("rename shard-00001.npy")
    assert events[shard_1 - 1].startswith(
        "fsync .shard-00001.npy."
    )  # the temp file, whole, before the rename
    assert events[shard_1 + 1] == "fsync out"  # the folder's entry, after it
    assert shard_1 < first_manifest_after_shard_1
    # a power cut after the manifest named shard 4 but before its bytes reached the disk
    (out / "shard-00004.npy").write_bytes(b"")
    manifest = read_manifest(out)
    manifest.complete = False
    corpus_encoding.write_manifest(out, manifest)
    encode_corpus(model, src, out, shard_size=5, batch_size=4, resume=True)
    assert shard_hashes(out) == shard_hashes(reference)


def test_a_full_disk_leaves_no_partial_shard_and_resumes(model, tmp_path, one_thread, monkeypatch):
    src = write_txt(tmp_path / "in.txt")
    reference = tmp_path / "ref"
    encode_corpus(model, src, reference, shard_size=5, batch_size=4)
    out = tmp_path / "out"
    real_save = np.save
    saves = []

    def save(path, array, *args, **kwargs):
        saves.append(path)
        if len(saves) == 3:  # half a shard written, then the disk is full
            with open(path, "wb") as handle:
                handle.write(b"\x93NUMPY half a shard")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real_save(path, array, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(np, "save", save)
        with pytest.raises(ProtoembedError) as caught:
            encode_corpus(model, src, out, shard_size=5, batch_size=4)
    message = str(caught.value)
    assert "\n" not in message and "No space left on device" in message and "shard-00002.npy" in message
    assert folder_files(out) == ["manifest.json", "shard-00000.npy", "shard-00001.npy"]  # no temp file either
    assert len(read_manifest(out).shards) == 2
    encode_corpus(model, src, out, shard_size=5, batch_size=4, resume=True)
    assert shard_hashes(out) == shard_hashes(reference)


def test_a_full_disk_in_the_command_names_the_reason_and_the_resume_command(
    model_dir, tmp_path, one_thread, monkeypatch, capsys
):
    """numpy's own full-disk error carries no errno ("N requested and M written"): the folder's free space
    names the reason, and the command's one line ends with the command that resumes (as train's does)."""
    import shlex

    src = write_txt(tmp_path / "in.txt")
    reference, out = tmp_path / "ref", tmp_path / "out"
    common = ["--model", model_dir, "--shard-size", "5", "--batch-size", "4", "--no-progress"]
    assert main(["encode", str(src), "-o", str(reference), *common]) == 0
    real_save, saves = np.save, []

    def save(path, array, *args, **kwargs):
        saves.append(path)
        if len(saves) == 3:  # what numpy's tofile raises when the disk fills mid-shard
            with open(path, "wb") as handle:
                handle.write(b"\x93NUMPY half a shard")
            raise OSError("4000 requested and 19 written")
        return real_save(path, array, *args, **kwargs)

    class Full:
        f_bavail, f_frsize = 0, 4096

    argv = ["encode", str(src), "-o", str(out), *common]
    capsys.readouterr()
    with monkeypatch.context() as patch:
        patch.setattr(np, "save", save)
        patch.setattr(os, "statvfs", lambda folder: Full())
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    message, command = err.strip().split("; resume with: ")
    assert (
        message
        == f"protoembed: error: cannot write {out / 'shard-00002.npy'}: No space left on device; no partial file is left"
    )
    assert shlex.split(command) == ["protoembed", *argv, "--resume"]
    assert main(shlex.split(command)[1:]) == 0
    assert shard_hashes(out) == shard_hashes(reference)


def test_another_runs_folder_is_refused(model, tmp_path):
    src = write_txt(tmp_path / "in.txt")
    out = tmp_path / "out"
    out.mkdir()
    np.save(out / "shard-00000.npy", np.zeros((2, 2), dtype=np.float32))
    with pytest.raises(ProtoembedError, match="holds another run's output \\(shard-00000.npy\\)"):
        encode_corpus(model, src, out)
    with pytest.raises(ProtoembedError, match="holds shard files .* but no manifest.json"):
        encode_corpus(model, src, out, resume=True)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ProtoembedError, match="a file of that name exists"):
        encode_corpus(model, src, tmp_path / "file")
    blocked = Path("/sys/protoembed-cannot-write-here/out")  # sysfs refuses new files, even to root
    with pytest.raises(ProtoembedError, match=f"^cannot create the folder {blocked}: /sys is not writable"):
        encode_corpus(model, src, blocked)
    # a folder holding other files only is fine
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert len(encode_corpus(model, src, other, shard_size=50)) == 23
    assert (other / "notes.txt").read_text() == "mine"


def test_a_folder_in_use_is_refused_and_too_many_shards_too(model, tmp_path):
    from protoembed.outputs.folder_lock import hold_output_dir

    src = write_txt(tmp_path / "in.txt")
    out = tmp_path / "out"
    # another run holds the folder (flock: per open file, so this process too)
    with hold_output_dir(out), pytest.raises(ProtoembedError) as caught:
        encode_corpus(model, src, out)
    assert str(caught.value) == (
        f"{out} is in use by another encode run (process {os.getpid()}); wait for it to end or choose "
        "another output folder (-o)"
    )
    assert not read_manifest(out)  # nothing written by the refused run
    big = write_txt(tmp_path / "big.txt", [f"s {i}" for i in range(100_001)])
    with pytest.raises(ProtoembedError, match="more than 100000 shards .* use a shard size of at least 2$"):
        encode_corpus(model, big, tmp_path / "big", shard_size=1)
    assert not (tmp_path / "big").exists()


def test_two_workers_write_the_same_shards_as_one_process(model, model_dir, tmp_path, one_thread):
    src = write_txt(tmp_path / "in.txt")
    encode_corpus(model_dir, src, tmp_path / "one", shard_size=5, batch_size=4)
    vectors = encode_corpus(model_dir, src, tmp_path / "two", shard_size=5, batch_size=4, workers=2)
    assert shard_hashes(tmp_path / "two") == shard_hashes(tmp_path / "one")
    assert read_manifest(tmp_path / "two").model_digest == read_manifest(tmp_path / "one").model_digest
    assert vectors.shape == (23, 32)
    with pytest.raises(ProtoembedError, match="pass the model as a spec"):
        encode_corpus(model, src, tmp_path / "three", workers=2)


def _cpu_env() -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[1] / "src")
    tests = str(Path(__file__).resolve().parent)
    path = os.pathsep.join([src, tests, os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}


def test_a_torchrun_launch_is_refused_before_anything_is_written(model_dir, tmp_path, capsys, monkeypatch):
    """Under torchrun (WORLD_SIZE above 1) encode refuses in one line naming the two ways it does run in
    parallel, and writes nothing: every rank would otherwise encode the whole corpus."""
    src = write_txt(tmp_path / "in.txt")
    monkeypatch.setenv("WORLD_SIZE", "2")
    out = tmp_path / "two"
    assert main(["encode", str(src), "-o", str(out), "--model", model_dir, "--device", "cpu"]) == 2
    assert capsys.readouterr().err == (
        "protoembed: error: encode runs as one process per run, not under torchrun (WORLD_SIZE 2): --workers / "
        "--devices within one machine, --engine ray past one machine\n"
    )
    assert not out.exists()


#: A CLI process that pauses for good in the middle of writing its 4th shard (a partial temp file on
#: disk), after touching the file named by argv[1]; the test then kills it with SIGKILL.
PAUSING_CLI = """
import sys, time
import numpy as np
from protoembed.cli import main
real, calls = np.save, []
def save(path, array, *args, **kwargs):
    calls.append(path)
    if len(calls) == 4:
        with open(path, "wb") as handle:
            handle.write(b"\\x93NUMPY partial")
        open(sys.argv[1], "w").close()
        time.sleep(600)
    return real(path, array, *args, **kwargs)
np.save = save
sys.exit(main(sys.argv[2:]))
"""


def test_kill_9_between_shards_then_resume_gives_the_same_bytes(model, model_dir, tmp_path, one_thread):
    src = write_txt(tmp_path / "in.txt")
    encode_corpus(model, src, tmp_path / "ref", shard_size=5, batch_size=4)
    out, marker = tmp_path / "out", tmp_path / "paused"
    argv = ["encode", str(src), "-o", str(out), "--model", model_dir, "--device", "cpu"]
    argv += ["--shard-size", "5", "--batch-size", "4", "--no-progress"]
    proc = subprocess.Popen([sys.executable, "-c", PAUSING_CLI, str(marker), *argv], env=_cpu_env())
    try:
        deadline = time.monotonic() + 240
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), f"the CLI did not reach its 4th shard (exit code {proc.poll()})"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert len(read_manifest(out).shards) == 3
    assert any(name.startswith(".shard-00003.npy.") for name in folder_files(out))  # the interrupted write
    assert main([*argv, "--resume"]) == 0
    assert shard_hashes(out) == shard_hashes(tmp_path / "ref")
    assert folder_files(out) == folder_files(tmp_path / "ref")  # the temp file is gone


def test_the_cores_are_split_between_the_workers(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 5})
    assert corpus_encoding.worker_cores(2) == [[0, 1], [2, 3, 5]]
    assert corpus_encoding.worker_cores(5) == [[0], [1], [2], [3], [5]]
    assert corpus_encoding.worker_cores(6) == [[0, 1, 2, 3, 5]] * 6  # fewer cores than workers: shared


def test_a_worker_that_dies_is_one_line_naming_its_shard(tmp_path, monkeypatch):
    """A worker process killed mid-shard (here: one that reports the shard it took, then exits -9, as the
    out-of-memory killer leaves it) ends the run with one line naming the worker, its exit code and the
    shard with its rows; nothing is recorded for that shard."""
    import multiprocessing
    import queue
    import threading

    from protoembed.corpus.sources import corpus_source
    from protoembed.model.model_spec import model_spec

    class Killed:
        def __init__(self, target, args, daemon):
            self.args, self.exitcode = args, None

        def start(self) -> None:
            def run() -> None:
                _, _, number, _, tasks, results = self.args
                index = tasks.get()[0]
                results.put(("start", number, index))
                self.exitcode = -9

            threading.Thread(target=run, daemon=True).start()

        def terminate(self) -> None:
            pass

        def join(self, timeout=None) -> None:
            pass

    class Context:
        Process = Killed

        @staticmethod
        def Queue(maxsize=0):  # noqa: N802 (multiprocessing's name)
            return queue.Queue(maxsize)

    monkeypatch.setattr(multiprocessing, "get_context", lambda method: Context)
    source = corpus_source(write_txt(tmp_path / "in.txt"), None, None, None)
    job = corpus_encoding.ShardJob(source, tmp_path / "out", 10, 23, 4, None, None, False)
    manifest = type("Manifest", (), {"shards": []})()
    with pytest.raises(ProtoembedError) as caught:
        corpus_encoding._run_workers(
            job, model_spec(), [1, 2], manifest, 1, None, progress.Progress(23, show=False)
        )
    assert str(caught.value) == (
        "worker 0 died (exit code -9) while encoding shard-00001.npy (rows 10 to 19); the finished shards are "
        "kept: rerun with --resume"
    )
    assert manifest.shards == []


def test_a_failing_tokenizer_worker_names_the_shard_and_resume_completes_it(model, tmp_path, one_thread):
    src = write_txt(tmp_path / "in.txt")
    out = tmp_path / "out"
    raw_ids = model.encoder.raw_ids

    def failing(texts):
        if any(t.startswith("stocks fell") for t in texts):
            raise MemoryError("no room for the ids")
        return raw_ids(texts)

    model.encoder.raw_ids = failing
    try:
        with pytest.raises(ProtoembedError) as caught:
            encode_corpus(model, src, out, shard_size=5, batch_size=2, show_progress=False)
    finally:
        del model.encoder.raw_ids
    first = next(i for i, s in enumerate(SENTENCES) if s.startswith("stocks fell"))
    shard = first // 5
    message = str(caught.value)
    assert "\n" not in message and message.startswith(
        f"shard-{shard:05d}.npy (rows {5 * shard} to {5 * shard + 4}): tokenizing chunk 1 of 1 failed"
    )
    assert message.endswith("MemoryError: no room for the ids")
    assert not (out / f"shard-{shard:05d}.npy").exists()  # nothing half written
    vectors = encode_corpus(model, src, out, shard_size=5, batch_size=2, show_progress=False, resume=True)
    np.testing.assert_allclose(np.asarray(vectors[:]), model.encode(SENTENCES, batch_size=2), atol=1e-6)


def test_ids_beside_the_shards_and_in_parquet_shards(model, tmp_path, one_thread):
    """An id field gives ``ids.jsonl`` beside ``npy`` shards (the ids in row order, recorded with its
    SHA-256) or an ``id`` column in Parquet shards (the vector a fixed-size list of float32); the vectors are
    the same bytes either way; without an id field the ids are the row numbers; ``open_corpus`` gives them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    keys = [f"doc-{i}" if i % 4 else 1000 + i for i in range(len(SENTENCES))]  # strings and integers
    lines = [json.dumps({"_id": key, "text": text}) for key, text in zip(keys, SENTENCES)]
    lines.insert(3, "")  # a blank line is no row: the ids stay with their texts
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    plain = tmp_path / "plain"
    encode_corpus(model, src, plain, field="text", shard_size=5, batch_size=4)
    assert not (plain / "ids.jsonl").exists() and read_manifest(plain).ids is None
    assert open_corpus(plain).ids().tolist() == list(range(len(SENTENCES)))

    out = tmp_path / "npy"
    encode_corpus(model, src, out, field="text", id_field="_id", shard_size=5, batch_size=4)
    ids_file = (out / "ids.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in ids_file] == keys
    manifest = read_manifest(out)
    assert manifest.input.id_field == "_id" and manifest.ids.name == "ids.jsonl"
    assert manifest.ids.sha256 == hashlib.sha256((out / "ids.jsonl").read_bytes()).hexdigest()
    assert shard_hashes(out) == shard_hashes(plain)
    assert open_corpus(out).ids().tolist() == keys

    table = tmp_path / "in.parquet"
    pq.write_table(pa.table({"key": [str(k) for k in keys], "sentence": SENTENCES}), table)
    parquet = tmp_path / "parquet"
    encode_corpus(
        model,
        table,
        parquet,
        column="sentence",
        id_column="key",
        shard_size=5,
        batch_size=4,
        output_format="parquet",
    )
    manifest = verify(parquet)
    assert [s.name for s in manifest.shards] == [f"shard-0000{i}.parquet" for i in range(5)]
    assert manifest.output_format == "parquet" and manifest.ids is None
    shards = [pq.read_table(parquet / s.name) for s in manifest.shards]
    assert shards[0].schema.field("vector").type == pa.list_(pa.float32(), model.dimension)
    assert sum((t.column("id").to_pylist() for t in shards), []) == [str(k) for k in keys]
    vectors = np.concatenate([np.stack(t.column("vector").to_numpy(zero_copy_only=False)) for t in shards])
    assert np.array_equal(vectors, np.asarray(open_corpus(plain)))
    assert np.array_equal(np.asarray(open_corpus(parquet)), vectors)
    assert open_corpus(parquet).ids().tolist() == [str(k) for k in keys]

    rows = tmp_path / "rows"
    encode_corpus(
        model, write_txt(tmp_path / "in.txt"), rows, shard_size=5, batch_size=4, output_format="parquet"
    )
    assert open_corpus(rows).ids().tolist() == list(range(len(SENTENCES)))
    assert np.array_equal(np.asarray(open_corpus(rows)), vectors)

    # a resume needs the same id field and output format
    for changed, message in (
        ({"id_field": None}, "input.id_field: recorded '_id', now None"),
        ({"id_field": "_id", "output_format": "parquet"}, "output_format: recorded 'npy', now 'parquet'"),
    ):
        options = {"id_field": "_id", **changed}
        with pytest.raises(ProtoembedError, match=re.escape(message)):
            encode_corpus(model, src, out, field="text", shard_size=5, batch_size=4, resume=True, **options)
    # a lost ids file is written again on resume
    (out / "ids.jsonl").unlink()
    encode_corpus(model, src, out, field="text", id_field="_id", shard_size=5, batch_size=4, resume=True)
    assert open_corpus(out, verify=True).ids().tolist() == keys


def test_a_bad_id_is_one_line_naming_its_line(model, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text('{"_id": 1, "text": "a"}\n{"_id": [2], "text": "b"}\n', encoding="utf-8")
    with pytest.raises(ProtoembedError) as caught:
        encode_corpus(model, src, tmp_path / "out", field="text", id_field="_id")
    assert str(caught.value) == f"{src}:2: field '_id': expected a string or an integer, got a list"
    with pytest.raises(ProtoembedError) as caught:
        encode_corpus(model, src, tmp_path / "out", field="text", id_field="id")
    assert str(caught.value) == f"{src}:1: no field 'id' (the row has _id, text)"
    txt = write_txt(tmp_path / "in.txt")
    with pytest.raises(ProtoembedError, match="--id-field / --id-column name the id of jsonl"):
        encode_corpus(model, txt, tmp_path / "out", id_field="_id")
    with pytest.raises(ProtoembedError, match="unknown output format 'csv': expected npy or parquet"):
        encode_corpus(model, txt, tmp_path / "out", output_format="csv")
