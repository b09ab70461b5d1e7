"""``protoembed encode``: file in, .npy out, same vectors as the API; bad input is one line, exit 2."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

import protoembed
from protoembed.cli import main


def test_encode_writes_the_api_vectors(tiny_model_dirs, tmp_path):
    src = tmp_path / "in.txt"
    src.write_bytes(b"a man is playing a guitar .\r\nhello\r\n")
    out = tmp_path / "out.npy"
    model = str(tiny_model_dirs["bert"])
    assert (
        main(["encode", str(src), "-o", str(out), "--model", model, "--head", "mask", "--no-progress"]) == 0
    )
    expected = protoembed.load(model, head="mask").encode(["a man is playing a guitar .", "hello"])
    np.testing.assert_array_equal(np.load(out), expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.npy"]  # no temp files left


def test_encode_errors_are_one_line_without_traceback(tiny_model_dirs, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("fine\n\nalso fine\n")
    out = str(tmp_path / "o.npy")
    cases = [
        (["encode", str(tmp_path / "missing.txt"), "-o", out], "missing.txt: file not found"),
        (["encode", str(src), "-o", out, "--model", str(tiny_model_dirs["bert"])], "line 2"),
        (["encode", str(src), "-o", out, "--head", "bogus"], "unknown head 'bogus'"),
        (["encode", str(src), "-o", out, "--model", str(tmp_path)], "neither a Hugging Face"),
    ]
    for argv, message in cases:
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse's usage errors
            code = exit_.code
        err = capsys.readouterr().err
        assert code == 2, err
        assert message in err and "Traceback" not in err
        assert not (tmp_path / "o.npy").exists()


def test_the_process_prints_one_line_and_exits_2(tmp_path):
    """The real process: no traceback, and an input error comes before torch is even imported."""
    argv = ["encode", str(tmp_path / "missing.txt"), "-o", str(tmp_path / "o.npy")]
    proc = subprocess.run([sys.executable, "-m", "protoembed", *argv], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"protoembed: error: {tmp_path / 'missing.txt'}: file not found"


# ------------------------------------------------------------------ -o OUT_DIR: a folder of shards


def _main(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exit_:  # argparse's usage errors
        return int(exit_.code)


def test_encode_into_a_folder_writes_shards_and_a_manifest(tiny_model_dirs, tmp_path, capsys):
    import json

    texts = [f"sentence number {i} about a guitar" for i in range(7)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "body": t}) + "\n" for i, t in enumerate(texts)))
    out = tmp_path / "vectors"
    model = str(tiny_model_dirs["bert"])
    argv = ["encode", str(src), "-o", str(out), "--model", model, "--field", "body", "--shard-size", "3"]
    assert _main([*argv, "--batch-size", "2", "--normalize", "--no-progress"]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {out}: 7 x 32 float32 in 3 shard(s) and manifest.json"
    assert sorted(p.name for p in out.iterdir()) == [
        ".protoembed.lock",  # the folder's lock file (the lock itself ended with the run)
        "manifest.json",
        "shard-00000.npy",
        "shard-00001.npy",
        "shard-00002.npy",
    ]
    got = np.concatenate([np.load(out / f"shard-{i:05d}.npy") for i in range(3)])
    expected = protoembed.load(model).encode(texts, batch_size=2, normalize=True)
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["input"]["field"] == "body" and manifest["settings"]["normalize"] is True
    # the same command again: refused, the run kept; with --resume: checked and kept
    assert _main([*argv, "--batch-size", "2", "--normalize"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "already holds a finished encoded corpus" in err and "--resume" in err
    assert _main([*argv, "--batch-size", "2", "--normalize", "--resume", "--no-progress"]) == 0
    capsys.readouterr()
    # another setting's resume: refused in one line naming both values; a setting that changes no vector
    # (the tokenizer threads): kept
    assert _main([*argv, "--batch-size", "2", "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.count("\n") == 0
        and "digest mismatch" in err
        and "settings.normalize: recorded True, now False" in err
    )
    assert (
        _main([*argv, "--batch-size", "2", "--normalize", "--resume", "--max-tokens-per-batch", "100"]) == 2
    )
    assert "settings.max_tokens_per_batch: recorded None, now 100" in capsys.readouterr().err
    assert _main([*argv, "--batch-size", "2", "--normalize", "--resume", "--tokenizer-workers", "2"]) == 0


def test_folder_mode_errors_are_one_line_exit_2(tiny_model_dirs, tmp_path, capsys):
    txt = tmp_path / "in.txt"
    txt.write_text("one\ntwo\n")
    (tmp_path / "in.csv").write_text("id,body\n1,hello\n")
    (tmp_path / "in.jsonl").write_text('{"text": "a"}\n{"txt": "b"}\n')
    taken = tmp_path / "taken"
    taken.mkdir()
    np.save(taken / "shard-00000.npy", np.zeros((1, 2), dtype=np.float32))
    out = str(tmp_path / "out")
    model = ["--model", str(tiny_model_dirs["bert"])]
    cases = [
        (["encode", str(txt), "-o", out, "--field", "text"], "--field / --column name the text of jsonl"),
        (["encode", str(tmp_path / "in.csv"), "-o", out, "--column", "text"], "its columns are id, body"),
        (["encode", str(tmp_path / "in.csv"), "-o", out], "csv input needs the column that holds the text"),
        (["encode", str(tmp_path / "in.jsonl"), "-o", out, "--field", "text"], "in.jsonl:2: no field 'text'"),
        (
            ["encode", str(tmp_path), "-o", out],
            f"{tmp_path}: a directory; expected one corpus file: UTF-8 text (one sentence per line), *.jsonl, *.jsonl.gz, *.csv, *.csv.gz, *.tsv, *.tsv.gz, *.parquet (encode each file of the directory, or join them into one)",
        ),
        (["encode", str(txt), "-o", str(taken), *model], "holds another run's output (shard-00000.npy)"),
        (["encode", str(txt), "-o", str(tmp_path / "o.npy"), "--resume"], "--resume needs an output folder"),
        (["encode", str(txt), "-o", out, "--format", "xml"], "invalid choice: 'xml'"),
        (["encode", str(txt), "-o", out, "--workers", "0"], "expected a positive integer"),
    ]
    for argv, message in cases:
        assert _main(argv) == 2, argv
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert message in lines[-1] and "Traceback" not in err, (argv, err)
        assert len(lines) == 1 or lines[0].startswith("usage:"), err  # one line, or argparse's usage
    assert not (tmp_path / "out").exists() and not (tmp_path / "o.npy").exists()


def test_the_command_writes_parquet_shards_with_the_ids(tiny_model_dirs, tmp_path, capsys):
    """``--id-column`` and ``--output-format parquet``: the shards hold the CSV's ids and the API's vectors;
    neither is taken with ``-o FILE.npy``."""
    import pyarrow.parquet as pq

    src = tmp_path / "in.csv"
    src.write_text("key,body\nk1,hello there\nk2,a man is playing a guitar .\nk3,bye\n", encoding="utf-8")
    model = str(tiny_model_dirs["bert"])
    out = tmp_path / "out"
    argv = ["encode", str(src), "-o", str(out), "--model", model, "--column", "body", "--id-column", "key"]
    assert _main([*argv, "--output-format", "parquet", "--shard-size", "2", "--no-progress"]) == 0
    table = pq.read_table(out / "shard-00000.parquet")
    assert table.column("id").to_pylist() == ["k1", "k2"]
    expected = protoembed.load(model).encode(
        ["hello there", "a man is playing a guitar .", "bye"], batch_size=64
    )
    got = np.asarray(protoembed.open_corpus(out))
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert protoembed.open_corpus(out).ids().tolist() == ["k1", "k2", "k3"]
    capsys.readouterr()
    assert _main([*argv[:3], str(tmp_path / "o.npy"), *argv[4:], "--model", model]) == 2
    assert "--id-column needs an output folder (-o OUT_DIR)" in capsys.readouterr().err
