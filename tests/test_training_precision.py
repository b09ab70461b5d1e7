"""Mixed precision (``training.precision``) and gradient checkpointing on the tiny BERT, on CPU.

bf16 is CPU autocast, what Accelerate applies to the objective's forward; fp16 needs CUDA (an error here).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import protoembed
from protoembed.core.errors import ProtoembedError
from protoembed.objectives import build_objective
from protoembed.objectives.base import contrastive_loss
from protoembed.outputs.run_layout import CHECKPOINT_DIR
from protoembed.training import train
from protoembed.training.components import build_objective_from_config
from protoembed.training.mixed_precision import enable_gradient_checkpointing
from training_helpers import SENTENCES, Interrupt, stop_after, tiny_config, write_corpus

S = SENTENCES[:6]
BATCHES = {
    "text": {"text": S},
    "triplets": {"anchor": S[:3], "positive": S[3:], "negative": S[1:4]},
    "scores": {"sentence1": S[:3], "sentence2": S[3:], "score": [1.0, 4.5, 2.0]},
    "labels": {"sentence1": S[:3], "sentence2": S[3:], "label": [0, 1, 2]},
}
#: every objective, its head and its batch
CASES = [
    ("conpvp", "soft_prompt", "text", {}),
    ("conpvp", "soft_prompt", "text", {"denoise": "attention_mask"}),
    ("simcse", "cls", "text", {}),
    ("promptbert", "mask", "text", {}),
    ("simcse_sup", "cls", "triplets", {}),
    ("cosine_regression", "mean", "scores", {}),
    ("nli_softmax", "mean", "labels", {}),
    ("cross_encoder", "cls", "scores", {}),
    ("cross_encoder", "cls", "labels", {}),
]


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (see conftest)."""


@pytest.mark.parametrize(("name", "head", "batch", "options"), CASES)
def test_bf16_loss_is_within_one_percent_of_fp32(tiny_model_dirs, name, head, batch, options) -> None:
    """Same weights, same batch, same dropout masks (seed) and ConPVP template draws: bf16 autocast
    changes the training loss by less than 1%, and the loss is fp32."""
    torch.manual_seed(0)
    embedder = protoembed.load(str(tiny_model_dirs["bert"]), head=head, device="cpu")
    objective = build_objective(name, embedder, **options).train()
    if name == "conpvp":
        _ = objective.generator  # seeded now, so that its template draws can be replayed
    draws = objective.get_extra_state() if name == "conpvp" else None
    hidden: list[torch.dtype] = []
    layer = embedder.encoder.auto_model.encoder.layer[0].intermediate.dense
    layer.register_forward_hook(lambda m, i, o: hidden.append(o.dtype))
    with torch.no_grad():
        torch.manual_seed(1)
        fp32 = objective(BATCHES[batch])
        if draws is not None:
            objective.set_extra_state(draws)
        torch.manual_seed(1)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16 = objective(BATCHES[batch])
    half = len(hidden) // 2  # one entry per forward: a call's columns may go in one forward or apart
    assert hidden == [torch.float32] * half + [torch.bfloat16] * half  # the backbone did run in bf16
    assert bf16.dtype == torch.float32 and fp32.dtype == torch.float32
    assert abs(bf16.item() - fp32.item()) < 0.01 * abs(fp32.item())


def test_contrastive_logits_and_loss_are_fp32_under_autocast() -> None:
    """InfoNCE of bf16 vectors under autocast equals, bit for bit, the fp32 computation on the same values."""
    torch.manual_seed(0)
    a, p, q = (torch.randn(8, 16).bfloat16() for _ in range(3))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = contrastive_loss(a, p, q)
        plain_under_autocast = torch.nn.functional.cosine_similarity(a, p)  # what autocast alone would do
    exact = contrastive_loss(a.float(), p.float(), q.float())
    assert mixed.dtype == torch.float32 and plain_under_autocast.dtype == torch.bfloat16
    assert mixed.item() == exact.item()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt")


def _final_weights(output_dir: Path) -> dict[str, torch.Tensor]:
    files = list((output_dir / CHECKPOINT_DIR).glob("pytorch_model*.bin"))
    assert len(files) == 1, files
    return torch.load(files[0], map_location="cpu", weights_only=True)


def test_bf16_run_trains_saves_and_resumes_to_the_same_model(
    tiny_model_dirs, corpus, tmp_path, data_dir, monkeypatch
):
    """SimCSE in bf16 with gradient checkpointing: stopped after step 3 (checkpoint at 2) and resumed, it
    ends with the weights of an uninterrupted bf16 run (crossing an epoch); the saved model is fp32."""
    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))
    model = tiny_model_dirs["bert"]
    settings = {"max_steps": 6, "eval_steps": 2, "keep_checkpoint": True, "precision": "bf16"}
    seen: list[tuple[torch.dtype, bool]] = []

    def factory(cfg, embedder):
        backbone = embedder.encoder.auto_model

        def record(module, inputs, output) -> None:
            if module.training:  # training forwards; evaluation runs in fp32, without autocast
                seen.append((output.dtype, checkpointing(backbone)))

        backbone.encoder.layer[0].intermediate.dense.register_forward_hook(record)
        return build_objective_from_config(cfg, embedder)

    def config(out):
        cfg = tiny_config(model, corpus, out, objective="simcse", head="cls", **settings)
        cfg.training.gradient_checkpointing = True
        return cfg

    straight, broken = tmp_path / "straight", tmp_path / "broken"
    train(config(straight), objective_factory=factory)
    assert set(seen) == {(torch.bfloat16, True)}

    with pytest.raises(Interrupt):
        train(config(broken), objective_factory=factory, callback=stop_after(3))
    train(config(broken), resume=True, objective_factory=factory)
    a, b = _final_weights(straight), _final_weights(broken)
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=1e-6, msg=key)

    def losses(out: Path) -> dict[int, float]:
        log = [json.loads(x) for x in (out / "training_log.jsonl").read_text().splitlines()]
        return {e["step"]: e["loss"] for e in log if e["event"] == "train"}

    assert losses(straight) == pytest.approx(losses(broken), abs=1e-6)
    from sentence_transformers import SentenceTransformer

    saved = SentenceTransformer(str(straight / "best"), device="cpu")
    assert {p.dtype for p in saved.parameters()} == {torch.float32}
    assert saved.encode(["a man is playing a guitar ."]).shape == (1, 32)


def checkpointing(backbone: torch.nn.Module) -> bool:
    """Whether the Hugging Face model has activation checkpointing on (the property's newer name first)."""
    if hasattr(type(backbone), "is_activation_checkpointing"):
        return backbone.is_activation_checkpointing
    return backbone.is_gradient_checkpointing


def test_fp16_without_cuda_is_a_one_line_error_before_step_one(
    tiny_model_dirs, corpus, tmp_path, monkeypatch
):
    cfg = tiny_config(tiny_model_dirs["bert"], corpus, tmp_path / "fp16", precision="fp16")
    assert cfg.training.precision == "fp16"  # a GPU config parses and validates on any machine
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    steps: list[int] = []
    with pytest.raises(ProtoembedError, match=r"^training.precision fp16 needs a CUDA GPU[^\n]*$"):
        train(cfg, callback=lambda event: steps.append(event["step"]))
    assert steps == [] and not (tmp_path / "fp16").exists()  # not even the folder, nor its lock file


def test_emulated_bf16_is_said_once_at_the_default_level_in_train_and_eval(
    tiny_model_dirs, tmp_path, data_dir, monkeypatch, capsys
):
    """On a CPU without native bf16 (its flags those of an AVX2-only CPU here), ``train`` and ``eval`` with
    bf16 each print the warning once on stderr, without ``--verbose``; ``train --check`` says it too."""
    from protoembed.cli import main
    from protoembed.model import precision
    from test_training_cli import _config

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx2"}))
    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))
    notice = (
        "protoembed: bf16 on this CPU is emulated (no AVX512-BF16 / AMX): correct, but several times slower "
        "than fp32; use fp32 here"
    )
    config = _config(tmp_path, tiny_model_dirs["bert"], "simcse", "cls", precision="bf16")
    out = tmp_path / "run"
    runs = {
        "check": ["train", "--config", str(config), "--output-dir", str(out), "--check"],
        "train": ["train", "--config", str(config), "--output-dir", str(out)],
        "eval": [
            "eval",
            "sts",
            "--model",
            str(out / "best"),
            "--precision",
            "bf16",
            "--tasks",
            "STSBenchmark",
        ],
    }
    said = {}
    for name, argv in runs.items():
        precision.warn_emulated_bf16.cache_clear()  # once per process: each command here is a new one
        assert main(argv) == 0, name
        captured = capsys.readouterr()
        assert [line for line in captured.err.splitlines() if "is emulated (" in line] == [notice], name
        said[name] = captured.out.splitlines()
    assert (
        "protoembed train --check: training.precision bf16: bf16 on the CPU, emulated (no AVX512-BF16 / AMX): "
        "several times slower than fp32"
    ) in said["check"]
    precision.warn_emulated_bf16.cache_clear()


def _grads(model_dir: Path, checkpointing: bool) -> tuple[float, dict[str, torch.Tensor], int]:
    """Loss, backbone gradients and layer-0 attention calls of one SimCSE step, dropout on, seed 0."""
    torch.manual_seed(0)
    embedder = protoembed.load(str(model_dir), head="cls", device="cpu")
    objective = build_objective("simcse", embedder).train()
    backbone = embedder.encoder.auto_model
    if checkpointing:
        enable_gradient_checkpointing(backbone)
    calls = []
    backbone.encoder.layer[0].attention.register_forward_hook(lambda m, i, o: calls.append(1))
    torch.manual_seed(1)
    loss = objective({"text": S})
    loss.backward()
    grads = {k: p.grad.clone() for k, p in backbone.named_parameters() if p.grad is not None}
    return loss.item(), grads, len(calls)


def test_gradient_checkpointing_gives_the_same_gradients_with_dropout(tiny_model_dirs) -> None:
    """Non-reentrant checkpointing replays the dropout RNG: the recomputed forward is the first one."""
    loss, plain, calls = _grads(tiny_model_dirs["bert"], checkpointing=False)
    loss_ckpt, ckpt, calls_ckpt = _grads(tiny_model_dirs["bert"], checkpointing=True)
    assert (calls, calls_ckpt) == (1, 2)  # the layer really ran again in backward
    assert loss_ckpt == loss and plain.keys() == ckpt.keys() and len(plain) > 10
    for key in plain:
        torch.testing.assert_close(ckpt[key], plain[key], rtol=1e-6, atol=1e-9, msg=key)
