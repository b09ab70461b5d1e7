"""Shared fixtures: tiny random backbones (built once per session) and the benchmark data dir."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tiny_models import KINDS, build_tiny_model

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``{"bert": dir, "albert": dir, "roberta": dir}`` of tiny random Hugging Face models."""
    root = tmp_path_factory.mktemp("tiny")
    return {kind: build_tiny_model(kind, root / kind) for kind in KINDS}


@pytest.fixture(scope="session", params=KINDS)
def tiny_model_dir(request: pytest.FixtureRequest, tiny_model_dirs: dict[str, Path]) -> Path:
    """Each tiny backbone in turn."""
    return tiny_model_dirs[request.param]


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The benchmark data directory: ``$PROTOEMBED_DATA``, else ``<repo>/../shared/data``.

    Missing data is a failure, never a skip: the data tests are the point of the suite.
    """
    path = Path(
        os.environ.get("PROTOEMBED_DATA") or Path(__file__).resolve().parents[1].parent / "shared" / "data"
    )
    if not path.is_dir():
        pytest.fail(f"benchmark data directory {path} not found: set PROTOEMBED_DATA to the staged data")
    return path
