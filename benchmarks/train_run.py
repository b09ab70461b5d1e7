"""A whole training run as a user times it: protoembed against sentence-transformers' trainer, same run.

The run is the own-pairs study's GoogleNews ``sup-mined`` run (``configs/cpu/own-pairs/sup-mined-googlenews.yaml``,
read by both libraries: one epoch of the title -> snippet pairs with one mined hard negative each, batch 64,
32 tokens, bf16 autocast, no duplicates in a batch, the checkpoint with the best dev nDCG@10 kept, the dev
split evaluated every eighth of the epoch and after the last step): ``protoembed train`` against
``experiments/own_pairs_st.py`` (``SentenceTransformerTrainer`` with ``MultipleNegativesRankingLoss`` and
``InformationRetrievalEvaluator``), each a process of its own timed from its start to its exit (imports,
model load, training, dev evaluations, the saved ``best/``), the two alternating (the order swapped
every round), ``--rounds`` each. protoembed runs with its defaults ``training.padding: auto`` (the rows
sorted by length into the forwards that pad fewest tokens) and ``training.dropout: fast``, which the
study's config pins to keep its records; ``--joint`` adds protoembed with ``training.padding: joint``
(one forward of the three columns padded together).

The data: ``experiments/own_pairs_data.py``'s split of ``$PROTOEMBED_DATA``'s GoogleNews, mined once
with the study's ``protoembed mine`` options (``experiments/own_pairs.py``), into a temporary folder
(``--data DIR`` keeps it there for the next run). Both runs use the same learning rate and seed
(``--lr``, ``--seed``); the speed does not depend on them.

Printed: each run's wall time and the training time its own ``results.json`` states, the CPU
(``lscpu``'s model and flags; on CUDA the device) and the load average before and after, and last
``ratio=`` (sentence-transformers' best wall time / protoembed's best: above 1, protoembed's run is the
faster; the aim on 2 CPU cores is >= 1.1). On a GPU both libraries train there (each takes CUDA when it
is there).

``--smoke``: the tiny random model, 48 pairs with a made-up negative (no mining), 2 steps of 8, 1 round.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import smoke
from machine import cpu_line, load_line

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the experiments' package: the study's mining and records
    sys.path.insert(0, str(ROOT))

from experiments.step_rerun import current_step  # noqa: E402

from protoembed import ProtoembedError  # noqa: E402

CONFIG = ROOT / "configs" / "cpu" / "own-pairs" / "sup-mined-googlenews.yaml"
SET = "googlenews"
#: the sides: name -> (library, extra ``--set`` overrides)
#: protoembed's defaults of the settings the study's config pins to the step its records were made with
DEFAULTS = [f"{key}={value}" for key, value in current_step().items()]
SIDES = {
    "protoembed": ("protoembed", DEFAULTS),
    "sentence-transformers": ("sentence-transformers", []),
    "protoembed, padding joint": ("protoembed", [*DEFAULTS, "training.padding=joint"]),
}


def prepare_data(folder: Path) -> tuple[Path, Path]:
    """The GoogleNews pairs with their mined negatives and the dev split in ``folder``: ``(mined file,
    dev folder)`` (made when missing)."""
    from experiments.own_pairs import MINED_FILE, mine
    from experiments.own_pairs_data import SETS, dev_dir, prepare

    import protoembed

    data = folder / SET
    mined = data / MINED_FILE
    if not (data / "train_pairs.jsonl").is_file():
        prepare(SET, protoembed.resolve_data_dir(None), data)
    if smoke.active() and not mined.is_file():  # no mining: a made-up negative, the next pair's document
        query, document = SETS[SET][1]
        pairs = [json.loads(line) for line in (data / "train_pairs.jsonl").read_text().splitlines()[:48]]
        rows = [
            {"anchor": p[query], "positive": p[document], "negative": pairs[(i + 1) % 48][document]}
            for i, p in enumerate(pairs)
        ]
        mined.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif not mine(SET, data, folder / "records", smoke.model_dir()):  # the study's mining, its options
        raise SystemExit("train_run: mining the hard negatives failed (its error above)")
    return mined, dev_dir(data, SET)


def write_config(folder: Path, mined: Path, dev: Path, model: str) -> Path:
    """The study's config with this folder's data and ``model`` (the default model's folder; a smoke
    run's tiny model): what both libraries read."""
    task = {"name": f"own-{SET}-dev", "kind": "retrieval", "files": {"all": str(dev)}, "splits": ["dev"]}
    lines = [
        f"base: {json.dumps(str(CONFIG))}",
        f"data: {{corpus: {json.dumps(str(mined))}}}",
        f"tasks: [{json.dumps(task)}]",
    ]
    lines.append(f"model: {json.dumps(model)}")
    path = folder / "run.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def command(side: str, config: Path, out: Path, overrides: list[str]) -> list[str]:
    """The process that trains ``side``'s run of ``config`` into ``out``."""
    library, extra = SIDES[side]
    sets = [arg for o in [*overrides, *extra] for arg in ("--set", o)]
    if library == "protoembed":
        return [
            sys.executable,
            "-m",
            "protoembed",
            "train",
            "--config",
            str(config),
            "--output-dir",
            str(out),
            *sets,
        ]
    script = ROOT / "experiments" / "own_pairs_st.py"
    return [sys.executable, str(script), "--config", str(config), "--output-dir", str(out), *sets]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--lr", type=float, default=5e-5, help="both runs' learning rate (the study's choice)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--joint", action="store_true", help="also protoembed with training.padding: joint")
    parser.add_argument(
        "--data", type=Path, help="keep the prepared and mined data here (default: a temp folder)"
    )
    smoke.add_argument(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        smoke.enable()
        args.rounds = 1
    work = Path(tempfile.mkdtemp(prefix="train-run-"))
    try:
        try:
            mined, dev = prepare_data(args.data or work)
        except ProtoembedError as err:  # no benchmark data, a bad --data: one line, no traceback
            raise SystemExit(f"train_run: {err}") from None
        config = write_config(work, mined, dev, smoke.model_dir())
        pairs = sum(1 for _ in mined.open(encoding="utf-8"))
        batch = 8 if args.smoke else 64
        steps = 2 if args.smoke else pairs // batch
        every = 1 if args.smoke else max(1, steps // 8)
        overrides = [f"training.lr={args.lr}", f"training.seed={args.seed}", f"training.eval_steps={every}"]
        overrides += ["training.max_steps=2", f"training.batch_size={batch}"] if args.smoke else []
        sides = [s for s in SIDES if args.joint or "joint" not in s]
        print(
            f"{pairs} mined pairs, {steps} steps of 64, dev every {every} steps; {len(sides)} sides, {args.rounds} rounds"
        )
        print(cpu_line())
        print(f"before: {load_line()}")
        best = dict.fromkeys(sides, float("inf"))
        for round_ in range(args.rounds):
            for side in sides if round_ % 2 == 0 else reversed(sides):
                out = work / "run"  # one run at a time, removed after it
                start = time.perf_counter()
                done = subprocess.run(command(side, config, out, overrides), stdout=subprocess.DEVNULL)
                if done.returncode:
                    raise SystemExit(f"train_run: {side}'s run exited {done.returncode} (its error above)")
                wall = time.perf_counter() - start
                results = json.loads((out / "results.json").read_text(encoding="utf-8"))
                trained = results["train_wall_time_s"]
                best[side] = min(best[side], wall)
                print(f"{side} round {round_ + 1}: {wall:.1f} s (its results.json: {trained} s)", flush=True)
                shutil.rmtree(out)
        print(f"after: {load_line()}")
        for side in sides:
            print(f"{side}: best {best[side]:.1f} s")
        print(f"ratio={best['sentence-transformers'] / best['protoembed']:.3f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
