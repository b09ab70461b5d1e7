"""The runtime registry: a new runtime is one module (``tests/toy_runtime.py``) plus one entry, and then
``protoembed.load``, ``LazyEncoder``, the CLI's ``--runtime`` (choices, help, errors) and the precision
rule all know it; the registry's own checks; the ``auto`` rule is unchanged by a new entry."""

from __future__ import annotations

import math

import numpy as np
import pytest

import protoembed
from protoembed.cli import main
from protoembed.core.errors import ProtoembedError
from protoembed.evaluation.encoders import LazyEncoder
from protoembed.model import precision as precision_module
from protoembed.model.export import export_embedder
from protoembed.model.runtimes import (
    RUNTIMES,
    RuntimeSpec,
    check_runtime,
    export_formats,
    register_runtime,
    runtime_choices,
)
from toy_runtime import RecordingEmbedder

SENTENCES = [
    "a man is playing a guitar .",
    "hello",
    "two dogs are running through a field of grass while the cat sat on the mat .",
    "stocks fell sharply after the report on monday .",
]

#: The toy runtime's one registry entry (its code: ``tests/toy_runtime.py``).
TOY = RuntimeSpec(
    "toy",
    label="Toy recorder",
    description="ONNX Runtime, recording every batch (a test's runtime)",
    library_name="onnx",
    reads=("onnx",),
    loader="toy_runtime:load_recording",
    extra="onnx",
    requires=("onnxruntime",),
)


@pytest.fixture
def toy():
    """The toy runtime, registered for one test."""
    spec = register_runtime(TOY)
    yield spec
    del RUNTIMES[spec.name]


@pytest.fixture(scope="module")
def mean_model(tiny_model_dirs):
    return protoembed.load(str(tiny_model_dirs["bert"]), head="mean", max_seq_length=12, device="cpu")


@pytest.fixture(scope="module")
def onnx_folder(mean_model, tmp_path_factory):
    return export_embedder(mean_model, tmp_path_factory.mktemp("onnx") / "mean")


def test_a_registered_runtime_loads_and_encodes_as_the_one_it_wraps(toy, mean_model, onnx_folder):
    model = protoembed.load(str(onnx_folder), runtime="toy")
    assert isinstance(model, RecordingEmbedder) and model.runtime == "toy" and model.precision == "fp32"
    vectors = model.encode(SENTENCES, batch_size=2)
    by_onnx = protoembed.load(str(onnx_folder), runtime="onnx").encode(SENTENCES, batch_size=2)
    np.testing.assert_array_equal(vectors, by_onnx)  # the same graph, the same session settings
    np.testing.assert_allclose(vectors, mean_model.encode(SENTENCES, batch_size=2), atol=1e-5)
    # every row went through the toy: 4 distinct sentences in batches of 2
    assert len(model.calls) == math.ceil(len(SENTENCES) / 2)
    assert sum(rows for rows, _ in model.calls) == len(SENTENCES)


def test_a_torch_model_runs_on_it_through_the_cached_export(toy, mean_model, tmp_path, monkeypatch):
    monkeypatch.setenv("PROTOEMBED_CACHE", str(tmp_path / "cache"))
    saved = mean_model.save(tmp_path / "saved")
    model = protoembed.load(str(saved), runtime="toy")
    assert isinstance(model, RecordingEmbedder) and model.root.parent == tmp_path / "cache" / "onnx"
    by_onnx = protoembed.load(str(saved), runtime="onnx")
    assert by_onnx.root == model.root  # one cached export for both
    np.testing.assert_array_equal(model.encode(SENTENCES), by_onnx.encode(SENTENCES))
    # LazyEncoder moves a loaded torch model there too; its store is keyed by the runtime's name
    encode = LazyEncoder(lambda: mean_model, runtime="toy", cache_embeddings=True)
    np.testing.assert_array_equal(encode(SENTENCES), by_onnx.encode(SENTENCES))
    assert encode.model.runtime == "toy" and encode.store.folder.name.endswith("-toy-fp32")


def test_its_precision_rule_and_auto_come_from_the_entries(toy, onnx_folder, monkeypatch):
    with pytest.raises(
        ProtoembedError, match=r"Toy recorder runs this export in fp32; for bf16 use --runtime openvino"
    ):
        protoembed.load(str(onnx_folder), runtime="toy", precision="bf16")
    with pytest.raises(ProtoembedError, match="no torch weights; use --runtime onnx, openvino, toy or auto"):
        protoembed.load(str(onnx_folder), runtime="torch")
    # priority 0, below ONNX Runtime's: auto never picks it
    monkeypatch.setattr(precision_module, "cpu_flags", lambda: frozenset({"avx2"}))
    assert protoembed.load(str(onnx_folder)).runtime == "onnx"


def test_the_cli_lists_it_and_runs_it(toy, onnx_folder, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["encode", "--help"])
    help_text = capsys.readouterr().out
    assert "toy" in help_text.split("--runtime", 1)[1] and TOY.description in " ".join(help_text.split())
    text = tmp_path / "in.txt"
    text.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    out = tmp_path / "v.npy"
    argv = ["encode", str(text), "-o", str(out), "--model", str(onnx_folder), "--no-progress"]
    assert main([*argv, "--runtime", "toy"]) == 0
    expected = protoembed.load(str(onnx_folder), runtime="onnx").encode(SENTENCES)
    np.testing.assert_array_equal(np.load(out), expected)
    # an unknown runtime: argparse's usage, then one error line listing every runtime, the toy included
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--runtime", "tf"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit_.value.code == 2 and "--runtime" in last and "'tf'" in last
    assert all(f"'{name}'" in last for name in ("auto", "torch", "onnx", "openvino", "toy"))
    with pytest.raises(
        ProtoembedError, match="unknown runtime 'tf': expected one of auto, torch, onnx, openvino, toy"
    ):
        check_runtime("tf")


def test_the_registry_refuses_clashes_and_forgets_an_unregistered_runtime(onnx_folder):
    assert "toy" not in runtime_choices()  # the fixture took it out again
    with pytest.raises(ProtoembedError, match=r"runtime 'onnx' is already registered; .* replace=True"):
        register_runtime(RUNTIMES["onnx"])
    onnx = RUNTIMES["onnx"]
    assert register_runtime(onnx, replace=True) is onnx  # replaced in place, its format's writer itself
    assert list(RUNTIMES) == ["torch", "onnx", "openvino"]
    with pytest.raises(ProtoembedError, match="runtime 'auto' is reserved"):
        register_runtime(RuntimeSpec("auto", label="A", description="", library_name="x"))
    writer = RuntimeSpec(
        "onnx2", label="B", description="", library_name="x", format="onnx", writer="m:f", loader="m:f"
    )
    with pytest.raises(ProtoembedError, match="export format 'onnx' already has a writer"):
        register_runtime(writer)
    assert "onnx2" not in RUNTIMES and list(export_formats()) == ["onnx", "openvino"]
    # an entry that opens nothing is refused, never run as torch
    loaderless = RuntimeSpec("fast", label="F", description="", library_name="x", reads=("onnx",))
    with pytest.raises(ProtoembedError, match="runtime 'fast' has no loader: a runtime opens export folders"):
        register_runtime(loaderless)
    assert "fast" not in RUNTIMES
    with pytest.raises(
        ProtoembedError, match="an export has no torch weights; use --runtime onnx, openvino or auto"
    ):
        protoembed.load(str(onnx_folder), runtime="torch")
