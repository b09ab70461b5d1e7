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
