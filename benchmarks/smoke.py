"""Every benchmark's ``--smoke`` mode: a few sentences or steps on a tiny random model, so that a test can
run each script end to end (to its ``ratio=`` line) in seconds and a script that drifted from the library
fails there (tests/test_benchmarks_smoke.py). A smoke run measures nothing: its figures are not results.

The tiny model is the tests' (tests/tiny_models.py: a 2-layer, 32-wide BERT with a WordPiece tokenizer
trained on a few sentences), built once per process into a temporary folder, or read from
``$PROTOEMBED_BENCH_TINY_MODEL`` when that names a folder (the smoke tests build it once for all scripts).
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
from functools import cache
from pathlib import Path

HELP = "a few sentences or steps on a tiny random model: checks that the script runs, measures nothing"
#: Set (to 1) in a smoke run's environment, so that the processes a benchmark starts run small too.
SMOKE_ENV = "PROTOEMBED_BENCH_SMOKE"
#: A model folder that stands for the default model (see :func:`model_dir`).
DEFAULT_MODEL_ENV = "PROTOEMBED_BENCH_DEFAULT_MODEL"
#: The environment variable naming a tiny model folder built beforehand.
TINY_MODEL_ENV = "PROTOEMBED_BENCH_TINY_MODEL"
SMOKE_NOTE = (
    "smoke run (--smoke): a few inputs, a tiny random model where one is loaded; the figures mean nothing"
)


def add_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--smoke`` to a benchmark's parser."""
    parser.add_argument("--smoke", action="store_true", help=HELP)


def enable(announce: bool = True) -> None:
    """Make this process and the processes it starts smoke runs (``$PROTOEMBED_BENCH_SMOKE``); print
    :data:`SMOKE_NOTE` when ``announce``."""
    os.environ[SMOKE_ENV] = "1"
    if announce:
        print(SMOKE_NOTE, flush=True)


def active() -> bool:
    """Whether this is a smoke run (:func:`enable` here or in the process that started this one)."""
    return os.environ.get(SMOKE_ENV) == "1"


def build_tiny_model(path: Path) -> Path:
    """The tests' tiny random BERT (tests/tiny_models.py), loaded with protoembed's default mean head and
    saved into ``path`` as a sentence-transformers folder (what the default model's folder is: modules.json,
    sentence_bert_config.json, ...), so that both libraries read it as they read the default model."""
    tests = str(Path(__file__).resolve().parents[1] / "tests")
    if tests not in sys.path:
        sys.path.append(tests)
    import protoembed
    from tiny_models import build_tiny_model as build

    backbone = build("bert", path.with_name(path.name + "-backbone"))
    return Path(protoembed.load(str(backbone), device="cpu").save(path))


@cache
def tiny_model() -> Path:
    """The tiny model's folder: ``$PROTOEMBED_BENCH_TINY_MODEL``, else one built now (removed at exit, and
    named in the environment for the processes this one starts)."""
    given = os.environ.get(TINY_MODEL_ENV)
    if given and (Path(given) / "config.json").is_file():
        return Path(given)
    folder = Path(tempfile.mkdtemp(prefix="protoembed-bench-tiny-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    built = build_tiny_model(folder / "model")
    os.environ[TINY_MODEL_ENV] = str(built)
    return built


def model_dir() -> str:
    """The folder of the model a benchmark measures as "the default model": the tiny one's in a smoke run,
    else ``$PROTOEMBED_BENCH_DEFAULT_MODEL`` where set (benchmarks/gpu_check.sh sets it to a folder of the
    default model's shape, random weights where the model's package is not installed), else the installed
    default backbone's."""
    if active():
        return str(tiny_model())
    if os.environ.get(DEFAULT_MODEL_ENV):
        return os.environ[DEFAULT_MODEL_ENV]
    from protoembed.model.backbones import default_model_path

    return str(default_model_path())


def model_name() -> str:
    """What ``protoembed.load`` (and the CLI's ``--model``) takes for that model: ``"default"``, or the
    folder :func:`model_dir` names when it is not the installed one."""
    return model_dir() if active() or os.environ.get(DEFAULT_MODEL_ENV) else "default"
