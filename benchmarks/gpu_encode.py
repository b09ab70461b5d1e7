"""Encode throughput on one device: protoembed against sentence-transformers at fp32 / fp16 / bf16, for the
default model's shape and BERT-base's, through the library and through ``protoembed encode``.

Models: the default model (all-MiniLM-L6-v2: 6 layers, 384 wide) where its package is installed, else random
weights of its shape; BERT-base's shape (12 layers, 768 wide, vocabulary 30,522) with random weights. Their
tokenizer: the default model's (BERT's uncased WordPiece vocabulary) where installed, else a WordPiece
tokenizer of 30,522 entries trained here on the sentences themselves (no download). Each shape is saved
once as a sentence-transformers folder (mean pooling, ``max_seq_length`` ``--max-seq-length``) that both
libraries and the CLI read.

Sentences: the distinct sentences of SentEval's MR, CR, SUBJ, MPQA and SNLI (:data:`SENTENCE_FILES`, under
``--data``), the first ``--sentences`` of them.

Library rows, per shape and precision, in ``--rounds`` alternating rounds (best round kept):

- protoembed: ``model.encode(sentences, batch_size=B, precision=P, tokenizer_workers=N,
  max_tokens_per_batch=M)``; an argument this checkout's ``encode`` lacks is left out (named in the
  output), a precision it refuses is a ``refused`` row;
- sentence-transformers: ``SentenceTransformer(folder).encode(sentences, batch_size=B)``, the model cast to
  fp16 / bf16 for those rows; and its default ``encode`` (fp32, its default batch size 32), the peer of
  the 5x aim.

Each row's vectors are compared with its library's fp32 vectors: the lowest cosine over the sentences.
CLI rows: ``protoembed encode FILE -o OUT --model FOLDER --precision P --device D --batch-size B
[--tokenizer-workers N]`` on a ``--cli-lines`` file (the sentences cycled, each cycle after the first
tagged with its number so that every line is distinct), timed from start to exit; its first lines'
vectors against the library's fp32 ones.

Prints the device line (device, host cores, library versions) above every table, the aims
(default model >= 50,000 sentences/s and >= 5x sentence-transformers' default encode with cosine >= 0.9999
to fp32; BERT-base >= 20,000/s) met or not; last line ``ratio=<protoembed's fastest default-shape row
within cosine 0.9999 / sentence-transformers' default encode>``.

    python benchmarks/gpu_encode.py [--device cuda] [--data DIR] [--shapes default,bert-base]
        [--precisions fp32,fp16,bf16] [--sentences 20000] [--batch-size 256] [--rounds 2]
        [--tokenizer-workers N] [--max-tokens-per-batch M] [--cli-lines 200000] [--cli-rows default:fp32,...]
        [--json FILE] [--smoke]

``--smoke`` (checks that the script runs; measures nothing): a tiny random model as the only shape, 64
sentences, one round, one CLI row (bf16) on a 300-line file.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import smoke
from machine import device_line

#: Files under the data directory the sentences come from (benchmarks/stage_gpu_data.sh copies them).
SENTENCE_FILES = (
    "senteval/MR/rt-polarity.pos",
    "senteval/MR/rt-polarity.neg",
    "senteval/CR/custrev.pos",
    "senteval/CR/custrev.neg",
    "senteval/SUBJ/subj.objective",
    "senteval/SUBJ/subj.subjective",
    "senteval/MPQA/mpqa.pos",
    "senteval/MPQA/mpqa.neg",
    "senteval/SNLI/s1.dev",
    "senteval/SNLI/s2.dev",
    "senteval/SNLI/s1.test",
    "senteval/SNLI/s2.test",
)
#: BERT-base's shape (Devlin et al. 2019) and all-MiniLM-L6-v2's.
SHAPES = {
    "default": {
        "hidden_size": 384,
        "num_hidden_layers": 6,
        "num_attention_heads": 12,
        "intermediate_size": 1536,
    },
    "bert-base": {
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
    },
}
VOCABULARY = 30522
#: Every file (or folder) benchmarks/gpu_check.sh reads under the data directory: the sentences, STS-B
#: (serve.py's short inputs), the Wikipedia sample (serve.py's long inputs, the training checks' sentences)
#: and GoogleNews (train_run.py's run, with --full).
DATA_FILES = (
    *SENTENCE_FILES,
    *(f"senteval/STS/STSBenchmark/sts-{split}.csv" for split in ("train", "dev", "test")),
    "unsup/wiki1m_sample",
    "clustering/gsdmm_original",
)
AGREE = 0.9999  # lowest cosine to fp32 for a row to count as agreeing
AIMS = {"default": 50_000.0, "bert-base": 20_000.0}  # sentences/s: the aims on one H200-class GPU
AIM_OVER_ST = 5.0
ST_DEFAULT = "sentence-transformers default encode"


def read_sentences(data: Path, count: int) -> list[str]:
    """The first ``count`` distinct non-empty lines of :data:`SENTENCE_FILES` (in that order)."""
    seen: dict[str, None] = {}
    for name in SENTENCE_FILES:
        path = data / name
        if not path.is_file():
            raise SystemExit(f"gpu_encode: no {path}: benchmarks/stage_gpu_data.sh stages it (or set --data)")
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.strip():
                seen.setdefault(line.strip())
    return list(seen)[:count]


def installed_default() -> str | None:
    """The installed default model's folder, or None."""
    try:
        from protoembed.model.backbones import default_model_path

        return str(default_model_path())
    except Exception:  # noqa: BLE001 - not installed, whatever the reason
        return None


def tokenizer_for(sentences: list[str]):
    """The default model's tokenizer where installed, else a WordPiece one trained on ``sentences``."""
    from transformers import AutoTokenizer, BertTokenizerFast

    installed = installed_default()
    if installed:
        return AutoTokenizer.from_pretrained(installed), "the default model's (installed)"
    from tokenizers import BertWordPieceTokenizer

    raw = BertWordPieceTokenizer(lowercase=True)
    raw.train_from_iterator(
        sentences, vocab_size=VOCABULARY, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    )
    tokenizer = BertTokenizerFast(
        tokenizer_object=raw._tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    return tokenizer, f"WordPiece trained here on the sentences ({len(tokenizer)} entries)"


def shape_folder(shape: str, tokenizer, tmp: Path, max_seq_length: int) -> tuple[str, str]:
    """(sentence-transformers folder of ``shape``, what its weights are)."""
    import torch
    from transformers import BertConfig, BertModel

    import protoembed

    installed = installed_default() if shape == "default" else None
    if installed:
        backbone, weights = installed, "installed weights"
    else:
        torch.manual_seed(0)
        config = BertConfig(
            vocab_size=max(VOCABULARY, len(tokenizer)), pad_token_id=tokenizer.pad_token_id, **SHAPES[shape]
        )
        folder = tmp / f"{shape}-backbone"
        BertModel(config, add_pooling_layer=False).save_pretrained(str(folder))
        tokenizer.save_pretrained(str(folder))
        backbone, weights = str(folder), "random weights"
    model = protoembed.load(backbone, head="mean", device="cpu", max_seq_length=max_seq_length)
    return str(model.save(tmp / shape)), weights


def supported(function, wanted: dict) -> tuple[dict, list[str]]:
    """(the arguments of ``wanted`` that ``function`` takes and that are set, names of those it lacks)."""
    parameters = inspect.signature(function).parameters
    given = {k: v for k, v in wanted.items() if v is not None}
    return {k: v for k, v in given.items() if k in parameters}, [k for k in given if k not in parameters]


def min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """The lowest cosine between the rows of ``a`` and the same rows of ``b``."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return float((a * b).sum(1).min())


def library_rows(
    folder: str, shape: str, sentences: list[str], args: argparse.Namespace
) -> tuple[list[dict], np.ndarray | None]:
    """Time every library row of ``shape`` (alternating rounds) and compare its vectors with fp32: (the
    rows, protoembed's fp32 vectors or None)."""
    import torch
    from sentence_transformers import SentenceTransformer

    import protoembed
    from protoembed.core.errors import ProtoembedError

    ours = protoembed.load(folder, device=args.device)
    wanted = {"tokenizer_workers": args.tokenizer_workers, "max_tokens_per_batch": args.max_tokens_per_batch}
    extra, lacking = supported(ours.encode, wanted)
    rows: dict[str, dict] = {}
    runners = {}
    for precision in args.precisions:
        name = f"protoembed {precision}"

        def run(p=precision, texts=sentences):
            return ours.encode(
                texts, batch_size=args.batch_size, precision=p, show_progress_bar=False, **extra
            )

        try:
            run(texts=sentences[:256])
        except ProtoembedError as error:
            rows[name] = {"shape": shape, "row": name, "refused": str(error)}
            continue
        rows[name] = {"shape": shape, "row": name, "note": f"without {', '.join(lacking)}" if lacking else ""}
        runners[name] = run
    dtypes = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    for precision in args.precisions:
        name = f"sentence-transformers {precision}"
        try:
            st = SentenceTransformer(folder, device=args.device).to(dtypes[precision])
            st.encode(sentences[:256], batch_size=args.batch_size, show_progress_bar=False)
        except (RuntimeError, TypeError) as error:  # a dtype this device cannot run
            rows[name] = {"shape": shape, "row": name, "refused": str(error).splitlines()[0][:200]}
            continue
        rows[name] = {"shape": shape, "row": name, "note": ""}
        runners[name] = lambda st=st: st.encode(
            sentences, batch_size=args.batch_size, show_progress_bar=False
        )
    if shape == "default":
        st_default = SentenceTransformer(folder, device=args.device)
        rows[ST_DEFAULT] = {"shape": shape, "row": ST_DEFAULT, "note": "fp32, batch size 32 (its default)"}
        runners[ST_DEFAULT] = lambda: st_default.encode(sentences, show_progress_bar=False)
    vectors = {}
    times: dict[str, list[float]] = {name: [] for name in runners}
    for round_ in range(args.rounds):
        for name in list(runners) if round_ % 2 == 0 else list(runners)[::-1]:
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            start = time.perf_counter()
            out = runners[name]()
            times[name].append(time.perf_counter() - start)
            vectors[name] = np.asarray(out, dtype=np.float32)
    for name, seconds in times.items():
        library = "protoembed" if name.startswith("protoembed") else "sentence-transformers"
        reference = vectors.get(f"{library} fp32")
        rows[name]["sentences_per_s"] = len(sentences) / min(seconds)
        rows[name]["min_cosine_to_fp32"] = (
            min_cosine(vectors[name], reference) if reference is not None else None
        )
    if args.device.startswith("cuda"):
        peak = torch.cuda.max_memory_allocated() / 2**30
        print(f"{shape}: peak GPU memory allocated so far {peak:.2f} GiB (both libraries' models held)")
        for row in rows.values():
            row["peak_gib_so_far"] = peak
    fp32 = vectors.get("protoembed fp32")
    return list(rows.values()), fp32


def cli_rows(
    folders: dict[str, str], sentences: list[str], fp32: dict, args: argparse.Namespace, tmp: Path
) -> list[dict]:
    """Time ``protoembed encode`` for each ``--cli-rows`` (shape:precision) on the generated file; its first
    lines' vectors against ``fp32[shape]`` (the library's)."""
    help_text = subprocess.run(
        [sys.executable, "-m", "protoembed", "encode", "--help"], capture_output=True, text=True
    ).stdout
    corpus = tmp / "lines.txt"
    with corpus.open("w", encoding="utf-8") as handle:
        for i in range(args.cli_lines):
            cycle, k = divmod(i, len(sentences))
            handle.write(sentences[k] + (f" ({cycle})" if cycle else "") + "\n")
    rows = []
    for item in args.cli_rows:
        shape, precision = item.split(":")
        if shape not in folders:
            continue
        name = f"protoembed encode {precision}"
        row = {"shape": shape, "row": name, "lines": args.cli_lines}
        out = tmp / f"cli-{shape}-{precision}"
        command = [
            sys.executable,
            "-m",
            "protoembed",
            "encode",
            str(corpus),
            "-o",
            str(out),
            "--model",
            folders[shape],
            "--precision",
            precision,
            "--device",
            args.device,
            "--batch-size",
            str(args.batch_size),
            "--no-progress",
        ]
        if args.tokenizer_workers and "--tokenizer-workers" in help_text:
            command += ["--tokenizer-workers", str(args.tokenizer_workers)]
        elif args.tokenizer_workers:
            row["note"] = "without --tokenizer-workers (this checkout's CLI lacks it)"
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if done.returncode:
            row["refused"] = (done.stderr.strip().splitlines() or ["?"])[-1][:200]
        else:
            row["sentences_per_s"] = args.cli_lines / seconds
            shards = sorted(out.glob("shard-*.npy"))
            first = np.load(shards[0])[: min(len(sentences), args.cli_lines)]
            if fp32.get(shape) is not None:
                row["min_cosine_to_fp32"] = min_cosine(first, fp32[shape][: len(first)])
            row.setdefault("note", "wall time from start to exit (interpreter, model load, writing included)")
        rows.append(row)
        print(
            f"  {shape} {name}: {row.get('sentences_per_s', 0):,.0f}/s {row.get('refused', '')}", flush=True
        )
    return rows


def print_rows(rows: list[dict], line: str) -> None:
    """A table of ``rows`` under the device ``line``."""
    print(f"\n{line}")
    print("| shape | row | sentences/s | lowest cosine to fp32 | note |")
    print("|---|---|---:|---:|---|")
    for r in rows:
        rate = f"{r['sentences_per_s']:,.0f}" if "sentences_per_s" in r else "-"
        cos = r.get("min_cosine_to_fp32")
        cos = f"{cos:.6f}" if cos is not None else "-"
        note = f"refused: {r['refused']}" if "refused" in r else r.get("note", "")
        print(f"| {r['shape']} | {r['row']} | {rate} | {cos} | {note} |")


def aims(rows: list[dict]) -> float:
    """Print each aim met or not; return the ratio of the last line."""

    def best(shape: str) -> dict | None:
        found = [
            r
            for r in rows
            if r["shape"] == shape
            and r["row"].startswith("protoembed ")
            and "sentences_per_s" in r
            and not r["row"].startswith("protoembed encode")
            and (r.get("min_cosine_to_fp32") or 0) >= AGREE
        ]
        return max(found, key=lambda r: r["sentences_per_s"], default=None)

    peer = next((r for r in rows if r["row"] == ST_DEFAULT and "sentences_per_s" in r), None)
    ratio = float("nan")
    for shape, aim in AIMS.items():
        top = best(shape)
        if top is None:
            print(f"aim {shape} >= {aim:,.0f}/s: not measured")
            continue
        met = "met" if top["sentences_per_s"] >= aim else "NOT met"
        print(
            f"aim {shape} >= {aim:,.0f}/s within cosine {AGREE}: {top['row']} {top['sentences_per_s']:,.0f}/s ({met})"
        )
        if shape == "default" and peer:
            ratio = top["sentences_per_s"] / peer["sentences_per_s"]
            met = "met" if ratio >= AIM_OVER_ST else "NOT met"
            print(
                f"aim default >= {AIM_OVER_ST:g}x sentence-transformers' default encode: {ratio:.2f}x ({met})"
            )
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--data", default=os.environ.get("PROTOEMBED_DATA", "../shared/data"))
    parser.add_argument("--shapes", default="default,bert-base")
    parser.add_argument("--precisions", default="fp32,fp16,bf16")
    parser.add_argument("--sentences", type=int, default=20_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tokenizer-workers", type=int, default=None)
    parser.add_argument("--max-tokens-per-batch", type=int, default=None)
    parser.add_argument("--cli-lines", type=int, default=200_000)
    parser.add_argument("--cli-rows", default="default:fp32,default:fp16,default:bf16,bert-base:bf16")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--keep-models", help="save each shape's model folder under this folder")
    parser.add_argument("--data-files", action="store_true", help="print the data files this check reads")
    smoke.add_argument(parser)
    args = parser.parse_args()
    if args.data_files:
        print("\n".join(DATA_FILES))
        return
    if args.smoke:
        smoke.enable()
        args.shapes, args.sentences, args.rounds, args.cli_lines = "default", 64, 1, 300
        args.cli_rows = "default:bf16"
    args.precisions = [p for p in args.precisions.split(",") if p]
    args.cli_rows = [r for r in args.cli_rows.split(",") if r]
    sentences = read_sentences(Path(args.data), args.sentences)
    line = device_line(args.device)
    print(line)
    print(
        f"{len(sentences)} distinct SentEval sentences, batch size {args.batch_size}, max_seq_length "
        f"{args.max_seq_length}, best of {args.rounds} alternating rounds; tokenizer_workers "
        f"{args.tokenizer_workers}, max_tokens_per_batch {args.max_tokens_per_batch}",
        flush=True,
    )
    rows: list[dict] = []
    fp32: dict[str, np.ndarray | None] = {}
    with tempfile.TemporaryDirectory(prefix="protoembed-gpu-encode-") as tmp:
        tmp = Path(tmp)
        folders = {}
        if args.smoke:
            folders["default"] = smoke.model_dir()
            print("default: a tiny random model (smoke)")
        else:
            tokenizer, told = tokenizer_for(sentences)
            print(f"tokenizer: {told}")
            for shape in [s for s in args.shapes.split(",") if s]:
                folders[shape], weights = shape_folder(shape, tokenizer, tmp, args.max_seq_length)
                print(f"{shape}: {weights}", flush=True)
        for shape, folder in folders.items() if args.keep_models else ():
            shutil.copytree(folder, Path(args.keep_models) / shape, dirs_exist_ok=True)
        for shape, folder in folders.items():
            shape_rows, fp32[shape] = library_rows(folder, shape, sentences, args)
            rows += shape_rows
            print_rows(shape_rows, line)
        cli = cli_rows(folders, sentences, fp32, args, tmp)
        rows += cli
        print_rows(cli, f"{line}; protoembed encode on {args.cli_lines:,} lines")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": line, "rows": rows}, indent=1), encoding="utf-8")
    print()
    ratio = aims(rows)
    print(f"ratio={ratio:.3f}")


if __name__ == "__main__":
    main()
