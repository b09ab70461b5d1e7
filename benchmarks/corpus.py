"""A 1M-line corpus (SimCSE's wiki1m size): memory and time to read it, and time to the first training step.

The corpus is generated in a temporary folder from the staged Wikipedia sample
(``$PROTOEMBED_DATA/unsup/wiki1m_sample``): its sentences cycled to ``--lines`` lines, each cycle after the
first tagged with its number so that the lines stay distinct. Each measurement runs in a fresh
subprocess:

- ``read``: :func:`protoembed.training.components.read_training_examples` (the trainer's reader, which
  streams the file), against ``whole-file``, the same sentences read the way the reader did before (the
  file as bytes, then as one string, then split): seconds, rise of the resident set (``VmHWM`` reset
  through ``/proc/self/clear_refs`` before, read after) and that rise over the size of ONE copy of the
  sentences (``sys.getsizeof`` of the list and of every string);
- ``first step``: :func:`protoembed.training.trainer.train` of SimCSE on the default backbone (batch
  ``--batch-size``, the DataLoader collating with ``--num-workers``): seconds from the call until the
  first batch's tensors are collated (corpus read, model load, loader start), and until the first
  optimizer step is done (the libraries imported beforehand, in every measurement).

    python benchmarks/corpus.py [--lines 1000000] [--batch-size 64] [--num-workers 0]

Last line: ``ratio=<whole-file read's memory rise / streamed read's>``. ``--smoke``: 2,000 lines, batch 8,
the first step on a tiny random model (checks that the script runs; measures nothing).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import smoke
from child import child_result


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def generate(path: Path, lines: int, data_dir: Path, words: int | None = None) -> int:
    """Write ``lines`` lines cycled from the staged sample to ``path`` (with ``words``: each sample sentence
    cut to its first ``words`` words); returns its size in bytes."""
    sample = []
    for source in sorted((data_dir / "unsup" / "wiki1m_sample").glob("*.txt")):
        for line in source.read_text(encoding="utf-8").splitlines():
            head = line.strip() if words is None else " ".join(line.split()[:words])
            if head:
                sample.append(head)
    if not sample:
        raise SystemExit(f"no Wikipedia sample under {data_dir / 'unsup' / 'wiki1m_sample'}")
    with path.open("w", encoding="utf-8") as handle:
        for i in range(lines):
            cycle, k = divmod(i, len(sample))
            handle.write(sample[k] + (f" ({cycle})" if cycle else "") + "\n")
    return path.stat().st_size


def _config(corpus: Path, output: Path, batch: int, workers: int, model: str = "default"):
    from protoembed.training.config import config_from_dict

    return config_from_dict(
        {
            "model": model,
            "objective": {"name": "simcse"},
            "data": {"corpus": str(corpus)},
            "training": {"batch_size": batch, "max_steps": 2, "eval_steps": 2, "num_workers": workers},
            "output_dir": str(output),
        }
    )


def child(mode: str, corpus: Path, batch: int, workers: int, model: str = "default") -> dict:
    """One measurement in this (fresh) process; imports come before the clock and the baseline."""
    import sentence_transformers  # noqa: F401 - imported lazily by the model load; not what is timed

    from protoembed.training.components import read_training_examples
    from protoembed.training.trainer import train

    cfg = _config(corpus, Path(tempfile.mkdtemp(dir=corpus.parent)), batch, workers, model)
    Path("/proc/self/clear_refs").write_text("5")
    base = _status_kib("VmRSS")
    start = time.perf_counter()
    if mode == "whole-file":  # the previous reader: bytes, then text, then the split lines
        data = corpus.read_bytes()
        text = data.decode("utf-8")
        sentences = [x.strip() for x in text.split("\n") if x.strip()]
        del data, text
    elif mode == "read":
        sentences = read_training_examples(cfg).columns["text"]
    else:  # first step

        class FirstStep(Exception):
            pass

        def stop(event: dict) -> None:
            raise FirstStep

        from protoembed.training import step

        collate, ready = step.Collator.__call__, []

        def timed(self, indices):  # when the loader has the first batch's tensors
            batch = collate(self, indices)
            ready.append(time.perf_counter() - start)
            return batch

        step.Collator.__call__ = timed
        with contextlib.suppress(FirstStep):
            train(cfg, callback=stop, progress=False, evaluator=lambda embedder: 0.0)
        return {"mode": mode, "seconds": time.perf_counter() - start, "first_batch": ready[0]}
    seconds = time.perf_counter() - start
    rise = (_status_kib("VmHWM") - base) * 1024
    one_copy = sys.getsizeof(sentences) + sum(sys.getsizeof(s) for s in sentences)
    return {"mode": mode, "seconds": seconds, "rise_mib": rise / 2**20, "one_copy_mib": one_copy / 2**20}


def run_child(mode: str, corpus: Path, args: argparse.Namespace) -> dict:
    command = [sys.executable, __file__, "--child", mode, "--corpus", str(corpus)]
    command += ["--batch-size", str(args.batch_size), "--num-workers", str(args.num_workers)]
    return child_result(command, mode)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--num-workers", type=int, default=0)
    parser.add_argument("--data-dir", default=os.environ.get("PROTOEMBED_DATA", "../shared/data"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--corpus", help=argparse.SUPPRESS)
    smoke.add_argument(parser)
    args = parser.parse_args()
    if args.child:
        model = smoke.model_name()
        print(json.dumps(child(args.child, Path(args.corpus), args.batch_size, args.num_workers, model)))
        return
    if args.smoke:
        smoke.enable()
        args.lines, args.batch_size = 2000, 8
        smoke.tiny_model()  # built once, for the children too
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "wiki1m_generated.txt"
        size = generate(corpus, args.lines, Path(args.data_dir))
        print(f"{args.lines} lines, {size / 2**20:.0f} MiB, generated from the staged Wikipedia sample")
        results = {mode: run_child(mode, corpus, args) for mode in ("read", "whole-file", "first step")}
    for mode in ("read", "whole-file"):
        r = results[mode]
        print(
            f"{mode:>10}: {r['seconds']:.1f} s, resident set +{r['rise_mib']:.0f} MiB = "
            f"{r['rise_mib'] / r['one_copy_mib']:.2f} x one copy of the sentences ({r['one_copy_mib']:.0f} MiB)"
        )
    first = results["first step"]
    print(
        f"first step: its batch collated {first['first_batch']:.1f} s after train() was called, the step done "
        f"at {first['seconds']:.1f} s (SimCSE, default backbone, batch {args.batch_size}, num_workers "
        f"{args.num_workers}; in between: model load and the step's forward and backward)"
    )
    print(f"ratio={results['whole-file']['rise_mib'] / results['read']['rise_mib']:.2f}")


if __name__ == "__main__":
    main()
