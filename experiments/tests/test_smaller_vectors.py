"""The smaller-vector study (experiments/smaller_vectors.py): its plan (methods x learning rates x seeds,
the Matryoshka override both libraries read, the evaluations of a kept model), the driver's run logic and
its resumability with every command faked, and the page's tables and findings against the records."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest


def _scores(ndcg: float) -> dict:
    return {"tasks": {"t": {"ndcg_at_10": ndcg, "recall_at_10": ndcg + 10, "mrr_at_10": ndcg - 5}}}


def _write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_the_methods_are_own_pairs_methods_with_or_without_the_matryoshka_override():
    from experiments.own_pairs_plan import METHODS as OWN
    from experiments.own_pairs_st import anchor_config, read_config
    from experiments.smaller_vectors_plan import (
        BY_LIBRARY,
        DIMS,
        MATRYOSHKA_OVERRIDE,
        MATRYOSHKA_PAIR,
        METHODS,
        PROTOEMBED_MATRYOSHKA,
    )

    from protoembed.training.config import apply_overrides

    WEIGHTED = "objective.matryoshka={dims: [384, 256, 128, 64, 32], weights: [2, 1, 1, 1, 1]}"
    assert MATRYOSHKA_OVERRIDE == "objective.matryoshka={dims: [384, 256, 128, 64, 32]}"
    assert apply_overrides({}, [MATRYOSHKA_OVERRIDE]) == {"objective": {"matryoshka": {"dims": list(DIMS)}}}
    assert {m: (s.base, s.overrides) for m, s in METHODS.items()} == {
        "sup-mined": ("sup-mined", ()),
        "sup-mined-mrl": ("sup-mined", (MATRYOSHKA_OVERRIDE,)),
        "st-mnrl-mined": ("st-mnrl-mined", ()),
        "st-mrl-mined": ("st-mnrl-mined", (MATRYOSHKA_OVERRIDE,)),
        "sup-mined-mrl-w": ("sup-mined", (WEIGHTED,)),
    }
    assert PROTOEMBED_MATRYOSHKA == ("sup-mined-mrl", "sup-mined-mrl-w")
    assert BY_LIBRARY == {
        "protoembed": ("sup-mined", "sup-mined-mrl"),
        "sentence-transformers": ("st-mnrl-mined", "st-mrl-mined"),
    }
    assert MATRYOSHKA_PAIR == ("sup-mined-mrl", "st-mrl-mined")
    assert METHODS["sup-mined"].label == OWN["sup-mined"].label
    assert METHODS["st-mrl-mined"].label == OWN["st-mnrl-mined"].label + ", Matryoshka 384/256/128/64/32"
    # the anchor reads the study's config with the override as MatryoshkaLoss's sizes
    root = Path(__file__).resolve().parents[2]
    config = root / "configs" / "cpu" / "own-pairs" / "sup-mined-snli.yaml"
    cfg = anchor_config(read_config(config, list(METHODS["st-mrl-mined"].overrides)))
    assert cfg.matryoshka_dims == DIMS and cfg.matryoshka_weights is None
    # the weighted method: protoembed reads the weights in the widths' order
    assert apply_overrides({}, [WEIGHTED])["objective"]["matryoshka"] == {
        "dims": list(DIMS),
        "weights": [2, 1, 1, 1, 1],
    }
    assert METHODS["sup-mined-mrl-w"].label.endswith(", Matryoshka 384/256/128/64/32, weights 2/1/1/1/1")


def test_a_kept_model_is_evaluated_at_every_width_then_quantised_and_rescored(tmp_path):
    from experiments.smaller_vectors import test_evaluations

    assert test_evaluations(tmp_path) == [
        ("retrieval.json", "test_s", ("--dims", "384,256,128,64,32", "--cache-embeddings")),
        ("int8.json", "int8_s", ("--vectors", "int8", "--rescore-multiplier", "4", "--cache-embeddings")),
        (
            "binary.json",
            "binary_s",
            ("--vectors", "binary", "--rescore-multiplier", "4", "--cache-embeddings"),
        ),
    ]


def _own_pairs_records(root: Path, chosen: dict[tuple[str, str], float]) -> Path:
    """Own-pairs records whose seed-1 dev scores choose ``chosen[(method, set)]``."""
    from experiments.own_pairs_plan import LR_GRID, run_name

    for (method, name), lr in chosen.items():
        for g in LR_GRID:
            _write(root / run_name(method, name, g, 1) / "dev.json", _scores(40.0 if g == lr else 30.0))
    return root


def _fake_study(
    tmp_path: Path, monkeypatch, lr_mode: str, dev_by_lr: dict[float, float], more: tuple[str, ...] = ()
):
    """Run the driver's run logic on GoogleNews with every command faked (``more``: further command-line
    arguments): a training writes results.json and best/, an evaluation its scores (dev: ``dev_by_lr[lr]``);
    returns the commands run and the records."""
    import experiments.own_pairs as own_pairs
    import experiments.smaller_vectors as driver
    from experiments.own_pairs_plan import LR_GRID

    commands: list[list[str]] = []
    lrs: dict[str, float] = {}

    def fake(cmd: list[str], folder: Path, key: str = "seconds", file: str = "", quiet: bool = False) -> int:
        commands.append(cmd)
        folder.mkdir(parents=True, exist_ok=True)
        if "--output-dir" in cmd:
            lrs[folder.name] = float(next(a for a in cmd if a.startswith("training.lr=")).split("=")[1])
            (folder / "best").mkdir(exist_ok=True)
            (folder / "results.json").write_text(json.dumps({"best_step": 1, "total_steps": 2}))
            return 0
        out = Path(cmd[cmd.index("--output") + 1])
        if cmd[cmd.index("--split") + 1] == "dev":
            out.write_text(json.dumps(_scores(dev_by_lr[lrs[folder.name]])))
        elif "--dims" in cmd:
            out.write_text(json.dumps({"suite": "retrieval", "dims": {"384": _scores(40.0)}}))
        else:
            out.write_text(json.dumps(_scores(39.0)))
        return 0

    monkeypatch.setattr(own_pairs, "timed_call", fake)
    monkeypatch.setattr(driver, "run_eval_steps", lambda config, cap: 2)
    own = _own_pairs_records(
        tmp_path / "own",
        {("sup-mined", "googlenews"): LR_GRID[1], ("st-mnrl-mined", "googlenews"): LR_GRID[2]},
    )
    args = driver.parse_args(
        ["--sets", "googlenews", "--lr", lr_mode, "--runs-dir", str(tmp_path / "runs")]
        + ["--records-dir", str(tmp_path / "records"), "--own-pairs-records", str(own), *more]
    )
    failed = driver._runs(args, {"googlenews": tmp_path / "runs" / "data" / "googlenews"})
    assert failed == []
    return commands, tmp_path / "records"


def _trained(commands: list[list[str]]) -> list[str]:
    return [Path(c[c.index("--output-dir") + 1]).name for c in commands if "--output-dir" in c]


def test_the_short_protocol_trains_every_seed_at_the_own_pairs_lr_then_a_rerun_skips_them(
    tmp_path, monkeypatch
):
    from experiments.own_pairs import ANCHOR_SCRIPT
    from experiments.own_pairs_plan import LR_GRID, run_name
    from experiments.smaller_vectors_plan import MATRYOSHKA_OVERRIDE, METHODS

    commands, records = _fake_study(tmp_path, monkeypatch, "own-pairs", {lr: 30.0 for lr in LR_GRID})
    lr = {"sup-mined": LR_GRID[1], "st-mnrl-mined": LR_GRID[2]}  # the base method's own-pairs choice
    expected = [run_name(m, "googlenews", lr[METHODS[m].base], seed) for seed in (1, 2, 3) for m in METHODS]
    assert _trained(commands) == expected
    by_run = {Path(c[c.index("--output-dir") + 1]).name: c for c in commands if "--output-dir" in c}
    mrl = by_run[run_name("st-mrl-mined", "googlenews", LR_GRID[2], 1)]
    assert mrl[1] == str(ANCHOR_SCRIPT) and mrl[-2:] == ["--set", MATRYOSHKA_OVERRIDE]
    assert "sup-mined-googlenews.yaml" in mrl[mrl.index("--config") + 1]
    pe = by_run[run_name("sup-mined-mrl", "googlenews", LR_GRID[1], 1)]
    assert pe[:4] == [sys.executable, "-m", "protoembed", "train"] and pe[-2:] == [
        "--set",
        MATRYOSHKA_OVERRIDE,
    ]
    assert MATRYOSHKA_OVERRIDE not in by_run[run_name("sup-mined", "googlenews", LR_GRID[1], 1)]
    for run in expected:  # every run recorded with its three test evaluations
        assert sorted(p.name for p in (records / run).glob("*.json")) == [
            "binary.json",
            "dev.json",
            "environment.json",
            "int8.json",
            "results.json",
            "retrieval.json",
        ]
    again, _ = _fake_study(tmp_path, monkeypatch, "own-pairs", {lr: 30.0 for lr in LR_GRID})
    assert again == []


def test_the_study_overrides_follow_a_protoembed_methods_own_and_skip_the_anchor(tmp_path, monkeypatch):
    from experiments.own_pairs_plan import LR_GRID, run_name
    from experiments.smaller_vectors_plan import MATRYOSHKA_OVERRIDE

    more = ("--seeds", "1", "--set", "training.padding=joint")
    commands, _ = _fake_study(tmp_path, monkeypatch, "own-pairs", {lr: 30.0 for lr in LR_GRID}, more)
    by_run = {Path(c[c.index("--output-dir") + 1]).name: c for c in commands if "--output-dir" in c}
    mrl = by_run[run_name("sup-mined-mrl", "googlenews", LR_GRID[1], 1)]
    assert mrl[-4:] == ["--set", MATRYOSHKA_OVERRIDE, "--set", "training.padding=joint"]
    assert by_run[run_name("sup-mined", "googlenews", LR_GRID[1], 1)][-1] == "training.padding=joint"
    assert by_run[run_name("st-mrl-mined", "googlenews", LR_GRID[2], 1)][-1] == MATRYOSHKA_OVERRIDE


def test_the_dev_protocol_tries_the_grid_then_tests_the_seeds_at_the_lr_chosen_on_dev(tmp_path, monkeypatch):
    from experiments.own_pairs_plan import LR_GRID, run_name
    from experiments.smaller_vectors_plan import METHODS, row_lr

    low, mid, high = LR_GRID
    commands, records = _fake_study(tmp_path, monkeypatch, "dev", {low: 30.0, mid: 31.0, high: 32.0})
    grid = [run_name(m, "googlenews", g, 1) for m in METHODS for g in LR_GRID]
    seeds = [run_name(m, "googlenews", high, s) for s in (2, 3) for m in METHODS]
    assert _trained(commands) == grid + seeds
    tested = sorted(p.parent.name for p in records.glob("*/retrieval.json"))
    assert tested == sorted(run_name(m, "googlenews", high, s) for m in METHODS for s in (1, 2, 3))
    assert row_lr(records, tmp_path / "own", "sup-mined-mrl", "googlenews") == (high, "dev")
    again, _ = _fake_study(tmp_path, monkeypatch, "dev", {low: 0.0, mid: 0.0, high: 0.0})
    assert again == []


# ------------------------------------------------------------------ the page
#: Test nDCG@10 per (method, seed) at 384, 256, 128, 64, 32; int8 and binary at full width.
WIDTHS = {
    "sup-mined": {1: [40, 38, 35, 30, 24], 2: [41, 39, 36, 31, 25]},
    "sup-mined-mrl": {1: [39.5, 38.5, 37, 34, 31], 2: [40.5, 39.5, 38, 35, 32]},
    "st-mnrl-mined": {1: [40, 38, 35, 30, 24], 2: [40, 38, 35, 30, 24]},
    "st-mrl-mined": {1: [39, 38.5, 37.5, 34, 31.5], 2: [39, 38.5, 37.5, 34, 31.5]},
    "sup-mined-mrl-w": {1: [40.5, 38.5, 36.5, 33.5, 30.5], 2: [41.5, 39.5, 37.5, 34.5, 31.5]},
}
UNTRAINED_WIDTHS = [32.0, 30.0, 27.0, 22.0, 16.0]
QUANT = {"int8": 0.99, "binary": 0.94}  # the share of the run's full-width score


def _tested(folder: Path, widths: list[float]) -> None:
    dims = {str(d): _scores(s) for d, s in zip((384, 256, 128, 64, 32), widths, strict=True)}
    _write(folder / "retrieval.json", {"suite": "retrieval", "dims": dims})
    for v, share in QUANT.items():
        _write(folder / f"{v}.json", _scores(widths[0] * share))


def _page_records(tmp_path: Path) -> tuple[Path, Path]:
    """One set's records (GoogleNews): the own-pairs lrs, every method's runs at them (seeds 1-2), one
    untested run at another lr, the untrained model."""
    from experiments.own_pairs_plan import LR_GRID, run_name

    own = _own_pairs_records(
        tmp_path / "own",
        {("sup-mined", "googlenews"): LR_GRID[1], ("st-mnrl-mined", "googlenews"): LR_GRID[2]},
    )
    _write(own / run_name("sup-mined", "googlenews", LR_GRID[1], 1) / "retrieval.json", _scores(39.0))
    _write(own / run_name("st-mnrl-mined", "googlenews", LR_GRID[2], 2) / "retrieval.json", _scores(40.2))
    for seed, score in ((2, 40.0), (3, 41.0)):
        _write(own / run_name("sup-mined", "googlenews", LR_GRID[1], seed) / "dev.json", _scores(33.0))
        _write(own / run_name("sup-mined", "googlenews", LR_GRID[1], seed) / "retrieval.json", _scores(score))
    records = tmp_path / "records"
    lr = {
        "sup-mined": LR_GRID[1],
        "sup-mined-mrl": LR_GRID[1],
        "st-mnrl-mined": LR_GRID[2],
        "st-mrl-mined": LR_GRID[2],
        "sup-mined-mrl-w": LR_GRID[1],
    }
    for method, seeds in WIDTHS.items():
        for seed, widths in seeds.items():
            run = records / run_name(method, "googlenews", lr[method], seed)
            _write(run / "dev.json", _scores(33.0))
            _write(run / "results.json", {"best_step": 3, "total_steps": 8})
            _write(run / "study_time.json", {"train_s": 100.0, "dev_s": 5.0, "test_s": 10.0, "int8_s": 2.0})
            _tested(run, widths)
    _write(records / run_name("sup-mined-mrl", "googlenews", LR_GRID[0], 1) / "dev.json", _scores(32.0))
    _tested(records / "untrained-default-googlenews", UNTRAINED_WIDTHS)
    return records, own


def _cell(values: list[float]) -> str:
    return f"{np.mean(values):.2f} ± {np.std(values, ddof=1):.2f}"


def test_the_page_tables_are_the_records_means_and_stds(tmp_path):
    from experiments.smaller_vectors_plan import METHODS
    from experiments.smaller_vectors_report import write_report

    records, own = _page_records(tmp_path)
    text = write_report(tmp_path / "page.md", records, own, "`cmd`").read_text()
    news = text[text.index("## GoogleNews") : text.index("## Runs")]
    assert "| untrained default (cut) | – | – | 32.00 | 30.00 | 27.00 | 22.00 | 16.00 |" in news
    for method, seeds in WIDTHS.items():
        cells = " | ".join(_cell([seeds[s][k] for s in seeds]) for k in range(5))
        lr = "5e-05" if METHODS[method].base == "sup-mined" else "0.0001"
        assert (
            f"| {METHODS[method].label} | {lr} (chosen on dev by the own-pairs study) | 2 | {cells} |" in news
        )
        full = [seeds[s][0] for s in seeds]
        quant = " | ".join(
            f"{_cell([f * share for f in full])} | {100 * share:.1f}" for share in QUANT.values()
        )
        assert f"| {METHODS[method].label} | {_cell(full)} | {quant} |" in news
    assert "| float32 (1536 B) | int8 rescored x4 (384 B) | % | binary rescored x4 (48 B) | % |" in news
    assert "| untrained default | 32.00 | 31.68 | 99.0 | 30.08 | 94.0 |" in news
    # the own-pairs seed std of sup-mined: its records of seeds 1-3 at 5e-05, 39, 40, 41 -> 1.00
    assert (
        "- Seeds recorded: `sup-mined` 2, `sup-mined-mrl` 2, `st-mnrl-mined` 2, `st-mrl-mined` 2, "
        "`sup-mined-mrl-w` 2. The own-pairs "
        "study's seed std of full-width test nDCG@10 (3 seeds): `sup-mined` 1.00; a difference of means below "
        "it is not resolved."
    ) in news
    # the own-pairs records of the retrained sup-mined seeds 1, 2 (39, 40; here 40, 41), st-mnrl-mined seed 2
    assert (
        "- The plain methods retrained here (the own-pairs runs' weights are not kept) against the own-pairs "
        "records of the same runs: 3 runs, the largest full-width test nDCG@10 difference +1.00 "
        "(`sup-mined-googlenews-lr5e-05-seed1`: 40.00 here, 39.00 there)."
    ) in news
    # the snli set has no records: its rows say so
    snli = text[text.index("## SNLI") : text.index("## GoogleNews")]
    assert "`sup-mined-mrl` against `st-mrl-mined`: not measured yet." in snli
    runs = text[text.index("## Runs") :]
    assert (
        "| sup-mined-mrl-googlenews-lr2e-05-seed1 | 3 / 8 | 32.00 | – | – | – | – | – | – | – |" not in runs
    )
    assert (
        "| sup-mined-mrl-googlenews-lr5e-05-seed1 | 3 / 8 | 33.00 | 39.50 | 38.50 | 37.00 | 34.00 | 31.00 |"
        in runs
    )


def test_the_findings_judge_the_aims_from_the_records(tmp_path):
    from experiments.smaller_vectors_report import collect, findings

    records, own = _page_records(tmp_path)
    lines = findings(collect(records, own, "googlenews"))
    # protoembed MRL − ST MRL per width, by hand: 384 +1.00, 256 +0.50, 128 -0.00, 64 +0.50, 32 +0.00
    assert lines[0] == (
        "`sup-mined-mrl` ≥ `st-mrl-mined` -0.5 nDCG@10 at every width: met "
        "(384: +1.00, 256: +0.50, 128: +0.00, 64: +0.50, 32: +0.00)."
    )
    # margins over the untrained cut: 64: 34.5 − 22 = +12.50 against 34 − 22 = +12.00; 32: 31.5 − 16 both
    assert lines[1] == (
        "At 64 and 32 dimensions `sup-mined-mrl` beats the untrained model cut to the same width by at least "
        "`st-mrl-mined`'s margin: met (64: +12.50 against +12.00; 32: +15.50 against +15.50)."
    )
    # the weighted run (means 41, 39, 37, 34, 31) against st-mrl-mined: +2.00, +0.50, -0.50, +0.00, -0.50;
    # margins 64: 34 − 22 = +12.00 against +12.00, 32: 31 − 16 = +15.00 against +15.50
    assert lines[2] == (
        "`sup-mined-mrl-w` ≥ `st-mrl-mined` -0.5 nDCG@10 at every width: met "
        "(384: +2.00, 256: +0.50, 128: -0.50, 64: +0.00, 32: -0.50)."
    )
    # short by 0.50 at 32; seed stds there: sup-mined-mrl-w 30.5, 31.5 -> 0.71, st-mrl-mined 0
    assert lines[3].endswith(
        "not met (64: +12.00 against +12.00; 32: +15.00 against +15.50); short by 0.50 at 32; the largest seed "
        "std of the two there is 0.71: not resolved."
    )
    # full-width cost: protoembed 40.5 − 40.0 = +0.50 (weighted: 40.5 − 41.0 = -0.50), sentence-transformers
    # 40.0 − 39.0 = +1.00
    assert (
        "protoembed `sup-mined` − `sup-mined-mrl` +0.50 (lr 5e-05, chosen on dev by the own-pairs study, equal weights)"
        in (lines[4])
    )
    assert "sentence-transformers `st-mnrl-mined` − `st-mrl-mined` +1.00" in lines[4]
    assert lines[4].endswith("protoembed's pays less: met.")
    assert (
        "`sup-mined` − `sup-mined-mrl-w` -0.50 (lr 5e-05, chosen on dev by the own-pairs study, weights 2/1/1/1/1)"
        in (lines[5])
    )
    assert lines[5].endswith("protoembed's pays less: met.")
    # the trained models are judged; the untrained one (int8 31.68 of 32, binary 30.08 of 32) beside them
    assert lines[6].startswith(
        "int8 rescored x4 keeps ≥ 97% of float32's nDCG@10 at 4x fewer bytes, judged on the trained models: "
        "met (5 of 5 reach it; lowest 99.0%, "
    )
    assert lines[6].endswith("; the untrained default model keeps 99.0%.")
    assert lines[7].startswith(
        "binary rescored x4 keeps ≥ 95% of float32's nDCG@10 at 32x fewer bytes, judged on the trained models: "
        "not met (0 of 5 reach it; lowest 94.0%, "
    )
    assert lines[7].endswith("; the untrained default model keeps 94.0%.")


def test_a_missed_aim_is_said_with_its_numbers(tmp_path):
    """protoembed's Matryoshka run 1 point below sentence-transformers' at 32: the first aim not met."""
    from experiments.own_pairs_plan import LR_GRID, run_name
    from experiments.smaller_vectors_report import collect, findings

    records, own = _page_records(tmp_path)
    for seed in (1, 2):
        widths = list(WIDTHS["sup-mined-mrl"][seed])
        widths[4] = 30.5
        _tested(records / run_name("sup-mined-mrl", "googlenews", LR_GRID[1], seed), widths)
    lines = findings(collect(records, own, "googlenews"))
    assert lines[0].startswith("`sup-mined-mrl` ≥ `st-mrl-mined` -0.5 nDCG@10 at every width: not met (")
    assert lines[0].endswith("32: -1.00).")
    assert "32: +14.50 against +15.50" in lines[1] and ": not met (" in lines[1]


@pytest.mark.parametrize("name", ["snli", "googlenews"])
def test_the_docs_table_is_the_records_summary(name):
    """The smaller-vector table of docs/training/your-data.md is :func:`summary_table` of the committed
    records, with a row for the set."""
    from experiments.own_pairs_report import SET_LABELS
    from experiments.smaller_vectors_report import collect, summary_table

    root = Path(__file__).resolve().parents[2]
    records = root / "docs" / "results" / "smaller-vectors"
    own = root / "docs" / "results" / "own-pairs"
    table = "\n".join(summary_table({n: collect(records, own, n) for n in SET_LABELS}))
    assert f"| {SET_LABELS[name]} | untrained default (cut) |" in table
    assert f"\n{table}\n" in (root / "docs" / "training" / "your-data.md").read_text(encoding="utf-8")


def test_the_headline_numbers_a_rerun_is_compared_on_are_the_rows_means():
    """``headline`` of the committed records: the weighted Matryoshka GoogleNews row at 32 dimensions is the
    mean of its tested seeds' ``retrieval.json`` there, read here directly; sentence-transformers' rows
    (which protoembed's training step does not touch) and the untrained model are left out."""
    from experiments.smaller_vectors_report import SET_LABELS, collect, headline

    root = Path(__file__).resolve().parents[2] / "docs" / "results"
    records = root / "smaller-vectors"
    numbers = headline({name: collect(records, root / "own-pairs", name) for name in SET_LABELS})
    runs = [
        r
        for r in sorted(records.glob("sup-mined-mrl-w-googlenews-lr*-seed*"))
        if (r / "retrieval.json").is_file()
    ]
    assert len(runs) == 3
    at_32 = [
        json.loads((r / "retrieval.json").read_text())["dims"]["32"]["tasks"]["googlenews-retrieval"][
            "ndcg_at_10"
        ]
        for r in runs
    ]
    assert numbers["GoogleNews, title -> snippet, `sup-mined-mrl-w`: test nDCG@10 at 32"] == pytest.approx(
        sum(at_32) / 3, abs=1e-9
    )
    assert not [name for name in numbers if "`st-" in name or "untrained" in name]
    assert len(numbers) == 2 * 3 * 5  # 2 sets x protoembed's 3 methods x 5 widths (no wall times)
