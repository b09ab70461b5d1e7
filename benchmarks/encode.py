"""Encoding throughput and STS-B cost: every backend of protoembed against every backend of
sentence-transformers, on the same model, batch size and sentences, on this CPU.

Encodes every distinct STS-B test sentence with the default backbone (all-MiniLM-L6-v2), one row after
the other in rounds (alternating, so other load on the machine hits every row alike), and prints each
row's best throughput over the rounds, its ratio to the baseline (sentence-transformers' torch fp32
``encode``), its largest difference to the baseline's vectors, and its STS-B test Spearman x100 (cosine
of the row's own vectors; a row is *lossless* within 0.1 of the baseline's, whatever its precision;
int8 rows aim within 0.3).
The header names the CPU and the features that decide the fastest backend (avx2, avx512_vnni,
avx512_bf16, amx) and the precision OpenVINO picks on it.

Rows: sentence-transformers torch fp32 / bf16 (``model_kwargs={"torch_dtype": torch.bfloat16}``), ONNX
fp32 / int8 (``export_dynamic_quantized_onnx_model(..., "avx2")``), OpenVINO (``backend="openvino"``) /
its static int8 (``export_static_quantized_openvino_model``'s recipe: 300 calibration sentences padded to
384 tokens, default ``OVQuantizationConfig``; the sentences are the staged Wikipedia sample's, as there is
no hub here for its default glue/sst2); protoembed torch fp32 / bf16, ONNX fp32 / int8 (ONNX Runtime),
OpenVINO (the ``--format openvino`` export at OpenVINO's default precision for this CPU; and forced to
fp32, what it runs on CPUs without native bf16) / its NNCF int8.

sentence-transformers' ONNX and OpenVINO backends need ``optimum-onnx`` / ``optimum-intel``, whose
releases require transformers < 4.58 / < 5.6 while sentence-transformers 6 requires transformers >= 5 and
the two need different ``optimum`` versions. Their rows therefore run sentence-transformers 5.x in two
worker processes over side installs (``--st-onnx-env``, ``--st-openvino-env``, made by ``make
bench-env``), driven row by row from here like the other rows. A worker starts under ``python -S`` with the
side install, then a view of the main site-packages without the packages that depend on the side
install's (:mod:`side_install`), on its path: the main environment's datasets, which sentence-transformers
imports whenever it is installed, needs a newer huggingface-hub than the side install's.

``--smoke`` (checks that the script runs; measures nothing): a tiny random model, 32 sentences, one round,
16 calibration sentences, the side installs' rows left out.

Last lines: the fastest protoembed row and the fastest sentence-transformers row, lossless and any, the
fastest lossless protoembed row that is not int8, and
``ratio=<protoembed's fastest lossless row / sentence-transformers' fastest row of any backend>``.

    python benchmarks/encode.py [--runs 3] [--batch-size 64] [--data-dir ../shared/data]
        [--st-onnx-env .venv/st-onnx] [--st-openvino-env .venv/st-openvino] [--limit N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

import smoke
from machine import cpu_line
from side_install import build_view, child_command, child_env

BASELINE = "sentence-transformers torch fp32"
ST_ROWS = [
    BASELINE,
    "sentence-transformers torch bf16",
    "sentence-transformers ONNX fp32",
    "sentence-transformers ONNX int8",
    "sentence-transformers OpenVINO",
    "sentence-transformers OpenVINO int8",
]
OURS_ROWS = [
    "protoembed torch fp32",
    "protoembed torch bf16",
    "protoembed ONNX fp32",
    "protoembed ONNX int8",
    "protoembed OpenVINO",
    "protoembed OpenVINO fp32",
    "protoembed OpenVINO int8",
]
#: rows served by a worker process: row -> (worker kind, model name inside the worker)
WORKER_ROWS = {
    "sentence-transformers ONNX fp32": ("onnx", "fp32"),
    "sentence-transformers ONNX int8": ("onnx", "int8"),
    "sentence-transformers OpenVINO": ("openvino", "fp32"),
    "sentence-transformers OpenVINO int8": ("openvino", "int8"),
}
LOSSLESS = 0.1  # STS-B Spearman x100 within this of the baseline's: lossless
INT8_BOUND = 0.3  # the bound an int8 row aims at
CALIBRATION_FILE = "unsup/wiki1m_sample/wiki1m_for_simcse.head-1280000B.txt"


def stsb_test(data_dir: Path) -> tuple[list[str], list[tuple[str, str, float]]]:
    """(distinct sentences, (sentence 1, sentence 2, gold score) pairs) of STS-B test (SentEval copy:
    7 tab-separated columns, score 5th, sentences last)."""
    path = data_dir / "senteval" / "STS" / "STSBenchmark" / "sts-test.csv"
    seen: dict[str, None] = {}
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        columns = line.split("\t")
        seen.update(dict.fromkeys(columns[5:7]))
        pairs.append((columns[5], columns[6], float(columns[4])))
    return list(seen), pairs


def sts_spearman(vectors: np.ndarray, sentences: list[str], pairs: list[tuple[str, str, float]]) -> float:
    """STS-B test Spearman x100 of the cosines of ``vectors`` (one row per distinct sentence)."""
    from scipy.stats import spearmanr

    index = {s: i for i, s in enumerate(sentences)}
    if not all(a in index and b in index for a, b, _ in pairs):
        return float("nan")  # a --limit run
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosines = [float(unit[index[a]] @ unit[index[b]]) for a, b, _ in pairs]
    return 100 * float(spearmanr(cosines, [g for _, _, g in pairs]).statistic)


# ----------------------------------------------------------------- workers (sentence-transformers 5 + optimum)
def _st_onnx_models(folder: Path, model_dir: str) -> dict:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.backend import export_dynamic_quantized_onnx_model

    fp32 = SentenceTransformer(model_dir, backend="onnx", device="cpu")  # its own export
    fp32.save(str(folder))
    export_dynamic_quantized_onnx_model(fp32, "avx2", str(folder))
    quantized = next((folder / "onnx").glob("model_*_avx2.onnx"))  # avx2: uint8 weights
    int8 = SentenceTransformer(
        str(folder), backend="onnx", device="cpu", model_kwargs={"file_name": f"onnx/{quantized.name}"}
    )
    return {"fp32": fp32, "int8": int8}


def _st_openvino_models(folder: Path, model_dir: str, calibration: list[str]) -> dict:
    """sentence-transformers' OpenVINO backend and its static int8, by the steps of
    ``export_static_quantized_openvino_model`` with local calibration sentences."""
    import nncf
    from optimum.intel.openvino import OVConfig, OVQuantizationConfig, OVQuantizer
    from sentence_transformers import SentenceTransformer

    exported = SentenceTransformer(model_dir, backend="openvino", device="cpu")
    exported.save(str(folder))
    exported.transformers_model.save_pretrained(str(folder / "openvino"))  # save() leaves openvino/ empty
    if not (folder / "openvino" / "openvino_model.xml").is_file():
        raise RuntimeError(f"{folder}: sentence-transformers wrote no openvino/openvino_model.xml")
    config = OVQuantizationConfig()
    samples = [
        dict(
            exported.tokenizer(
                text, padding="max_length", max_length=384, truncation=True, return_tensors="np"
            )
        )
        for text in calibration[: config.num_samples or 300]
    ]
    quantizer = OVQuantizer.from_pretrained(exported.transformers_model)  # quantises that model in place
    out = folder / "int8"
    quantizer.quantize(
        nncf.Dataset(samples), save_directory=str(out), ov_config=OVConfig(quantization_config=config)
    )
    target = folder / "openvino" / "openvino_model_qint8_quantized.xml"
    target.parent.mkdir(exist_ok=True)
    shutil.copy(out / "openvino" / "openvino_model.xml", target)
    shutil.copy(out / "openvino" / "openvino_model.bin", target.with_suffix(".bin"))
    fp32 = SentenceTransformer(str(folder), backend="openvino", device="cpu")  # the saved fp32 export
    int8 = SentenceTransformer(
        str(folder), backend="openvino", device="cpu", model_kwargs={"file_name": f"openvino/{target.name}"}
    )
    if "FakeQuantize" in {op.get_type_name() for op in fp32.transformers_model.model.get_ops()}:
        raise RuntimeError("the sentence-transformers OpenVINO fp32 model holds quantised layers")
    if "FakeQuantize" not in {op.get_type_name() for op in int8.transformers_model.model.get_ops()}:
        raise RuntimeError("the sentence-transformers OpenVINO int8 model holds no quantised layer")
    return {"fp32": fp32, "int8": int8}


def worker(args: argparse.Namespace) -> None:
    """Serve one side install's rows: ``run NAME`` -> seconds, ``save NAME FILE``, ``quit``. Runs in a
    child over the side install (:mod:`side_install`): protoembed is not importable there, so the model
    folder comes as ``--model-dir``."""
    kind, workdir = args.worker
    sentences, _ = stsb_test(Path(args.data_dir))
    sentences = sentences[: args.limit]
    folder = Path(workdir) / f"st-{kind}"
    if kind == "onnx":
        models = _st_onnx_models(folder, args.model_dir)
    else:
        calibration = (Path(args.data_dir) / CALIBRATION_FILE).read_text(encoding="utf-8").splitlines()
        models = _st_openvino_models(folder, args.model_dir, calibration)

    def encode(model, texts=sentences) -> np.ndarray:
        return model.encode(texts, batch_size=args.batch_size, show_progress_bar=False)

    for model in models.values():
        encode(model)  # warm-up
    print("ready", flush=True)
    for line in sys.stdin:
        command, *rest = line.split()
        if command == "run":
            start = time.perf_counter()
            encode(models[rest[0]])
            print(f"{time.perf_counter() - start:.6f}", flush=True)
        elif command == "save":
            np.save(rest[1], encode(models[rest[0]]))
            print("ok", flush=True)
        elif command == "load-export":  # sentence-transformers' backend on a protoembed export
            from sentence_transformers import SentenceTransformer

            models[rest[0]] = SentenceTransformer(rest[1], backend=kind, device="cpu")
            print("ok", flush=True)
        else:
            return


def worker_process(kind: str, env_dir: Path, model_dir: str, args: argparse.Namespace, workdir: str):
    """(command, environment) of the worker over the side install ``env_dir``: this file under ``python
    -S`` with the side folder, then a view of the main site-packages without what depends on the side
    install's packages (:func:`side_install.build_view`, in ``workdir``), on its path."""
    view = Path(workdir) / f"main-view-{kind}"
    build_view(env_dir, view)
    command = child_command(__file__, "--worker", kind, workdir, "--model-dir", model_dir)
    command += ["--batch-size", str(args.batch_size), "--data-dir", str(args.data_dir)]
    command += ["--limit", str(args.limit)] if args.limit else []
    return command, child_env(env_dir, view)


class Worker:
    """A worker process over a side install, spoken to line by line."""

    def __init__(
        self, kind: str, env_dir: Path, model_dir: str, args: argparse.Namespace, workdir: str
    ) -> None:
        command, env = worker_process(kind, env_dir, model_dir, args, workdir)
        self.process = subprocess.Popen(
            command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        if self.ask("") != "ready":
            raise RuntimeError(
                f"the sentence-transformers {kind} worker did not start (see its output above)"
            )

    def ask(self, line: str) -> str:
        if line:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        while True:
            answer = self.process.stdout.readline()
            if not answer:
                raise RuntimeError("a sentence-transformers worker stopped")
            if answer.strip() in ("ready", "ok") or answer.strip().replace(".", "").isdigit():
                return answer.strip()

    def close(self) -> None:
        self.process.stdin.write("quit\n")
        self.process.stdin.flush()
        self.process.wait(timeout=60)


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    """Run the alternating benchmark and print the table and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--data-dir", default=os.environ.get("PROTOEMBED_DATA", "../shared/data"))
    parser.add_argument("--st-onnx-env", default=".venv/st-onnx", help="side install for the ST ONNX rows")
    parser.add_argument(
        "--st-openvino-env", default=".venv/st-openvino", help="side install for the ST OpenVINO rows"
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences (a smoke run)")
    parser.add_argument("--worker", nargs=2, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", default=None, help=argparse.SUPPRESS)
    smoke.add_argument(parser)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    if args.smoke:  # the side installs' rows need a download (make bench-env): left out
        args.runs, args.limit, args.st_onnx_env, args.st_openvino_env = 1, args.limit or 32, None, None
        smoke.enable()

    from sentence_transformers import SentenceTransformer

    import protoembed
    from protoembed.model.export.openvino import inference_precision_here

    data_dir = Path(args.data_dir)
    sentences, pairs = stsb_test(data_dir)
    sentences = sentences[: args.limit]
    bs = args.batch_size
    workdir = tempfile.mkdtemp(prefix="protoembed-bench-")
    model_dir, model_name = smoke.model_dir(), smoke.model_name()
    ours = protoembed.load(model_name, device="cpu")
    ours_bf16 = protoembed.load(model_name, device="cpu", precision="bf16")
    export = protoembed.export_embedder
    calibration = (data_dir / CALIBRATION_FILE).read_text(encoding="utf-8").splitlines()
    calibration = calibration[:16] if args.smoke else calibration
    models = {
        "protoembed torch fp32": ours,
        "protoembed torch bf16": ours_bf16,
        "protoembed ONNX fp32": protoembed.load(str(export(ours, Path(workdir) / "fp32")), runtime="onnx"),
        "protoembed ONNX int8": protoembed.load(
            str(export(ours, Path(workdir) / "int8", quantize="int8")), runtime="onnx"
        ),
        "protoembed OpenVINO": protoembed.load(str(export(ours, Path(workdir) / "ov", format="openvino"))),
        "protoembed OpenVINO fp32": protoembed.load(str(Path(workdir) / "ov"), precision="fp32"),
        "protoembed OpenVINO int8": protoembed.load(
            str(
                export(
                    ours, Path(workdir) / "ov8", format="openvino", quantize="int8", calibration=calibration
                )
            )
        ),
    }
    peer = SentenceTransformer(model_dir, device="cpu")
    peer_bf16 = SentenceTransformer(model_dir, device="cpu", model_kwargs={"torch_dtype": torch.bfloat16})
    workers: dict[str, Worker] = {}
    for kind, env in (("onnx", args.st_onnx_env), ("openvino", args.st_openvino_env)):
        if env is None:
            print(
                f"the sentence-transformers {kind} rows are skipped in a smoke run (they need make bench-env)"
            )
        elif Path(env).is_dir():
            workers[kind] = Worker(kind, Path(env), model_dir, args, workdir)
        else:
            print(f"no {env}: the sentence-transformers {kind} rows are skipped (make bench-env)")

    def st_encode(model) -> Callable[[], np.ndarray]:
        return lambda: model.encode(sentences, batch_size=bs, show_progress_bar=False)

    def ours_encode(model) -> Callable[[], np.ndarray]:
        return lambda: model.encode(sentences, batch_size=bs, show_progress_bar=False)

    runners: dict[str, Callable[[], object]] = {BASELINE: st_encode(peer)}
    runners["sentence-transformers torch bf16"] = st_encode(peer_bf16)
    for row, (kind, name) in WORKER_ROWS.items():
        if kind in workers:
            runners[row] = lambda w=workers[kind], n=name: float(w.ask(f"run {n}"))
    runners.update({row: ours_encode(model) for row, model in models.items()})
    rows = [r for r in ST_ROWS + OURS_ROWS if r in runners]

    # vectors of every row (also the warm-up)
    vectors: dict[str, np.ndarray] = {}
    for row in rows:
        if row in WORKER_ROWS:
            kind, name = WORKER_ROWS[row]
            workers[kind].ask(f"save {name} {workdir}/{kind}-{name}.npy")
            vectors[row] = np.load(f"{workdir}/{kind}-{name}.npy")
        else:
            vectors[row] = np.asarray(runners[row](), dtype=np.float32)
    compat = {}
    for kind, folder in (("onnx", "fp32"), ("openvino", "ov")):
        if kind in workers:  # sentence-transformers' backend reading protoembed's export
            workers[kind].ask(f"load-export ours {workdir}/{folder}")
            workers[kind].ask(f"save ours {workdir}/{kind}-ours.npy")
            compat[kind] = float(np.abs(np.load(f"{workdir}/{kind}-ours.npy") - vectors[BASELINE]).max())

    times: dict[str, list[float]] = {r: [] for r in rows}
    for _ in range(args.runs):
        for row in rows:
            times[row].append(float(runners[row]()) if row in WORKER_ROWS else _timed(runners[row]))
    for w in workers.values():
        w.close()

    rates = {r: len(sentences) / min(t) for r, t in times.items()}
    spearman = {r: sts_spearman(vectors[r], sentences, pairs) for r in rows}
    load = os.getloadavg()
    print(cpu_line())
    print(
        f"OpenVINO's inference precision here: {inference_precision_here()}; {len(sentences)} distinct STS-B test "
        f"sentences, batch size {bs}, {len(os.sched_getaffinity(0))} cores, torch threads {torch.get_num_threads()}, "
        f"best of {args.runs} alternating rounds; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}\n"
    )

    def lossless(row: str) -> bool:  # on STS-B test, whatever the row's precision
        return not np.isfinite(spearman[BASELINE]) or abs(spearman[row] - spearman[BASELINE]) <= LOSSLESS

    def verdict(row: str) -> str:
        if lossless(row):
            return "lossless"
        if "int8" in row:
            within = abs(spearman[row] - spearman[BASELINE]) <= INT8_BOUND
            return f"int8, {'within' if within else 'OUTSIDE'} {INT8_BOUND}"
        return f"LOSSY (more than {LOSSLESS})"

    print(
        "| row | sentences/s | x baseline | max abs diff to baseline | STS-B test Spearman x100 | verdict |"
    )
    print("|---|---:|---:|---:|---:|---|")
    for row in rows:
        diff = float(np.abs(vectors[row] - vectors[BASELINE]).max())
        precision = getattr(models.get(row), "precision", "")
        shown = f"{row} ({precision})" if row == "protoembed OpenVINO" else row
        print(
            f"| {shown} | {rates[row]:.1f} | {rates[row] / rates[BASELINE]:.2f} | {diff:.1e} | {spearman[row]:.2f} "
            f"| {verdict(row)} |"
        )
    print()
    for kind, diff in compat.items():
        print(
            f"sentence-transformers' {kind} backend reading protoembed's fp32 {kind} export: max abs diff {diff:.1e}"
        )

    def fastest(candidates: list[str]) -> str:
        return max(candidates, key=lambda r: rates[r])

    ours_rows = [r for r in rows if r.startswith("protoembed")]
    st_rows = [r for r in rows if r.startswith("sentence-transformers")]
    best_ours = fastest([r for r in ours_rows if lossless(r)])
    best_st = fastest(st_rows)
    best_st_lossless = fastest([r for r in st_rows if lossless(r)])
    best_ours_any = fastest(ours_rows)
    best_ours_int8 = fastest([r for r in ours_rows if "int8" in r])
    st_int8 = [r for r in st_rows if "int8" in r]
    print(f"fastest lossless protoembed row: {best_ours} ({rates[best_ours]:.1f}/s)")
    print(f"fastest lossless sentence-transformers row: {best_st_lossless} ({rates[best_st_lossless]:.1f}/s)")
    print(f"fastest sentence-transformers row of any backend: {best_st} ({rates[best_st]:.1f}/s)")
    print(
        f"fastest protoembed row of any precision: {best_ours_any} ({rates[best_ours_any] / rates[best_st]:.2f}x "
        "the fastest sentence-transformers row)"
    )
    print(f"lossless against lossless: {rates[best_ours] / rates[best_st_lossless]:.2f}x")
    best_float = fastest([r for r in ours_rows if lossless(r) and "int8" not in r])
    print(
        f"fastest lossless protoembed row without int8: {best_float} "
        f"({rates[best_float] / rates[best_st]:.2f}x the fastest sentence-transformers row)"
    )
    if st_int8:  # no sentence-transformers int8 row without its side installs
        best_st_int8 = fastest(st_int8)
        print(
            f"int8 against int8: {best_ours_int8} / {best_st_int8} = "
            f"{rates[best_ours_int8] / rates[best_st_int8]:.2f}x"
        )
    shutil.rmtree(workdir, ignore_errors=True)
    print(f"ratio={rates[best_ours] / rates[best_st]:.3f}")


if __name__ == "__main__":
    main()
