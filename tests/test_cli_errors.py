"""Bad input a new user hits: each case is a one-line error (exit 2, no traceback) naming the path or value.

The CLI runs in-process (an unexpected exception would fail the test with its traceback); argparse's
own errors exit through ``SystemExit(2)``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import protoembed
from protoembed.cli import build_parser, main
from protoembed.errors import ProtoembedError
from protoembed.io import replace_dir, write_json_atomic

BLOCK = "/sys/protoembed-cannot-write-here"  # sysfs refuses new files, even to root


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``(exit code, stderr)`` of ``protoembed argv`` run in this process."""
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's usage errors
        code = int(exit_.code or 0)
    err = capsys.readouterr().err
    return code, err


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.strip().splitlines() if not line.startswith(("usage:", " "))]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture()
def readonly_dir(tmp_path: Path):
    """A folder nobody can create files in: immutable for root (``chattr +i``), mode 0555 for others."""
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    as_root = os.geteuid() == 0
    if as_root and subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.fail("chattr +i failed: run the tests as a normal user or on a file system with attributes")
    try:
        yield folder
    finally:
        if as_root:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o755)


@pytest.fixture()
def sentences_file(tmp_path: Path) -> Path:
    path = tmp_path / "in.txt"
    path.write_text("a man is playing a guitar .\nhello\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------- output paths, checked first


@pytest.mark.parametrize("where", ["readonly", "sys", "directory"])
def test_encode_output_that_cannot_be_written(where, readonly_dir, sentences_file, tmp_path, capsys):
    target = {
        "readonly": readonly_dir / "v.npy",
        "sys": Path(BLOCK) / "v.npy",
        "directory": tmp_path / "exists.npy",
    }[where]
    (tmp_path / "exists.npy").mkdir()
    # The model does not exist: the output is checked before the model is looked at.
    argv = ["encode", str(sentences_file), "-o", str(target), "--model", str(tmp_path / "no-model")]
    code, err = run_cli(argv, capsys)
    assert_one_line_error(code, err, str(target))
    assert "no-model" not in err
    assert ("is a directory" in err) if where == "directory" else ("not writable" in err or "cannot" in err)


@pytest.mark.parametrize("where", ["readonly", "sys"])
def test_eval_output_that_cannot_be_written(where, readonly_dir, tmp_path, capsys):
    target = readonly_dir / "r.json" if where == "readonly" else Path(BLOCK) / "r.json"
    # No data directory either: the output is checked before the data is read.
    argv = ["eval", "sts", "--data-dir", str(tmp_path / "no-data"), "--output", str(target)]
    code, err = run_cli(argv, capsys)
    assert_one_line_error(code, err, str(target), "not writable")
    assert "no-data" not in err


def test_eval_output_in_a_new_folder_is_fine_and_created(tmp_path):
    args = build_parser().parse_args(["eval", "sts", "--output", str(tmp_path / "new" / "deeper" / "r.json")])
    assert args.output.endswith("r.json") and not (tmp_path / "new").exists()  # the probe leaves nothing


# --------------------------------------------------------------------------- broken models


def _corrupt(folder: Path, how: str) -> None:
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2] if how == "truncated" else b"not a safetensors file" * 8)


@pytest.mark.parametrize("layout", ["sentence-transformers", "huggingface"])
@pytest.mark.parametrize("how", ["truncated", "garbage"])
def test_broken_weights_are_a_one_line_error(layout, how, tiny_model_dirs, sentences_file, tmp_path, capsys):
    model = tmp_path / "model"
    if layout == "huggingface":
        shutil.copytree(tiny_model_dirs["bert"], model)
    else:
        protoembed.load(str(tiny_model_dirs["bert"]), head="mean").save(model)
        assert (model / "modules.json").is_file()
    _corrupt(model, how)
    with pytest.raises(ProtoembedError, match=f"cannot load the model in {model}"):
        protoembed.load(str(model))
    code, err = run_cli(
        ["encode", str(sentences_file), "-o", str(tmp_path / "v.npy"), "--model", str(model)], capsys
    )
    assert_one_line_error(code, err, str(model), "SafetensorError")


# --------------------------------------------------------------------------- devices and numbers


def test_devices_are_checked_before_loading(tiny_model_dirs, sentences_file, tmp_path, capsys):
    missing = f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"
    for device, needle in [(missing, "CUDA"), ("gpu0", "unknown device 'gpu0'")]:
        with pytest.raises(ProtoembedError, match=needle):
            protoembed.load(str(tmp_path / "no-model"), device=device)  # before the model is looked up
        argv = [
            "encode",
            str(sentences_file),
            "-o",
            str(tmp_path / "v.npy"),
            "--model",
            str(tiny_model_dirs["bert"]),
        ]
        code, err = run_cli([*argv, "--device", device], capsys)
        assert_one_line_error(code, err, needle)
    assert not (tmp_path / "v.npy").exists()


@pytest.mark.parametrize("value", ["-1", "0", "many"])
def test_max_seq_length_must_be_positive(value, sentences_file, tmp_path, capsys):
    argv = ["encode", str(sentences_file), "-o", str(tmp_path / "v.npy"), "--max-seq-length", value]
    code, err = run_cli(argv, capsys)
    assert_one_line_error(code, err, "--max-seq-length", "expected a positive integer")


@pytest.mark.parametrize("value", [0, -1, True, 2.5])
def test_api_refuses_bad_max_seq_length(value, tiny_model_dirs):
    with pytest.raises(ProtoembedError, match="max_seq_length must be a positive number"):
        protoembed.load(str(tiny_model_dirs["bert"]), max_seq_length=value)


# --------------------------------------------------------------------------- the Python API


def test_encode_edge_cases(tiny_model_dirs):
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean")
    empty = model.encode([])
    assert empty.shape == (0, model.dimension) and empty.dtype == np.float32
    assert tuple(model.encode([], convert_to_tensor=True).shape) == (0, model.dimension)
    for bad, shown in [(None, "NoneType None"), (math.nan, "float NaN"), (b"x", "bytes b'x'")]:
        with pytest.raises(ProtoembedError, match=rf"^sentence 1: expected a string, got {shown}"):
            model.encode(["fine", bad])
    with pytest.raises(ProtoembedError, match="expected a string or a sequence of strings"):
        model.encode(None)
    tight = protoembed.load(str(tiny_model_dirs["bert"]), head="mean", max_seq_length=2)
    assert tight.encode(["a man is playing"]).shape == (1, model.dimension)  # cut to nothing is not empty
    for batch_size in (0, -1, 1.5):
        with pytest.raises(ProtoembedError, match="batch_size must be an integer of at least 1"):
            model.encode(["fine"], batch_size=batch_size)


def test_encode_empty_lines_name_the_line_and_the_flag(tiny_model_dirs, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("fine\n   \nalso fine\n\n", encoding="utf-8")
    argv = ["encode", str(src), "-o", str(tmp_path / "v.npy"), "--model", str(tiny_model_dirs["bert"])]
    code, err = run_cli(argv, capsys)
    assert_one_line_error(code, err, "line 2, 4", "--allow-empty")
    assert "allow_empty" not in err and "index" not in err
    assert run_cli([*argv, "--allow-empty"], capsys)[0] == 0
    assert np.load(tmp_path / "v.npy").shape[0] == 4


def test_no_progress_bar_into_a_log_and_no_shard_bar_on_save(tiny_model_dirs, tmp_path, capfd):
    src = tmp_path / "in.txt"
    src.write_text("one\ntwo\n", encoding="utf-8")
    argv = ["encode", str(src), "-o", str(tmp_path / "v.npy"), "--model", str(tiny_model_dirs["bert"])]
    assert main(argv) == 0  # stderr is captured here, not a terminal
    protoembed.load(str(tiny_model_dirs["bert"])).save(tmp_path / "m")
    err = capfd.readouterr().err
    assert "Encoding" not in err and "shards" not in err and "%|" not in err


# --------------------------------------------------------------------------- permissions and leftovers


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_outputs_respect_the_umask(umask, tiny_model_dirs, tmp_path):
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean")
    previous = os.umask(umask)
    try:
        saved = model.save(tmp_path / "m")
        result = write_json_atomic(tmp_path / "r" / "results.json", {"a": 1})
    finally:
        os.umask(previous)
    files = [p for p in saved.rglob("*") if p.is_file()] + [result]
    folders = [saved, *(p for p in saved.rglob("*") if p.is_dir()), result.parent]
    assert {oct(p.stat().st_mode & 0o777) for p in files} == {oct(0o666 & ~umask)}
    assert {oct(p.stat().st_mode & 0o777) for p in folders} == {oct(0o777 & ~umask)}


def _dead_pid() -> int:
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(proc.stdout)


def test_temp_folders_of_a_killed_save_are_removed_by_the_next(tmp_path):
    dead = _dead_pid()
    target = tmp_path / "best"
    (tmp_path / f".best.tmp-{dead}-abc").mkdir()  # what kill -9 during a save leaves
    (tmp_path / f".best.tmp-{dead}-abc" / "model.safetensors").write_bytes(b"half")
    (tmp_path / f".best.tmp-{os.getpid()}-live").mkdir()  # a save running in this process: kept
    replace_dir(target, lambda tmp: (tmp / "a.txt").write_text("new"))
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".best.tmp-{os.getpid()}-live", "best"]
    assert (target / "a.txt").read_text() == "new"


def test_a_kill_between_the_renames_restores_the_previous_folder(tmp_path):
    dead = _dead_pid()
    old = tmp_path / f".best.old-{dead}-xyz"  # killed after moving the old folder aside
    old.mkdir()
    (old / "a.txt").write_text("previous")
    (tmp_path / f".best.tmp-{dead}-abc").mkdir()

    def fail(tmp: Path) -> None:
        raise ProtoembedError("build failed")

    with pytest.raises(ProtoembedError, match="build failed"):
        replace_dir(tmp_path / "best", fail)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best"]
    assert (tmp_path / "best" / "a.txt").read_text() == "previous"


# --------------------------------------------------------------------------- names and versions


def test_table_names_are_task_aliases():
    parse = build_parser().parse_args
    assert parse(["eval", "sts", "--tasks", "STS-B", "sick-r", "STS12"]).tasks == [
        "STSBenchmark",
        "SICKRelatedness",
        "STS12",
    ]
    assert parse(["eval", "transfer", "--tasks", "SST", "mr"]).tasks == ["SST2", "MR"]
    assert parse(["eval", "fewshot", "--tasks", "SST2"]).tasks == ["SST2"]


def test_unknown_task_lists_the_names(capsys):
    code, err = run_cli(["eval", "sts", "--tasks", "STS-C"], capsys)
    assert_one_line_error(code, err, "unknown task 'STS-C'", "STSBenchmark (STS-B)")


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"protoembed {protoembed.__version__}"


def test_results_json_records_the_resolved_head(tiny_model_dirs, tmp_path, capsys):
    root = tmp_path / "data" / "senteval" / "STS" / "STSBenchmark"
    root.mkdir(parents=True)
    lines = [f"g\tf\t2012\t{i}\t{i % 5}.0\ta man plays {i} .\ta dog runs {i % 3} ." for i in range(6)]
    (root / "sts-test.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "r.json"
    argv = ["eval", "sts", "--model", str(tiny_model_dirs["bert"]), "--data-dir", str(tmp_path / "data")]
    assert main([*argv, "--tasks", "STS-B", "--output", str(out)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["head"] == "mean" and list(result["tasks"]) == ["STSBenchmark"]


def test_cli_modules_import_no_torch():
    """``--help`` stays fast: the package, the head registry and the whole parser load no torch."""
    code = (
        "import sys, protoembed, protoembed.heads; from protoembed.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers', 'sklearn', 'scipy') "
        "if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def test_a_shared_temp_folder_is_swapped_in_and_its_leftover_cleaned(tmp_path):
    from protoembed.io import clean_stale_siblings, shared_temp_sibling, swap_dir

    target = tmp_path / "checkpoint"
    target.mkdir()
    (target / "old.txt").write_text("old")
    tmp = shared_temp_sibling(target)
    tmp.mkdir()
    (tmp / "new.txt").write_text("new")
    swap_dir(tmp, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]
    assert sorted(p.name for p in target.iterdir()) == ["new.txt"]
    tmp.mkdir()  # what a kill while the processes write leaves
    clean_stale_siblings(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]
