"""``protoembed train`` end to end: one process, two gloo processes under torchrun, and bad input."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import protoembed
from protoembed.cli import main
from tiny_models import without_dropout
from training_helpers import STSB_SELECTION, write_corpus


def _config(tmp_path: Path, model_dir: Path, objective: str, head: str, **training) -> Path:
    corpus = write_corpus(tmp_path / "corpus.txt")
    settings = {
        "batch_size": 8,
        "lr": 1.0e-3,
        "max_steps": 2,
        "eval_steps": 2,
        "log_steps": 1,
        "eval_batch_size": 256,
        "selection": STSB_SELECTION,
        "test_tasks": ["STSBenchmark"],
        **training,
    }
    lines = [
        f"model: {model_dir}",
        f"head: {head}",
        "max_seq_length: 16",
        f"objective: {{name: {objective}}}",
        f"data: {{corpus: {corpus}}}",
        "training:",
        *[f"  {k}: {json.dumps(v)}" for k, v in settings.items()],
    ]
    path = tmp_path / "tiny.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _env(data_dir: Path) -> dict[str, str]:
    env = dict(os.environ, PROTOEMBED_DATA=str(data_dir), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    env["TOKENIZERS_PARALLELISM"] = "false"
    return env


def _gloo_env(data_dir: Path) -> dict[str, str]:
    """:func:`_env` with every GPU hidden: the 2-process tests are the CPU (gloo) path, on any machine
    (on a GPU machine too, where the launchers would otherwise pick CUDA)."""
    return {**_env(data_dir), "CUDA_VISIBLE_DEVICES": ""}


def test_train_command_one_process(tiny_model_dirs, data_dir, tmp_path):
    config = _config(tmp_path, tiny_model_dirs["bert"], "simcse", "cls")
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "protoembed", "train", "--config", str(config), "--output-dir", str(out)]
    done = subprocess.run(
        [*cmd, "--set", "objective.temperature=0.1"],
        env=_env(data_dir),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["model"] == str(out / "best") and "STSBenchmark" in results["tasks"]
    start = json.loads((out / "training_log.jsonl").read_text().splitlines()[0])
    assert start["objective"]["temperature"] == 0.1 and start["world_size"] == 1
    assert (out / "best" / "modules.json").is_file() and (out / "config.yaml").is_file()


LAUNCHERS = {
    "torchrun": ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"],
    # on a CPU-only machine `--multi_gpu` launches torchrun-style workers that fall back to gloo
    "accelerate": ["-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2"]
    + [
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        "0",
    ],
}


@pytest.mark.parametrize("launcher", list(LAUNCHERS))
def test_train_command_two_processes(tiny_model_dirs, data_dir, tmp_path, launcher):
    """2 gloo processes (ConPVP: gathered anchors and prototypes); the batch of 8 is split 4 + 4."""
    config = _config(tmp_path, tiny_model_dirs["bert"], "conpvp", "soft_prompt")
    out = tmp_path / "ddp"
    cmd = [sys.executable, *LAUNCHERS[launcher]]
    cmd += ["-m", "protoembed", "train", "--config", str(config), "--output-dir", str(out)]
    done = subprocess.run(cmd, env=_gloo_env(data_dir), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    log = [json.loads(x) for x in (out / "training_log.jsonl").read_text().splitlines()]
    assert log[0]["world_size"] == 2 and log[-1]["event"] == "end"
    assert [e["step"] for e in log if e["event"] == "train"] == [1, 2]  # logged once, by rank 0
    assert json.loads((out / "results.json").read_text())["best_step"] == 2


def test_train_command_two_processes_cached(tiny_model_dirs, data_dir, tmp_path):
    """GradCache across 2 gloo processes through the trainer: step 1's logged loss is SimCSE's InfoNCE
    over the global batch (both processes' rows gathered), computed here from the initial model; a
    mini_batch_size that divides the global batch but not the per-process one is refused first."""
    model_dir = without_dropout(tiny_model_dirs["bert"], tmp_path / "bert")  # the two views coincide
    sentences = [line for line in write_corpus(tmp_path / "sentences.txt").read_text().splitlines() if line]
    # step 1's batch is the whole corpus (16 rows per process, chunks of 2): its loss does not depend on
    # the order the sampler draws
    config = _config(tmp_path, model_dir, "simcse", "mean", batch_size=len(sentences), mini_batch_size=2)
    cmd = [sys.executable, *LAUNCHERS["torchrun"], "-m", "protoembed", "train", "--config", str(config)]
    # no randomly initialised part; head mean: a random tiny BERT's [CLS] states are all alike (cos 0.99999),
    # which would leave the loss at log(batch size) whatever the formula
    cmd += ["--set", "objective.mlp=none"]
    done = subprocess.run(
        [*cmd, "--output-dir", str(tmp_path / "bad"), "--set", f"training.mini_batch_size={len(sentences)}"],
        env=_gloo_env(data_dir),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    half = len(sentences) // 2
    assert (
        f"training.mini_batch_size {len(sentences)} does not divide the per-process batch {half}"
        in done.stderr
    )
    out = tmp_path / "cached"
    done = subprocess.run(
        [*cmd, "--output-dir", str(out)], env=_gloo_env(data_dir), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    log = [json.loads(x) for x in (out / "training_log.jsonl").read_text().splitlines()]
    assert log[0]["world_size"] == 2 and log[-1]["event"] == "end"
    losses = [e["loss"] for e in log if e["event"] == "train"]
    model = protoembed.load(str(model_dir), head="mean", max_seq_length=16, device="cpu")
    z = model.encode(sentences, convert_to_tensor=True, batch_size=1).double()
    z = torch.nn.functional.normalize(z, dim=-1)
    logits = z @ z.T / 0.05  # SimCSE's default temperature
    expected = torch.nn.functional.cross_entropy(logits, torch.arange(len(sentences))).item()
    assert len(losses) == 2 and losses[0] == pytest.approx(expected, rel=1e-4)
    assert losses[1] != pytest.approx(losses[0], rel=1e-6)  # step 1 changed the model


def test_a_logged_run_shows_its_test_evaluation_progress(
    tiny_model_dirs, data_dir, tmp_path, capsys, monkeypatch
):
    """Off a terminal (stderr captured: a log file), the test tasks after the last step report progress as
    ``protoembed eval`` does: encoding lines (here at every batch: the interval set to 0), ending with the
    count of the tasks' distinct sentences, after the training lines."""
    import protoembed.core.progress

    monkeypatch.setattr(protoembed.core.progress, "LINE_EVERY", 0.0)
    config = _config(tmp_path, tiny_model_dirs["bert"], "simcse", "mean", selection=None)
    assert main(["train", "--config", str(config), "--output-dir", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().err.splitlines()
    trained = max(i for i, line in enumerate(lines) if line.startswith("Training: 2/2 steps"))
    after = lines[trained + 1 :]
    pairs = protoembed.get_task("STSBenchmark").load(data_dir)
    sentences = len(set(pairs.sentences1) | set(pairs.sentences2))
    encoding = [line for line in after if line.startswith("Encoding: ")]
    assert len(encoding) > 1 and encoding[-1].startswith(
        f"Encoding: {sentences:,}/{sentences:,} sentences ("
    ), after


def test_train_command_bad_input_is_one_line(tiny_model_dirs, tmp_path, capsys):
    config = _config(tmp_path, tiny_model_dirs["bert"], "simcse", "cls")
    assert (
        main(["train", "--config", str(config), "--set", "training.bacth_size=4", "--output-dir", "x"]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unknown config key 'training.bacth_size'" in err
    assert (
        main(["train", "--config", str(config), "--set", "objective.tau=0.1", "--output-dir", str(tmp_path)])
        == 2
    )
    assert "unknown option 'tau'" in capsys.readouterr().err
    assert main(["train", "--config", str(tmp_path / "none.yaml")]) == 2
    assert "not found" in capsys.readouterr().err


def test_a_missing_corpus_names_both_places_tried(tiny_model_dirs, tmp_path, capsys, monkeypatch):
    """A relative ``data.corpus`` is looked for in the working directory, then under the data directory:
    a missing one names both."""
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("PROTOEMBED_DATA", str(data))
    monkeypatch.chdir(tmp_path)
    config = _config(tmp_path, tiny_model_dirs["bert"], "simcse", "cls", selection=None, test_tasks=[])
    config.write_text(config.read_text(encoding="utf-8").replace(str(tmp_path / "corpus.txt"), "mine.txt"))
    assert main(["train", "--config", str(config), "--output-dir", str(tmp_path / "out"), "--check"]) == 2
    assert capsys.readouterr().err == (
        f"protoembed: error: training file: 'mine.txt' not found in the working directory {tmp_path} nor "
        f"under {data}; it is not a dataset protoembed fetches: give the file's path, or place it under the "
        "data directory\n"
    )


def test_corpus_with_only_empty_lines_is_an_error(tiny_model_dirs, tmp_path, capsys):
    config = _config(tmp_path, tiny_model_dirs["bert"], "simcse", "cls")
    (tmp_path / "corpus.txt").write_text("\n\n", encoding="utf-8")
    assert main(["train", "--config", str(config), "--output-dir", str(tmp_path / "o")]) == 2
    assert "has no usable sentence (2 empty line(s))" in capsys.readouterr().err


def test_sigterm_stops_cleanly_and_says_how_to_resume(tiny_model_dirs, data_dir, tmp_path):
    """SIGTERM mid-run: the step in progress finishes, the last checkpoint is kept, one line gives the exact
    --resume command, and that command finishes the run. The signal goes once step 8's checkpoint is
    there; the run has 56 steps more, so a loaded machine still sees it land mid-run, at whichever step."""
    config = _config(tmp_path, tiny_model_dirs["bert"], "simcse", "cls", max_steps=64, eval_steps=8)
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "protoembed", "train", "--config", str(config), "--output-dir", str(out)]
    cmd += ["--set", "objective.temperature=0.1"]
    process = subprocess.Popen(cmd, env=_env(data_dir), stderr=subprocess.PIPE, text=True)
    state = out / "checkpoint" / "trainer_state.json"
    deadline = time.monotonic() + 240
    while not state.is_file() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be interrupted"
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, stderr[-3000:]
    lines = stderr.strip().splitlines()
    assert any(x.startswith("protoembed train: 32 examples (text) from ") for x in lines)  # progress, logged
    last = lines[-1]
    stopped = re.match(r"protoembed train: stopped by SIGTERM after step (\d+) of 64; ", last)
    assert stopped and 8 <= int(stopped[1]) < 64, last
    kept = int(stopped[1]) // 8 * 8  # the step's own evaluation and checkpoint run before it stops
    assert f"the checkpoint of step {kept} is kept in {out / 'checkpoint'}" in last
    command = shlex.split(last.split("; resume with: ", 1)[1])
    assert command == [
        "protoembed",
        "train",
        "--config",
        str(config),
        "--set",
        "objective.temperature=0.1",
        "--output-dir",
        str(out),
        "--resume",
    ]
    assert not (out / "results.json").exists()
    done = subprocess.run(
        [sys.executable, "-m", *command], env=_env(data_dir), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    log = [json.loads(x) for x in (out / "training_log.jsonl").read_text().splitlines()]
    assert [e["event"] for e in log].count("resume") == 1 and log[-1]["event"] == "end"
    assert [e["step"] for e in log if e["event"] == "train"] == list(range(1, 65))
    assert json.loads((out / "results.json").read_text())["model"] == str(out / "best")
