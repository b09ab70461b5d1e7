"""The CPU study runner: runs method x seed, skips finished runs, writes the mean ± std report."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from protoembed.training import study
from training_helpers import write_corpus

REPO = Path(__file__).resolve().parents[1]


def _fake_results(avg: float) -> dict:
    tasks = {t: {"spearman": avg + i, "pearson": avg, "n": 10} for i, t in enumerate(study.STS_TEST_TASKS)}
    return {"variant": "senteval", "split": "test", "tasks": tasks, "avg": avg + 3, "stsb_dev_spearman": avg}


def test_shipped_cpu_configs_cover_the_seven_methods():
    configs = study.method_configs(REPO / "configs" / "cpu")
    assert list(configs) == list(study.METHODS)
    steps = {study.load_config(p).training.max_steps for p in configs.values()}
    batches = {study.load_config(p).training.batch_size for p in configs.values()}
    assert len(steps) == 1 and len(batches) == 1  # same steps and batch size for all


def test_report_mean_std_and_partial_study(tmp_path):
    runs = tmp_path / "runs"
    for seed, avg in ((1, 70.0), (2, 72.0)):
        (runs / f"simcse-seed{seed}").mkdir(parents=True)
        (runs / f"simcse-seed{seed}" / "results.json").write_text(json.dumps(_fake_results(avg)))
        (runs / f"simcse-seed{seed}" / study.TIME_FILE).write_text(json.dumps({"seconds": 60.0}))
    (runs / study.UNTRAINED).mkdir()
    (runs / study.UNTRAINED / "results.json").write_text(json.dumps(_fake_results(60.0)))
    configs = study.method_configs(REPO / "configs" / "cpu", ["simcse", "promptbert"])
    text = study.write_report(tmp_path / "r.md", runs, configs, [1, 2], "cmd", list(study.STS_TEST_TASKS))
    assert "| SimCSE | 2/2 | 71.00 ± 1.41 |" in text  # STS12 of seeds 70 and 72, sample std
    assert "| PromptBERT | 0/2 |" in text and "INCOMPLETE" in text
    assert "| untrained default (mean head) | - | 60.00 |" in text
    assert "Total wall time: **2.0 min**" in text and "SimCSE: avg 74.00, +11.00 vs untrained" in text
    figure = tmp_path / "r.png"  # the figure beside the report, linked from it
    assert "](r.png)" in text and figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.md", "r.png", "runs"]  # no temp files left


def test_report_without_finished_runs_has_no_figure(tmp_path):
    configs = study.method_configs(REPO / "configs" / "cpu", ["simcse"])
    text = study.write_report(tmp_path / "r.md", tmp_path, configs, [1], "cmd", list(study.STS_TEST_TASKS))
    assert "| SimCSE | 0/1 |" in text and ".png" not in text and not (tmp_path / "r.png").exists()


def test_study_runs_each_seed_once_and_resumes(tiny_model_dirs, data_dir, tmp_path, monkeypatch):
    corpus = write_corpus(tmp_path / "corpus.txt")
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "simcse.yaml").write_text(
        f"model: {tiny_model_dirs['bert']}\nhead: cls\nmax_seq_length: 16\nobjective: {{name: simcse}}\n"
        f"data: {{corpus: {corpus}}}\ntraining: {{batch_size: 8, max_steps: 1, eval_steps: 1, "
        "test_tasks: [STSBenchmark]}\n"
    )
    runs, records = tmp_path / "runs", tmp_path / "records"
    (records / study.UNTRAINED).mkdir(parents=True)  # skip the (slow) untrained default model evaluation
    (records / study.UNTRAINED / "results.json").write_text(json.dumps(_fake_results(60.0)))
    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    args = [
        "--configs",
        str(configs),
        "--seeds",
        "1",
        "2",
        "--runs-dir",
        str(runs),
        "--records-dir",
        str(records),
        "--report",
        str(tmp_path / "r.md"),
    ]
    assert study.main(args) == 0
    for seed in (1, 2):
        assert (runs / f"simcse-seed{seed}" / "results.json").is_file()
        config = (runs / f"simcse-seed{seed}" / "config.yaml").read_text()
        assert f"seed: {seed}" in config
        recorded = json.loads((records / f"simcse-seed{seed}" / "results.json").read_text())
        assert recorded == json.loads((runs / f"simcse-seed{seed}" / "results.json").read_text())
        assert (records / f"simcse-seed{seed}" / study.TIME_FILE).is_file()
    stamp = os.path.getmtime(runs / "simcse-seed1" / "results.json")
    shutil.rmtree(runs / "simcse-seed2")  # another machine: only the committed record is left
    assert study.main(args) == 0  # rerun: both runs are recorded and skipped
    assert os.path.getmtime(runs / "simcse-seed1" / "results.json") == stamp
    assert not (runs / "simcse-seed2").exists()
    assert "| SimCSE | 2/2 |" in (tmp_path / "r.md").read_text()


def test_unknown_method_is_an_error(capsys):
    assert study.main(["--methods", "simcsee", "--report-only"]) == 2
    assert "unknown method 'simcsee'" in capsys.readouterr().err


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)
