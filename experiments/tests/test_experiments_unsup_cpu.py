"""The unsupervised CPU study (experiments/): method x seed runs, recorded runs skipped, report from records."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from experiments import unsup_cpu
from experiments.records import cpus_text
from experiments.unsup_cpu_report import ENVIRONMENT_FILE, LOG_FILE, TIME_FILE, UNTRAINED, write_report

from protoembed.model.precision import CPU_FEATURES
from protoembed.outputs.run_layout import DEV_SCORE
from training_helpers import write_corpus

REPO = Path(__file__).resolve().parents[2]
TASKS = unsup_cpu.resolved_config(REPO / "configs" / "cpu" / "simcse.yaml")["training"]["test_tasks"]


def _fake_results(avg: float) -> dict:
    tasks = {t: {"spearman": avg + i, "pearson": avg, "n": 10} for i, t in enumerate(TASKS)}
    return {
        "suite": "sts",
        "variant": "senteval",
        "split": "test",
        "tasks": tasks,
        "avg": avg + 3,
        DEV_SCORE: avg,
        "best_step": 100,
    }


def _configs(*methods: str) -> dict:
    paths = unsup_cpu.method_configs(REPO / "configs" / "cpu", list(methods))
    return {m: unsup_cpu.resolved_config(p) for m, p in paths.items()}


def test_shipped_cpu_configs_cover_the_methods() -> None:
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
        start = {"event": "start", "total_steps": 12, "data": {"examples": 1234}}
        train = {"event": "train", "step": 12, "loss": 0.0631}
        (folder / LOG_FILE).write_text(json.dumps(start) + "\n" + json.dumps(train) + "\n")
        environment = {"cpu_count": 7, "load_average_start": 1.5, "load_average_end": 2.3}
        environment |= {"cpu": "Acme 9000", "cpu_features": ["avx2", "avx512_bf16"]}
        environment["backbone"] = {"model": "default", "parameters": 4321, "dimension": 16}
        (folder / ENVIRONMENT_FILE).write_text(json.dumps(environment))


def _proc_cpu_model() -> str:
    """The first ``model name`` of /proc/cpuinfo, read here on its own."""
    lines = Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines()
    return next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))


def test_cpus_text_counts_the_records_of_each_cpu() -> None:
    x = {"cpu": "X", "cpu_features": ["avx2"]}
    y = {"cpu": "Y", "cpu_features": []}
    text = cpus_text([x, {"cpu_count": 2}, dict(x), y])  # an older record names no CPU
    assert text == "X (avx2; 2 records), Y (none of the speed features; 1 record)"
    assert cpus_text([{"cpu_count": 2}]) is None


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
    assert (
        machine + ": 1.5-2.3; CPU: Acme 9000 (avx2, avx512_bf16; 1 record) (recorded by 1 of 2 runs" in text
    )
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
        assert environment["cpu"] == _proc_cpu_model() and set(environment["cpu_features"]) <= set(
            CPU_FEATURES
        )
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
        "training: {max_steps: 12, test_tasks: [STS12, STS13, STS14, STS15, STS16, STSBenchmark, SICKRelatedness]}\n"
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


# ------------------------------------------------------------------ the other suites (--suites)
TRANSFER = ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC"]
CLUSTERING = ["AgNews", "Tweet"]
PROTOCOLS = {
    "transfer": {
        "classifier": "pytorch",
        "folds": 10,
        "inner_folds": 10,
        "seed": 1111,
        "l2_grid": [1e-5, 1e-2],
    },
    "fewshot": {"shots_per_class": 16, "seeds": 3, "C": 1.0},
    "clustering": {"algorithm": "k-means", "runs": 10},
}


def _suite_json(suite: str, model: str, base: float) -> dict:
    """A results file as ``protoembed eval <suite> --output`` writes it, numbers from ``base``."""
    if suite == "transfer":
        tasks = {t: {"acc": base + i} for i, t in enumerate(TRANSFER)}
    elif suite == "clustering":
        tasks = {t: {"acc": base + i, "nmi": base / 2 + i} for i, t in enumerate(CLUSTERING)}
    else:
        tasks = {t: {"acc": base, "seeds_acc": [base - 1, base, base + 1]} for t in TRANSFER}
    avg = statistics.mean(t["acc"] for t in tasks.values())  # as protoembed writes it: the tasks' mean
    return {"model": model, "suite": suite, "protocol": PROTOCOLS[suite], "tasks": tasks, "avg": avg}


class FakeCalls:
    """``subprocess.call`` stand-in: records each command and writes what the real one would."""

    def __init__(self, runs: Path, records: Path, retrained_shift: float = 0.0) -> None:
        self.commands: list[list[str]] = []
        self.runs, self.records, self.shift, self.n = runs, records, retrained_shift, 0

    def __call__(self, cmd: list[str], **kwargs) -> int:
        assert cmd[:3] == [sys.executable, "-m", "protoembed"], cmd
        self.commands.append(cmd[3:])
        self.n += 1
        out = lambda flag: Path(cmd[cmd.index(flag) + 1])  # noqa: E731
        if cmd[3] == "train":
            run = out("--output-dir")
            results = json.loads((self.records / run.name / "results.json").read_text())
            results["tasks"]["STS13"]["spearman"] += self.shift
            (run / "best").mkdir(parents=True)
            (run / "results.json").write_text(json.dumps(results))
        elif cmd[3] == "eval":
            target = out("--output")
            target.parent.mkdir(parents=True, exist_ok=True)  # as protoembed's writer does
            data = _suite_json(cmd[4], out("--model").name, 60.0 + 3 * self.n)
            if "--classifier" in cmd:
                data["protocol"] = {"classifier": cmd[cmd.index("--classifier") + 1]}
            target.write_text(json.dumps(data))
        elif cmd[3] == "analyze":
            out("--output").write_text(json.dumps({"analysis": cmd[4], "figure": str(out("--figure"))}))
        else:
            raise AssertionError(f"unexpected command {cmd}")
        return 0


def _study(tmp_path: Path, monkeypatch, shift: float = 0.0) -> tuple[FakeCalls, list[str]]:
    """Records of seed 1 of ConPVP (paper; no config kept) and SimCSE (config kept), no kept models."""
    runs, records = tmp_path / "runs", tmp_path / "records"
    _write_run(records / "conpvp-paper-seed1", 70.0, log=False)
    _write_run(records / "simcse-seed1", 72.0, log=False)
    (records / "simcse-seed1" / "config.yaml").write_text("model: default\n")
    _write_run(records / UNTRAINED, 60.0, log=False)
    fake = FakeCalls(runs, records, shift)
    monkeypatch.setattr(subprocess, "call", fake)  # the suites run their commands through records.timed_call
    monkeypatch.setattr(unsup_cpu, "backbone_facts", lambda model: {"parameters": 5, "dimension": 4})
    args = ["--seeds", "1", "--methods", "conpvp-paper", "simcse", "--runs-dir", str(runs)]
    args += ["--records-dir", str(records), "--report", str(tmp_path / "r.md")]
    return fake, [*args, "--suites", "transfer", "fewshot", "clustering"]


def _row(text: str, section: str, label: str) -> list[str]:
    """The cells of ``label``'s row in the first table after the line ``section``."""
    rest = text[text.index(section) :]
    line = next(x for x in rest.splitlines() if x.startswith(f"| {label} |"))
    return [c.strip() for c in line.strip("|").split("|")][1:]


def test_suites_retrain_missing_models_evaluate_and_draw_then_skip(tmp_path, monkeypatch) -> None:
    fake, args = _study(tmp_path, monkeypatch, shift=0.009)  # within the 0.01 tolerance
    records, runs = tmp_path / "records", tmp_path / "runs"
    before = {p: p.read_bytes() for p in records.rglob("*") if p.is_file()}
    assert unsup_cpu.main(args) == 0
    paper, simcse = runs / "conpvp-paper-seed1", runs / "simcse-seed1"
    train = [c for c in fake.commands if c[0] == "train"]
    assert train == [
        ["train", "--config", "configs/cpu/conpvp-paper.yaml", "--output-dir", str(paper), "--resume"]
        + ["--set", "training.seed=1"],  # no recorded config: the method's config and the run's seed
        ["train", "--config", str(records / "simcse-seed1" / "config.yaml"), "--output-dir", str(simcse)]
        + ["--resume"]  # the recorded config holds the seed; made before these settings: as it was made
        + ["--set", "training.padding=joint", "--set", "training.dropout=torch"],
    ]
    evals = [c for c in fake.commands if c[0] == "eval"]
    expected = []
    for folder, model in ((UNTRAINED, "default"), ("conpvp-paper-seed1", paper), ("simcse-seed1", simcse)):
        for suite in ("transfer", "fewshot", "clustering"):
            cmd = ["eval", suite, "--model", str(model if model == "default" else model / "best")]
            cmd += ["--output", str(records / folder / f"{suite}.json")]
            expected.append(
                cmd
                + ["--runtime", "onnx"]
                + (["--cache-embeddings"] if suite != "clustering" else [])
                + (["--classifier", "pytorch"] if suite == "transfer" else [])
            )
    assert evals == expected
    figures = records / "figures"
    models = ["--model", "default", "--model", str(simcse / "best"), "--model", str(paper / "best")]
    labels = ["--label", "untrained", "--label", "SimCSE", "--label", "ConPVP (paper)"]

    def where(stem: str) -> list[str]:
        return ["--figure", str(figures / f"{stem}.png"), "--output", str(figures / f"{stem}.json")]

    fewshot = [str(records / f / "fewshot.json") for f in (UNTRAINED, "simcse-seed1", "conpvp-paper-seed1")]
    assert [c for c in fake.commands if c[0] == "analyze"] == [
        ["analyze", "similarity", *models, *labels, *where("fig4-similarity")],
        ["analyze", "frequent-tokens", *models, *labels, "--head", "mean", *where("fig5-frequent-tokens")],
        ["analyze", "tsne", *models, *labels, *where("fig6-tsne")],
        ["analyze", "fewshot", *fewshot, *labels, *where("fig7-fewshot")],
    ]
    for path, content in before.items():  # the records are extended, never rewritten
        assert path.read_bytes() == content
    assert not (records / "conpvp-paper-seed1" / "config.yaml").exists()
    times = json.loads((records / "conpvp-paper-seed1" / "suite_time.json").read_text())
    assert sorted(times) == ["clustering", "fewshot", "retrain", "transfer"]
    assert sorted(json.loads((figures / "suite_time.json").read_text())) == sorted(
        ["similarity", "frequent-tokens", "tsne", "fewshot"]
    )
    from protoembed.cli import build_parser
    from protoembed.evaluation.suite import SUITES

    for cmd in fake.commands:  # each one is a valid protoembed command line, read as the study means it
        parsed = build_parser().parse_args(cmd)
        assert parsed.command == cmd[0]
        if cmd[0] == "eval":
            assert parsed.func.args == (SUITES[cmd[1]],)
            output = cmd[cmd.index("--output") + 1]
            assert (parsed.output, parsed.runtime, parsed.cache_embeddings) == (
                output,
                "onnx",
                cmd[1] != "clustering",
            )
        elif cmd[0] == "analyze":
            assert (parsed.analysis, parsed.figure) == (cmd[1], cmd[cmd.index("--figure") + 1])
            if cmd[1] == "fewshot":
                assert parsed.results == fewshot and parsed.label == labels[1::2]
            else:
                assert parsed.model == [models[i] for i in range(1, 6, 2)] and parsed.label == labels[1::2]
        else:
            assert cmd[0] == "train" and (parsed.config, parsed.output_dir, parsed.resume) == (
                cmd[2],
                cmd[4],
                True,
            )
    fake.commands.clear()
    assert unsup_cpu.main(args) == 0  # everything recorded: nothing runs, nothing retrains
    assert fake.commands == []


def test_report_tables_5_and_6_equal_the_suite_files(tmp_path, monkeypatch) -> None:
    import numpy as np

    fake, args = _study(tmp_path, monkeypatch)
    records = tmp_path / "records"
    _write_run(records / "simcse-seed2", 74.0, log=False)  # a second seed: mean ± std
    _write_run(records / "conpvp-paper-seed2", 71.0, log=False)
    assert unsup_cpu.main([*args[:1], "1", "2", *args[2:]]) == 0
    assert any(
        c[:2] == ["eval", "transfer"] and "simcse-seed2" in c[c.index("--output") + 1] for c in fake.commands
    )
    text = (tmp_path / "r.md").read_text()

    def data(folder: str, suite: str) -> dict:
        return json.loads((records / folder / f"{suite}.json").read_text())["tasks"]

    def cell(values: list[float]) -> str:
        return f"{np.mean(values):.2f}" + (f" ± {np.std(values, ddof=1):.2f}" if len(values) > 1 else "")

    rows = {"SimCSE": ["simcse-seed1", "simcse-seed2"], "untrained default (its own head)": [UNTRAINED]}
    rows[unsup_cpu.METHODS["conpvp-paper"]] = ["conpvp-paper-seed1", "conpvp-paper-seed2"]
    for label, folders in rows.items():
        transfer = [data(f, "transfer") for f in folders]
        want = [cell([t[task]["acc"] for t in transfer]) for task in TRANSFER]
        want.append(cell([np.mean([t[task]["acc"] for task in TRANSFER]) for t in transfer]))
        assert _row(text, "## Transfer (ConPVP Table 5)", label) == want
        clusters = [data(f, "clustering") for f in folders]
        for metric, marker in (("acc", "Accuracy:"), ("nmi", "NMI:")):
            want = [cell([c[task][metric] for c in clusters]) for task in CLUSTERING]
            want.append(cell([np.mean([c[task][metric] for task in CLUSTERING]) for c in clusters]))
            assert _row(text, marker, label) == want
    assert text.index("## Transfer (ConPVP Table 5)") < text.index("## Clustering (ConPVP Table 6)")
    for stem in ("fig4-similarity", "fig5-frequent-tokens", "fig6-tsne", "fig7-fewshot"):
        assert f"](records/figures/{stem}.png)" in text
    seconds = sum(v for p in records.glob("*/suite_time.json") for v in json.loads(p.read_text()).values())
    training = 60.0 * 5  # study_time.json of the five records
    assert f"Compute: **{seconds / 60:.1f} min** ({seconds:.0f} s" in text
    assert f"**{(seconds + training) / 60:.1f} min** in all" in text
    evaluated = f"{UNTRAINED}, conpvp-paper-seed1, conpvp-paper-seed2, simcse-seed1, simcse-seed2"
    assert f"Models with all 3 suites recorded (5): {evaluated}." in text


def test_report_has_no_suite_sections_without_their_records(tmp_path) -> None:
    records = tmp_path / "records"
    _write_run(records / "simcse-seed1", 70.0, log=False)
    text = write_report(tmp_path / "r.md", records, _configs("simcse"), unsup_cpu.METHODS, [1], "`c`")
    assert "Table 5" not in text and "Table 6" not in text and "Compute:" not in text
    (records / "simcse-seed1" / "clustering.json").write_text(json.dumps(_suite_json("clustering", "m", 50)))
    text = write_report(tmp_path / "r.md", records, _configs("simcse"), unsup_cpu.METHODS, [1], "`c`")
    assert "## Clustering (ConPVP Table 6)" in text and "Table 5" not in text and "## Figures" not in text
    assert _row(text, "Accuracy:", "SimCSE") == ["50.00", "51.00", "50.50"]


def test_a_retrained_model_with_other_sts_numbers_stops_the_study(tmp_path, monkeypatch, capsys) -> None:
    fake, args = _study(tmp_path, monkeypatch, shift=0.02)
    assert unsup_cpu.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    recorded = _fake_results(70.0)["tasks"]["STS13"]["spearman"]
    assert err == (
        f"unsup_cpu: error: conpvp-paper-seed1: the model in {tmp_path / 'runs' / 'conpvp-paper-seed1'} is "
        f"not the recorded one: STS STS13 (recorded {recorded:.4f}, retrained {recorded + 0.02:.4f})"
    )
    assert [c[1] for c in fake.commands if c[0] == "eval"] == [
        "transfer",
        "fewshot",
        "clustering",
    ]  # untrained
    assert not list((tmp_path / "records" / "conpvp-paper-seed1").glob("transfer.json"))


def test_existing_suite_files_are_skipped_and_their_model_not_needed(tmp_path, monkeypatch) -> None:
    fake, args = _study(tmp_path, monkeypatch)
    records = tmp_path / "records"
    for suite in ("transfer", "fewshot", "clustering"):  # conpvp-paper-seed1 is done: no retraining
        data = _suite_json(suite, "m", 1) | (
            {"protocol": {"classifier": "pytorch"}} if suite == "transfer" else {}
        )
        (records / "conpvp-paper-seed1" / f"{suite}.json").write_text(json.dumps(data))
    (records / UNTRAINED / "fewshot.json").write_text(json.dumps(_suite_json("fewshot", "m", 1)))
    assert unsup_cpu.main([*args, "--no-figures", "--suite-methods", "conpvp-paper", "simcse"]) == 0
    assert [c[:2] for c in fake.commands] == [
        ["eval", "transfer"],
        ["eval", "clustering"],  # the untrained model's few-shot file exists
        ["train", "--config"],
        ["eval", "transfer"],
        ["eval", "fewshot"],
        ["eval", "clustering"],
    ]
    assert "simcse-seed1" in fake.commands[2][4]
    assert json.loads((records / "conpvp-paper-seed1" / "transfer.json").read_text())["model"] == "m"


def test_a_finished_run_folder_without_its_model_is_an_error(tmp_path, monkeypatch, capsys) -> None:
    fake, args = _study(tmp_path, monkeypatch)
    run = tmp_path / "runs" / "conpvp-paper-seed1"
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps(_fake_results(70.0)))
    assert unsup_cpu.main([*args, "--no-figures"]) == 2
    err = capsys.readouterr().err
    assert f"error: conpvp-paper-seed1: {run} holds a finished run without best/; move it away" in err
    assert not any(c[0] == "train" for c in fake.commands)


def test_unknown_suite_method_is_an_error(capsys) -> None:
    args = ["--suites", "transfer", "--suite-methods", "simcsee", "--records-dir", "/nonexistent"]
    assert unsup_cpu.main([*args, "--runs-dir", "/nonexistent", "--report", "/nonexistent/r.md"]) == 2
    assert "unknown method 'simcsee'" in capsys.readouterr().err


def test_the_report_names_make_when_only_suite_options_were_given() -> None:
    for argv in (
        ["--suites", "transfer", "fewshot", "clustering"],
        ["--suite-methods", "all", "--no-figures"],
        ["--dims", "--sklearn-transfer"],
    ):
        made = unsup_cpu._command(argv, unsup_cpu.parse_args(argv))
        assert made == f"`make experiment-unsup` (= `python experiments/unsup_cpu.py {unsup_cpu.MAKE_ARGS}`)"
    argv = ["--suites", "transfer", "--seeds", "1"]
    assert (
        unsup_cpu._command(argv, unsup_cpu.parse_args(argv)) == "`python experiments/unsup_cpu.py --seeds 1`"
    )


def test_make_experiment_unsup_passes_the_study_its_make_args() -> None:
    makefile = (Path(__file__).parents[2] / "Makefile").read_text()
    recipe = makefile[makefile.index("\nexperiment-unsup:") :].splitlines()[2].strip()
    assert recipe == f"$(BIN)/python experiments/unsup_cpu.py {unsup_cpu.MAKE_ARGS}"


def test_figures_are_drawn_after_seed_1_before_later_seeds(tmp_path, monkeypatch) -> None:
    fake, args = _study(tmp_path, monkeypatch)
    records = tmp_path / "records"
    for name in ("conpvp-paper-seed2", "simcse-seed2"):  # a later seed: evaluated after the figures
        _write_run(records / name, 71.0, log=False)
    args[args.index("--seeds") + 1 : args.index("--seeds") + 2] = ["1", "2"]
    assert unsup_cpu.main(args) == 0
    order = [(c[0], c[c.index("--output") + 1] if c[0] == "eval" else c[1]) for c in fake.commands]
    order = [(kind, what) for kind, what in order if kind != "train"]
    first_figure = next(i for i, (kind, _) in enumerate(order) if kind == "analyze")
    seed2 = [i for i, (kind, out) in enumerate(order) if kind == "eval" and "-seed2/" in out]
    assert len(seed2) == 6 and first_figure < min(seed2)
    assert [what for kind, what in order[first_figure : first_figure + 4]] == [
        "similarity",
        "frequent-tokens",
        "tsne",
        "fewshot",
    ]


def test_report_shows_what_a_fix_moved_and_reads_earlier_suites(tmp_path) -> None:
    """Earlier records in before-fixes/: per method, the averages before and now, the change of the means
    and the change in the earlier seeds' standard deviations (numbers recomputed here); the suites come
    from the earlier records while the current ones have none, and the page says so."""
    records, before = tmp_path / "records", tmp_path / "records" / "before-fixes"
    for seed, (old, new) in enumerate([(70.0, 70.5), (71.0, 71.5), (72.0, 72.9)], start=1):
        _write_run(before / f"simcse-seed{seed}", old, log=False)
        _write_run(records / f"simcse-seed{seed}", new, log=False)
    (before / "CHANGES.md").write_text("The MLP was initialised otherwise.\n")
    (before / "simcse-seed1" / "clustering.json").write_text(json.dumps(_suite_json("clustering", "m", 50)))
    text = write_report(tmp_path / "r.md", records, _configs("simcse"), unsup_cpu.METHODS, [1, 2, 3], "`c`")
    assert "The MLP was initialised otherwise." in text
    # averages are avg + 3 (see _fake_results): before 73, 74, 75 (std 1); now 73.5, 74.5, 75.9
    change = (73.5 + 74.5 + 75.9) / 3 - 74.0
    row = _row(text, "## What the fixes moved", "SimCSE")
    assert row[:5] == ["3/3", "74.00 ± 1.00", "74.63 ± 1.21", f"{change:+.2f}", f"{change:.1f} (no)"]
    assert "**SimCSE: these suites ran on the models of the earlier records**" in text
    assert _row(text, "Accuracy:", "SimCSE") == ["50.00", "51.00", "50.50"]
    (records / "simcse-seed1" / "clustering.json").write_text(json.dumps(_suite_json("clustering", "m", 60)))
    text = write_report(tmp_path / "r.md", records, _configs("simcse"), unsup_cpu.METHODS, [1, 2, 3], "`c`")
    assert "earlier records**" not in text and _row(text, "Accuracy:", "SimCSE") == [
        "60.00",
        "61.00",
        "60.50",
    ]


def test_a_transfer_record_of_another_classifier_is_redone(tmp_path):
    """The study's transfer is the authors' classifier: a transfer.json without one (scikit-learn's)
    or with sklearn is not done; one with pytorch is; other suites need only exist."""
    from experiments.unsup_cpu_report import recorded

    assert not recorded(tmp_path, "transfer")
    for protocol, done in (
        ({}, False),
        ({"classifier": "sklearn"}, False),
        ({"classifier": "pytorch"}, True),
    ):
        (tmp_path / "transfer.json").write_text(json.dumps({"protocol": protocol, "tasks": {}}))
        assert recorded(tmp_path, "transfer") is done
    (tmp_path / "fewshot.json").write_text(json.dumps({"tasks": {}}))
    assert recorded(tmp_path, "fewshot")


def test_transfer_of_both_classifiers_side_by_side(tmp_path) -> None:
    """A record's transfer.json of SentEval's PyTorch classifier with the scikit-learn one kept in
    transfer-sklearn/: both per task (mean ± std over the seeds that have both) and the change of the
    average; a transfer.json still of scikit-learn's stays off the page's transfer table."""
    records = tmp_path / "records"
    for seed, (old, new) in enumerate([(70.0, 71.0), (72.0, 72.5), (74.0, None)], start=1):
        _write_run(records / f"simcse-seed{seed}", 60.0, log=False)
        sklearn = {**_suite_json("transfer", "m", old), "avg": old + 3}
        sklearn["protocol"] = {**sklearn["protocol"], "classifier": "sklearn"}
        kept = records / "transfer-sklearn" / f"simcse-seed{seed}"
        kept.mkdir(parents=True)
        (kept / "transfer.json").write_text(json.dumps(sklearn))
        current = sklearn if new is None else {**_suite_json("transfer", "m", new), "avg": new + 3}
        (records / f"simcse-seed{seed}" / "transfer.json").write_text(json.dumps(current))
    text = write_report(tmp_path / "r.md", records, _configs("simcse"), unsup_cpu.METHODS, [1, 2, 3], "`c`")
    section = text[text.index("## Transfer with both classifiers") :]
    rows = [
        [c.strip() for c in x.strip("|").split("|")] for x in section.splitlines() if x.startswith("| SimCSE")
    ]
    assert rows[0][:5] == ["SimCSE", "scikit-learn", "2", "71.00 ± 1.41", "72.00 ± 1.41"]
    assert rows[1][:5] == ["SimCSE", "SentEval PyTorch", "2", "71.75 ± 1.06", "72.75 ± 1.06"]
    assert rows[1][-1] == "74.75 ± 1.06" and rows[2][-1] == "0.75 ± 0.35"  # changes +1.0 and +0.5
    transfer_table = text[text.index("## Transfer, clustering") : text.index("## Transfer with both")]
    assert "74.00" not in transfer_table  # seed 3's scikit-learn MR is not mixed in


def test_sklearn_transfer_runs_scikit_learns_classifier_on_the_suite_models(tmp_path, monkeypatch) -> None:
    """``--sklearn-transfer`` runs ``eval transfer --classifier sklearn`` (the cached vectors, after
    ``--suites transfer``) into transfer-sklearn/<record>/transfer.json for the untrained record and each
    suite method's; a recorded one is skipped; ``protoembed report`` of a record folder still reads one
    transfer protocol (the two would not share its table)."""
    from protoembed import ProtoembedError, build_report, load_results

    fake, args = _study(tmp_path, monkeypatch)
    records = tmp_path / "records"
    args = [a for a in args if a not in ("fewshot", "clustering")] + ["--no-figures"]
    assert unsup_cpu.main([*args, "--sklearn-transfer"]) == 0
    runs = tmp_path / "runs"
    models = [("default", UNTRAINED)] + [
        (str(runs / f / "best"), f) for f in ("conpvp-paper-seed1", "simcse-seed1")
    ]
    sklearn = [c for c in fake.commands if "sklearn" in c]
    assert sklearn == [
        [
            "eval",
            "transfer",
            "--model",
            m,
            "--output",
            str(records / "transfer-sklearn" / f / "transfer.json"),
        ]
        + ["--runtime", "onnx", "--cache-embeddings", "--classifier", "sklearn"]
        for m, f in models
    ]
    kept = records / "transfer-sklearn" / "simcse-seed1" / "transfer.json"
    assert json.loads(kept.read_text())["protocol"] == {"classifier": "sklearn"}
    both = load_results([records / "simcse-seed1", kept])  # two transfer protocols: one page refuses
    with pytest.raises(ProtoembedError, match="cannot share a table"):
        build_report(both, tmp_path / "page.md", figures=False)
    build_report(load_results([records / "simcse-seed1"]), tmp_path / "page.md", figures=False)
    fake.commands.clear()
    assert unsup_cpu.main([*args, "--sklearn-transfer"]) == 0
    assert not [c for c in fake.commands if "sklearn" in c]


def test_a_recorded_config_retrains_with_the_settings_added_since_as_it_was_made() -> None:
    from experiments.records import legacy_settings

    assert legacy_settings({"model": "default"}) == ["training.padding=joint", "training.dropout=torch"]
    # a record made after padding existed keeps its own padding; dropout is added
    assert legacy_settings({"training": {"padding": "auto", "seed": 1}}) == ["training.dropout=torch"]
    assert legacy_settings({"training": {"padding": "auto", "dropout": "fast"}}) == []


def test_dims_runs_sts_at_every_width_and_the_page_tabulates_it(tmp_path, monkeypatch) -> None:
    from experiments.unsup_cpu_report import DIMS, dims_section

    fake, args = _study(tmp_path, monkeypatch)
    records = tmp_path / "records"
    widths = ",".join(map(str, DIMS))

    def call(cmd: list[str], **kwargs) -> int:  # sts --dims writes its per-width results
        if "--dims" not in cmd:
            return fake(cmd, **kwargs)
        fake.commands.append(cmd[3:])
        model = cmd[cmd.index("--model") + 1]
        base = 60.0 if model == "default" else 70.0 + int(model.split("seed")[1][0])
        dims = {str(d): {"tasks": {}, "avg": base - i} for i, d in enumerate(DIMS)}
        Path(cmd[cmd.index("--output") + 1]).write_text(json.dumps({"suite": "sts", "dims": dims}))
        return 0

    monkeypatch.setattr(subprocess, "call", call)
    args = [a for a in args if a not in ("--suites", "transfer", "fewshot", "clustering")] + ["--dims"]
    assert unsup_cpu.main(args) == 0
    dims = [c for c in fake.commands if "--dims" in c]
    simcse = tmp_path / "runs" / "simcse-seed1" / "best"
    paper = tmp_path / "runs" / "conpvp-paper-seed1" / "best"
    assert dims == [
        ["eval", "sts", "--model", str(m), "--output", str(records / f / "sts-dims.json")]
        + ["--dims", widths, "--variant", "senteval"]
        for m, f in (("default", UNTRAINED), (simcse, "simcse-seed1"), (paper, "conpvp-paper-seed1"))
    ]
    page = (tmp_path / "r.md").read_text()
    assert "## STS at smaller widths (Matryoshka)" in page
    assert _row(page, "## STS at smaller widths", "SimCSE") == ["1", *(f"{71.0 - i:.2f}" for i in range(5))]
    # a label's seeds: mean ± sample std, computed here
    (records / "simcse-seed2").mkdir()
    two = {str(d): {"tasks": {}, "avg": 73.0 - i} for i, d in enumerate(DIMS)}
    (records / "simcse-seed2" / "sts-dims.json").write_text(json.dumps({"suite": "sts", "dims": two}))
    section = dims_section([(records / "simcse-seed1", "S"), (records / "simcse-seed2", "S")])
    row = next(x for x in section.splitlines() if x.startswith("| S |"))
    assert row.split("|")[2:4] == [" 2 ", f" 72.00 ± {statistics.stdev([71.0, 73.0]):.2f} "]
    assert dims_section([(records / "nothing", "x")]) == ""


def test_a_rerun_with_the_current_step_shows_the_headline_numbers_before_and_after(tmp_path) -> None:
    """``--step-before`` keeps each method's seed means (STS average, the suites' averages, STS at the
    smaller widths); the page shows them beside the rerun records' means."""
    from experiments.step_rerun import STEP_BEFORE_FILE
    from experiments.unsup_cpu_report import DIMS

    records = tmp_path / "records"
    assert unsup_cpu.main(["--step-before", "--records-dir", str(records)]) == 2  # no records: nothing kept
    assert not (records / STEP_BEFORE_FILE).exists()

    def write(avgs: list[float], transfer: float) -> None:
        for seed, avg in enumerate(avgs, start=1):
            folder = records / f"simcse-seed{seed}"
            shutil.rmtree(folder, ignore_errors=True)
            _write_run(folder, avg, log=False)
            dims = {str(d): {"tasks": {}, "avg": avg - i} for i, d in enumerate(DIMS)}
            (folder / "sts-dims.json").write_text(json.dumps({"suite": "sts", "dims": dims}))
        data = _suite_json("transfer", "m", transfer - 3)  # seven tasks: acc base + 0..6, mean base + 3
        (records / "simcse-seed1" / "transfer.json").write_text(json.dumps(data))

    write([70.0, 72.0], 80.0)
    assert unsup_cpu.main(["--step-before", "--records-dir", str(records)]) == 0
    kept = json.loads((records / STEP_BEFORE_FILE).read_text())
    assert kept["settings"] == {"training.padding": "joint", "training.dropout": "torch"}
    assert kept["numbers"] == {  # the record's avg is avg + 3 (_fake_results); one seed has transfer
        "SimCSE: STS avg.": 74.0,
        "SimCSE: transfer avg.": 80.0,
        "SimCSE: STS avg. at 256": 70.0,
        "SimCSE: STS avg. at 128": 69.0,
        "SimCSE: STS avg. at 64": 68.0,
        "SimCSE: STS avg. at 32": 67.0,
    }
    write([71.0, 72.5], 79.5)
    text = write_report(tmp_path / "r.md", records, _configs("simcse"), unsup_cpu.METHODS, [1, 2], "`c`")
    section = text[text.index("## Before and after the rerun") :]
    assert "made again with `training.padding: auto`, `training.dropout: fast` (the defaults)" in section
    assert "| SimCSE: STS avg. | 74.00 | 74.75 | +0.75 |" in section
    assert "| SimCSE: transfer avg. | 80.00 | 79.50 | -0.50 |" in section
    assert "| SimCSE: STS avg. at 32 | 67.00 | 67.75 | +0.75 |" in section
    (records / STEP_BEFORE_FILE).unlink()
    text = write_report(tmp_path / "r.md", records, _configs("simcse"), unsup_cpu.METHODS, [1, 2], "`c`")
    assert "## Before and after the rerun" not in text


def test_an_unknown_study_suite_is_a_one_line_error(tmp_path) -> None:
    from experiments.unsup_cpu_suites import suites_and_figures

    from protoembed import ProtoembedError

    with pytest.raises(
        ProtoembedError, match=r"^unknown study suite 'sts'; expected one of transfer, fewshot, "
    ):
        suites_and_figures(tmp_path, tmp_path, {}, [1], ["sts"], [], [], figures=False)
