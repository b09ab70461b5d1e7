"""Training-step cost: ConPVP (3 views, no denoising) vs SimCSE (2 views), same batch and sequence length.

Both objectives train the default backbone (all-MiniLM-L6-v2) with AdamW; a step is forward + backward
+ optimizer step. Sentences come from the unsupervised Wikipedia sample (``$PROTOEMBED_DATA``), keeping
those with at least ``--tokens`` word pieces. "Same sequence length" has two readings, chosen by
``--length``:

- ``sentence`` (default; what training costs): after truncation every sentence has exactly ``--tokens``
  word pieces in both objectives; ConPVP's template tokens come on top, as in the paper (a row is the
  sentence plus 8 to 15 template, soft-prompt and special tokens), SimCSE gets ``[CLS] sentence [SEP]``.
- ``row`` (what three views cost against two): every row of both forwards is at most ``--tokens`` tokens
  in all; ConPVP's sentences are truncated to leave room for its longest template, so both forwards are
  padded to the same width and ConPVP's holds 3 rows per sentence against SimCSE's 2.

The two objectives alternate step by step in one process (the order swapped every step) on the same
batches; the step time reported is the best of the steps (the least disturbed by other load on a shared
machine; the median is printed too).

Peak memory: on CUDA, ``torch.cuda.max_memory_allocated`` over a step minus the memory allocated before
it (in this process); on CPU, each objective runs a few steps in a fresh subprocess and reports the rise of
its maximum resident set size (``getrusage``) over the high-water mark after set-up (model and optimizer
built, nothing trained), plus that absolute maximum.

    python benchmarks/train_step.py [--batch-size 16] [--steps 10] [--device cpu|cuda] [--tokens 32]
                                    [--length sentence|row]

Last line: ``ratio=<conpvp step time / simcse step time>`` (target: at most 1.6).

``--smoke`` (any mode; checks that the script runs, measures nothing): a tiny random model in place of the
default backbone, batch 4, 2 steps, 16 tokens; the CPU peak memory (two more processes) is left out.

Supervised mode, ``--objective cosine_regression``: SBERT's siamese STS-B step of protoembed (the
``cosine_regression`` objective, mean head, its forwards as ``training.padding: auto`` chooses them and
its dropout masks drawn as a training run's, ``training.dropout: fast``) against
sentence-transformers' own step on the same model folder (``SentenceTransformer`` + ``CosineSimilarityLoss``,
the two columns tokenised with ``SentenceTransformer.preprocess`` and embedded as the loss does), same
batches of STS-B train pairs (``senteval/STS/STSBenchmark/sts-train.csv``, file order, scores / 5), same
AdamW learning rate (2e-5, SBERT's). A step is tokenisation + forward + backward + optimizer step, for both.
Rounds alternate the two (order swapped every round); the best and the median step are printed.

    python benchmarks/train_step.py --objective cosine_regression [--batch-size 32] [--steps 20]

Last line then: ``ratio=<protoembed steps/s / sentence-transformers steps/s>`` (best steps; target: at
least 1.0).

With ``--head cnn`` the same rounds time protoembed's step with the ``cnn`` head (CNN-SBERT) against its
step with the mean head (SBERT), same batches and learning rate:

    python benchmarks/train_step.py --objective cosine_regression --head cnn

Last line then: ``ratio=<cnn step time / mean step time>`` (best steps; target: at most 3).

GradCache mode, ``--mini-batch-size M``: the cached step of ``--cache-objective`` (conpvp) against its
plain step at the same batch, alternating, and the data time of a step against its model time:

    python benchmarks/train_step.py --mini-batch-size 32 [--batch-size 64] [--steps 5]

Last line then: ``ratio=<cached step time / plain step time>`` (best steps; target: at most 1.4).

Precision mode, ``--bf16``: the training step of ``--cache-objective`` (conpvp) under bf16 mixed
precision (``training.precision: bf16``: the forward wrapped in torch's bf16 autocast as Accelerate wraps
it, weights, optimizer and loss in fp32) against its fp32 step, alternating on the same batches, both through the trainer's own
:func:`protoembed.training.step.forward_backward`; the header names the CPU and whether it has native bf16:

    python benchmarks/train_step.py --bf16 [--batch-size 16] [--steps 10]

Last line then: ``ratio=<bf16 step time / fp32 step time>`` (best steps; reported, no target).

Breakdown mode, ``--breakdown``: where a ConPVP step's time goes (data, copy, forward, backward, optimizer,
reading the loss, the rest), the plain loop against the trainer's (fused / foreach AdamW, DataLoader
workers, the loss read at logging steps only), and each one's steps/s, tokens/s and MFU
(:func:`breakdown_main`); ``--model tiny`` (default) leaves next to nothing but what is not the model:

    python benchmarks/train_step.py --breakdown [--model tiny|default] [--workers K] [--batch-size 16]
                                    [--steps 10] [--rounds 2]

Last line then: ``ratio=<trainer steps/s / plain steps/s>`` (best unsynchronised pass).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

import smoke

OBJECTIVES = {"conpvp": ("soft_prompt", {}), "simcse": ("cls", {})}
WORDS = [
    "the",
    "of",
    "a",
    "in",
    "to",
    "and",
    "was",
    "is",
    "for",
    "on",
    "as",
    "by",
    "with",
    "he",
    "at",
    "from",
    "his",
    "an",
    "were",
    "are",
    "which",
    "this",
    "be",
    "it",
]


def sentences(count: int, tokens: int, data_dir: Path) -> list[str]:
    """``count`` sentences of at least ``tokens`` word pieces (Wikipedia sample, or synthetic text)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smoke.model_dir())
    found: list[str] = []
    for path in sorted((data_dir / "unsup" / "wiki1m_sample").glob("*.txt")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if (
                len(found) < count
                and len(tokenizer(line.strip(), add_special_tokens=False)["input_ids"]) >= tokens
            ):
                found.append(line.strip())
    while len(found) < count:  # no data staged: deterministic synthetic sentences
        i = len(found)
        found.append(" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(tokens + 8)))
    return found


def template_overhead(objective) -> int:
    """Most tokens a ConPVP row adds to its sentence (special tokens, soft prompt, template words)."""
    templates = [objective.anchor, *objective.positives, *objective.negatives]
    return max(len(t.head) + len(t.tail) for t in templates)


def build(name: str, tokens: int, device: str, length: str = "sentence"):
    """(objective in train mode, AdamW) on a fresh copy of the default backbone.

    ``length`` ``sentence``: every sentence keeps ``tokens`` word pieces; ``row``: every row has at most
    ``tokens`` tokens in all (see the module docstring).
    """
    import protoembed
    from protoembed.objectives import build_objective

    head, options = OBJECTIVES[name]
    # prompt heads count sentence tokens; plain heads count the whole input ([CLS] + sentence + [SEP])
    max_len = tokens if name == "conpvp" or length == "row" else tokens + 2
    torch.manual_seed(0)
    embedder = protoembed.load(smoke.model_name(), head=head, device=device)
    objective = build_objective(name, embedder, max_seq_length=max_len, **options).to(device).train()
    if name == "conpvp" and length == "row":  # the objective owns the truncation of training inputs
        objective.views.max_seq_length = tokens - template_overhead(objective)
    return objective, torch.optim.AdamW(objective.parameters(), lr=3e-5)


def step(objective, optimizer, batch: list[str]) -> float:
    """One training step; returns the loss."""
    loss = objective(batch)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(loss.detach())


def alternating(names: list[str], steps: int):
    """``(round, name)`` for ``steps`` rounds of ``names``, the order swapped every round (so other load
    on a shared machine hits every variant alike)."""
    for i in range(steps):
        for name in names if i % 2 == 0 else names[::-1]:
            yield i, name


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure_rss(name: str, args: argparse.Namespace) -> None:
    """Subprocess mode: max-RSS rise of ``steps`` training steps of one objective, printed as JSON."""
    data = sentences(args.batch_size * args.memory_steps, args.tokens, Path(args.data_dir))
    objective, optimizer = build(name, args.tokens, "cpu", args.length)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    for i in range(args.memory_steps):
        step(objective, optimizer, data[i * args.batch_size : (i + 1) * args.batch_size])
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"rise_mib": (after - before) / 1024, "max_rss_mib": after / 1024}))


def cpu_memory(name: str, args: argparse.Namespace) -> str:
    command = [sys.executable, __file__, "--measure-rss", name, "--batch-size", str(args.batch_size)]
    command += [
        "--tokens",
        str(args.tokens),
        "--length",
        args.length,
        "--data-dir",
        args.data_dir,
        "--memory-steps",
        str(args.memory_steps),
    ]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    result = json.loads(out)
    return (
        f"peak memory +{result['rise_mib']:.0f} MiB max RSS over set-up "
        f"({result['max_rss_mib']:.0f} MiB in all; fresh process, {args.memory_steps} steps)"
    )


def sts_pairs(data_dir: Path, count: int) -> list[tuple[str, str, float]]:
    """The first ``count`` (sentence1, sentence2, score) pairs of STS-B train (read by protoembed's reader)."""
    from protoembed.data.training.formats import read_examples

    examples = read_examples(data_dir / "senteval/STS/STSBenchmark/sts-train.csv", "stsb")
    columns = examples.columns
    rows = list(zip(columns["sentence1"], columns["sentence2"], columns["score"]))
    if len(rows) < count:
        raise SystemExit(f"STS-B train has {len(rows)} pairs, {count} needed: lower --steps or --batch-size")
    return rows[:count]


class SiameseStep:
    """One supervised training step: protoembed's ``cosine_regression`` or sentence-transformers' own."""

    def __init__(self, system: str, device: str, lr: float, head: str = "mean") -> None:
        torch.manual_seed(0)
        self.system, self.device = system, device
        if system == "protoembed":
            import protoembed
            from protoembed.objectives import build_objective

            embedder = protoembed.load(smoke.model_name(), head=head, device=device)
            self.model = build_objective("cosine_regression", embedder).to(device).train()
            from protoembed.training.config_models import DROPOUT_KERNELS
            from protoembed.training.dropout import dropout_kernel

            self.dropout = lambda: dropout_kernel(DROPOUT_KERNELS[0], torch.device(device))
            self.backbone = embedder.encoder.auto_model
        else:
            from sentence_transformers import SentenceTransformer
            from sentence_transformers.sentence_transformer.losses import CosineSimilarityLoss

            self.st = SentenceTransformer(smoke.model_dir(), device=device)
            self.model = CosineSimilarityLoss(self.st).train()
            self.backbone = self.st[0].auto_model
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr)

    def __call__(self, batch: list[tuple[str, str, float]]) -> float:
        s1, s2, scores = (list(column) for column in zip(*batch))
        if self.system == "protoembed":  # its dropout masks drawn as a training run draws them
            with self.dropout():
                loss = self.model({"sentence1": s1, "sentence2": s2, "score": scores})
                loss.backward()
        else:
            from sentence_transformers.util import batch_to_device

            features = [batch_to_device(self.st.preprocess(s), self.st.device) for s in (s1, s2)]
            labels = torch.tensor(scores, device=self.st.device) / 5
            loss = self.model(features, labels)
            loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())


def siamese_main(args: argparse.Namespace) -> None:
    """Alternate protoembed's and sentence-transformers' STS-B steps, print both, then ``ratio=``."""
    device, size = args.device, args.batch_size
    pairs = sts_pairs(Path(args.data_dir), size * (args.steps + 1))
    batches = [pairs[i * size : (i + 1) * size] for i in range(args.steps + 1)]
    if args.head:  # protoembed with that head against protoembed with the mean head
        runs = {
            f"protoembed {args.head}": SiameseStep("protoembed", device, lr=2e-5, head=args.head),
            "protoembed mean": SiameseStep("protoembed", device, lr=2e-5),
        }
    else:
        runs = {name: SiameseStep(name, device, lr=2e-5) for name in ("protoembed", "sentence-transformers")}
    print(
        f"STS-B train step, cosine regression, default backbone (all-MiniLM-L6-v2, mean head), device "
        f"{device}, batch {size} pairs, AdamW lr 2e-5, {args.steps} alternating rounds (+1 warm-up), "
        f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.2f}"
    )
    forwards: dict[str, list[tuple[int, int, int]]] = {name: [] for name in runs}
    for name, run in runs.items():  # warm-up, and the forwards of one step
        # sentence-transformers calls the backbone's forward() directly (no module hooks): watch the
        # embedding layer, which both call as a module, and count non-padding ids
        pad = run.backbone.config.pad_token_id

        def watch(module, args, kwargs, name=name, pad=pad) -> None:
            ids = kwargs["input_ids"] if kwargs.get("input_ids") is not None else args[0]
            forwards[name].append((*ids.shape, int((ids != pad).sum())))

        hook = run.backbone.embeddings.register_forward_pre_hook(watch, with_kwargs=True)
        run(batches[0])
        hook.remove()
    times: dict[str, list[float]] = {name: [] for name in runs}
    order = list(runs)
    for i, name in alternating(order, args.steps):
        _sync(device)
        start = time.perf_counter()
        runs[name](batches[i + 1])
        _sync(device)
        times[name].append(time.perf_counter() - start)
    best = {name: min(values) for name, values in times.items()}
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"{'system':>21}  steps/s  best ms  median ms  forwards of one step (rows x width, non-padding)")
    for name in runs:
        shapes = " + ".join(f"{r}x{w} ({t})" for r, w, t in forwards[name])
        print(
            f"{name:>21}  {1 / best[name]:7.2f}  {best[name] * 1000:7.0f}  {median[name] * 1000:9.0f}  {shapes}"
        )
    if args.head:
        head, mean = list(runs)
        print(
            f"median-step ratio {median[head] / median[mean]:.3f} ({args.head} / mean step time; sensitive to load)"
        )
        print(f"ratio={best[head] / best[mean]:.3f}")
        return
    pe, st = "protoembed", "sentence-transformers"
    print(
        f"median-step ratio {median[st] / median[pe]:.3f} (protoembed steps/s / ST steps/s; sensitive to load)"
    )
    print(f"ratio={best[st] / best[pe]:.3f}")


def cache_main(args: argparse.Namespace) -> None:
    """``--mini-batch-size M``: the GradCache step against the plain step of the same objective at equal
    batch, and the data time of a step (what the training loader's collate does: tokenise, build the
    views, pad) against its model time (forward, backward, optimizer step), both through the trainer's
    own :func:`protoembed.training.step.forward_backward`. Plain and cached steps alternate (order swapped
    every round) on the same batches. Last line: ``ratio=<cached step time / plain step time>`` (best
    steps; target: at most 1.4)."""
    from accelerate import Accelerator

    from protoembed.training.step import forward_backward

    device, size, name = args.device, args.batch_size, args.cache_objective
    accelerator = Accelerator(cpu=not device.startswith("cuda"))
    objective, optimizer = build(name, args.tokens, device, args.length)
    model, optimizer = accelerator.prepare(objective, optimizer)
    data = sentences(size * (args.steps + 1), args.tokens, Path(args.data_dir))
    batches = [data[i * size : (i + 1) * size] for i in range(args.steps + 1)]
    variants = {"plain": None, "cached": args.mini_batch_size}
    data_times: list[float] = []
    model_times: dict[str, list[float]] = {v: [] for v in variants}

    def one(variant: str, batch: list[str]) -> None:
        start = time.perf_counter()
        views = objective.collate(batch)
        collated = time.perf_counter()
        forward_backward(accelerator, model, views, variants[variant])
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        _sync(device)
        data_times.append(collated - start)
        model_times[variant].append(time.perf_counter() - collated)

    for variant in variants:  # warm-up
        one(variant, batches[0])
    data_times.clear()
    model_times = {v: [] for v in variants}
    order = list(variants)
    for i, variant in alternating(order, args.steps):
        one(variant, batches[i + 1])
    rows = len(objective.collate(batches[0]))
    print(
        f"{name}, default backbone (all-MiniLM-L6-v2), device {device}, batch {size} ({rows} rows), "
        f"{args.tokens} sentence tokens, mini_batch_size {args.mini_batch_size}, {args.steps} alternating "
        f"rounds (+1 warm-up), torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.2f}"
    )
    best = {v: min(t) for v, t in model_times.items()}
    median = {v: statistics.median(t) for v, t in model_times.items()}
    for variant in variants:
        print(
            f"{variant:>7}: {1 / best[variant]:6.2f} steps/s (best model time {best[variant] * 1000:.0f} ms, "
            f"median {median[variant] * 1000:.0f} ms)"
        )
    data_median = statistics.median(data_times)
    print(
        f"data time per step {data_median * 1000:.1f} ms (median collate, main process) against model time "
        f"{median['plain'] * 1000:.0f} ms (median plain step): data/model ratio {data_median / median['plain']:.4f}"
    )
    print(f"median-step ratio {median['cached'] / median['plain']:.3f} (cached / plain; sensitive to load)")
    print(f"ratio={best['cached'] / best['plain']:.3f}")


def bf16_main(args: argparse.Namespace) -> None:
    """``--bf16``: the bf16 mixed-precision training step against the fp32 one (see the module docstring)."""
    from accelerate import Accelerator

    from protoembed.model.precision import cpu_features, native_bf16
    from protoembed.training.step import forward_backward

    device, size, name = args.device, args.batch_size, args.cache_objective
    cpu = not device.startswith("cuda")
    accelerator = Accelerator(cpu=cpu)  # one per process: bf16 wraps the forward as its mixed precision does
    runs = {}
    for precision in ("fp32", "bf16"):
        objective, optimizer = build(name, args.tokens, device, args.length)  # the same seed: equal weights
        model, optimizer = accelerator.prepare(objective, optimizer)
        if precision == "bf16":
            autocast = torch.autocast(device_type="cuda" if not cpu else "cpu", dtype=torch.bfloat16)
            model.forward = autocast(model.forward)
        runs[precision] = (accelerator, objective, model, optimizer)
    data = sentences(size * (args.steps + 1), args.tokens, Path(args.data_dir))
    batches = [data[i * size : (i + 1) * size] for i in range(args.steps + 1)]
    times: dict[str, list[float]] = {p: [] for p in runs}
    losses: dict[str, float] = {}

    def one(precision: str, batch: list[str]) -> None:
        accelerator, objective, model, optimizer = runs[precision]
        views = objective.collate(batch)
        _sync(device)
        start = time.perf_counter()
        losses[precision] = float(forward_backward(accelerator, model, views, None))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        _sync(device)
        times[precision].append(time.perf_counter() - start)

    for precision in runs:  # warm-up: the same first batch, weights and dropout masks in both precisions
        torch.manual_seed(1234)
        one(precision, batches[0])
    first = dict(losses)
    times = {p: [] for p in runs}
    order = list(runs)
    for i, precision in alternating(order, args.steps):
        one(precision, batches[i + 1])
    features = ", ".join(f"{flag} {'yes' if on else 'no'}" for flag, on in cpu_features().items())
    print(
        f"{name}, default backbone (all-MiniLM-L6-v2), device {device} (native bf16: "
        f"{'yes' if native_bf16(device) else 'no'}; {features}), batch {size}, {args.tokens} sentence tokens, "
        f"{args.steps} alternating rounds (+1 warm-up), torch threads {torch.get_num_threads()}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    best = {p: min(t) for p, t in times.items()}
    median = {p: statistics.median(t) for p, t in times.items()}
    for precision in runs:
        print(
            f"{precision}: {1 / best[precision]:6.2f} steps/s (best step {best[precision] * 1000:.0f} ms, "
            f"median {median[precision] * 1000:.0f} ms); first-batch loss {first[precision]:.4f}"
        )
    print(f"median-step ratio {median['bf16'] / median['fp32']:.3f} (bf16 / fp32; sensitive to load)")
    print(f"ratio={best['bf16'] / best['fp32']:.3f}")


#: The phases of a step the ``--breakdown`` mode times (see :func:`breakdown_main`).
PHASES = ("data", "copy", "forward", "backward", "optimizer", "read loss", "other")


def tiny_default(device: str):
    """A 1-layer, 32-wide BERT with random weights and the default model's tokenizer, in a temp folder
    (the model costs next to nothing: what is left of a step is what is not the model)."""
    import tempfile

    from transformers import AutoTokenizer, BertConfig, BertModel

    from protoembed.model.backbones import default_model_path

    folder = Path(tempfile.mkdtemp(prefix="protoembed-tiny-"))
    tokenizer = AutoTokenizer.from_pretrained(default_model_path())
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
    )
    BertModel(config, add_pooling_layer=False).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def breakdown_main(args: argparse.Namespace) -> None:
    """``--breakdown``: where a ConPVP step's time goes, as the trainer ran it before (``plain``: AdamW's
    per-parameter loop, the batch collated in the main process, the loss read every step) and as it runs
    now (``trainer``: :func:`protoembed.training.components.adamw`, the batches from a DataLoader with
    ``--workers`` processes (pinned on CUDA), the loss read every ``--log-steps`` steps).

    Two passes each, alternating, on the same batches: one with the device synchronised after every
    phase (the breakdown: ``data`` = collating (tokenising, building the views, padding) or, for
    ``trainer``, waiting on the loader; ``copy`` to the device; ``forward``; ``backward``; ``optimizer``
    step; ``read loss`` (the host waiting for the loss); ``other``: the rest of the step, Python between
    the phases), one without (the step as it runs: steps/s, tokens/s and MFU by
    :mod:`protoembed.training.throughput`). ``--model tiny`` (default): a 1-layer, 32-wide BERT with the
    default tokenizer, so what is not the model shows; ``default``: all-MiniLM-L6-v2.
    Last line: ``ratio=<trainer steps/s / plain steps/s>`` (unsynchronised passes, median step).
    """
    import protoembed
    from protoembed.model.precision import cpu_features
    from protoembed.objectives import build_objective
    from protoembed.training.components import adamw, loader_workers
    from protoembed.training.throughput import device_peak_flops, flop_params, mfu

    device, size = torch.device(args.device), args.batch_size
    workers = loader_workers(args.workers, device)
    spec = str(tiny_default(args.device)) if args.model == "tiny" else "default"
    data = sentences(size * args.steps, args.tokens, Path(args.data_dir))
    batches = [data[i * size : (i + 1) * size] for i in range(args.steps)]

    def build(variant: str):
        torch.manual_seed(0)
        embedder = protoembed.load(spec, head="soft_prompt", device=str(device))
        objective = build_objective("conpvp", embedder, max_seq_length=args.tokens).to(device).train()
        if variant == "plain":
            optimizer = torch.optim.AdamW(objective.parameters(), lr=3e-5, foreach=False, fused=False)
        else:
            optimizer = adamw([{"params": list(objective.parameters())}], 3e-5, device)
        return objective, optimizer

    runs = {variant: build(variant) for variant in ("plain", "trainer")}
    backbone = runs["plain"][0].embedder.encoder.auto_model
    params, peak = flop_params(backbone), device_peak_flops(device, "fp32")

    def loader(objective):
        if objective is runs["plain"][0]:
            return (objective.collate(batch) for batch in batches)
        return iter(
            torch.utils.data.DataLoader(
                batches,
                batch_size=None,
                collate_fn=objective.collate,
                num_workers=workers,
                pin_memory=device.type == "cuda",
            )
        )

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    def one_pass(variant: str, timed: bool) -> tuple[dict[str, float], float, int]:
        """A pass over the batches: median ms per phase (timed), median step seconds, tokens per step."""
        objective, optimizer = runs[variant]
        read_every = 1 if variant == "plain" else args.log_steps
        phases: dict[str, list[float]] = {phase: [] for phase in PHASES}
        steps: list[float] = []
        tokens = 0
        batches_in = loader(objective)
        pending: list[torch.Tensor] = []
        sync()
        last = time.perf_counter()
        for i in range(len(batches)):
            marks = [time.perf_counter()]

            def mark(marks: list[float] = marks) -> None:
                if timed:
                    sync()
                marks.append(time.perf_counter())

            views = next(batches_in)
            mark()
            tokens = int(views.lengths.sum())
            views = views.to(device, non_blocking=device.type == "cuda")
            mark()
            loss = objective(views)
            mark()
            loss.backward()
            mark()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            mark()
            pending.append(loss.detach())
            if (i + 1) % read_every == 0 or i + 1 == len(batches):
                [float(v) for v in torch.stack(pending).tolist()]
                pending = []
            mark()
            now = time.perf_counter()
            steps.append(now - last)
            if timed:
                spans = [b - a for a, b in zip(marks, marks[1:])]
                for phase, span in zip(PHASES, spans):
                    phases[phase].append(span)
                phases["other"].append((now - last) - sum(spans))
            last = now
        # the first step pays the loader's start (workers): left out of the medians
        return (
            {phase: statistics.median(v[1:]) * 1000 for phase, v in phases.items() if v},
            statistics.median(steps[1:]),
            tokens,
        )

    timed: dict[str, list[dict[str, float]]] = {v: [] for v in runs}
    free: dict[str, list[float]] = {v: [] for v in runs}
    token_count = 0
    for _, variant in alternating(list(runs), args.rounds):
        phases, _, _ = one_pass(variant, True)
        timed[variant].append(phases)
        _, step, token_count = one_pass(variant, False)
        free[variant].append(step)
    features = ", ".join(f"{flag} {'yes' if on else 'no'}" for flag, on in cpu_features().items())
    print(
        f"conpvp step breakdown, model {args.model} ({params:,} parameters in the 6N count), device "
        f"{device} ({features}), batch {size} ({3 * size} rows), {args.tokens} sentence tokens, "
        f"{len(batches)} steps x {args.rounds} rounds per variant, trainer workers {workers}, "
        f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'phase (median ms)':>18}  " + "  ".join(f"{v:>16}" for v in runs))
    best = {v: min(rounds, key=lambda r: sum(r.values())) for v, rounds in timed.items()}
    for phase in PHASES:
        cells = []
        for variant in runs:
            total = sum(best[variant].values())
            value = best[variant][phase]
            cells.append(f"{value:8.2f} ({value / total:4.0%})")
        print(f"{phase:>18}  " + "  ".join(f"{c:>16}" for c in cells))
    views = runs["plain"][0].views
    tokenising = []
    for batch in batches:
        start = time.perf_counter()
        views.sentence_ids(batch)
        tokenising.append(time.perf_counter() - start)
    print(
        f"{'of data: tokenising':>18}  {statistics.median(tokenising) * 1000:8.2f} ms (the tokenizer alone)"
    )
    step = {v: min(values) for v, values in free.items()}
    for variant in runs:
        rate = token_count / step[variant]
        utilisation = mfu(params, rate, peak)
        shown = "unknown (no peak for this device)" if utilisation is None else f"{utilisation:.2%}"
        print(f"{variant}: {1 / step[variant]:.2f} steps/s unsynchronised, {rate:,.0f} tokens/s, MFU {shown}")
    print(f"ratio={step['plain'] / step['trainer']:.3f}")


def main() -> None:
    """Alternate ConPVP and SimCSE steps (or, with ``--objective``, protoembed's and sentence-transformers'
    supervised steps), print both, then ``ratio=``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--objective",
        choices=("cosine_regression",),
        help="time this supervised objective against sentence-transformers' own step instead",
    )
    parser.add_argument(
        "--head",
        choices=("cnn",),
        help="with --objective: time protoembed's step with this head against its mean-head step",
    )
    parser.add_argument("--batch-size", type=int, default=None, help="default 16 (32 with --objective)")
    parser.add_argument("--steps", type=int, default=None, help="default 10 (20 rounds with --objective)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tokens", type=int, default=32, help="sequence length in word pieces")
    parser.add_argument(
        "--length",
        choices=("sentence", "row"),
        default="sentence",
        help="what --tokens bounds: each sentence (templates on top) or each whole row",
    )
    parser.add_argument("--data-dir", default=os.environ.get("PROTOEMBED_DATA", "../shared/data"))
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's own choice)")
    parser.add_argument(
        "--mini-batch-size",
        type=int,
        help="time the GradCache step with this mini-batch against the plain step (and data vs model time)",
    )
    parser.add_argument("--cache-objective", choices=sorted(OBJECTIVES), default="conpvp")
    parser.add_argument(
        "--bf16", action="store_true", help="time the bf16 mixed-precision training step against the fp32 one"
    )
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="where a ConPVP step's time goes: the plain loop against the trainer's (see breakdown_main)",
    )
    parser.add_argument("--model", choices=("tiny", "default"), default="tiny", help="--breakdown's model")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="--breakdown: the trainer's loader workers (default: its own)",
    )
    parser.add_argument(
        "--log-steps", type=int, default=10, help="--breakdown: the trainer reads the loss every N"
    )
    parser.add_argument("--rounds", type=int, default=2, help="--breakdown: alternating rounds per variant")
    parser.add_argument("--memory-steps", type=int, default=2, help=argparse.SUPPRESS)
    parser.add_argument("--measure-rss", choices=sorted(OBJECTIVES), help=argparse.SUPPRESS)
    smoke.add_argument(parser)
    args = parser.parse_args()
    if args.smoke:  # whichever mode is asked for, small
        smoke.enable()
        smoke.tiny_model()  # built once, for the memory children too
        args.batch_size, args.steps, args.tokens, args.memory_steps = 4, 2, 16, 1
        args.mini_batch_size = args.mini_batch_size and 2
    if args.batch_size is None:
        args.batch_size = 32 if args.objective else 16
    if args.steps is None:
        args.steps = 20 if args.objective else 10
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.objective:
        siamese_main(args)
        return
    if args.mini_batch_size:
        cache_main(args)
        return
    if args.bf16:
        bf16_main(args)
        return
    if args.breakdown:
        breakdown_main(args)
        return
    if args.measure_rss:
        measure_rss(args.measure_rss, args)
        return

    device = args.device
    memory: dict[str, str] = {}
    if (
        args.smoke
    ):  # two more interpreters; the children's code runs in the smoke run of the other modes' rows
        memory = dict.fromkeys(OBJECTIVES, "peak memory not measured in a smoke run")
    elif not device.startswith("cuda"):  # first: a child's max RSS starts at its parent's at fork time
        memory = {name: cpu_memory(name, args) for name in OBJECTIVES}
    data = sentences(args.batch_size * (args.steps + 1), args.tokens, Path(args.data_dir))
    batches = [data[i * args.batch_size : (i + 1) * args.batch_size] for i in range(args.steps + 1)]
    runs = {name: build(name, args.tokens, device, args.length) for name in OBJECTIVES}
    bound = "sentence tokens" if args.length == "sentence" else "tokens per row at most"
    print(
        f"default backbone (all-MiniLM-L6-v2), device {device}, batch {args.batch_size}, "
        f"{args.tokens} {bound}, {args.steps} timed steps each (+1 warm-up), "
        f"torch threads {torch.get_num_threads()}"
    )
    shapes: dict[str, list[tuple[int, int, int]]] = {name: [] for name in runs}
    for name, (objective, optimizer) in runs.items():  # warm-up, and the tokens one step encodes
        hook = objective.embedder.encoder.auto_model.register_forward_pre_hook(
            lambda module, a, kw, name=name: shapes[name].append(
                (*kw["attention_mask"].shape, int(kw["attention_mask"].sum()))
            ),
            with_kwargs=True,
        )
        step(objective, optimizer, batches[0])
        hook.remove()
    times: dict[str, list[float]] = {name: [] for name in runs}
    peaks: dict[str, float] = dict.fromkeys(runs, 0.0)
    order = list(runs)
    for i, name in alternating(order, args.steps):
        objective, optimizer = runs[name]
        _sync(device)
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        start = time.perf_counter()
        step(objective, optimizer, batches[i + 1])
        _sync(device)
        times[name].append(time.perf_counter() - start)
        if device.startswith("cuda"):
            peaks[name] = max(peaks[name], (torch.cuda.max_memory_allocated() - base) / 2**20)
    median = {name: statistics.median(values) for name, values in times.items()}
    best = {name: min(values) for name, values in times.items()}
    for name in runs:
        if device.startswith("cuda"):
            memory[name] = f"peak memory +{peaks[name]:.0f} MiB allocated during a step"
        forwards = " + ".join(f"{rows} x {width}" for rows, width, _ in shapes[name])
        real = sum(n for _, _, n in shapes[name])
        print(
            f"{name:>7}: {1 / best[name]:6.2f} steps/s (best step {best[name] * 1000:.0f} ms, "
            f"median {median[name] * 1000:.0f} ms); "
            f"forwards of one step (rows x tokens) {forwards} ({real} non-padding); {memory[name]}"
        )
    print(f"median-step ratio {median['conpvp'] / median['simcse']:.3f} (sensitive to other load)")
    print(f"ratio={best['conpvp'] / best['simcse']:.3f}")


if __name__ == "__main__":
    main()
