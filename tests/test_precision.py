"""bf16 encoding: the forward under bf16 autocast, pooling and normalisation in fp32, fp32 vectors out."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import protoembed
from cpu_kinds import CPU_KINDS, NATIVE_BF16, simulate
from protoembed.cli import main
from protoembed.core.errors import ProtoembedError
from protoembed.model.export import export_embedder
from protoembed.model.precision import CPU_FEATURES, CPU_FLAGS_ENV, cpu_features, host_cpu_flags, native_bf16

SENTENCES = ["a man is playing a guitar .", "the quick brown fox jumps over the lazy dog .", "hello"]


def by_hand(model, sentences: list[str]) -> np.ndarray:
    """The bf16 path computed here one sentence at a time: autocast backbone, fp32 pooling + L2."""
    rows = []
    for sentence in sentences:
        features = model.features([sentence])
        with torch.inference_mode():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = model.encoder(features)
            out = {
                k: v.float() if torch.is_tensor(v) and v.is_floating_point() else v for k, v in out.items()
            }
            vector = model.pooler(out)["sentence_embedding"].float()
            rows.append(torch.nn.functional.normalize(vector, dim=-1)[0].numpy())
    return np.stack(rows)


@pytest.mark.parametrize("head", ["mean", "mask"])
def test_bf16_encode_is_the_autocast_forward_with_fp32_pooling(tiny_model_dirs, head):
    model = protoembed.load(str(tiny_model_dirs["bert"]), head=head, normalize=True, precision="bf16")
    assert model.precision == "bf16"
    vectors = model.encode(SENTENCES, batch_size=1)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, by_hand(model, SENTENCES), atol=1e-6)
    fp32 = model.encode(SENTENCES, batch_size=1, precision="fp32")
    assert model.precision == "bf16"  # the per-call precision does not stick
    difference = np.abs(vectors - fp32).max()
    assert 0 < difference < 5e-2  # bf16 really ran, and stays close to fp32
    np.testing.assert_array_equal(
        fp32,
        protoembed.load(str(tiny_model_dirs["bert"]), head=head, normalize=True).encode(
            SENTENCES, batch_size=1
        ),
    )


def test_bad_precision_and_bf16_on_an_export_are_errors(tiny_model_dirs, tmp_path):
    with pytest.raises(ProtoembedError, match="unknown precision 'fp8'"):
        protoembed.load(str(tiny_model_dirs["bert"]), precision="fp8")
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean")
    with pytest.raises(ProtoembedError, match="unknown precision 'half'"):
        model.encode(SENTENCES, precision="half")
    out = export_embedder(model, tmp_path / "out")
    with pytest.raises(
        ProtoembedError, match=r"ONNX Runtime runs this export in fp32; for bf16 use --runtime openvino"
    ):
        protoembed.load(str(out), precision="bf16", runtime="onnx")
    assert protoembed.load(str(out), precision="fp32", runtime="onnx").precision == "fp32"
    calibration = [
        f"calibration sentence {i} : the {w} sat on the mat ." for i in range(8) for w in ("cat", "dog")
    ]
    int8 = export_embedder(model, tmp_path / "int8", quantize="int8", calibration=calibration)
    for runtime in ("onnx", "openvino", "auto"):
        with pytest.raises(ProtoembedError, match=r"exported in int8; it cannot run in bf16"):
            protoembed.load(str(int8), precision="bf16", runtime=runtime)


def test_cli_bf16_on_an_export_is_one_line(tiny_model_dirs, tmp_path, capsys):
    out = export_embedder(protoembed.load(str(tiny_model_dirs["bert"]), head="mean"), tmp_path / "out")
    text = tmp_path / "in.txt"
    text.write_text("hello\n")
    code = main(
        [
            "encode",
            str(text),
            "--model",
            str(out),
            "--precision",
            "bf16",
            "--runtime",
            "onnx",
            "-o",
            str(tmp_path / "v.npy"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "bf16" in err
    assert not (tmp_path / "v.npy").exists()


def test_cpu_features_read_proc_cpuinfo_unless_a_cpu_is_simulated(monkeypatch):
    with open("/proc/cpuinfo") as handle:
        line = next(line for line in handle if line.startswith("flags"))
    flags = line.split(":", 1)[1].split()
    assert host_cpu_flags() == frozenset(flags)
    monkeypatch.delenv(CPU_FLAGS_ENV)
    assert cpu_features() == {name: name in flags for name in CPU_FEATURES}
    for kind, kind_flags in CPU_KINDS.items():
        simulate(monkeypatch, kind)
        assert cpu_features() == {name: name in kind_flags for name in CPU_FEATURES}
        assert native_bf16("cpu") == (kind in NATIVE_BF16)
    monkeypatch.setenv(CPU_FLAGS_ENV, "avx2,avx512_bf16")  # commas too
    assert cpu_features()["avx512_bf16"] and not cpu_features()["amx_bf16"]


@pytest.mark.parametrize("kind", CPU_KINDS)
def test_bf16_is_native_or_emulated_as_the_cpu_kind_says(kind, monkeypatch):
    """The training check's answer for bf16 follows the (simulated) CPU kind: native on AVX512-BF16 and AMX,
    emulated (and said so) on the others."""
    from protoembed.training.mixed_precision import check_precision_here

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    simulate(monkeypatch, kind)
    answer = check_precision_here("bf16")
    if kind in NATIVE_BF16:
        assert answer == "bf16 on the CPU (native bf16)"
    else:
        assert answer == "bf16 on the CPU, emulated (no AVX512-BF16 / AMX): several times slower than fp32"
