"""OpenVINO: ``--format openvino`` exports equal their torch model in fp32, NNCF int8, the ``auto`` rule,
the runtime switch of a torch model and an ONNX folder, the results' protocol, bad input."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys

import numpy as np
import pytest

import protoembed
from cpu_kinds import CPU_KINDS, NATIVE_BF16, simulate
from export_inputs import CALIBRATION, LONG, SENTENCES
from protoembed.cli import main
from protoembed.core.errors import ProtoembedError
from protoembed.evaluation.encoders import LazyEncoder
from protoembed.model import precision as precision_module
from protoembed.model.export import EXPORT_CONFIG, OnnxEmbedder, export_embedder
from protoembed.model.export import openvino as openvino_module
from protoembed.model.export.openvino import IR_FILE, OpenVinoEmbedder, inference_precision_here
from protoembed.model.model_card import write_model_card
from protoembed.model.runtimes import auto_runtime


def _one_line_cli_error(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("protoembed: error:") and "\n" not in err
    return err


@pytest.fixture(scope="module")
def mean_model(tiny_model_dirs):
    return protoembed.load(str(tiny_model_dirs["bert"]), head="mean", max_seq_length=12, normalize=True)


@pytest.fixture(scope="module")
def openvino_mean(mean_model, tmp_path_factory):
    """The fp32 OpenVINO export of the tiny BERT with the mean head."""
    return export_embedder(mean_model, tmp_path_factory.mktemp("ov") / "mean", format="openvino")


@pytest.mark.parametrize("head", ["mean", "cls", "mask", "soft_prompt", "cnn"])
def test_fp32_openvino_export_equals_torch(tiny_model_dirs, tmp_path, head):
    model = protoembed.load(str(tiny_model_dirs["bert"]), head=head, max_seq_length=12)
    out = export_embedder(model, tmp_path / head, format="openvino")
    config = json.loads((out / EXPORT_CONFIG).read_text(encoding="utf-8"))
    assert config["format"] == "openvino" and config["graph"] == IR_FILE and config["format_version"] == 2
    assert not (out / "onnx").exists() and not (out / "traced").exists()
    sizes = {name: (out / name).stat().st_size for name in (IR_FILE, IR_FILE[:-4] + ".bin")}
    assert config["files"] == sizes
    assert config["inference_precision"] == inference_precision_here()
    reloaded = protoembed.load(str(out), precision="fp32")
    assert isinstance(reloaded, OpenVinoEmbedder) and (reloaded.runtime, reloaded.precision) == (
        "openvino",
        "fp32",
    )
    for batch_size in (2, 5):
        np.testing.assert_allclose(
            reloaded.encode(SENTENCES, batch_size=batch_size),
            model.encode(SENTENCES, batch_size=batch_size),
            atol=1e-5,
        )
    np.testing.assert_allclose(reloaded.encode(LONG), model.encode(LONG), atol=1e-5)


def test_an_openvino_exports_card_says_openvino(openvino_mean, mean_model, tmp_path, monkeypatch):
    """The card of an export names the registry entry that wrote it: OpenVINO's label and library_name,
    not ONNX's (an ONNX export of the same model says ONNX); and the runtime and precision the folder runs
    in where it was written: on a CPU with native bf16 OpenVINO runs the fp32 graph in bf16, and an fp32
    ONNX folder is run by OpenVINO too (``--runtime auto``)."""
    card = (openvino_mean / "README.md").read_text(encoding="utf-8")
    header = card.split("---\n")[1].splitlines()
    assert "library_name: openvino" in header
    assert f"| OpenVINO export | fp32 weights, dimension {mean_model.dimension} |" in card.splitlines()
    runs = "| runs on | {} in {} under --runtime auto where it was written{} |"
    assert runs.format("OpenVINO", "fp32", "") in card.splitlines()  # the suite's CPU: AVX2 only
    assert "ONNX" not in card and "onnx" not in card
    onnx_folder = export_embedder(mean_model, tmp_path / "onnx")
    onnx_card = (onnx_folder / "README.md").read_text(encoding="utf-8")
    assert "library_name: onnx" in onnx_card.split("---\n")[1].splitlines()
    assert f"| ONNX export | fp32 weights, dimension {mean_model.dimension} |" in onnx_card.splitlines()
    assert runs.format("ONNX Runtime", "fp32", "") in onnx_card.splitlines()
    assert "OpenVINO" not in onnx_card
    simulate(monkeypatch, "amx")
    for folder, row in (
        (openvino_mean, runs.format("OpenVINO", "bf16", " (--precision fp32: OpenVINO in fp32)")),
        (onnx_folder, runs.format("OpenVINO", "bf16", " (--runtime onnx: ONNX Runtime in fp32)")),
    ):
        copy = shutil.copytree(folder, tmp_path / f"amx-{folder.name}")
        write_model_card(copy)
        assert row in (copy / "README.md").read_text(encoding="utf-8").splitlines()


def host_runs(asked: str) -> str:
    """The precision OpenVINO's CPU plugin runs when ``asked`` is: bf16 only where the host's CPU (not the
    one the suite simulates) has native bf16 (AVX512-BF16 or AMX), f32 otherwise; OpenVINO's own rule."""
    native = {"avx512_bf16", "amx_bf16"} & precision_module.host_cpu_flags()
    return asked if asked != "bf16" or native else "fp32"


@pytest.mark.parametrize("kind", CPU_KINDS)
def test_openvino_default_precision_follows_the_cpu_kind(kind, monkeypatch):
    """Without a precision, bf16 is asked of OpenVINO where the CPU has native bf16 (else f32): the choice
    follows protoembed's (simulated) flags, not the host's."""
    simulate(monkeypatch, kind)
    expected = "bf16" if kind in NATIVE_BF16 else "f32"
    assert openvino_module.compile_config(None, None)["INFERENCE_PRECISION_HINT"] == expected
    assert openvino_module.inference_precision_here() == ("bf16" if kind in NATIVE_BF16 else "fp32")
    assert openvino_module.compile_config(None, "fp32")["INFERENCE_PRECISION_HINT"] == "f32"


def test_openvino_default_precision_is_the_cpus_own(openvino_mean, mean_model):
    """Loaded without a precision, OpenVINO runs what :func:`inference_precision_here` asks (fp32 on the
    suite's simulated CPU, whatever the host); bf16, when asked, runs where the host's CPU has native bf16
    (OpenVINO's own rule, else f32); bf16 vectors stay within bf16 rounding of fp32 (cosine above 0.999
    on every sentence)."""
    model = protoembed.load(str(openvino_mean))
    assert model.precision == openvino_module.inference_precision_here()
    asked = protoembed.load(str(openvino_mean), precision="bf16")
    assert asked.precision == host_runs("bf16")
    vectors, expected = asked.encode(SENTENCES), mean_model.encode(SENTENCES)
    cosines = (
        (vectors * expected).sum(axis=1) / np.linalg.norm(vectors, axis=1) / np.linalg.norm(expected, axis=1)
    )
    assert cosines.min() > 0.999


def test_openvino_runs_an_onnx_folder_and_a_torch_model(mean_model, tmp_path, monkeypatch):
    monkeypatch.setenv("PROTOEMBED_CACHE", str(tmp_path / "cache"))
    onnx_folder = export_embedder(mean_model, tmp_path / "onnx")
    by_ort = protoembed.load(str(onnx_folder), runtime="onnx")
    by_openvino = protoembed.load(str(onnx_folder), runtime="openvino", precision="fp32")
    assert isinstance(by_ort, OnnxEmbedder) and isinstance(by_openvino, OpenVinoEmbedder)
    np.testing.assert_allclose(by_openvino.encode(SENTENCES), by_ort.encode(SENTENCES), atol=1e-5)
    # a torch folder on OpenVINO: its fp32 ONNX export, made once in the cache
    saved = mean_model.save(tmp_path / "saved")
    cached = protoembed.load(str(saved), runtime="openvino", precision="fp32")
    assert isinstance(cached, OpenVinoEmbedder) and cached.root.parent == tmp_path / "cache" / "onnx"
    np.testing.assert_allclose(cached.encode(SENTENCES), mean_model.encode(SENTENCES), atol=1e-5)
    # LazyEncoder switches a loaded torch model the same way; its store is keyed by runtime and precision
    encode = LazyEncoder(lambda: protoembed.load(str(saved)), runtime="openvino", cache_embeddings=True)
    encode(SENTENCES[:2])
    assert encode.model.runtime == "openvino"
    assert encode.store.folder.name.endswith(f"-openvino-{encode.model.precision}")


def test_auto_rule_follows_the_cpu(openvino_mean, mean_model, tmp_path, monkeypatch):
    onnx_folder = export_embedder(mean_model, tmp_path / "onnx")
    int8_folder = export_embedder(mean_model, tmp_path / "int8", quantize="int8", calibration=CALIBRATION)
    configs = {
        name: json.loads((folder / EXPORT_CONFIG).read_text(encoding="utf-8"))
        for name, folder in (("ov", openvino_mean), ("onnx", onnx_folder), ("int8", int8_folder))
    }
    for flags, fp32_onnx in (
        (("avx2",), "onnx"),
        (("avx2", "avx512_bf16"), "openvino"),
        (("amx_bf16",), "openvino"),
    ):
        monkeypatch.setattr(precision_module, "cpu_flags", lambda flags=flags: frozenset(flags))
        assert auto_runtime(configs["onnx"]) == fp32_onnx
        assert auto_runtime(configs["int8"]) == "onnx"
        assert auto_runtime(configs["ov"]) == "openvino"
    monkeypatch.setitem(sys.modules, "openvino", None)  # not installed: its import fails
    assert auto_runtime(configs["onnx"]) == "onnx"
    monkeypatch.undo()
    monkeypatch.setattr(precision_module, "cpu_flags", lambda: frozenset({"avx2"}))
    assert protoembed.load(str(onnx_folder)).runtime == "onnx"  # auto is load's default


def test_int8_openvino_export_is_quantised_and_close(mean_model, tmp_path, capfd):
    """Stdout holds the command's one line only (OpenVINO's converter and NNCF's bars, printed on file
    descriptor 1, go to the DEBUG log); --verbose adds no second line about the folder; 16 distinct
    sentences (one batch) calibrate with a WARNING naming the file."""
    calibration = tmp_path / "calibration.txt"
    calibration.write_text("\n".join(CALIBRATION) + "\n", encoding="utf-8")
    saved = mean_model.save(tmp_path / "saved")
    argv = ["export", str(saved), "-o", str(tmp_path / "int8"), "--format", "openvino", "--quantize", "int8"]
    assert main(["--verbose", *argv, "--calibration", str(calibration)]) == 0
    captured = capfd.readouterr()
    assert captured.out == (
        f"wrote {tmp_path / 'int8'}: mean head, openvino, int8, dimension 32; runs on OpenVINO in int8 under "
        "--runtime auto here\n"
    )
    err = captured.err.splitlines()  # (and the tiny model's max_seq_length 12 truncates, said below)
    assert err[0] == (
        f"protoembed: {calibration}: 16 distinct non-blank sentences in 16 lines: int8 calibration on 1 batch "
        "instead of 32 (512 distinct sentences wanted); the int8 scales may be off"
    )
    assert all("truncated" in line for line in err[1:]) and str(tmp_path / "int8") not in captured.err
    out = tmp_path / "int8"
    ir = (out / IR_FILE).read_text(encoding="utf-8")
    assert ir.count('type="FakeQuantize"') + ir.count('element_type="i8"') > 0  # quantised layers in the IR
    model = protoembed.load(str(out))
    assert model.precision == "int8" and json.loads((out / EXPORT_CONFIG).read_text())["quantize"] == "int8"
    card = (out / "README.md").read_text().splitlines()
    assert f"| OpenVINO export | int8 weights, dimension {mean_model.dimension} |" in card
    assert "| runs on | OpenVINO in int8 under --runtime auto where it was written |" in card
    vectors, expected = model.encode(SENTENCES), mean_model.encode(SENTENCES)
    cosines = (vectors * expected).sum(axis=1)  # both normalised
    assert cosines.min() > 0.9
    with pytest.raises(ProtoembedError, match="exported in int8"):
        protoembed.load(str(out), precision="bf16")


def test_int8_openvino_vectors_do_not_depend_on_the_batch(mean_model, tmp_path):
    """NNCF's scales are fixed: a text alone, among 64 others (padding) and in another order, one vector."""
    from tiny_models import CORPUS

    out = export_embedder(
        mean_model, tmp_path / "ov8", format="openvino", quantize="int8", calibration=CALIBRATION
    )
    int8 = protoembed.load(str(out))
    others = [f"{CORPUS[i % 11]} {CORPUS[(7 * i) % 11]}"[: 10 + 3 * i] for i in range(64)]
    text = "a man is playing a guitar ."
    alone = int8.encode([text])[0]
    np.testing.assert_allclose(int8.encode([*others, text], batch_size=65)[-1], alone, rtol=0, atol=1e-6)
    np.testing.assert_allclose(int8.encode([text, *others[::-1]], batch_size=65)[0], alone, rtol=0, atol=1e-6)


def test_calibration_defaults_to_the_staged_wiki_sample(data_dir, caplog):
    from protoembed.model.export.openvino import CALIBRATION_BATCH, CALIBRATION_BATCHES, calibration_sentences

    sentences = calibration_sentences(None, data_dir)
    corpus = (data_dir / "unsup/wiki1m_sample/wiki1m_for_simcse.head-1280000B.txt").read_text(
        encoding="utf-8"
    )
    distinct = list(dict.fromkeys(line for line in corpus.splitlines() if line.strip()))
    assert sentences == distinct[: CALIBRATION_BATCH * CALIBRATION_BATCHES]
    assert not caplog.records  # a full 32 batches: nothing to say


def test_calibration_counts_distinct_sentences(tmp_path, caplog):
    """Repeats count once: 21 lines of 2 sentences are refused (one batch is 16), naming the file; 40
    distinct in 85 lines calibrate on 3 batches with a WARNING; a list is named as such."""
    from protoembed.model.export.openvino import calibration_sentences

    two = tmp_path / "two.txt"
    two.write_text(
        "\n".join(["a man is playing a guitar .", "the cat sat on the mat ."] * 10 + ["a man"]) + "\n"
    )
    with pytest.raises(ProtoembedError) as info:
        calibration_sentences(two)
    assert str(info.value) == (
        f"{two}: int8 calibration needs at least 16 distinct non-blank sentences (one batch); found 3 "
        "distinct non-blank sentences in 21 lines"
    )
    forty = [f"sentence number {i} about the cat ." for i in range(40)]
    many = tmp_path / "many.txt"
    many.write_text("\n".join([*forty, *(f" {s} " for s in forty), *[""] * 5]) + "\n")
    assert calibration_sentences(many) == forty
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"{many}: 40 distinct non-blank sentences in 85 lines: int8 calibration on 3 batches instead of 32 "
        "(512 distinct sentences wanted); the int8 scales may be off"
    ]
    with pytest.raises(ProtoembedError) as info:
        calibration_sentences(tmp_path / "none.txt")
    assert str(info.value) == (
        f"{tmp_path / 'none.txt'}: file not found; expected the int8 calibration sentences, one per line"
    )
    caplog.clear()
    assert calibration_sentences(forty * 2) == forty
    assert (
        caplog.records[0].getMessage().startswith("calibration texts: 40 distinct non-blank sentences in 80")
    )


def test_stdout_to_log_captures_native_and_python_writes(capfd, caplog):
    """What a converter writes to file descriptor 1 (native code) or sys.stdout (Python) is logged at
    DEBUG, line by line; nothing reaches stdout, and stdout works again afterwards."""
    from protoembed.model.export.quiet import stdout_to_log

    log = logging.getLogger("protoembed.test_quiet")
    caplog.set_level(logging.DEBUG, logger=log.name)
    with stdout_to_log(log, "tool"):
        os.write(1, b"native line\n\n")
        print("python line")
    print("after")
    assert capfd.readouterr().out == "after\n"
    assert sorted(r.getMessage() for r in caplog.records) == ["tool: native line", "tool: python line"]


def test_eval_records_the_openvino_runtime(openvino_mean, data_dir, tmp_path):
    out = tmp_path / "sts.json"
    argv = [
        "eval",
        "sts",
        "--model",
        str(openvino_mean),
        "--data-dir",
        str(data_dir),
        "--tasks",
        "SICKRelatedness",
    ]
    assert main([*argv, "--runtime", "openvino", "--precision", "fp32", "--output", str(out)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert (result["runtime"], result["precision"]) == ("openvino", "fp32")


def test_encode_cli_on_openvino_verbose(openvino_mean, tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    out = tmp_path / "v.npy"
    argv = ["encode", "--model", str(openvino_mean), str(text), "-o", str(out), "--precision", "fp32"]
    assert main([*argv, "--verbose"]) == 0
    assert "OpenVINO runs the openvino export in fp32" in capsys.readouterr().err
    expected = protoembed.load(str(openvino_mean), precision="fp32").encode(SENTENCES)
    np.testing.assert_array_equal(np.load(out), expected)


def test_bad_openvino_input(openvino_mean, mean_model, tmp_path, capsys, monkeypatch, tiny_model_dirs):
    import shutil

    # a missing or truncated .bin / .xml: one line naming the file
    for name, damage in (
        (IR_FILE[:-4] + ".bin", "delete"),
        (IR_FILE[:-4] + ".bin", "truncate"),
        (IR_FILE, "truncate"),
    ):
        broken = tmp_path / f"broken-{damage}-{name[-3:]}"
        shutil.copytree(openvino_mean, broken)
        file = broken / name
        if damage == "delete":
            file.unlink()
        else:
            file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])
        with pytest.raises(ProtoembedError) as info:
            protoembed.load(str(broken))
        message = str(info.value)
        assert str(file) in message and "\n" not in message
    # --format unknown, --calibration without an OpenVINO int8 export
    err = _one_line_cli_error(
        ["export", str(tiny_model_dirs["bert"]), "-o", str(tmp_path / "o"), "--format", "tflite"], capsys
    )
    assert "--format 'tflite'" in err and "onnx, openvino" in err
    err = _one_line_cli_error(
        [
            "export",
            str(tiny_model_dirs["bert"]),
            "-o",
            str(tmp_path / "o"),
            "--calibration",
            str(tmp_path / "c.txt"),
        ],
        capsys,
    )
    assert "--calibration" in err and not (tmp_path / "o").exists()
    # bf16 on ONNX Runtime, torch runtime on an export
    onnx_folder = export_embedder(mean_model, tmp_path / "onnx")
    text = tmp_path / "in.txt"
    text.write_text("hello\n", encoding="utf-8")
    argv = ["encode", str(text), "-o", str(tmp_path / "v.npy"), "--model", str(onnx_folder)]
    err = _one_line_cli_error([*argv, "--runtime", "onnx", "--precision", "bf16"], capsys)
    assert "ONNX Runtime runs this export in fp32" in err
    err = _one_line_cli_error([*argv, "--runtime", "torch"], capsys)
    assert "no torch weights" in err
    err = _one_line_cli_error(
        [
            "encode",
            str(text),
            "-o",
            str(tmp_path / "v.npy"),
            "--model",
            str(openvino_mean),
            "--runtime",
            "onnx",
        ],
        capsys,
    )
    assert "OpenVINO only" in err
    # the runtime without the optional package: the pip command
    monkeypatch.setitem(sys.modules, "openvino", None)
    err = _one_line_cli_error([*argv, "--runtime", "openvino"], capsys)
    assert "pip install 'protoembed[openvino]'" in err
    assert not (tmp_path / "v.npy").exists()


def test_nncf_log_lines_go_through_logging_not_stdout(monkeypatch, capfd, caplog):
    """During quantisation NNCF's logger (its own stdout handler) is routed through logging from WARNING
    up; its handler and settings come back afterwards."""
    import nncf

    from protoembed.model.export import openvino as ov_export

    nncf_logger = logging.getLogger("nncf")
    before = (nncf_logger.level, nncf_logger.propagate, list(nncf_logger.handlers))

    def quantize(model, *args, **kwargs):
        nncf_logger.info("an info line")
        nncf_logger.warning("a warning line")
        return model

    monkeypatch.setattr(nncf, "quantize", quantize)
    assert ov_export._quantize("model", []) == "model"
    assert capfd.readouterr().out == ""
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("nncf", "WARNING", "a warning line")
    ]
    assert (nncf_logger.level, nncf_logger.propagate, list(nncf_logger.handlers)) == before


@pytest.mark.parametrize("kind", CPU_KINDS)
def test_export_says_what_auto_runs_the_folder_on(kind, tiny_model_dirs, tmp_path, capsys, monkeypatch):
    """``protoembed export`` of an fp32 ONNX graph prints what ``--runtime auto`` runs it on here, and the
    runtime that keeps fp32 where that is another: OpenVINO in bf16 on a CPU with native bf16 (the folder
    then loads on OpenVINO, asked for bf16, which it runs where the host has it: :func:`host_runs`;
    ``--runtime onnx`` on ONNX Runtime in fp32), ONNX Runtime in fp32 elsewhere."""
    simulate(monkeypatch, kind)
    out = tmp_path / "onnx"
    assert main(["export", str(tiny_model_dirs["bert"]), "-o", str(out), "--head", "mean"]) == 0
    line = capsys.readouterr().out
    prefix = f"wrote {out}: mean head, onnx, fp32, dimension 32; runs on "
    if kind in NATIVE_BF16:
        assert line == prefix + (
            "OpenVINO in bf16 under --runtime auto here (--runtime onnx: ONNX Runtime in fp32)\n"
        )
        auto = protoembed.load(str(out))
        assert (auto.runtime, auto.precision) == ("openvino", host_runs("bf16"))
    else:
        assert line == prefix + "ONNX Runtime in fp32 under --runtime auto here\n"
        auto = protoembed.load(str(out))
        assert (auto.runtime, auto.precision) == ("onnx", "fp32")
    kept = protoembed.load(str(out), runtime="onnx")
    assert (kept.runtime, kept.precision) == ("onnx", "fp32")
