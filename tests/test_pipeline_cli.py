"""The encode pipeline's flags (``--tokenizer-workers``, ``--max-tokens-per-batch``) on ``encode``, every
``eval`` suite and ``serve``: checked when parsed or before the model loads (one line, exit 2), and
handed to ``encode``; ``--precision fp16`` refused off CUDA with training's wording."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import protoembed
from protoembed.cli import build_parser, main
from protoembed.commands.eval import lazy_encoder
from protoembed.evaluation.suite import SUITES
from protoembed.model import batching
from protoembed.training.mixed_precision import check_precision_here

SENTENCES = [
    "a man is playing a guitar .",
    "the cat sat .",
    "two dogs are running through a field of grass .",
]


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """``(exit code, stdout, stderr)`` of ``protoembed argv`` in this process."""
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's usage errors
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if not line.startswith(("usage:", " "))]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture()
def saved(tiny_model_dirs, tmp_path):
    """A saved tiny model whose max_seq_length is 24 (its sentence_bert_config.json says so)."""
    return protoembed.load(str(tiny_model_dirs["bert"]), head="mean", max_seq_length=24).save(tmp_path / "m")


@pytest.fixture()
def text_file(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("".join(s + "\n" for s in SENTENCES), encoding="utf-8")
    return path


@pytest.mark.parametrize("command", [["encode", "in.txt", "-o", "v.npy"], ["eval", "sts"], ["serve"]])
@pytest.mark.parametrize(("flag", "value"), [("--tokenizer-workers", "0"), ("--max-tokens-per-batch", "-3")])
def test_bad_values_are_one_line_when_parsed(command, flag, value, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli([*command, flag, value], capsys)
    assert code == 2
    assert one_line(err).endswith(f"argument {flag}: expected a positive integer, got '{value}'")


def test_a_budget_below_the_model_rows_is_refused_before_it_loads(
    saved, text_file, tmp_path, capsys, monkeypatch
):
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(protoembed, "load", refuse)
    argv = ["encode", str(text_file), "-o", str(tmp_path / "v.npy"), "--model", str(saved)]
    code, _, err = run_cli([*argv, "--max-tokens-per-batch", "20"], capsys)
    assert code == 2
    assert one_line(err) == (
        "protoembed: error: max_tokens_per_batch 20 is below the length of the longest row this model makes "
        "(24 tokens after truncation): a batch must hold one row; pass at least 24"
    )  # serve's words for the same rule (tests/test_serve_cli.py)
    code, _, err = run_cli([*argv, "--max-seq-length", "16", "--max-tokens-per-batch", "12"], capsys)
    assert "(16 tokens after truncation)" in one_line(err) and not (tmp_path / "v.npy").exists()
    code, _, err = run_cli(["eval", "sts", "--model", str(saved), "--max-tokens-per-batch", "8"], capsys)
    assert code == 2 and "max_tokens_per_batch 8 is below the length of the longest row" in one_line(err)


@pytest.mark.parametrize("output", ["v.npy", "shards"])
def test_the_flags_reach_encode_and_change_no_vector(output, saved, text_file, tmp_path, capsys, monkeypatch):
    seen: list[dict] = []
    encode = batching.BatchEncoder.encode

    def spy(self, *args, **kwargs):
        seen.append({k: kwargs.get(k) for k in ("tokenizer_workers", "max_tokens_per_batch")})
        return encode(self, *args, **kwargs)

    monkeypatch.setattr(batching.BatchEncoder, "encode", spy)
    out = tmp_path / output
    argv = ["encode", str(text_file), "-o", str(out), "--model", str(saved), "--tokenizer-workers", "2"]
    code, _, err = run_cli([*argv, "--max-tokens-per-batch", "48", "--no-progress"], capsys)
    assert code == 0, err
    assert seen == [{"tokenizer_workers": 2, "max_tokens_per_batch": 48}]
    vectors = np.load(out) if output.endswith(".npy") else np.load(out / "shard-00000.npy")
    np.testing.assert_allclose(vectors, protoembed.load(str(saved)).encode(SENTENCES), atol=1e-6)


def test_every_eval_suite_takes_the_flags(tiny_model_dirs):
    flags = [
        "--model",
        str(tiny_model_dirs["bert"]),
        "--tokenizer-workers",
        "3",
        "--max-tokens-per-batch",
        "512",
    ]
    for name in SUITES:
        args = build_parser().parse_args(["eval", name, *flags])
        assert lazy_encoder(args).pipeline == {"tokenizer_workers": 3, "max_tokens_per_batch": 512}, name


def test_serve_takes_the_flags_its_budget_is_max_batch_tokens():
    args = build_parser().parse_args(["serve", "--tokenizer-workers", "2", "--max-tokens-per-batch", "4096"])
    assert (args.tokenizer_workers, args.max_batch_tokens) == (2, 4096)
    args = build_parser().parse_args(["serve"])
    assert (args.tokenizer_workers, args.max_batch_tokens) == (None, 16384)


FP16 = "precision fp16 needs a CUDA GPU and this machine has none; use bf16 (CPU or CUDA) or fp32"


def test_fp16_off_cuda_is_refused_in_training_s_words(
    tiny_model_dirs, text_file, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean")
    with pytest.raises(protoembed.ProtoembedError, match=f"^{re.escape(FP16)}$"):
        model.encode(SENTENCES, precision="fp16")
    assert model.precision == "fp32"
    with pytest.raises(protoembed.ProtoembedError, match=f"^training.{re.escape(FP16)}$"):
        check_precision_here("fp16")  # the one rule, the one wording

    def refuse(*args, **kwargs):
        raise AssertionError("the weights were loaded")

    monkeypatch.setattr("protoembed.model.backbones.load_backbone", refuse)
    with pytest.raises(protoembed.ProtoembedError, match=f"^{re.escape(FP16)}$"):
        protoembed.load(str(tiny_model_dirs["bert"]), precision="fp16")
    argv = ["encode", str(text_file), "-o", str(tmp_path / "v.npy"), "--model", str(tiny_model_dirs["bert"])]
    code, _, err = run_cli([*argv, "--precision", "fp16"], capsys)
    assert code == 2 and one_line(err) == f"protoembed: error: {FP16}"


def test_fp16_on_a_cpu_model_of_a_cuda_machine_names_the_device(tiny_model_dirs, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean", device="cpu")
    with pytest.raises(
        protoembed.ProtoembedError, match="^precision fp16 needs a CUDA GPU and the model runs on cpu;"
    ):
        model.encode(SENTENCES, precision="fp16")


def test_fp16_is_a_torch_precision_only():
    from protoembed.model.runtimes import get_runtime

    assert "fp16" in get_runtime("torch").precisions
    assert "fp16" not in get_runtime("openvino").precisions and "fp16" not in get_runtime("onnx").precisions
