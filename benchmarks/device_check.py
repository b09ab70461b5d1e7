"""Training steps/s, tokens/s and utilisation: SimCSE through protoembed's trainer against
sentence-transformers' own trainer, same batch, both cached; ConPVP through protoembed's (``--objective``).

protoembed: :func:`protoembed.training.trainer.train` of ``simcse`` (``cls`` head, ``max_seq_length``
``--tokens``) with ``training.mini_batch_size`` ``--mini-batch-size`` and ``training.precision``
``--precision``. sentence-transformers: ``SentenceTransformerTrainer`` with
``CachedMultipleNegativesRankingLoss(mini_batch_size=...)`` on (sentence, sentence) pairs (unsupervised
SimCSE: the two dropout views are the two columns), CLS pooling, the same ``max_seq_length``, batch,
learning rate and precision (``bf16=True`` for bf16). Both read the same sentences of the staged
Wikipedia sample (``$PROTOEMBED_DATA/unsup/wiki1m_sample``) and run ``--warmup`` untimed steps then
``--steps`` timed ones (from the end of the last warm-up step to the end of the last step; optimizer
steps included, no evaluation). Backbones: ``default`` (all-MiniLM-L6-v2) and ``bert-base`` (a
random-weight model of BERT-base's shape with the default tokenizer, saved to a temporary folder).

``--objective conpvp``: the paper's ConPVP (configs/base/conpvp.yaml: its head and objective settings)
through protoembed's trainer only (sentence-transformers has no ConPVP); ``--mini-batch-size 0``: the
plain step, no GradCache (sentence-transformers: ``MultipleNegativesRankingLoss``).

Printed per row: steps/s, tokens/s (non-padding tokens of one step's rows: 2B for SimCSE, 3B with the
templates for ConPVP, as the objective collates them), model FLOPs utilisation (6 x parameters x tokens/s
over the device's dense bf16 / fp16 peak, :data:`PEAK_TFLOPS` by GPU name or ``--peak-tflops``; the trainer's
own ``tokens_per_second`` and ``mfu`` beside them where its step events or results.json carry them), peak
memory over the run, model built inside it (weights, gradients, AdamW, activations; CUDA:
``max_memory_allocated``; CPU: the rise of the resident set) and that per row of a step; last line
``ratio=<protoembed steps/s / sentence-transformers steps/s>`` (of the first backbone; with ConPVP,
``<protoembed steps/s / 6.6>``: the steps/s ``protoembed train --config configs/bert-base-uncased/conpvp.yaml``
(batch 128, bf16, 32 tokens) ran on one H200 before the trainer was tuned for GPUs; the aim is 3x).

    python benchmarks/device_check.py [--device cuda|cpu] [--models default,bert-base] [--batch-size 64]
        [--mini-batch-size 32] [--steps 20] [--warmup 3] [--precision bf16|fp32] [--tokens 32]
        [--objective simcse|conpvp] [--peak-tflops T]

A model may also be given as a model folder (``--models /path/to/folder``).

``--smoke`` (checks that the script runs; measures nothing): the default backbone replaced by a tiny random
model, batch 4, mini-batch 2, 2 timed steps after 1, fp32, 16 tokens.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from pathlib import Path

import torch

import smoke
from machine import device_line

# the memory benchmark's shapes and sample reader
from memory import backbone, sentences

#: Dense bf16 / fp16 peak TFLOP/s of the GPUs by a part of their name (the vendors' data sheets, SXM parts).
PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "L4": 121.0, "A10": 125.0}
#: ConPVP BERT-base, batch 128, bf16, one H200: steps/s before the trainer was tuned for GPUs (the aim: 3x).
CONPVP_BEFORE = 6.6
CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "base"


def paper_objective(name: str) -> tuple[str, dict]:
    """(head, objective settings) of the paper's ``name`` (configs/base/<name>.yaml, SimCSE: ``cls`` and
    the objective's defaults, as sentence-transformers' side has no MLP)."""
    if name == "simcse":
        return "cls", {"name": "simcse"}
    import yaml

    config = yaml.safe_load((CONFIGS / f"{name}.yaml").read_text(encoding="utf-8"))
    return config["head"], config["objective"]


def peak_tflops(device: str, given: float | None) -> float | None:
    """The device's dense bf16 peak: ``given``, else :data:`PEAK_TFLOPS` by the GPU's name; None when unknown."""
    if given:
        return given
    if not device.startswith("cuda"):
        return None
    name = torch.cuda.get_device_name(torch.device(device))
    return next((peak for part, peak in PEAK_TFLOPS.items() if part in name), None)


class Clock:
    """Times the steps after the warm-up; peak memory over the whole run."""

    def __init__(self, warmup: int, device: str) -> None:
        self.warmup, self.device, self.marks = warmup, device, []
        self.reported: dict = {}  # the trainer's own tokens_per_second / mfu, where it reports them
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
        else:
            Path("/proc/self/clear_refs").write_text("5")
            self.base = _status_kib("VmRSS") * 1024

    def step_done(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()
        self.marks.append(time.perf_counter())

    def steps_per_second(self) -> float:
        timed = self.marks[self.warmup - 1 :]
        return (len(timed) - 1) / (timed[-1] - timed[0])

    def peak_mib(self) -> float:
        if self.device == "cuda":
            return (torch.cuda.max_memory_allocated() - self.base) / 2**20
        return (_status_kib("VmHWM") * 1024 - self.base) / 2**20


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


class Stop(Exception):
    """Raised after the last timed step (no final evaluation)."""


def run_protoembed(model_dir: str, texts: list[str], args: argparse.Namespace, out: Path) -> Clock:
    from protoembed.training.config import config_from_dict
    from protoembed.training.trainer import train

    head, objective = paper_objective(args.objective)
    corpus = out / "corpus.txt"
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    total = args.warmup + args.steps
    cfg = config_from_dict(
        {
            "model": model_dir,
            "head": head,
            "max_seq_length": args.tokens,
            "objective": objective,
            "data": {"corpus": str(corpus)},
            "training": {
                "batch_size": args.batch_size,
                "mini_batch_size": args.mini_batch_size or None,
                "precision": args.precision,
                "lr": 3e-5,
                "max_steps": total + 1,
                "eval_steps": total + 1,
                "seed": 0,
            },
            "output_dir": str(out / "protoembed"),
        }
    )
    clock = Clock(args.warmup, args.device)

    def callback(event: dict) -> None:
        clock.step_done()
        clock.reported.update({k: event[k] for k in ("tokens_per_second", "mfu") if k in event})
        if event["step"] == total:
            raise Stop

    with contextlib.suppress(Stop):
        train(cfg, callback=callback, progress=False, evaluator=lambda embedder: 0.0)
    results = out / "protoembed" / "results.json"
    if results.is_file():
        saved = json.loads(results.read_text(encoding="utf-8"))
        clock.reported.update({k: saved[k] for k in ("tokens_per_second", "mfu") if k in saved})
    return clock


def run_st(model_dir: str, texts: list[str], args: argparse.Namespace, out: Path) -> Clock:
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers.sentence_transformer.losses import (
        CachedMultipleNegativesRankingLoss,
        MultipleNegativesRankingLoss,
    )
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from sentence_transformers.sentence_transformer.training_args import SentenceTransformerTrainingArguments
    from transformers import TrainerCallback

    clock = Clock(args.warmup, args.device)  # before the model, as protoembed's (built inside train())
    torch.manual_seed(0)
    transformer = Transformer(model_dir, max_seq_length=args.tokens)
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="cls")
    model = SentenceTransformer(modules=[transformer, pooling], device=args.device)
    if args.mini_batch_size:
        loss = CachedMultipleNegativesRankingLoss(model, mini_batch_size=args.mini_batch_size)
    else:
        loss = MultipleNegativesRankingLoss(model)
    total = args.warmup + args.steps

    class Timer(TrainerCallback):
        def on_step_end(self, arguments, state, control, **kwargs):
            clock.step_done()

    training = SentenceTransformerTrainingArguments(
        output_dir=str(out / "st"),
        per_device_train_batch_size=args.batch_size,
        learning_rate=3e-5,
        max_steps=total,
        bf16=args.precision == "bf16",
        use_cpu=args.device == "cpu",
        save_strategy="no",
        eval_strategy="no",
        report_to="none",
        logging_steps=10**6,
        dataloader_drop_last=True,
        seed=0,
        disable_tqdm=True,
    )
    dataset = Dataset.from_dict({"anchor": texts, "positive": texts})
    trainer = SentenceTransformerTrainer(
        model=model, args=training, train_dataset=dataset, loss=loss, callbacks=[Timer()]
    )
    trainer.train()
    return clock


def model_folder(name: str, tmp: Path) -> str:
    """A Hugging Face model folder: the default backbone's, or a saved random-weight shape."""
    if name == "default":
        return smoke.model_dir()
    if Path(name).is_dir():
        return name
    auto, tokenizer = backbone(name, None)
    folder = tmp / name
    auto.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return str(folder)


def step_shape(model_dir: str, texts: list[str], args: argparse.Namespace) -> tuple[int, int]:
    """(non-padding tokens of one step's rows as the objective collates them, the backbone's parameters)."""
    import protoembed
    from protoembed.objectives import build_objective

    head, settings = paper_objective(args.objective)
    options = {k: v for k, v in settings.items() if k != "name"}
    embedder = protoembed.load(model_dir, head=head, device="cpu")
    objective = build_objective(args.objective, embedder, max_seq_length=args.tokens, **options)
    views = objective.collate(texts[: args.batch_size])
    return int(views.lengths.sum()), sum(p.numel() for p in embedder.parameters())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--models", default="default,bert-base")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--mini-batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--precision", choices=("bf16", "fp32"), default="bf16")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--data-dir", default=os.environ.get("PROTOEMBED_DATA", "../shared/data"))
    parser.add_argument("--objective", choices=("simcse", "conpvp"), default="simcse")
    parser.add_argument(
        "--peak-tflops", type=float, help="the device's dense bf16 peak (default: by GPU name)"
    )
    smoke.add_argument(parser)
    args = parser.parse_args()
    if args.smoke:
        smoke.enable()
        args.models, args.batch_size, args.mini_batch_size, args.steps, args.warmup = "default", 4, 2, 2, 1
        args.precision, args.tokens = "fp32", 16
    count = args.batch_size * (args.warmup + args.steps + 1)
    texts = sentences(count, Path(args.data_dir))
    peak = peak_tflops(args.device, args.peak_tflops)
    print(device_line(args.device))
    cached = (
        f"mini_batch_size {args.mini_batch_size}" if args.mini_batch_size else "plain step (no GradCache)"
    )
    print(
        f"{args.objective}, device {args.device}, {args.precision}, batch {args.batch_size}, {cached}, "
        f"max_seq_length {args.tokens}, {args.steps} timed steps after {args.warmup}; MFU against "
        f"{f'{peak:g} TFLOP/s' if peak else 'an unknown peak (--peak-tflops)'}"
    )
    print(
        f"{'model':>10} {'system':>21} {'steps/s':>8} {'tokens/s':>9} {'MFU':>6} {'peak MiB':>9} {'MiB/row':>8}"
        "  trainer's own"
    )
    systems = [("protoembed", run_protoembed)]
    if args.objective == "simcse":
        systems.append(("sentence-transformers", run_st))
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in [m for m in args.models.split(",") if m]:
            folder = model_folder(name, Path(tmp))
            tokens, params = step_shape(folder, texts, args)
            shown = Path(name).name if Path(name).is_dir() else name
            rows = 3 if args.objective == "conpvp" else 2
            rates = {}
            for system, run in systems:
                out = Path(tempfile.mkdtemp(dir=tmp))
                clock = run(folder, texts, args, out)
                rate, memory = clock.steps_per_second(), clock.peak_mib()
                rates[system] = rate
                mfu = 6 * params * rate * tokens / (peak * 1e12) if peak else float("nan")
                own = ", ".join(f"{k} {v:.4g}" for k, v in clock.reported.items()) or "-"
                print(
                    f"{shown:>10} {system:>21} {rate:>8.2f} {rate * tokens:>9.0f} {mfu:>6.1%} {memory:>9.0f} "
                    f"{memory / (rows * args.batch_size):>8.2f}  {own}",
                    flush=True,
                )
            if args.objective == "simcse":
                ratios.append(rates["protoembed"] / rates["sentence-transformers"])
            else:
                ratios.append(rates["protoembed"] / CONPVP_BEFORE)
    if args.objective == "conpvp":
        print(
            f"aim: ConPVP BERT-base batch 128 bf16 >= 3 x {CONPVP_BEFORE} steps/s (the last line's ratio >= 3 "
            "when that is the first model)"
        )
    print(f"ratio={ratios[0]:.3f}")


if __name__ == "__main__":
    main()
