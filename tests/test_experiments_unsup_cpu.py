"""The unsupervised CPU study (experiments/): method x seed runs, recorded runs skipped, report from records."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from experiments import unsup_cpu
from experiments.unsup_cpu_report import ENVIRONMENT_FILE, LOG_FILE, TIME_FILE, UNTRAINED, write_report

from training_helpers import write_corpus

REPO = Path(__file__).resolve().parents[1]
TASKS = unsup_cpu.resolved_config(REPO / "configs" / "cpu" / "simcse.yaml")["training"]["test_tasks"]


def _fake_results(avg: float) -> dict:
    tasks = {t: {"spearman": avg + i, "pearson": avg, "n": 10} for i, t in enumerate(TASKS)}
    return {
        "variant": "senteval",
        "split": "test",
        "tasks": tasks,
        "avg": avg + 3,
        "stsb_dev_spearman": avg,
        "best_step": 100,
    }


def _configs(*methods: str) -> dict:
    paths = unsup_cpu.method_configs(REPO / "configs" / "cpu", list(methods))
    return {m: unsup_cpu.resolved_config(p) for m, p in paths.items()}


def test_shipped_cpu_configs_cover_the_seven_methods() -> None:
    configs = _configs()
    assert list(configs) == list(unsup_cpu.METHODS)
    steps = {c["training"]["max_steps"] for c in configs.values()}
    batches = {c["training"]["batch_size"] for c in configs.values()}
    assert len(steps) == 1 and len(batches) == 1  # same steps and batch size for all


def _write_run(folder: Path, avg: float, log: bool) -> None:
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(_fake_results(avg)))
    (folder / TIME_FILE).write_text(json.dumps({"seconds": 60.0}))
    if log:
        start = {"event": "start", "total_steps": 12, "corpus": {"sentences": 1234}}
        train = {"event": "train", "step": 12, "loss": 0.0631}
        (folder / LOG_FILE).write_text(json.dumps(start) + "\n" + json.dumps(train) + "\n")
        environment = {"cpu_count": 7, "load_average_start": 1.5, "load_average_end": 2.3}
        environment["backbone"] = {"model": "default", "parameters": 4321, "dimension": 16}
        (folder / ENVIRONMENT_FILE).write_text(json.dumps(environment))


def test_report_mean_std_numbers_from_the_records(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _write_run(runs / "simcse-seed1", 70.0, log=True)
    _write_run(runs / "simcse-seed2", 72.0, log=False)  # an older record: results and time only
    (runs / UNTRAINED).mkdir()
    (runs / UNTRAINED / "results.json").write_text(json.dumps(_fake_results(60.0)))
    (runs / "DISCUSSION.md").write_text("## What the numbers say\n\nhand-written\n")
    configs = _configs("simcse", "promptbert")
    full = ("full.yaml", unsup_cpu.resolved_config(REPO / "configs" / "bert-base-uncased" / "simcse.yaml"))
    labels = unsup_cpu.METHODS
    text = write_report(tmp_path / "r.md", runs, configs, labels, [1, 2], "`cmd`", "simcse", full, None)
    assert "| SimCSE | 2/2 | 71.00 ± 1.41 |" in text  # STS12 of seeds 70 and 72, sample std
    assert "| PromptBERT | 0/2 |" in text and "INCOMPLETE" in text
    assert "| untrained default (its own head) | - | 60.00 |" in text
    assert "Total wall time: **2.0 min**" in text and "SimCSE: avg 74.00, +11.00 vs untrained" in text
    # numbers from the log and environment records, not from the configs
    assert "(1,234 sentences as the runs' logs read it), 12 steps of batch 32 (384 sentences per run" in text
    assert "backbone `default` (4,321 parameters, embedding dimension 16)" in text
    machine = "Machine: 7 CPU core(s) (`os.cpu_count()`); 1-minute load average at the start and end of a run"
    assert machine + ": 1.5-2.3 (recorded by 1 of 2 runs" in text
    assert "| SimCSE | 71.00 ± 1.41 | 100, 100 | 0.063 | 1.0 |" in text
    assert "hand-written" in text and "| batch | 32 | 64 |" in text  # the full-size column from its config
    figure = tmp_path / "r.png"  # the figure beside the report, linked from it
    assert "](r.png)" in text and figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.md", "r.png", "runs"]  # no temp files left


def test_report_without_finished_runs_has_no_figure(tmp_path: Path) -> None:
    text = write_report(tmp_path / "r.md", tmp_path, _configs("simcse"), unsup_cpu.METHODS, [1], "`cmd`")
    assert "| SimCSE | 0/1 |" in text and ".png" not in text and not (tmp_path / "r.png").exists()
    assert "100 steps of batch 32 (3,200 sentences per run)" in text  # no log: the config's step limit
    assert "(sentences not recorded as" in text and "Machine: not recorded" in text
    backbone = {"parameters": 22, "dimension": 4}  # counted from the model by the caller
    text = write_report(tmp_path / "r.md", tmp_path, _configs("simcse"), {}, [1], "`c`", backbone=backbone)
    assert "backbone `default` (22 parameters, embedding dimension 4)" in text


@pytest.mark.subprocess  # protoembed train runs in child interpreters
def test_study_runs_each_seed_once_and_resumes(tiny_model_dirs, data_dir, tmp_path, monkeypatch) -> None:
    corpus = write_corpus(tmp_path / "corpus.txt")
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "simcse.yaml").write_text(
        f"model: {tiny_model_dirs['bert']}\nhead: cls\nmax_seq_length: 16\nobjective: {{name: simcse}}\n"
        f"data: {{corpus: {corpus}}}\ntraining: {{batch_size: 8, max_steps: 1, eval_steps: 1, "
        "test_tasks: [STSBenchmark]}\n"
    )
    runs, records = tmp_path / "runs", tmp_path / "records"
    (records / UNTRAINED).mkdir(parents=True)  # skip the (slow) untrained model evaluation
    (records / UNTRAINED / "results.json").write_text(json.dumps(_fake_results(60.0)))
    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    args = ["--configs", str(configs), "--seeds", "1", "2", "--runs-dir", str(runs)]
    args += ["--records-dir", str(records), "--report", str(tmp_path / "r.md")]
    assert unsup_cpu.main(args) == 0
    import protoembed

    parameters = sum(p.numel() for p in protoembed.load(str(tiny_model_dirs["bert"])).parameters())
    for seed in (1, 2):
        run, kept = runs / f"simcse-seed{seed}", records / f"simcse-seed{seed}"
        assert f"seed: {seed}" in (run / "config.yaml").read_text()
        for name in ("results.json", "config.yaml", LOG_FILE):  # the run's own files, copied as they are
            assert (kept / name).read_bytes() == (run / name).read_bytes()
        environment = json.loads((kept / ENVIRONMENT_FILE).read_text())
        assert environment["cpu_count"] == os.cpu_count()
        assert environment["backbone"]["parameters"] == parameters
        assert (kept / TIME_FILE).is_file()
    stamp = os.path.getmtime(runs / "simcse-seed1" / "results.json")
    shutil.rmtree(runs / "simcse-seed2")  # another machine: only the committed record is left
    assert unsup_cpu.main(args) == 0  # rerun: both runs are recorded and skipped
    assert os.path.getmtime(runs / "simcse-seed1" / "results.json") == stamp
    assert not (runs / "simcse-seed2").exists()
    report = (tmp_path / "r.md").read_text()
    assert "| SimCSE | 2/2 |" in report and f"{parameters:,} parameters" in report


def test_a_trained_run_is_recorded_without_training(tiny_model_dirs, tmp_path) -> None:
    """A run folder with results.json (trained elsewhere, e.g. another worktree) is recorded as it is."""
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "simcse.yaml").write_text(
        f"model: {tiny_model_dirs['bert']}\nobjective: {{name: simcse}}\ndata: {{corpus: c.txt}}\n"
        "training: {max_steps: 12}\n"
    )
    runs, records = tmp_path / "runs", tmp_path / "records"
    _write_run(runs / "simcse-seed1", 70.0, log=True)
    (runs / "simcse-seed1" / ENVIRONMENT_FILE).unlink()  # the trainer writes none; the recorder measures it
    (runs / "simcse-seed1" / "config.yaml").write_text("model: tiny\n")
    (records / UNTRAINED).mkdir(parents=True)
    (records / UNTRAINED / "results.json").write_text(json.dumps(_fake_results(60.0)))
    args = ["--configs", str(configs), "--seeds", "1", "--runs-dir", str(runs), "--records-dir", str(records)]
    assert unsup_cpu.main([*args, "--report", str(tmp_path / "r.md")]) == 0
    for name in ("results.json", "config.yaml", LOG_FILE, TIME_FILE):
        assert (records / "simcse-seed1" / name).read_bytes() == (runs / "simcse-seed1" / name).read_bytes()
    environment = json.loads((records / "simcse-seed1" / ENVIRONMENT_FILE).read_text())
    assert environment["cpu_count"] == os.cpu_count() and environment["load_average_start"] is None
    assert "(1,234 sentences as the runs' logs read it), 12 steps" in (tmp_path / "r.md").read_text()


def test_unknown_method_is_an_error(capsys) -> None:
    assert unsup_cpu.main(["--methods", "simcsee", "--report-only"]) == 2
    assert "unknown method 'simcsee'" in capsys.readouterr().err


def test_runs_as_a_script_from_the_repository_root() -> None:
    done = subprocess.run(
        [sys.executable, "experiments/unsup_cpu.py", "--methods", "simcsee", "--report-only"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "unknown method 'simcsee'" in done.stderr


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch) -> None:
    monkeypatch.chdir(REPO)
