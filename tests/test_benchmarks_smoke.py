"""Every script in benchmarks/ runs: its ``--smoke`` mode (a few inputs, a tiny random model; benchmarks/smoke.py)
in a fresh interpreter, to its last line ``ratio=<number>``, so that a benchmark that drifted from the library
fails here. The peers that need a download (sentence-transformers' ONNX / OpenVINO side installs of
encode.py, Infinity's virtual environment of serve.py) are left out of the smoke runs; what keeps them
working is tested instead: their interpreter does not see the main environment's site-packages where that
breaks them."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SRC = BENCHMARKS.parent / "src"
#: benchmarks whose smoke run is another's: gpu_check.sh runs them (with --smoke), or a test of their own
COVERED = {"device_check.py": "gpu_check.sh", "gpu_encode.py": "gpu_check.sh", "feed_rate.py": "its own test"}
#: a benchmark is a script that prints a ``ratio=`` line; each is run here with ``--smoke``, plus these
ARGUMENTS = {
    "gpu_check.sh": ["--device", "cpu"],
    "memory.py": ["--device", "cpu"],
    "train_step.py": ["--device", "cpu"],
    "transfer.py": ["--outer-folds", "1"],
}
SMOKE = sorted(
    p.name
    for p in BENCHMARKS.iterdir()
    if p.suffix in (".py", ".sh") and '"ratio=' in p.read_text(encoding="utf-8") and p.name not in COVERED
)
RATIO = re.compile(r"ratio=(\d+(\.\d+)?)( |$)")


@pytest.fixture(scope="module")
def smoke_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a smoke run: this checkout's src first, offline, the tiny model built once."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))
        smoke = importlib.import_module("smoke")
        model = smoke.build_tiny_model(tmp_path_factory.mktemp("bench-tiny") / "model")
    path = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {
        **os.environ,
        "PYTHONPATH": path,
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHON": sys.executable,
        smoke.TINY_MODEL_ENV: str(model),
    }


def test_the_benchmarks_run_elsewhere_are_run_there() -> None:
    """The benchmarks left out above: gpu_check.sh calls them (and its smoke run passes --smoke on)."""
    called = (BENCHMARKS / "gpu_check.sh").read_text(encoding="utf-8")
    assert all(f" {name} " in called for name, by in COVERED.items() if by == "gpu_check.sh")
    assert {"encode.py", "serve.py", "transfer.py", "gpu_check.sh"} <= set(SMOKE)


@pytest.mark.parametrize("script", SMOKE)
def test_smoke_run_ends_with_its_ratio(
    script: str, smoke_env: dict[str, str], data_dir: Path, tmp_path: Path
):
    path = BENCHMARKS / script
    command = (["bash"] if path.suffix == ".sh" else [sys.executable]) + [str(path), "--smoke"]
    command += ARGUMENTS.get(script, [])
    env = {**smoke_env, "PROTOEMBED_DATA": str(data_dir)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0, done.stderr[-3000:]
    assert lines and RATIO.match(lines[-1]), done.stdout[-2000:]
    assert "smoke run (--smoke)" in done.stdout


def test_train_run_without_benchmark_data_says_so_in_one_line(smoke_env: dict[str, str], tmp_path: Path):
    missing = tmp_path / "no-data"
    env = {**smoke_env, "PROTOEMBED_DATA": str(missing)}
    command = [sys.executable, str(BENCHMARKS / "train_run.py"), "--smoke"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith(f"train_run: benchmark data directory {missing}")


# ------------------------------------------------------------------------- the peers' isolated interpreters
PROBE = """
import importlib.metadata, importlib.util, json, sys
import torch
print(json.dumps({
    "path": sys.path,
    "datasets": importlib.util.find_spec("datasets") is not None,
    "hub": importlib.metadata.version("huggingface-hub"),
    "torch": torch.__file__,
}))
"""


def _fake_side_install(folder: Path) -> Path:
    """A side install holding only huggingface-hub 0.36.0 (what ``make bench-env`` puts there, less the
    rest): every main-environment package that requires huggingface-hub must disappear from its view."""
    (folder / "huggingface_hub").mkdir(parents=True)
    (folder / "huggingface_hub" / "__init__.py").write_text('__version__ = "0.36.0"\n')
    info = folder / "huggingface_hub-0.36.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: huggingface-hub\nVersion: 0.36.0\n")
    (info / "RECORD").write_text("huggingface_hub/__init__.py,,\n")
    return folder


def test_encode_s_side_install_workers_do_not_see_the_main_site_packages(tmp_path: Path) -> None:
    """encode.py's sentence-transformers worker: ``python -S`` with the side install, then a view of the
    main site-packages less every distribution that depends on one the side install holds (datasets 5
    needs a newer huggingface-hub than the side's: it must not be importable there); torch still is."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))
        encode = importlib.import_module("encode")
        side = _fake_side_install(tmp_path / "st-onnx")
        args = argparse.Namespace(batch_size=8, data_dir=str(tmp_path), limit=None)
        command, env = encode.worker_process("onnx", side, "MODEL", args, str(tmp_path))
    assert command[:3] == [sys.executable, "-S", encode.__file__]
    assert command[3:8] == ["--worker", "onnx", str(tmp_path), "--model-dir", "MODEL"]
    done = subprocess.run([*command[:2], "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    view = tmp_path / "main-view-onnx"
    assert seen["path"][1:3] == [str(side.resolve()), str(view)]
    main = {str(Path(p).resolve()) for p in site.getsitepackages()}
    assert not main & {str(Path(p).resolve()) for p in seen["path"] if p and not p.startswith(str(view))}
    assert seen["datasets"] is False and seen["hub"] == "0.36.0"
    assert seen["torch"] == str(view / "torch" / "__init__.py")


def test_infinity_s_environment_does_not_see_the_main_site_packages(tmp_path: Path) -> None:
    """serve.py starts Infinity's processes in their own virtual environment with :func:`serve.side_env`:
    a ``PYTHONPATH`` naming the main site-packages does not reach them."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))
        serve = importlib.import_module("serve")
    venv.create(tmp_path / "infinity", with_pip=False)
    main = [str(Path(p).resolve()) for p in site.getsitepackages()]
    env = serve.side_env({**os.environ, "PYTHONPATH": os.pathsep.join(main)})
    python = tmp_path / "infinity" / "bin" / "python"
    code = "import json, sys; print(json.dumps(sys.path))"
    done = subprocess.run([str(python), "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    path = {str(Path(p).resolve()) for p in json.loads(done.stdout) if p}
    assert not path & set(main)
    assert env["PYTHONNOUSERSITE"] == "1" and env["HF_HUB_OFFLINE"] == "1"
