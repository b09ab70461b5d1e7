"""How fast the encode pipeline feeds a model: the host-side ceiling a GPU run cannot exceed.

The model costs next to nothing (a 1-layer, 32-wide BERT with random weights and the default model's
tokenizer, ``max_seq_length`` 256 as the default model's), so what is timed is everything around the
forward: tokenisation, batching, padding, moving the vectors. Three rows on the same distinct SentEval
STS sentences (STS12-16 and STS-B, ``--data-dir``) and batch size, in alternating rounds (other load on
the machine hits every row alike), best round of each:

- ``tokenizer alone``: the bound. The tokenizer's own batched call, batches of ``--batch-size``
  sentences in input order padded to tensors (``padding=True, truncation=True, return_tensors="pt"``),
  by N threads (one batch each at a time);
- ``protoembed``: ``Embedder.encode(sentences, tokenizer_workers=N)`` on the tiny model, and the share of
  its time spent waiting on tokenisation (the forward thread blocked on the next chunk);
- ``sentence-transformers``: ``SentenceTransformer.encode`` of the same model saved by protoembed and
  loaded from that folder (its own tokenisation, in the calling thread).

for N = 1, 2 and more where the cores allow (``--workers``). Every run sets
``TOKENIZERS_PARALLELISM=false``, as the ``protoembed`` command does, and runs the forward on
``--torch-threads`` threads (default 1: on a GPU one host thread launches the forward; the tiny model's
operations are too small to gain from more, and an intra-op team on every core would contend with the
tokenizer threads for the cores this benchmark measures). The vectors of the two encoders
are compared (largest absolute difference, on the first sentences). Last lines:
``efficiency=<protoembed's best / the tokenizer alone on one thread>`` (the tokenizer's own throughput as
the ``protoembed`` command runs it, ``TOKENIZERS_PARALLELISM=false``; the line above it compares with the
tokenizer alone's best at any number of threads) and
``ratio=<protoembed's best / sentence-transformers>``.

    python benchmarks/feed_rate.py [--runs 3] [--batch-size 64] [--limit N] [--workers 1 2]
        [--data-dir ../shared/data] [--smoke]

``--smoke``: a few hundred sentences, one round, one worker (seconds; the tests run it).
"""

from __future__ import annotations

import os

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # as the protoembed command sets it

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from machine import cpu_line, load_line

#: SentEval's STS test sets: the input files of STS12-16 (two tab-separated sentences a line) and
#: STS-B's splits (sentences in columns 6 and 7).
STS_INPUTS = ("STS12-en-test", "STS13-en-test", "STS14-en-test", "STS15-en-test", "STS16-en-test")
STSB_SPLITS = ("sts-train.csv", "sts-dev.csv", "sts-test.csv")
MAX_SEQ_LENGTH = 256  # the default model's
SMOKE_SENTENCES = 300
DEFAULT_SENTENCES = 20_000  # of the 41,251 distinct: a run of a minute or two on 2 cores
WARM_UP = 2000


def sts_sentences(data_dir: Path) -> list[str]:
    """Every distinct sentence of SentEval's STS12-16 inputs and STS-B splits, in file order."""
    root = data_dir / "senteval" / "STS"
    seen: dict[str, None] = {}
    for name in STS_INPUTS:
        for path in sorted((root / name).glob("STS.input.*.txt")):
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                seen.update(dict.fromkeys(part.strip() for part in line.split("\t")[:2]))
    for split in STSB_SPLITS:
        for line in (root / "STSBenchmark" / split).read_text(encoding="utf-8").splitlines():
            seen.update(dict.fromkeys(part.strip() for part in line.split("\t")[5:7]))
    return [text for text in seen if text]


def tiny_model(folder: Path):
    """The near-free model: a 1-layer, 32-wide random BERT with the default model's tokenizer, as a
    protoembed model saved to ``folder`` (sentence-transformers' layout) and loaded back."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    import protoembed
    from protoembed.model.backbones import default_model_path, quiet_transformers

    torch.manual_seed(0)
    with quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
        config = BertConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=512,
        )
        BertModel(config, add_pooling_layer=False).save_pretrained(str(folder / "backbone"))
        tokenizer.save_pretrained(str(folder / "backbone"))
    model = protoembed.load(
        str(folder / "backbone"), head="mean", max_seq_length=MAX_SEQ_LENGTH, device="cpu"
    )
    saved = model.save(folder / "model")
    return protoembed.load(str(saved), device="cpu"), saved


def tokenizer_alone(tokenizer, sentences: list[str], batch_size: int, workers: int) -> Callable[[], None]:
    """The bound: the tokenizer's batched call on batches of ``batch_size``, padded to tensors, by
    ``workers`` threads."""
    batches = [sentences[i : i + batch_size] for i in range(0, len(sentences), batch_size)]

    def one(batch: list[str]) -> object:
        return tokenizer(batch, padding=True, truncation=True, max_length=MAX_SEQ_LENGTH, return_tensors="pt")

    if workers == 1:
        return lambda: [one(batch) for batch in batches] and None
    pool = ThreadPoolExecutor(workers)
    return lambda: list(pool.map(one, batches)) and None


class Waiting:
    """Time the encode's forward thread spends waiting for tokenised chunks (wraps
    :meth:`protoembed.model.batching.BatchEncoder._pipeline`, the generator the forward loop pulls from)."""

    def __init__(self) -> None:
        from protoembed.model.batching import BatchEncoder

        self.seconds = 0.0
        original = BatchEncoder._pipeline
        meter = self

        def timed(self, *args, **kwargs):
            chunks = original(self, *args, **kwargs)
            while True:
                start = time.perf_counter()
                try:
                    chunk = next(chunks)
                except StopIteration:
                    return
                finally:
                    meter.seconds += time.perf_counter() - start
                yield chunk

        BatchEncoder._pipeline = timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="alternating rounds; each row's best is kept")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_SENTENCES,
        help=f"the first N sentences (default {DEFAULT_SENTENCES})",
    )
    parser.add_argument("--workers", type=int, nargs="+", default=None, help="tokenizer threads to try")
    parser.add_argument("--data-dir", default=os.environ.get("PROTOEMBED_DATA", "../shared/data"))
    parser.add_argument("--torch-threads", type=int, default=1, help="threads of the forward (default 1)")
    parser.add_argument(
        "--smoke", action="store_true", help=f"{SMOKE_SENTENCES} sentences, one round, 1 worker"
    )
    args = parser.parse_args()

    import sentence_transformers
    import tokenizers
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer

    import protoembed
    from protoembed.core.threads import usable_cores
    from protoembed.model.backbones import quiet_transformers

    torch.set_num_threads(args.torch_threads)
    sentences = sts_sentences(Path(args.data_dir))
    limit = SMOKE_SENTENCES if args.smoke else args.limit
    sentences = sentences[:limit]
    runs = 1 if args.smoke else args.runs
    cores = len(usable_cores())
    workers = args.workers or ([1] if args.smoke else sorted({1, 2, *([cores - 1] if cores > 3 else [])}))
    words = np.mean([len(s.split()) for s in sentences])
    print(cpu_line())
    print(f"{load_line()}; {cores} usable cores; torch threads {torch.get_num_threads()}")
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, tokenizers {tokenizers.__version__}, "
        f"sentence-transformers {sentence_transformers.__version__}, protoembed {protoembed.__version__}"
    )
    print(
        f"{len(sentences)} distinct SentEval STS sentences (mean {words:.1f} words), batch {args.batch_size}, "
        f"max_seq_length {MAX_SEQ_LENGTH}; model: 1-layer 32-wide random BERT, the default model's tokenizer; "
        f"best of {runs} alternating round(s)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        model, saved = tiny_model(Path(tmp))
        with quiet_transformers():
            st = SentenceTransformer(str(saved), device="cpu")
            tokenizer = AutoTokenizer.from_pretrained(str(saved))  # its own, as sentence-transformers has
        waiting = Waiting()
        rows: dict[str, Callable[[], object]] = {
            "sentence-transformers": lambda: st.encode(
                sentences, batch_size=args.batch_size, show_progress_bar=False, convert_to_numpy=True
            )
        }
        for n in workers:
            rows[f"tokenizer alone, {n} thread(s)"] = tokenizer_alone(
                tokenizer, sentences, args.batch_size, n
            )
            rows[f"protoembed, {n} tokenizer worker(s)"] = lambda n=n: model.encode(
                sentences, batch_size=args.batch_size, show_progress_bar=False, tokenizer_workers=n
            )
        sample = sentences[:WARM_UP]  # warm-up, and the vectors compared
        theirs = st.encode(sample, batch_size=args.batch_size, show_progress_bar=False, convert_to_numpy=True)
        for n in workers:
            ours = model.encode(
                sample, batch_size=args.batch_size, show_progress_bar=False, tokenizer_workers=n
            )
        tokenizer_alone(tokenizer, sample, args.batch_size, 1)()
        best = dict.fromkeys(rows, float("inf"))
        waited = dict.fromkeys(rows, 0.0)
        for _ in range(runs):
            for name, run in rows.items():
                waiting.seconds = 0.0
                start = time.perf_counter()
                run()
                seconds = time.perf_counter() - start
                if seconds < best[name]:
                    best[name], waited[name] = seconds, waiting.seconds / seconds
    rate = {name: len(sentences) / seconds for name, seconds in best.items()}
    print(f"largest |protoembed - sentence-transformers| over the vectors: {np.abs(ours - theirs).max():.2e}")
    print(f"{'row':<40} {'sentences/s':>12}  note")
    for name in rows:
        note = ""
        if name.startswith("protoembed"):
            n = int(name.split(", ")[1].split()[0])
            bound = rate[f"tokenizer alone, {n} thread(s)"]
            note = f"waiting on tokenization {100 * waited[name]:.0f}% of its time; {rate[name] / bound:.2f}x the tokenizer alone"
        print(f"{name:<40} {rate[name]:>12,.0f}  {note}")
    ours_best = max(v for k, v in rate.items() if k.startswith("protoembed"))
    bound = (
        rate["tokenizer alone, 1 thread(s)"]
        if 1 in workers
        else min(v for k, v in rate.items() if k.startswith("tokenizer"))
    )
    bound_best = max(v for k, v in rate.items() if k.startswith("tokenizer alone"))
    print(f"protoembed's best against the tokenizer alone's best (any threads): {ours_best / bound_best:.3f}")
    print(f"efficiency={ours_best / bound:.3f}")
    print(f"ratio={ours_best / rate['sentence-transformers']:.3f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
