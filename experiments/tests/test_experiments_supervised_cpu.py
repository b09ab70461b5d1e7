"""The supervised CPU study (experiments/): its configs, and a report whose tables equal the records."""

from __future__ import annotations

import json
import re
from pathlib import Path

from experiments import supervised_cpu
from experiments.supervised_cpu_report import ROWS, write_report

REPO = Path(__file__).resolve().parents[2]


def _results(stsb: float, pearson: float, every_task: bool = False) -> dict:
    tasks = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness"]
    chosen = tasks if every_task else ["STSBenchmark"]
    scores = {t: {"spearman": stsb - (t != "STSBenchmark") * 5, "pearson": pearson, "n": 10} for t in chosen}
    return {"variant": "senteval", "split": "test", "tasks": scores, "avg": stsb - 1}


def _write(folder: Path, name: str, data: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(data))


def test_the_study_covers_every_table_one_cell():
    configs = supervised_cpu.study_configs(
        REPO / "configs" / "cpu", list(supervised_cpu.SYSTEMS), list(supervised_cpu.REGIMES)
    )
    # supervised SimCSE has no STS-B-only cell; the BCE cross-encoder recipe only an STS-B one
    assert len(configs) == 3 * 3 + 2 + 1
    assert list(configs)[:5] == [
        "cross-encoder-stsb",
        "cross-encoder-bce-stsb",
        "sbert-stsb",
        "cnn-sbert-stsb",
        "cross-encoder-nli",
    ]


def test_run_names_split_into_the_longest_system_and_a_regime():
    split = supervised_cpu.split_name
    assert split("cross-encoder-bce-stsb") == ("cross-encoder-bce", "stsb")
    assert split("cross-encoder-nli-stsb") == ("cross-encoder", "nli-stsb")
    assert split("cnn-sbert-nli") == ("cnn-sbert", "nli")
    for bad in ("cross-encoder-glue", "sbert", "bert-stsb"):
        try:
            split(bad)
        except supervised_cpu.ProtoembedError as err:
            assert repr(bad) in str(err)
        else:
            raise AssertionError(bad)


def test_report_tables_equal_the_records(tmp_path):
    records = tmp_path / "records"
    for head, value in (("cls", 20.0), ("mean", 70.0), ("cnn", 40.0)):
        _write(records / f"untrained-{head}", "results.json", _results(value, value - 1, every_task=True))
    for seed, shift in ((1, 0.0), (2, 2.0)):
        _write(records / f"sbert-stsb-seed{seed}", "results.json", _results(80 + shift, 79))
        _write(
            records / f"sbert-nli-stsb-seed{seed}", "results.json", _results(84 + shift, 83, every_task=True)
        )
    ce = records / "cross-encoder-stsb-seed1"
    _write(ce, "results.json", {**_results(30.0, 29), "best_dev_score": 88.0})
    _write(ce, "results-mean.json", _results(60.0, 59))
    _write(ce, "cross-encoder.json", _results(87.5, 87))
    _write(records / "cnn-sbert-nli-stsb-seed1", "results.json", _results(83.0, 82, every_task=True))
    _write(records / "sbert-nli-stsb-seed1", "nli.results.json", _results(75.0, 74))  # the NLI stage
    report = write_report(
        tmp_path / "page.md", records, REPO / "configs" / "cpu", "make experiment-supervised"
    )
    text = report.read_text()
    table = text.split("## Table I")[1].split("## Table II")[0]
    rows = {
        line.split(" | ")[0].strip("| "): line.split(" | ")[1:]
        for line in table.splitlines()
        if line.startswith("| ") and "Model" not in line
    }
    assert list(rows) == list(ROWS)
    assert rows["SBERT"][0] == "70.00 (69.00)"  # not fine-tuned: the untrained mean head
    assert rows["SBERT"][1] == "81.00 ± 1.41 (79.00 ± 0.00)"  # STS-B, two seeds: mean ± sample std
    assert rows["SBERT"][2] == "75.00 (74.00)"  # NLI: the NLI stage of the NLI then STS-B run
    assert rows["SBERT"][3].rstrip(" |") == "85.00 ± 1.41 (83.00 ± 0.00)"
    assert rows["[CLS] (cross-encoder)"][1] == "30.00 (29.00)"
    assert rows["Avg. (cross-encoder)"][1] == "60.00 (59.00)"
    assert rows["Supervised SimCSE"][1] == "–"
    assert "| Cross-encoder, STS-B | MSE on the 0-5 score (GLUE) | 1 | 88.00 | 87.50 (87.00) | yes |" in text
    table3 = text.split("## Table III")[1].split("##")[0]
    assert [r.split(" | ")[0].strip("| ") for r in table3.splitlines() if re.match(r"\| (SBERT|CNN)", r)] == [
        "SBERT",
        "CNN-SBERT",
    ]
    assert (tmp_path / "page.png").is_file()


def test_report_compares_the_earlier_records_of_a_rerun(tmp_path):
    """before-fixes/ holds the earlier cross-encoder records: the page shows Table II, [CLS] and Avg.
    before and now for each run name there, with the seeds each side has."""
    records = tmp_path / "records"
    before = records / "before-fixes"
    for seed, value in ((1, 60.0), (2, 64.0)):
        _write(before / f"cross-encoder-stsb-seed{seed}", "results.json", _results(value - 10, value - 11))
        _write(
            before / f"cross-encoder-stsb-seed{seed}", "results-mean.json", _results(value - 20, value - 21)
        )
        _write(before / f"cross-encoder-stsb-seed{seed}", "cross-encoder.json", _results(value, value - 1))
    (before / "CHANGES.md").write_text("One STS-B epoch before, three now.\n")
    ce = records / "cross-encoder-stsb-seed1"
    _write(ce, "results.json", _results(30.0, 29))
    _write(ce, "results-mean.json", _results(60.0, 59))
    _write(ce, "cross-encoder.json", _results(83.5, 84))
    text = write_report(tmp_path / "page.md", records, REPO / "configs" / "cpu", "c").read_text()
    section = text.split("## What the fixes moved")[1]
    assert "One STS-B epoch before, three now." in section
    assert "| cross-encoder-stsb: Table II | 2 / 1 | 62.00 ± 2.83 (61.00 ± 2.83) | 83.50 (84.00) |" in section
    assert "| cross-encoder-stsb: [CLS] | 2 / 1 | 52.00 ± 2.83 (51.00 ± 2.83) | 30.00 (29.00) |" in section
    assert "| cross-encoder-stsb: Avg. | 2 / 1 | 42.00 ± 2.83 (41.00 ± 2.83) | 60.00 (59.00) |" in section
    assert "| Cross-encoder, STS-B | MSE on the 0-5 score (GLUE) | 1 | n/a | 83.50 (84.00) | yes |" in text


def test_the_cross_encoder_rows_report_the_recipe_with_the_better_dev_score(tmp_path):
    """Table II lists both losses with their dev scores; Table I's [CLS] / Avg. cells read the recipe whose
    runs score STS-B dev best on average, even when the other scores better on test."""
    records = tmp_path / "records"
    runs = {  # system: [(dev, [CLS] test, Avg. test, cross-encoder test)] per seed
        "cross-encoder": [(82.0, 30.0, 50.0, 78.0), (83.0, 32.0, 52.0, 79.0)],  # dev mean 82.5, test 78.5
        "cross-encoder-bce": [(84.0, 40.0, 60.0, 75.0), (82.0, 44.0, 62.0, 77.0)],  # dev 83.0, test 76.0
    }
    for system, seeds in runs.items():
        for seed, (dev, cls, avg, ce) in enumerate(seeds, 1):
            folder = records / f"{system}-stsb-seed{seed}"
            _write(folder, "results.json", {**_results(cls, cls - 1), "best_dev_score": dev})
            _write(folder, "results-mean.json", _results(avg, avg - 1))
            _write(folder, "cross-encoder.json", _results(ce, ce - 1))
    mse_nli = records / "cross-encoder-nli-stsb-seed1"  # one recipe only: reported whatever its dev
    _write(mse_nli, "results.json", {**_results(20.0, 19), "best_dev_score": 70.0})
    _write(mse_nli, "results-mean.json", _results(45.0, 44))
    _write(mse_nli, "cross-encoder.json", _results(71.0, 70))
    text = write_report(tmp_path / "page.md", records, REPO / "configs" / "cpu", "c").read_text()
    table2 = text.split("## Table II")[1].split("## Table III")[0]
    assert [line for line in table2.splitlines() if line.startswith("| Cross-encoder")] == [
        "| Cross-encoder, STS-B | MSE on the 0-5 score (GLUE) | 2 | 82.50 ± 0.71 | 78.50 ± 0.71 (77.50 ± 0.71) | no |",
        "| Cross-encoder, STS-B | BCE on score / 5 (sentence-transformers) | 2 | 83.00 ± 1.41 "
        "| 76.00 ± 1.41 (75.00 ± 1.41) | yes |",
        "| Cross-encoder, NLI then STS-B | MSE on the 0-5 score (GLUE) | 1 | 70.00 | 71.00 (70.00) | yes |",
    ]
    table1 = text.split("## Table I:")[1].split("## Table II")[0]
    cells = {line.split(" | ")[0].strip("| "): line.split(" | ")[1:] for line in table1.splitlines()}
    assert cells["[CLS] (cross-encoder)"][1] == "42.00 ± 2.83 (41.00 ± 2.83)"  # BCE's [CLS] runs
    assert cells["Avg. (cross-encoder)"][1] == "61.00 ± 1.41 (60.00 ± 1.41)"
    assert cells["Avg. (cross-encoder)"][3].rstrip(" |") == "45.00 (44.00)"  # MSE, the only NLI then STS-B


def test_the_page_names_the_command_that_rewrites_it_not_the_runs_chosen():
    """The page is drawn from every record, so only the options it depends on are kept in its command."""
    argv = ["--seeds", "3", "--systems", "cnn-sbert", "--records-dir", "r", "--set", "training.epochs=1"]
    assert supervised_cpu._command(argv) == "python experiments/supervised_cpu.py --records-dir r"
    argv = ["--report=p.md", "--report-only", "--regimes", "stsb"]
    assert supervised_cpu._command(argv) == "python experiments/supervised_cpu.py --report=p.md"
    assert supervised_cpu._command([]) == "python experiments/supervised_cpu.py"


def test_a_cross_encoder_run_is_evaluated_by_the_command_line(tmp_path, monkeypatch):
    """A cross-encoder run ending on STS-B: the mean head over its encoder (the Avg. row) and Table II's
    scores, both by ``protoembed eval sts`` (the latter with ``--cross-encoder`` on ``best/cross_encoder``);
    a file already written is not evaluated again, and another system needs neither."""
    run = tmp_path / "cross-encoder-stsb-seed1"
    run.mkdir()
    (run / "config.yaml").write_text("model: default\n")
    calls = []

    def call(cmd, stdout=None):
        calls.append(cmd[3:])
        Path(cmd[cmd.index("--output") + 1]).write_text("{}")
        return 0

    monkeypatch.setattr(supervised_cpu.subprocess, "call", call)
    assert supervised_cpu.extra_evaluations(run, "cross-encoder", "stsb", ["STS12"], 8)
    best = str(run / "best")
    tail = ["--batch-size", "8", "--tasks", supervised_cpu.STSB, "--output"]
    assert calls == [
        ["eval", "sts", "--model", best, "--head", "mean", *tail, str(run / supervised_cpu.MEAN_RESULTS)],
        [
            "eval",
            "sts",
            "--model",
            str(run / "best" / "cross_encoder"),
            "--cross-encoder",
            *tail,
            str(run / supervised_cpu.CROSS_ENCODER_RESULTS),
        ],
    ]
    assert supervised_cpu.extra_evaluations(run, "cross-encoder", "stsb", ["STS12"], 8)
    assert supervised_cpu.extra_evaluations(run, "sbert", "stsb", ["STS12"], 8) and len(calls) == 2


def test_a_rerun_with_the_current_step_shows_table_one_before_and_after(tmp_path):
    """``--step-before`` keeps Table I's seed means (row: regime); the page shows them beside the rerun
    records' means, and has no such section without the file."""
    from experiments.step_rerun import STEP_BEFORE_FILE

    records = tmp_path / "records"
    argv = ["--step-before", "--records-dir", str(records)]
    assert supervised_cpu.main(argv) == 2 and not (records / STEP_BEFORE_FILE).exists()  # no records
    for seed, value in ((1, 80.0), (2, 82.0)):
        _write(records / f"sbert-stsb-seed{seed}", "results.json", _results(value, value))
    assert supervised_cpu.main(argv) == 0
    kept = json.loads((records / STEP_BEFORE_FILE).read_text())
    assert kept["settings"] == {"training.padding": "joint", "training.dropout": "torch"}
    assert kept["numbers"] == {"SBERT: STS-B": 81.0}  # the other rows and regimes have no runs
    for seed, value in ((1, 81.0), (2, 82.5)):
        _write(records / f"sbert-stsb-seed{seed}", "results.json", _results(value, value))
    text = write_report(tmp_path / "page.md", records, REPO / "configs" / "cpu", "c").read_text()
    section = text.split("## Before and after the rerun with the current training step")[1]
    assert "made again with `training.padding: auto`, `training.dropout: fast` (the defaults)" in section
    assert "| SBERT: STS-B | 81.00 | 81.75 | +0.75 |" in section
    (records / STEP_BEFORE_FILE).unlink()
    text = write_report(tmp_path / "page.md", records, REPO / "configs" / "cpu", "c").read_text()
    assert "## Before and after the rerun" not in text


def test_setup_names_the_cpus_the_runs_ran_on(tmp_path: Path) -> None:
    from experiments.supervised_cpu_report import setup_text

    runs = {}
    for name, cpu in (("sbert-stsb-seed1", "X"), ("sbert-stsb-seed2", "Y")):
        _write(tmp_path / name, "study_time.json", {"seconds": 90.0})
        _write(tmp_path / name, "environment.json", {"cpu_count": 2, "cpu": cpu, "cpu_features": ["avx2"]})
        runs.setdefault("sbert-stsb", []).append(tmp_path / name)
    text = setup_text(tmp_path, runs)
    assert "| sbert-stsb | 2 |  | 1.5 |" in text
    assert text.endswith("Total compute: 3 min on 2 CPU cores (X (avx2; 1 record), Y (avx2; 1 record)).\n")
