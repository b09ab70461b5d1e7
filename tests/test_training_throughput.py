"""A training step that feeds the device: the MFU arithmetic, the token count, AdamW's fused / foreach
kernels against the plain loop, DataLoader workers, the deferred loss read, and training's progress lines
when stderr is not a terminal."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
import torch

from protoembed.core import progress
from protoembed.core.errors import ProtoembedError
from protoembed.core.progress import Progress
from protoembed.outputs.run_layout import CHECKPOINT_DIR
from protoembed.training.components import adamw, loader_workers, param_groups
from protoembed.training.throughput import TokenCounter, flop_params, mfu, peak_flops
from protoembed.training.trainer import train
from training_helpers import StandInObjective, tiny_config, write_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt")


@pytest.fixture
def benchmark_data(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The staged benchmark data (the runs' STS-B dev and test sets); only the tests that train use it."""
    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))


def _log(output_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (output_dir / "training_log.jsonl").read_text().splitlines()]


def _losses(output_dir: Path) -> list[float]:
    return [entry["loss"] for entry in _log(output_dir) if entry["event"] == "train"]


# ------------------------------------------------------------------ MFU arithmetic
def test_peak_table_matches_whole_device_names():
    assert peak_flops("NVIDIA H100 80GB HBM3", "bf16") == 989e12
    assert peak_flops("NVIDIA H200", "fp16") == 989e12
    assert peak_flops("NVIDIA H100 PCIe", "bf16") == 756e12  # not the SXM part's peak
    assert peak_flops("NVIDIA A100-SXM4-80GB", "fp32") == 19.5e12
    assert peak_flops("NVIDIA A100-SXM4-80GB", "fp32", tf32=True) == 156e12
    assert peak_flops("NVIDIA L40S", "bf16") is None  # not an L4
    assert peak_flops("Tesla V100-SXM2-16GB", "bf16") is None  # no bf16 on a V100
    assert peak_flops(None, "bf16") is None  # a CPU: unknown


def test_mfu_is_six_params_tokens_over_the_peak(tiny_model_dirs):
    """By hand: 6 x N x tokens/s / peak, N the backbone's parameters outside its embedding tables."""
    from transformers import AutoModel

    backbone = AutoModel.from_pretrained(str(tiny_model_dirs["bert"]))
    named = dict(backbone.named_parameters())
    tables = sum(
        named[f"embeddings.{t}_embeddings.weight"].numel() for t in ("word", "position", "token_type")
    )
    n = sum(p.numel() for p in backbone.parameters()) - tables
    assert flop_params(backbone) == n
    backbone.embeddings.LayerNorm.weight.requires_grad_(False)  # frozen: not trained, not counted
    assert flop_params(backbone) == n - backbone.embeddings.LayerNorm.weight.numel()
    assert mfu(22_000_000, 100_000.0, 989e12) == pytest.approx(6 * 22e6 * 1e5 / 989e12, rel=1e-12)
    assert mfu(22_000_000, 100_000.0, None) is None


def test_token_counter_reads_view_lengths_and_counts_grad_forwards_only(tiny_model_dirs):
    from transformers import AutoModel

    from protoembed.objectives.views import ViewBatch

    backbone = AutoModel.from_pretrained(str(tiny_model_dirs["bert"]))
    counter = TokenCounter(backbone)
    views = ViewBatch(features={}, lengths=torch.tensor([5, 7, 3]), n=3)
    counter.add_batch(views)
    assert counter.take() == 15 and counter.take() == 0
    counter.add_batch({"text": ["a", "b"]})  # not a ViewBatch: the hook counts attention masks
    ids = torch.tensor([[2, 10, 11, 3, 0], [2, 12, 3, 0, 0]])
    mask = (ids != 0).long()
    backbone(input_ids=ids, attention_mask=mask)
    with torch.no_grad():  # GradCache's first pass, an evaluation: not counted
        backbone(input_ids=ids, attention_mask=mask)
    assert counter.take() == 7
    counter.add_batch({"text": ["a", "b"]})
    backbone(input_ids=ids)  # no mask: every position
    assert counter.take() == 10
    counter.close()


@pytest.mark.parametrize("kind", ["bert", "albert", "roberta"])
def test_training_backbones_attend_with_sdpa(tiny_model_dirs, kind):
    """The backbone a run trains runs attention in PyTorch's fused SDPA kernel (Hugging Face's default
    where the architecture has it), not the eager matmul-softmax-matmul."""
    import protoembed

    backbone = protoembed.load(str(tiny_model_dirs[kind])).encoder.auto_model
    assert backbone.config._attn_implementation == "sdpa"


# ------------------------------------------------------------------ AdamW
@pytest.mark.parametrize("device", ["cpu", "cuda", "mps"])  # the kernel each device gets, run on the CPU
def test_adamw_kernels_step_like_the_plain_loop(device):
    def run(make):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.LayerNorm(5), torch.nn.Linear(5, 3))
        optimizer = make(param_groups(model, weight_decay=0.01, lr=1e-3))
        generator = torch.Generator().manual_seed(1)
        for _ in range(25):
            for p in model.parameters():
                p.grad = torch.randn(p.shape, generator=generator)
            optimizer.step()
        return optimizer, [p.detach().clone() for p in model.parameters()]

    fast, a = run(lambda groups: adamw(groups, 1e-3, torch.device(device)))
    kind = "fused" if device in ("cpu", "cuda") else "foreach"
    assert all(group[kind] for group in fast.param_groups)
    _, b = run(lambda groups: torch.optim.AdamW(groups, lr=1e-3, foreach=False, fused=False))
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, rtol=0, atol=1e-7)


def test_loader_workers_default_by_device():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert loader_workers(None, cpu, cores=16) == 0
    assert loader_workers(None, cuda, cores=16) == 4
    assert loader_workers(None, cuda, cores=2) == 1
    assert loader_workers(None, cuda, cores=1) == 0
    assert loader_workers(3, cpu, cores=2) == 3  # as set


# ------------------------------------------------------------------ runs
@pytest.mark.parametrize(
    ("objective", "head", "workers"), [("simcse", "cls", (0, 2)), ("conpvp", "soft_prompt", (1, 2))]
)
def test_workers_give_the_same_losses(
    tiny_model_dirs, corpus, tmp_path, objective, head, workers, benchmark_data
):
    """SimCSE: 2 workers train exactly as the main process; ConPVP's keyed template draws (any number of
    workers) do not depend on how many workers there are."""
    losses = []
    for n in workers:
        out = tmp_path / f"w{n}"
        cfg = tiny_config(tiny_model_dirs["bert"], corpus, out, objective=objective, head=head, num_workers=n)
        cfg.training.max_steps, cfg.training.eval_steps = 4, 4
        train(cfg, progress=False)
        losses.append(_losses(out))
    assert len(losses[0]) == 4 and losses[0] == losses[1]


def test_run_reports_tokens_per_second_and_mfu(tiny_model_dirs, corpus, tmp_path, benchmark_data):
    """results.json and every log entry carry tokens_per_second and mfu (null on a CPU); the tokens
    counted are the attention masks the stand-in's two forwards per step read."""
    seen: list[int] = []

    class Counting(StandInObjective):
        def forward(self, batch):
            features = self.embedder.features(batch["text"])
            seen.append(2 * int(features["attention_mask"].sum()))
            return super().forward(batch)

    out = tmp_path / "run"
    cfg = tiny_config(tiny_model_dirs["bert"], corpus, out, log_steps=2, keep_checkpoint=True)
    results = train(cfg, objective_factory=lambda cfg, embedder: Counting(embedder), progress=False)
    saved = json.loads((out / "results.json").read_text())
    assert saved["tokens_per_second"] == results["tokens_per_second"] > 0
    assert "mfu" in saved and saved["mfu"] is None
    state = json.loads((out / CHECKPOINT_DIR / "trainer_state.json").read_text())
    assert state["tokens"] == sum(seen) and len(seen) == 5
    assert saved["tokens_per_second"] == pytest.approx(state["tokens"] / state["train_time_s"], abs=0.05)
    start = _log(out)[0]
    assert start["event"] == "start" and start["attention"] == "sdpa" and start["loader_workers"] == 0
    entries = [e for e in _log(out) if e["event"] == "train"]
    assert [e["step"] for e in entries] == [2, 4, 5]
    assert all(e["tokens_per_second"] > 0 and e["mfu"] is None for e in entries)


def test_a_nan_between_logging_steps_names_its_step_before_the_next_checkpoint(
    tiny_model_dirs, corpus, tmp_path, benchmark_data
):
    """Losses are read at logging and evaluation steps only; a NaN at step 3 (neither) still stops the
    run naming step 3, at step 4's evaluation, before it writes a checkpoint."""
    out = tmp_path / "nan"
    cfg = tiny_config(tiny_model_dirs["bert"], corpus, out, log_steps=5, eval_steps=2)
    with pytest.raises(ProtoembedError, match=r"loss is nan at step 3 .*checkpoint \(step 2\) is kept"):
        train(cfg, objective_factory=lambda cfg, e: StandInObjective(e, nan_at=3), progress=False)
    state = json.loads((out / CHECKPOINT_DIR / "trainer_state.json").read_text())
    assert state["step"] == 2
    assert _log(out)[-1] == {"event": "non_finite_loss", "step": 3, "epoch": 0, "loss": "nan"}


# ------------------------------------------------------------------ progress
class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_training_progress_line_format():
    """Steps at 0.5 steps/s: a line after 10 s with the status, a last line with the total time."""
    clock, log = Clock(), io.StringIO()
    with Progress(20, desc="Training", unit="steps", stream=log, clock=clock) as bar:
        for step in range(1, 21):
            clock.now += 2.0
            bar.status = f"loss {1 / step:.4f}, dev 70.00, 1,234 tokens/s"
            bar.update(1)
    assert log.getvalue().splitlines() == [
        "Training: 5/20 steps (0.5/s, 30 s left); loss 0.2000, dev 70.00, 1,234 tokens/s",
        "Training: 10/20 steps (0.5/s, 20 s left); loss 0.1000, dev 70.00, 1,234 tokens/s",
        "Training: 15/20 steps (0.5/s, 10 s left); loss 0.0667, dev 70.00, 1,234 tokens/s",
        "Training: 20/20 steps (0.5/s, 0 s left); loss 0.0500, dev 70.00, 1,234 tokens/s",
        "Training: 20/20 steps (0.5/s, 40 s in all); loss 0.0500, dev 70.00, 1,234 tokens/s",
    ]


def test_training_prints_progress_lines_when_stderr_is_not_a_terminal(
    tiny_model_dirs, corpus, tmp_path, monkeypatch, capsys, benchmark_data
):
    monkeypatch.setattr(progress, "LINE_EVERY", 0.0)  # a line at every step
    cfg = tiny_config(tiny_model_dirs["bert"], corpus, tmp_path / "p", log_steps=2)
    train(cfg, objective_factory=lambda cfg, e: StandInObjective(e))
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Training:")]
    pattern = (
        r"Training: (\d)/5 steps \([\d.,]+/s, [\d a-z]+ (left|in all)\); loss \d+\.\d{4}, dev \S+, "
        r"[\d,]+ tokens/s"
    )
    assert re.fullmatch(r"Training: 1/5 steps \([\d.,]+/s, [\d a-z]+ left\)", lines[0])  # nothing read yet
    assert [int(re.fullmatch(pattern, line).group(1)) for line in lines[1:]] == [2, 3, 4, 5, 5]
    assert lines[-1].split("; ")[0].endswith("in all)")


# ------------------------------------------------------------------ torch.compile
def test_compile_gives_the_eager_losses(tmp_path, corpus, benchmark_data):
    """``training.compile: true`` trains as eager does: the same logged losses to 1e-5 over 3 steps (a
    1-layer tiny BERT with dropout off, since compiled dropout draws other masks; compiling its forward
    and backward is most of this test's time on a CPU)."""
    from tiny_models import build_tiny_model

    model = build_tiny_model("bert", tmp_path / "model", layers=1)
    config = json.loads((model / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (model / "config.json").write_text(json.dumps(config))
    losses = {}
    for compiled in (False, True):
        out = tmp_path / f"compile-{compiled}"
        cfg = tiny_config(model, corpus, out, objective="simcse", head="cls", compile=compiled)
        cfg.training.max_steps, cfg.training.eval_steps = 3, 3
        train(cfg, progress=False)
        losses[compiled] = _losses(out)
    assert len(losses[True]) == 3
    assert losses[True] == pytest.approx(losses[False], abs=1e-5)


def test_a_run_saved_before_the_new_keys_resumes_while_they_keep_their_defaults(tmp_path):
    """A config.yaml written before ``training.compile`` existed: resuming with it at its default is
    allowed; with it changed, the key is named."""
    import yaml

    from protoembed.training.checkpoint import check_output_dir
    from protoembed.training.config_models import TrainingConfig

    training = TrainingConfig(lr=1e-3).model_dump()
    now = {"output_dir": "x", "training": training, "objective": {"name": "simcse"}}
    old = {"training": {k: v for k, v in training.items() if k != "compile"}, "objective": {"name": "simcse"}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(old), encoding="utf-8")
    assert check_output_dir(tmp_path, now, resume=True) is None
    changed = {**now, "training": {**training, "compile": True}}
    with pytest.raises(ProtoembedError, match="config key 'training.compile' differs"):
        check_output_dir(tmp_path, changed, resume=True)


def test_equal_sizes_gathers_without_exchanging_sizes(monkeypatch):
    """Two (simulated) processes: the gather exchanges sizes (a host read) and then the tensors; inside
    ``equal_sizes`` only the tensors, with the same result."""
    from protoembed.objectives import distributed

    calls: list[int] = []

    def all_gather(parts, tensor):
        calls.append(len(parts))
        for part in parts:
            part.copy_(tensor)

    monkeypatch.setattr(distributed, "world", lambda: (1, 2))
    monkeypatch.setattr(distributed.dist, "all_gather", all_gather)
    x = torch.arange(6.0).reshape(3, 2).requires_grad_()
    plain = distributed.gather_with_grad(x)
    assert len(calls) == 2
    calls.clear()
    with distributed.equal_sizes():
        fast = distributed.gather_with_grad(x)
    assert len(calls) == 1 and not distributed._equal_sizes
    torch.testing.assert_close(fast, plain, rtol=0, atol=0)
    torch.testing.assert_close(fast, torch.cat([x, x]).detach(), rtol=0, atol=0)
