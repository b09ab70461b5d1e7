"""SimCSE steps/s: protoembed's trainer against sentence-transformers' own trainer, same batch, both cached.

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

Printed per row: steps/s, tokens/s (non-padding tokens of the 2B rows of a step), peak memory over the
run, model built inside it (weights, gradients, AdamW, activations; CUDA: ``max_memory_allocated``; CPU:
the rise of the resident set) and that per row of a step; last line
``ratio=<protoembed steps/s / sentence-transformers steps/s>`` (of the first backbone).

    python benchmarks/device_check.py [--device cuda|cpu] [--models default,bert-base] [--batch-size 64]
        [--mini-batch-size 32] [--steps 20] [--warmup 3] [--precision bf16|fp32] [--tokens 32]

``--smoke`` (checks that the script runs; measures nothing): the default backbone replaced by a tiny random
model, batch 4, mini-batch 2, 2 timed steps after 1, fp32, 16 tokens.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from pathlib import Path

import torch

import smoke

# the memory benchmark's shapes and sample reader
from memory import backbone, sentences


class Clock:
    """Times the steps after the warm-up; peak memory over the whole run."""

    def __init__(self, warmup: int, device: str) -> None:
        self.warmup, self.device, self.marks = warmup, device, []
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

    corpus = out / "corpus.txt"
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    total = args.warmup + args.steps
    cfg = config_from_dict(
        {
            "model": model_dir,
            "head": "cls",
            "max_seq_length": args.tokens,
            "objective": {"name": "simcse"},
            "data": {"corpus": str(corpus)},
            "training": {
                "batch_size": args.batch_size,
                "mini_batch_size": args.mini_batch_size,
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
        if event["step"] == total:
            raise Stop

    with contextlib.suppress(Stop):
        train(cfg, callback=callback, progress=False, evaluator=lambda embedder: 0.0)
    return clock


def run_st(model_dir: str, texts: list[str], args: argparse.Namespace, out: Path) -> Clock:
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers.sentence_transformer.losses import CachedMultipleNegativesRankingLoss
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from sentence_transformers.sentence_transformer.training_args import SentenceTransformerTrainingArguments
    from transformers import TrainerCallback

    clock = Clock(args.warmup, args.device)  # before the model, as protoembed's (built inside train())
    torch.manual_seed(0)
    transformer = Transformer(model_dir, max_seq_length=args.tokens)
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="cls")
    model = SentenceTransformer(modules=[transformer, pooling], device=args.device)
    loss = CachedMultipleNegativesRankingLoss(model, mini_batch_size=args.mini_batch_size)
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
    auto, tokenizer = backbone(name, None)
    folder = tmp / name
    auto.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return str(folder)


def tokens_per_step(model_dir: str, texts: list[str], args: argparse.Namespace) -> int:
    """Non-padding tokens of one step's 2B rows ([CLS] sentence [SEP], at most ``--tokens``)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    lengths = [min(len(ids), args.tokens) for ids in tokenizer(texts[: args.batch_size])["input_ids"]]
    return 2 * sum(lengths)


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
    smoke.add_argument(parser)
    args = parser.parse_args()
    if args.smoke:
        smoke.enable()
        args.models, args.batch_size, args.mini_batch_size, args.steps, args.warmup = "default", 4, 2, 2, 1
        args.precision, args.tokens = "fp32", 16
    count = args.batch_size * (args.warmup + args.steps + 1)
    texts = sentences(count, Path(args.data_dir))
    print(
        f"SimCSE, device {args.device}, {args.precision}, batch {args.batch_size} ({2 * args.batch_size} rows), "
        f"mini_batch_size {args.mini_batch_size}, max_seq_length {args.tokens}, {args.steps} timed steps "
        f"after {args.warmup}"
    )
    print(f"{'model':>10} {'system':>21} {'steps/s':>8} {'tokens/s':>9} {'peak MiB':>9} {'MiB/row':>8}")
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in [m for m in args.models.split(",") if m]:
            folder = model_folder(name, Path(tmp))
            tokens = tokens_per_step(folder, texts, args)
            rates = {}
            for system, run in (("protoembed", run_protoembed), ("sentence-transformers", run_st)):
                out = Path(tempfile.mkdtemp(dir=tmp))
                clock = run(folder, texts, args, out)
                rate, peak = clock.steps_per_second(), clock.peak_mib()
                rates[system] = rate
                print(
                    f"{name:>10} {system:>21} {rate:>8.2f} {rate * tokens:>9.0f} {peak:>9.0f} "
                    f"{peak / (2 * args.batch_size):>8.2f}",
                    flush=True,
                )
            ratios.append(rates["protoembed"] / rates["sentence-transformers"])
    print(f"ratio={ratios[0]:.3f}")


if __name__ == "__main__":
    main()
