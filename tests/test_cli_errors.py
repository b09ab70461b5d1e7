"""Bad input a new user hits: each case is a one-line error (exit 2, no traceback) naming the path or value.

The CLI runs in-process (an unexpected exception would fail the test with its traceback); argparse's
own errors exit through ``SystemExit(2)``.
"""

from __future__ import annotations

import errno
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import protoembed
from protoembed.cli import build_parser, main
from protoembed.core.errors import ProtoembedError
from protoembed.model.export import export_embedder
from protoembed.outputs.io import replace_dir, write_json_atomic
from protoembed.outputs.run_layout import dev_score
from test_training_cli import _config, _env  # the tiny training config of the CLI tests
from tiny_models import specials_only_mean

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


def test_encode_into_a_folder_that_cannot_be_written(readonly_dir, sentences_file, tmp_path, capsys):
    """``-o DIR``: the folder is named (or the parent that refuses to hold it), never a file encode does
    not write, and what was expected; checked before the model is looked at."""
    (tmp_path / "file").write_text("x")
    cases = [
        (
            readonly_dir,
            f"cannot write the folder {readonly_dir}: it is not writable (",
            "expected a writable folder",
        ),
        (
            readonly_dir / "out",
            f"cannot create the folder {readonly_dir / 'out'}: {readonly_dir} is not writable (",
            "expected a writable parent folder",
        ),
        (
            Path(BLOCK) / "out",
            f"cannot create the folder {BLOCK}/out: /sys is not writable (",
            "parent folder",
        ),
        (
            tmp_path / "file",
            f"cannot write the folder {tmp_path / 'file'}: a file of that name exists",
            "a folder",
        ),
        (
            tmp_path / "file" / "out",
            f"cannot create the folder {tmp_path / 'file' / 'out'}: {tmp_path / 'file'} is a file",
            "(expected a folder)",
        ),
    ]
    for target, *needles in cases:
        argv = ["encode", str(sentences_file), "-o", str(target), "--model", str(tmp_path / "no-model")]
        code, err = run_cli(argv, capsys)
        assert_one_line_error(code, err, *needles)
        assert "results.json" not in err and "no-model" not in err
    assert sorted(p.name for p in readonly_dir.iterdir()) == []


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
    assert_one_line_error(code, err, "--max-seq-length", "max_seq_length must be a positive number of tokens")


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
    vectors = np.load(tmp_path / "v.npy")
    # lines 2 and 4 are the bare [CLS] [SEP] (as documented), lines 1 and 3 as the model encodes them
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean")
    np.testing.assert_allclose(vectors[[0, 2]], model.encode(["fine", "also fine"]), atol=1e-5)
    np.testing.assert_allclose(vectors[[1, 3]], [specials_only_mean(tiny_model_dirs["bert"])] * 2, atol=1e-5)


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
    """The id of a process that has exited (a shell, not a Python interpreter: milliseconds)."""
    proc = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
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
        "import sys, protoembed, protoembed.model.heads; from protoembed.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers', 'sklearn', 'scipy') "
        "if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def test_a_shared_temp_folder_is_swapped_in_and_its_leftover_cleaned(tmp_path):
    from protoembed.outputs.io import clean_stale_siblings, shared_temp_sibling, swap_dir

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


# --------------------------------------------------------------------------- one run per output folder


def _protoembed(*args: str, env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """``protoembed args`` in a fresh interpreter."""
    cmd = [sys.executable, "-m", "protoembed", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def assert_failed_in_one_line(proc: subprocess.CompletedProcess[str] | tuple[int, str], *needles: str) -> str:
    """Exit 2, no traceback, one ``protoembed...`` error line holding every needle; returns that line."""
    code, err = (proc.returncode, proc.stderr) if not isinstance(proc, tuple) else proc
    assert code == 2, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    errors = [line for line in err.strip().splitlines() if "error" in line and line.startswith("protoembed")]
    assert len(errors) == 1 and errors[0] == err.strip().splitlines()[-1], err[-3000:]
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


def _wait_for(condition, process: subprocess.Popen, what: str, limit: float = 240) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert process.poll() is None, f"the run ended before {what}: {process.stderr.read()[-3000:]}"
        assert time.monotonic() < deadline, f"no {what} after {limit} s"
        time.sleep(0.02)


def _run_outputs(folder: Path) -> dict[str, object]:
    """What a finished run leaves, comparable across folders: ``best/`` byte for byte, the results and the
    log without paths, wall times and the rates measured by them (tokens/s, MFU), and the names of every
    entry (no temp folder left behind)."""
    rates = ("tokens_per_second", "mfu")
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    for key in ("model", "train_wall_time_s", *rates):
        results.pop(key)
    log = [json.loads(line) for line in (folder / "training_log.jsonl").read_text().splitlines()]
    for entry in log:
        for key in ("elapsed_s", "wall_time_s", "data", *rates):
            entry.pop(key, None)
    return {
        "best": {
            str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.glob("best/**/*"))
            if p.is_file()
        },
        "results": results,
        "log": [e for e in log if e["event"] != "resume"],
        "entries": sorted(p.name for p in folder.iterdir()),
    }


@pytest.fixture(scope="module")
def run_alone(tiny_model_dirs, data_dir, tmp_path_factory) -> tuple[Path, dict[str, object]]:
    """(config, outputs) of the reference run: 16 steps, dev every 8, trained alone from start to end."""
    root = tmp_path_factory.mktemp("alone")
    config = _config(root, tiny_model_dirs["bert"], "simcse", "cls", max_steps=16, eval_steps=8)
    done = _protoembed(
        "train", "--config", str(config), "--output-dir", str(root / "run"), env=_env(data_dir)
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return config, _run_outputs(root / "run"), root / "run"


def test_a_second_run_on_a_held_folder_is_refused(run_alone, data_dir, tmp_path):
    """While a run holds its folder (stopped by SIGSTOP right after taking the lock, so the timing is
    exact), a second run exits 2 naming the folder and the process; the first then ends as if alone."""
    config, alone, _ = run_alone
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "protoembed", "train", "--config", str(config), "--output-dir", str(out)]
    first = subprocess.Popen(cmd, env=_env(data_dir), stderr=subprocess.PIPE, text=True)
    lock = out / ".protoembed.lock"
    try:
        _wait_for(lambda: lock.is_file() and lock.read_text().strip() == str(first.pid), first, "the lock")
        first.send_signal(signal.SIGSTOP)
        second = _protoembed("train", "--config", str(config), "--output-dir", str(out), env=_env(data_dir))
    finally:
        first.send_signal(signal.SIGCONT)
    assert_failed_in_one_line(second, f"{out} is in use by another training run (process {first.pid})")
    _, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr[-3000:]
    assert _run_outputs(out) == alone


def test_a_run_that_leaves_only_its_lock_removes_it_and_the_folders_it_made(tmp_path, monkeypatch):
    """A run refused or failed at start leaves no folder it created holding only ``.protoembed.lock``; a
    folder that was there stays (empty), one with the run's files keeps the lock file too; a refused run
    leaves the holder's folder alone; only the main process of a launcher's run takes the locks."""
    from protoembed.outputs.folder_lock import LOCK_FILE, hold_output_dir, hold_output_dirs

    deep = tmp_path / "a" / "b" / "run"
    with pytest.raises(ProtoembedError, match="^failed at start$"), hold_output_dir(deep):
        assert [p.name for p in deep.iterdir()] == [LOCK_FILE]
        raise ProtoembedError("failed at start")
    assert list(tmp_path.iterdir()) == []  # a/, a/b/ and a/b/run/ all made by the run: all gone
    mine = tmp_path / "mine"
    mine.mkdir()
    with hold_output_dir(mine):
        pass
    assert list(mine.iterdir()) == []  # the user's folder stays, the lock file does not
    with hold_output_dir(mine):
        (mine / "results.json").write_text("{}")
    assert sorted(p.name for p in mine.iterdir()) == [LOCK_FILE, "results.json"]
    held = tmp_path / "held"
    with hold_output_dir(held) as lock:
        refused = pytest.raises(ProtoembedError, match=f"^{held} is in use by another training run")
        with refused, hold_output_dir(held):  # flock is per open file: this process too is another run
            pass
        assert [p.name for p in held.iterdir()] == [LOCK_FILE] and lock.read_text() == f"{os.getpid()}\n"
    assert not held.exists()
    monkeypatch.setenv("RANK", "1")  # a launcher's other process: the main one holds the folder
    with hold_output_dirs([tmp_path / "other"]):
        assert not (tmp_path / "other").exists()


def test_a_run_killed_by_sigkill_leaves_no_lock_and_resumes(run_alone, data_dir, tmp_path):
    config, alone, _ = run_alone
    out = tmp_path / "run"
    cmd = ["train", "--config", str(config), "--output-dir", str(out)]
    first = subprocess.Popen(
        [sys.executable, "-m", "protoembed", *cmd], env=_env(data_dir), stderr=subprocess.PIPE, text=True
    )
    _wait_for((out / "checkpoint" / "trainer_state.json").is_file, first, "the checkpoint of step 8")
    first.kill()  # SIGKILL: no handler runs, the kernel drops the lock
    first.communicate(timeout=60)
    assert (out / ".protoembed.lock").is_file()  # the file stays, the lock does not
    resumed = _protoembed(*cmd, "--resume", env=_env(data_dir))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _run_outputs(out) == alone


# --------------------------------------------------------------------------- a full disk


def _mount_tmpfs(folder: Path, size: str = "60m") -> bool:
    """Mount a small tmpfs on ``folder`` where the machine allows it (root, not in a locked-down sandbox)."""
    folder.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True
    )
    return done.returncode == 0


def _fill(folder: Path) -> Path:
    """Write ``folder/filler`` until the file system is full (the chunks shrink down to one byte)."""
    filler = folder / "filler"
    chunk = 1 << 20
    with open(filler, "wb", buffering=0) as handle:
        while chunk:
            try:
                handle.write(b"\0" * chunk)
            except OSError:
                chunk //= 2
    return filler


#: what the fallback injects when no tmpfs can be mounted: the second checkpoint's save runs out of space
#: after writing part of its file
_INJECT_ENOSPC = """
import errno, sys
from pathlib import Path
import accelerate
calls = []
real = accelerate.Accelerator.save_state
def save_state(self, output_dir=None, **kwargs):
    calls.append(output_dir)
    if len(calls) == 2:
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        (Path(output_dir) / "model.bin").write_bytes(b"half a checkpoint")
        raise OSError(errno.ENOSPC, "No space left on device")
    return real(self, output_dir, **kwargs)
accelerate.Accelerator.save_state = save_state
from protoembed.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _no_tmpfs_reason() -> str:
    return "cannot mount a tmpfs here (needs root and a mount-capable sandbox); the simulated variant ran"


def _assert_kept_the_step_8_checkpoint(failed, out: Path) -> None:
    """The failed run's one line names the path and what was kept; no partial file or folder is left."""
    line = assert_failed_in_one_line(
        failed, "No space left on device", f"the checkpoint of step 8 is kept in {out / 'checkpoint'}"
    )
    assert f"cannot write {out}" in line and "resume with: " in line
    assert not (out / "results.json").exists()
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".") and "lock" not in p.name) == []
    assert json.loads((out / "checkpoint" / "trainer_state.json").read_text())["step"] == 8


def test_a_full_disk_keeps_the_last_checkpoint_and_resumes(run_alone, data_dir, tmp_path):
    """Simulated (runs everywhere): an injected ENOSPC in the second checkpoint's save, after part of its
    file is written. One line names the path and what was kept, no partial folder is left, and --resume
    equals a run alone. (On a real full tmpfs: the next test.)"""
    config, alone, _ = run_alone
    out = tmp_path / "run"
    cmd = ["train", "--config", str(config), "--output-dir", str(out)]
    failed = subprocess.run(
        [sys.executable, "-c", _INJECT_ENOSPC, *cmd], env=_env(data_dir), capture_output=True, text=True
    )
    _assert_kept_the_step_8_checkpoint(failed, out)
    resumed = _protoembed(*cmd, "--resume", env=_env(data_dir))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _run_outputs(out) == alone


def test_a_real_full_disk_keeps_the_last_checkpoint_and_resumes(run_alone, data_dir, tmp_path):
    """Real: training into a 60 MB tmpfs that is filled while the run is stopped (SIGSTOP) after the
    checkpoint of step 8. The same one line and kept checkpoint as the simulated test, and --resume once
    there is room equals a run alone. Skipped, saying so, where no tmpfs can be mounted."""
    config, alone, _ = run_alone
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk):
        pytest.skip(_no_tmpfs_reason())
    out = disk / "run"
    cmd = ["train", "--config", str(config), "--output-dir", str(out)]
    try:
        first = subprocess.Popen(
            [sys.executable, "-m", "protoembed", *cmd], env=_env(data_dir), stderr=subprocess.PIPE, text=True
        )
        _wait_for((out / "checkpoint" / "trainer_state.json").is_file, first, "the checkpoint of step 8")
        first.send_signal(signal.SIGSTOP)
        filler = _fill(disk)
        first.send_signal(signal.SIGCONT)
        _, stderr = first.communicate(timeout=300)
        _assert_kept_the_step_8_checkpoint((first.returncode, stderr), out)
        filler.unlink()
        resumed = _protoembed(*cmd, "--resume", env=_env(data_dir))
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert _run_outputs(out) == alone
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.fixture(scope="module")
def short_run_alone(tiny_model_dirs, data_dir, tmp_path_factory) -> tuple[Path, Path]:
    """(config, run folder) of a 4-step run (dev every 2 steps) trained alone, in this process."""
    root = tmp_path_factory.mktemp("short")
    config = _config(root, tiny_model_dirs["bert"], "simcse", "cls", max_steps=4, eval_steps=2)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PROTOEMBED_DATA", str(data_dir))
        assert main(["train", "--config", str(config), "--output-dir", str(root / "alone")]) == 0
    return config, root / "alone"


@pytest.mark.parametrize("site", ["best", "log", "results"])
def test_a_full_disk_at_each_training_write(site, short_run_alone, data_dir, tmp_path, capsys, monkeypatch):
    """An injected ENOSPC at each write of a run: one line naming the path and what was kept, no partial
    file or folder, and --resume from what was kept gives the run alone's model and results."""
    import protoembed.outputs.st_layout
    import protoembed.training.runlog

    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))
    config, alone = short_run_alone
    argv = ["train", "--config", str(config), "--output-dir"]
    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        if site == "best":  # the first best/ (step 2), after its weights are written
            patch.setattr(protoembed.outputs.st_layout, "write_json", _enospc)  # modules.json
            path, kept = out / "best", "no checkpoint had been written yet, so a resumed run starts over"
        elif site == "log":  # the log line of step 3, after the checkpoint of step 2
            appends = []

            def append(file, mode="r", *args, **kwargs):
                appends.append(mode)
                if appends.count("a") == 5:
                    _enospc()
                return open(file, mode, *args, **kwargs)

            patch.setattr(protoembed.training.runlog, "open", append, raising=False)
            path, kept = (
                out / "training_log.jsonl",
                f"the checkpoint of step 2 is kept in {out / 'checkpoint'}",
            )
        else:  # results.json, after the last checkpoint
            write_text = Path.write_text

            def fail_results(self, *args, **kwargs):
                if self.name.startswith(".results.json."):
                    write_text(self, "{half", encoding="utf-8")
                    _enospc()
                return write_text(self, *args, **kwargs)

            patch.setattr(Path, "write_text", fail_results)
            path, kept = out / "results.json", f"the checkpoint of step 4 is kept in {out / 'checkpoint'}"
        capsys.readouterr()
        line = assert_failed_in_one_line(
            run_cli([*argv, str(out)], capsys), f"cannot write {path}: No space left"
        )
    assert kept in line and f"resume with: protoembed train --config {config}" in line
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == [".protoembed.lock"]
    assert main([*argv, str(out), "--resume"]) == 0
    assert (out / "best" / "model.safetensors").read_bytes() == (
        alone / "best/model.safetensors"
    ).read_bytes()
    results = [json.loads((d / "results.json").read_text())["tasks"] for d in (out, alone)]
    assert results[0] == results[1]


def test_a_full_disk_on_encode_export_and_report(
    tiny_model_dirs, sentences_file, tmp_path, capsys, monkeypatch
):
    """encode's .npy, an export's folder (with a stale temp folder of an export killed by kill -9 beside
    it) and report's page: one line each, nothing half-written left."""
    import protoembed.model.export.graph

    out = tmp_path / "out"
    out.mkdir()
    model = str(tiny_model_dirs["bert"])

    def half_then_enospc(path, *args, **kwargs):
        Path(str(path)).write_bytes(b"half")
        _enospc()

    with monkeypatch.context() as patch:
        patch.setattr(np, "save", half_then_enospc)
        code_err = run_cli(
            ["encode", str(sentences_file), "-o", str(out / "v.npy"), "--model", model], capsys
        )
    assert_failed_in_one_line(
        code_err, f"cannot write {out / 'v.npy'}: No space left on device; no partial file"
    )

    killed = out / f".other-export.tmp-{_dead_pid()}-x"  # what kill -9 during an export leaves
    killed.mkdir()
    (killed / "model.onnx").write_bytes(b"87 MB in real life")
    with monkeypatch.context() as patch:
        patch.setattr(
            protoembed.model.export.graph, "trace_graph", lambda e, path, *a: half_then_enospc(path)
        )
        code_err = run_cli(["export", model, "-o", str(out / "onnx")], capsys)
    assert_failed_in_one_line(
        code_err, f"cannot write {out / 'onnx'}: No space left on device; no partial folder"
    )

    results = out / "sts.json"
    write_json_atomic(
        results,
        {
            "model": "m",
            "suite": "sts",
            "variant": "senteval",
            "split": "test",
            "avg": 1.0,
            "tasks": {"STS12": {"spearman": 1.0, "pearson": 1.0, "n": 3}},
        },
    )
    write_text = Path.write_text

    def fail_page(self, *args, **kwargs):
        if self.name.startswith(".report.md."):
            half_then_enospc(self)
        return write_text(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(Path, "write_text", fail_page)
        code_err = run_cli(["report", str(results), "-o", str(out / "report.md"), "--no-figures"], capsys)
    assert_failed_in_one_line(code_err, f"cannot write {out / 'report.md'}: No space left on device")
    assert sorted(p.name for p in out.iterdir()) == ["sts.json"]


# --------------------------------------------------------------------------- a read-only output folder


def test_train_into_a_read_only_folder_is_refused_first(readonly_dir, tiny_model_dirs, tmp_path, capsys):
    """Checked before the config's data is read: the corpus here does not even exist."""
    config = _config(tmp_path, tiny_model_dirs["bert"], "simcse", "cls")
    (tmp_path / "corpus.txt").unlink()
    for target in (readonly_dir / "run", Path(BLOCK) / "run"):
        code_err = run_cli(["train", "--config", str(config), "--output-dir", str(target)], capsys)
        assert_failed_in_one_line(code_err, f"cannot create the folder {target}: ", "is not writable")
    with open(config, "a", encoding="utf-8") as handle:
        handle.write(f"output_dir: {readonly_dir / 'from-config'}\n")
    code_err = run_cli(["train", "--config", str(config)], capsys)
    assert_failed_in_one_line(code_err, str(readonly_dir / "from-config"), "not writable")


# --------------------------------------------------------------------------- malformed inputs, misleading messages


@pytest.mark.parametrize("content", ["[]", "null", "3"])
def test_report_on_json_that_is_not_an_object(content, tmp_path, capsys):
    results = tmp_path / "r.json"
    results.write_text(content + "\n", encoding="utf-8")
    code_err = run_cli(["report", str(results), "-o", str(tmp_path / "page.md")], capsys)
    assert_failed_in_one_line(code_err, str(results), "expected a JSON object")
    assert not (tmp_path / "page.md").exists()


def test_cross_encoder_scoring_refuses_a_bi_encoder(tiny_model_dirs, tmp_path, capsys):
    """A bi-encoder's folder (or a bare backbone) would get a freshly initialised head: refused, before the
    data is read, naming the folder to pass."""
    saved = protoembed.load(str(tiny_model_dirs["bert"]), head="mean").save(tmp_path / "best")
    for model in (saved, tiny_model_dirs["bert"]):
        argv = [
            "eval",
            "sts",
            "--cross-encoder",
            "--model",
            str(model),
            "--data-dir",
            str(tmp_path / "no-data"),
        ]
        line = assert_failed_in_one_line(run_cli(argv, capsys), f"{model} is not a trained cross-encoder")
        assert "best/cross_encoder/" in line and "BertModel" in line and "no-data" not in line


def test_truncation_is_said_once_per_call_and_transformers_warning_is_not(
    tiny_model_dirs, tmp_path, caplog, capfd
):
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean")
    budget = model.encoder.sentence_budget(None, None)  # the tiny backbone's positions less [CLS] [SEP]
    long = " ".join(["word"] * 3 * budget)
    with caplog.at_level("WARNING", logger="protoembed"):
        model.encode([long, "short", long + " more"])
        model.encode(["short"])
    said = [r.getMessage() for r in caplog.records if r.name.startswith("protoembed")]
    longest = len(model.encoder.sentence_ids([long + " more"])[0])
    assert said == [
        f"2 of 3 input(s) truncated to {budget} sentence tokens (the backbone's limit; the longest had {longest})"
    ]
    assert "Token indices sequence length" not in capfd.readouterr().err


def test_data_dir_that_is_a_file(tmp_path, capsys):
    path = tmp_path / "data.tar"
    path.write_bytes(b"")
    code_err = run_cli(["eval", "sts", "--data-dir", str(path)], capsys)
    line = assert_failed_in_one_line(code_err, f"{path} (from --data-dir) is a file, not a directory")
    assert "download" not in line


def test_base_file_errors_name_the_file_and_its_includer(tiny_model_dirs, tmp_path, capsys):
    config = _config(tmp_path, tiny_model_dirs["bert"], "simcse", "cls")
    (tmp_path / "typo.yaml").write_text("training: {bacth_size: 4}\n", encoding="utf-8")
    top = tmp_path / "top.yaml"
    top.write_text(f"base: [{config.name}, typo.yaml]\n", encoding="utf-8")
    argv = ["train", "--config", str(top), "--output-dir", str(tmp_path / "o")]
    assert_failed_in_one_line(
        run_cli(argv, capsys),
        f"{tmp_path / 'typo.yaml'} (base of {top}): unknown config key 'training.bacth_size'",
    )
    top.write_text("base: missing.yaml\n", encoding="utf-8")
    assert_failed_in_one_line(run_cli(argv, capsys), f"{top}: base file 'missing.yaml' not found")


def test_ctrl_c_prints_the_resume_command(tiny_model_dirs, data_dir, tmp_path):
    config = _config(tmp_path, tiny_model_dirs["bert"], "simcse", "cls", max_steps=400, eval_steps=8)
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "protoembed", "train", "--config", str(config), "--output-dir", str(out)]
    # SIGINT at its default in the run: a test session started in the background (nohup, `&`) ignores
    # SIGINT, and a child would inherit that and never see the Ctrl-C
    restore = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
    process = subprocess.Popen(cmd, env=_env(data_dir), stderr=subprocess.PIPE, text=True, preexec_fn=restore)
    _wait_for((out / "checkpoint" / "trainer_state.json").is_file, process, "the checkpoint of step 8")
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("protoembed train: interrupted (Ctrl-C); the checkpoint of step "), last
    assert f"is kept in {out / 'checkpoint'}; resume with: " in last
    expected = ["protoembed", "train", "--config", str(config), "--output-dir", str(out), "--resume"]
    assert shlex.split(last.split("; resume with: ", 1)[1]) == expected


def test_every_table_title_names_the_model_head_and_scorer():
    from protoembed.evaluation.sts import format_sts_table

    tasks = {"STSBenchmark": {"spearman": 39.0, "pearson": 40.0, "n": 3}}
    mask = {
        "model": "default",
        "head": "mask",
        "template": '"<S>" means [MASK] .',
        "tasks": tasks,
        "avg": 39.0,
    }
    assert format_sts_table(mask).splitlines()[0] == (
        'STS (? data, test split, model default, head mask (template "<S>" means [MASK] .), scorer cosine)'
    )
    cross = {
        "model": "run/best/cross_encoder",
        "scorer": "cross-encoder",
        "variant": "senteval",
        "tasks": tasks,
        "avg": 39.0,
    }
    assert format_sts_table(cross).splitlines()[0] == (
        "STS (senteval data, test split, model run/best/cross_encoder, scorer cross-encoder)"
    )


def test_every_table_title_names_the_runtime_and_precision_that_ran():
    """An fp32 ONNX folder that ran OpenVINO bf16 says so in the title, as its results JSON does."""
    from protoembed.evaluation.clustering import format_clustering_table
    from protoembed.evaluation.sts import format_sts_table

    record = {"model": "minilm-onnx", "head": "mean", "runtime": "openvino", "precision": "bf16"}
    sts = {
        **record,
        "variant": "senteval",
        "tasks": {"STSBenchmark": {"spearman": 1.0, "pearson": 2.0, "n": 3}},
    }
    assert format_sts_table({**sts, "avg": 1.0}).splitlines()[0] == (
        "STS (senteval data, test split, model minilm-onnx, head mean, scorer cosine, encoded by openvino in bf16)"
    )
    clustering = {**record, "runtime": "onnx", "precision": "int8", "tasks": {}, "avg": None}
    assert format_clustering_table(clustering).splitlines()[0].endswith(", encoded by onnx in int8)")


# --------------------------------------------------------------------------- model cards


def _card_table(card: str, heading: str) -> list[list[str]]:
    """The rows (cells) of the first markdown table after ``heading`` in a card."""
    block = card.split(heading, 1)[1].split("\n\n")[1]
    return [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines()[2:]]


def test_a_trained_models_card_holds_the_runs_own_numbers(run_alone):
    _, _, run = run_alone
    card = (run / "best" / "README.md").read_text(encoding="utf-8")
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    start = json.loads((run / "training_log.jsonl").read_text().splitlines()[0])
    rows = dict(_card_table(card, "## Training"))
    assert rows["dev score there"] == (
        f"{dev_score(results):.2f} (spearman x100 on STSBenchmark (dev split), scored by the embeddings)"
    )
    assert int(rows["selected at step"]) == results["best_step"]
    corpus = Path(start["data"]["files"][0]["path"])
    lines = len(corpus.read_bytes().splitlines())
    assert rows["training data"] == f"`corpus.txt` ({lines} lines, {start['data']['examples']} examples)"
    assert rows["objective"] == "simcse (temperature=0.05, mlp=train)"
    table = {
        row[0]: row[1:]
        for row in _card_table(card, "STS (senteval data, test split, head cls, scorer cosine")
    }
    for task, row in results["tasks"].items():
        assert [float(table[task][0]), float(table[task][1]), int(table[task][2])] == [
            round(row["spearman"], 2),
            round(row["pearson"], 2),
            row["n"],
        ]
    assert float(table["Avg."][0]) == round(results["avg"], 2)
    import yaml

    config = yaml.safe_load(card.split("```yaml\n", 1)[1].split("```", 1)[0])
    recorded = yaml.safe_load((run / "config.yaml").read_text())
    recorded.pop("output_dir")
    assert config == recorded
    model = dict(_card_table(card, "saved by protoembed."))
    assert model["head"] == "cls" and model["protoembed version"] == protoembed.__version__
    assert 'SentenceTransformer("best")' in card and "trust_remote_code" not in card


def test_every_saved_model_has_a_card(tiny_model_dirs, tmp_path):
    mask = protoembed.load(str(tiny_model_dirs["bert"]), head="mask").save(tmp_path / "mask-model")
    card = (mask / "README.md").read_text(encoding="utf-8")
    rows = dict(_card_table(card, "saved by protoembed."))
    assert rows["head"] == f"mask, template `{protoembed.load(str(mask)).encoder.template}`"
    assert 'SentenceTransformer("mask-model", trust_remote_code=True)' in card and "## Training" not in card
    mean = protoembed.load(str(tiny_model_dirs["bert"]), head="mean")
    card = (mean.save(tmp_path / "mean-model") / "README.md").read_text(encoding="utf-8")
    assert 'SentenceTransformer("mean-model")' in card
    exported = export_embedder(mean, tmp_path / "onnx-model")
    card = (exported / "README.md").read_text(encoding="utf-8")
    assert (
        dict(_card_table(card, "saved by protoembed."))["ONNX export"]
        == f"fp32 weights, dimension {mean.dimension}"
    )
    assert 'protoembed.load("onnx-model")' in card


# --------------------------------------------------------------------------- validated before torch


def test_config_errors_come_before_torch_is_imported(tiny_model_dirs, tmp_path):
    """A bad key, a bad objective option, a missing base: file, a read-only output folder, a base model
    that is not there, a training file whose second row does not parse, a max_seq_length above the base
    model's position limit (its config.json read without torch), an output folder held by another
    run and one that holds a finished run: each a one-line error (exit 2) from an interpreter that never imported torch,
    transformers or sentence-transformers (they take most of a minute to import on a busy machine), and
    no output folder left behind; ``--check`` of a good fp32 run passes, says what it checked and imports
    none of them either."""
    config = _config(tmp_path, tiny_model_dirs["bert"], "simcse", "cls")
    text = config.read_text(encoding="utf-8")
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"text": "a first row"}\n"just a string"\n', encoding="utf-8")
    bad = {
        "key": text.replace("batch_size:", "bacth_size:"),
        "option": text.replace("{name: simcse}", "{name: simcse, tau: 0.1}"),
        "base": "base: missing.yaml\n" + text,
        "model": text.replace(f"model: {tiny_model_dirs['bert']}", f"model: {tmp_path / 'no-model'}"),
        "rows": text.replace(f"corpus: {tmp_path / 'corpus.txt'}", f"corpus: {rows}"),
        "length": text.replace("max_seq_length: 16", "max_seq_length: 100000"),
    }
    for name, content in bad.items():
        assert content != text
        (tmp_path / f"{name}.yaml").write_text(content, encoding="utf-8")
    out, busy = tmp_path / "o", tmp_path / "busy"
    runs = [["train", "--config", str(tmp_path / f"{name}.yaml"), "--output-dir", str(out)] for name in bad]
    runs.append(["train", "--config", str(config), "--output-dir", f"{BLOCK}/o"])
    runs.append(["train", "--config", str(config), "--output-dir", str(busy)])
    done = tmp_path / "done"
    done.mkdir()
    (done / "results.json").write_text("{}", encoding="utf-8")
    runs.append(["train", "--config", str(config), "--output-dir", str(done)])
    runs.append(["train", "--config", str(config), "--output-dir", str(out), "--check"])
    code = (
        "import contextlib, fcntl, io, json, os, sys\nfrom protoembed.cli import main\nout = []\n"
        f"os.makedirs({str(busy)!r})\n"
        f"held = os.open({str(busy / '.protoembed.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(held, fcntl.LOCK_EX)  # another run's lock (flock: per open file)\n"
        f"for argv in {runs!r}:\n"
        "    err, said = io.StringIO(), io.StringIO()\n"
        "    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(said):\n"
        "        try:\n            status = main(argv)\n"
        "        except SystemExit as exit_:\n            status = exit_.code\n"
        "    out.append([status, err.getvalue(), said.getvalue()])\n"
        "heavy = [m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules]\n"
        "print(json.dumps({'runs': out, 'imported': heavy}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    report = json.loads(proc.stdout)
    assert report["imported"] == []
    needles = [
        "unknown config key 'training.bacth_size'",
        "objective 'simcse': unknown option 'tau'",
        "base file 'missing.yaml' not found",
        f"model '{tmp_path / 'no-model'}': no such directory, and not a Hugging Face hub id",
        f"{rows}:2: expected a JSON object",
        f"max_seq_length 100000 is above the position limit of base model {tiny_model_dirs['bert']}: 128 "
        f"(max_position_embeddings in {tiny_model_dirs['bert'] / 'config.json'})",
        "not writable",
        f"{busy} is in use by another training run (another process); wait for it to end or choose another "
        "--output-dir",
        f"{done} already holds a training run; pass --resume",
    ]
    *refused, (status, err, said) = report["runs"]
    for (status_, err_, _), needle in zip(refused, needles, strict=True):
        assert_failed_in_one_line((status_, err_), needle)
    assert (status, err) == (0, "")
    assert said.splitlines() == [
        f"protoembed train --check: {line}"
        for line in (
            f"config {config}: valid (run: simcse)",
            f"output folder {out}: writable; a new run",
            "3 file(s) the run reads are present",
            f"base model {tiny_model_dirs['bert']}: found ({tiny_model_dirs['bert']})",
            f"{tmp_path / 'corpus.txt'}: text, the first 32 example(s) parse (columns text)",
            "model selection on STSBenchmark (dev split): its files read",
            "test set STSBenchmark (test split): its files read",
            f"output folder {out}: not in use by another run (its lock taken)",
            "training.precision fp32: runs on any machine",
            "all checks passed; nothing trained",
        )
    ]
    assert not out.exists()  # no refused run, nor the check, leaves its folder (or a lone lock file)
    assert [p.name for p in busy.iterdir()] == [".protoembed.lock"]  # the other run's folder is untouched
    assert [p.name for p in done.iterdir()] == ["results.json"]


def test_torch_and_safetensors_write_errors_are_read_as_a_full_disk(tmp_path, monkeypatch):
    """torch's zip writer and safetensors raise no OSError on a full disk: :func:`write_failure` still
    reads them as one. Simulated (runs everywhere): their messages, with statvfs saying 0 bytes are free.
    (On a real full tmpfs: the next test.)"""
    from protoembed.outputs.io import write_failure

    monkeypatch.setattr(os, "statvfs", lambda path: os.statvfs_result((4096, 4096, 1, 0, 0, 1, 0, 0, 0, 255)))
    torch_error = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")
    safetensors_error = RuntimeError(
        "Error while serializing: I/O error: No space left on device (os error 28)"
    )
    reasons = [write_failure(err, tmp_path) for err in (torch_error, safetensors_error)]
    assert reasons == ["No space left on device"] * 2
    assert write_failure(RuntimeError("shapes do not match"), tmp_path) is None


def test_torch_and_safetensors_write_errors_on_a_real_full_disk(tmp_path):
    """Real: what torch.save and safetensors raise on a full 1 MB tmpfs is read as a full disk. Skipped,
    saying so, where no tmpfs can be mounted."""
    import gc

    from safetensors.torch import save_file

    from protoembed.outputs.io import write_failure

    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "1m"):
        pytest.skip(_no_tmpfs_reason())
    weights = {"w": torch.zeros(1000)}
    try:
        _fill(disk)
        reasons = []
        for save in (lambda: torch.save(weights, disk / "a.pt"), lambda: save_file(weights, disk / "a.st")):
            with pytest.raises(Exception) as raised:  # whatever the library raises
                save()
            reasons.append(write_failure(raised.value, disk))
            del raised
        assert reasons == ["No space left on device"] * 2
        assert write_failure(RuntimeError("shapes do not match"), disk) is None
    finally:
        gc.collect()  # the failed writers' open files
        subprocess.run(["umount", str(disk)], check=True)
