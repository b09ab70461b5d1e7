"""Peak memory of one training step, plain against GradCache (``training.mini_batch_size``).

Rows: ConPVP (3 views, soft-prompt anchor) and SimCSE (2 views, ``cls``) x batch 64, 128, 256, 512 x
plain / cached (``mini_batch_size`` 32, Gao et al. 2021) x fp32 / bf16 (Accelerate's ``mixed_precision``)
x backbone: the default one (all-MiniLM-L6-v2) and random-weight models of the papers' shapes, built from
a ``transformers`` config without weights (``bert-base``: BertConfig's defaults, 12 x 768;
``roberta-large``: 24 x 1024, 16 heads, vocabulary 50265), all read through the default tokenizer.
Sentences: the staged Wikipedia sample (``$PROTOEMBED_DATA/unsup/wiki1m_sample``), truncated to
``--tokens`` (32, the papers') word pieces, templates on top for ConPVP.

A step is the trainer's own :func:`protoembed.training.step.forward_backward` (the objective prepared by
Accelerate, the batch already collated): forward, backward, gradients in ``.grad``; the optimizer step is
left out (AdamW's two moments, 8 bytes per parameter, come on top and do not depend on the batch).
Measured: on CUDA ``torch.cuda.max_memory_allocated`` during the step minus the memory allocated before
it; on CPU the rise of the resident set during the step (the high-water mark ``VmHWM`` reset through
``/proc/self/clear_refs`` before it, read after it), each row in a fresh subprocess. ``params_mib`` is the
fp32 weights; a GPU needs about ``weights + 2 x weights (AdamW) + step peak``.

    python benchmarks/memory.py [--device cpu|cuda] [--models default,bert-base,roberta-large]
        [--objectives conpvp,simcse] [--batches 64,128,256,512] [--precisions fp32,bf16]
        [--variants plain,cached] [--mini-batch-size 32] [--layers N] [--threads T] [--row-timeout S]

``--layers N`` keeps the shapes' width but only ``N`` layers (activations grow linearly with the depth;
for a quick CPU run). A row that fails or runs past ``--row-timeout`` is printed as such.
Last line: ``ratio=<plain peak / cached peak, ConPVP, BERT-base shape, batch 256 (the largest batch run when
256 was not), first precision>`` (``ratio=nan`` when that pair of rows was not run).

``--smoke`` (checks that the script runs; measures nothing): ConPVP on the BERT-base shape cut to one
layer, batch 16, plain and cached (mini-batch 8), fp32, the default backbone replaced by a tiny random model
(whose tokenizer every shape then reads).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

import smoke

OBJECTIVES = {"conpvp": "soft_prompt", "simcse": "cls"}
MODELS = ("default", "bert-base", "roberta-large")


def backbone(model: str, layers: int | None):
    """``(auto_model, tokenizer)``: the default backbone, or a random-weight model of a paper's shape."""
    from transformers import AutoModel, AutoTokenizer, BertConfig, RobertaConfig

    tokenizer = AutoTokenizer.from_pretrained(smoke.model_dir())
    torch.manual_seed(0)
    if model == "default":
        auto = AutoModel.from_pretrained(smoke.model_dir())
        if layers:
            auto.encoder.layer = auto.encoder.layer[:layers]
            auto.config.num_hidden_layers = layers
        return auto, tokenizer
    if model == "bert-base":
        config = BertConfig(vocab_size=max(30522, len(tokenizer)), pad_token_id=tokenizer.pad_token_id)
    elif model == "roberta-large":
        config = RobertaConfig(
            vocab_size=50265,
            hidden_size=1024,
            num_hidden_layers=24,
            num_attention_heads=16,
            intermediate_size=4096,
            max_position_embeddings=514,
            type_vocab_size=1,
            pad_token_id=tokenizer.pad_token_id,
        )
    else:
        raise SystemExit(f"unknown model {model!r}: expected one of {', '.join(MODELS)}")
    if layers:
        config.num_hidden_layers = layers
    return AutoModel.from_config(config, add_pooling_layer=False), tokenizer


def sentences(count: int, data_dir: Path) -> list[str]:
    """The first ``count`` non-empty lines of the staged Wikipedia sample (cycled if fewer)."""
    lines: list[str] = []
    for path in sorted((data_dir / "unsup" / "wiki1m_sample").glob("*.txt")):
        lines += [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines:
        raise SystemExit(f"no Wikipedia sample under {data_dir / 'unsup' / 'wiki1m_sample'}")
    return list(itertools.islice(itertools.cycle(lines), count))


def _vm_hwm_kib() -> int:
    """Peak resident set of this process since the last reset (``VmHWM``), KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def _vm_rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def measure(row: dict) -> dict:
    """One row (in this process): build, collate, run one step, return the peak and the step's shape."""
    from accelerate import Accelerator

    from protoembed.model.loading import build
    from protoembed.objectives import build_objective
    from protoembed.training.step import forward_backward

    device = row["device"]
    if row.get("threads"):
        torch.set_num_threads(row["threads"])
    accelerator = Accelerator(
        cpu=device == "cpu", mixed_precision="no" if row["precision"] == "fp32" else "bf16"
    )
    auto, tokenizer = backbone(row["model"], row.get("layers"))
    head = OBJECTIVES[row["objective"]]
    embedder = build(auto, tokenizer, head)
    objective = build_objective(row["objective"], embedder, max_seq_length=row["tokens"]).to(
        accelerator.device
    )
    model = accelerator.prepare(objective.train())
    views = objective.collate(sentences(row["batch"], Path(row["data_dir"]))).to(accelerator.device)
    params = sum(p.numel() for p in objective.parameters())
    mini = row["mini_batch_size"] if row["variant"] == "cached" else None
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current resident set
        base = _vm_rss_kib() * 1024
    start = time.perf_counter()
    loss = forward_backward(accelerator, model, views, mini)
    if device == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
    else:
        peak = _vm_hwm_kib() * 1024 - base
    seconds = time.perf_counter() - start
    return {
        **row,
        "rows": len(views),
        "tokens_per_step": int(views.lengths.sum()),
        "peak_mib": peak / 2**20,
        "params_mib": params * 4 / 2**20,
        "step_s": seconds,
        "loss": float(loss),
    }


def run_row(row: dict, timeout: float) -> dict:
    """``measure(row)`` in a fresh interpreter (its own allocator and peak)."""
    command = [sys.executable, __file__, "--row", json.dumps(row)]
    # a fixed mmap threshold: glibc otherwise raises it after big frees and keeps later big blocks in its
    # heap, where memory freed during set-up is reused by the step without showing in the resident set
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072", MALLOC_TRIM_THRESHOLD_="131072")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {**row, "error": f"over {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {**row, "error": f"exit {done.returncode}: {tail[:120]}"}
    return json.loads(lines[-1])


def main() -> None:
    """Run the selected rows, print the table and ``ratio=``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--objectives", default="conpvp,simcse")
    parser.add_argument("--batches", default="64,128,256,512")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--variants", default="plain,cached")
    parser.add_argument("--mini-batch-size", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=32, help="sentence word pieces (max_seq_length)")
    parser.add_argument("--layers", type=int, help="keep only this many layers of every backbone")
    parser.add_argument("--threads", type=int, help="torch threads per row (default: torch's choice)")
    parser.add_argument("--row-timeout", type=float, default=900.0, help="seconds per row")
    parser.add_argument("--data-dir", default=os.environ.get("PROTOEMBED_DATA", "../shared/data"))
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--row", help=argparse.SUPPRESS)
    smoke.add_argument(parser)
    args = parser.parse_args()
    if args.smoke:
        smoke.enable()
        args.models, args.objectives, args.batches, args.precisions = "bert-base", "conpvp", "16", "fp32"
        args.mini_batch_size, args.layers = 8, 1
        smoke.tiny_model()  # built once, for the rows too
    if args.row:
        print(json.dumps(measure(json.loads(args.row))))
        return
    split = lambda text: [x for x in text.split(",") if x]  # noqa: E731
    rows = [
        {
            "device": args.device,
            "model": model,
            "objective": objective,
            "batch": int(batch),
            "precision": precision,
            "variant": variant,
            "mini_batch_size": args.mini_batch_size,
            "tokens": args.tokens,
            "layers": args.layers,
            "threads": args.threads,
            "data_dir": args.data_dir,
        }
        for model, objective, precision, batch, variant in itertools.product(
            split(args.models),
            split(args.objectives),
            split(args.precisions),
            split(args.batches),
            split(args.variants),
        )
    ]
    depth = f", first {args.layers} layer(s) of each backbone" if args.layers else ""
    print(
        f"peak memory of one training step (forward + backward, no optimizer step), device {args.device}, "
        f"{args.tokens} sentence tokens, mini_batch_size {args.mini_batch_size}{depth}; "
        f"{'max_memory_allocated' if args.device == 'cuda' else 'resident-set rise, fresh process per row'}"
    )
    header = (
        f"{'model':>13} {'objective':>9} {'prec':>4} {'batch':>5} {'variant':>7} {'rows':>5} "
        f"{'tokens':>6} {'peak MiB':>9} {'MiB/row':>8} {'params MiB':>10} {'step s':>7}"
    )
    print(header)
    results = []
    for row in rows:
        result = run_row(row, args.row_timeout)
        results.append(result)
        prefix = (
            f"{row['model']:>13} {row['objective']:>9} {row['precision']:>4} {row['batch']:>5} "
            f"{row['variant']:>7}"
        )
        if "error" in result:
            print(f"{prefix}  -- {result['error']}")
        else:
            print(
                f"{prefix} {result['rows']:>5} {result['tokens_per_step']:>6} {result['peak_mib']:>9.0f} "
                f"{result['peak_mib'] / result['rows']:>8.2f} {result['params_mib']:>10.0f} "
                f"{result['step_s']:>7.1f}",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    first = split(args.precisions)[0]
    batches = [int(b) for b in split(args.batches)]
    batch = 256 if 256 in batches else max(batches)
    pick = {
        r["variant"]: r["peak_mib"]
        for r in results
        if "error" not in r
        and (r["model"], r["objective"], r["batch"], r["precision"]) == ("bert-base", "conpvp", batch, first)
    }
    ratio = pick["plain"] / pick["cached"] if {"plain", "cached"} <= pick.keys() else float("nan")
    print(f"ratio={ratio:.2f}")


if __name__ == "__main__":
    main()
