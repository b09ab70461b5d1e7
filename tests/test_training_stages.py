"""Chained stages: one config, each stage its own data/objective/training, the next from the last's model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

import protoembed
from protoembed.core.errors import ProtoembedError
from protoembed.training.stages import load_run, train_stages
from training_helpers import write_corpus


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (see conftest)."""


@pytest.fixture(autouse=True)
def benchmark_data(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))


def _write_config(tmp_path: Path, model_dir: Path, second_corpus: str, **extra) -> Path:
    first = write_corpus(tmp_path / "first.txt")
    config = {
        "model": str(model_dir),
        "head": "mean",
        "max_seq_length": 16,
        "objective": "simcse",
        "data": {"corpus": str(first)},
        "training": {
            "batch_size": 8,
            "lr": 1e-3,
            "max_steps": 2,
            "eval_steps": 2,
            "seed": 3,
            "eval_batch_size": 256,
            "test_tasks": ["STSBenchmark"],
        },
        "output_dir": str(tmp_path / "run"),
        "stages": [
            {"name": "first", "training": {"lr": 5e-4}},
            {"name": "second", "data": {"corpus": second_corpus}, "training": {"max_steps": 3}},
        ],
        **extra,
    }
    path = tmp_path / "staged.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def test_stages_expand_with_shared_keys_and_chained_models(tmp_path, tiny_model_dirs):
    second = write_corpus(tmp_path / "second.txt")
    stages = load_run(_write_config(tmp_path, tiny_model_dirs["bert"], str(second)), ["training.seed=7"])
    (n1, c1), (n2, c2) = stages
    assert (n1, n2) == ("first", "second")
    assert c1.model == str(tiny_model_dirs["bert"])  # model: the first stage only
    assert c2.model == str(tmp_path / "run" / "first" / "best")  # then the previous stage's kept model
    assert c1.output_dir == str(tmp_path / "run" / "first") and c2.output_dir == str(
        tmp_path / "run" / "second"
    )
    assert (c1.training.lr, c2.training.lr) == (5e-4, 1e-3)  # a stage's keys on top of the shared ones
    assert (c1.training.max_steps, c2.training.max_steps) == (2, 3)
    assert c1.training.seed == c2.training.seed == 7  # --set applies to the shared part
    assert c2.data.corpus == str(second)


def test_staged_run_end_to_end(tmp_path, tiny_model_dirs):
    second = write_corpus(tmp_path / "second.txt", repeat=3)
    stages = load_run(_write_config(tmp_path, tiny_model_dirs["bert"], str(second)))
    results = train_stages(stages, progress=False)
    out = tmp_path / "run"
    for name, steps in (("first", 2), ("second", 3)):
        assert json.loads((out / name / "results.json").read_text())["best_step"] in (2, steps)
        log = [json.loads(x) for x in (out / name / "training_log.jsonl").read_text().splitlines()]
        assert log[-1]["event"] == "end" and log[-1]["step"] == steps
        assert (out / name / "best" / "modules.json").is_file()
    top = json.loads((out / "results.json").read_text())
    assert top == json.loads(json.dumps(results))
    assert [s["name"] for s in top["stages"]] == ["first", "second"]
    for stage in top["stages"]:  # each stage's own throughput; none at the top
        own = json.loads((out / stage["name"] / "results.json").read_text())
        assert stage["tokens_per_second"] == own["tokens_per_second"] > 0 and stage["mfu"] is None
    assert top["tokens_per_second"] is None and top["mfu"] is None
    assert top["tasks"] == json.loads((out / "second" / "results.json").read_text())["tasks"]
    assert yaml.safe_load((out / "second" / "config.yaml").read_text())["model"] == str(
        out / "first" / "best"
    )
    # the second stage started from the first stage's model: its step-0 weights are those weights
    first = protoembed.load(str(out / "first" / "best"), device="cpu")
    untrained = protoembed.load(str(tiny_model_dirs["bert"]), head="mean", device="cpu")
    sentences = ["a man is playing a guitar ."]
    assert not torch.allclose(
        torch.as_tensor(first.encode(sentences)), torch.as_tensor(untrained.encode(sentences))
    )
    # rerunning with --resume leaves finished stages as they are and gives the same results
    again = train_stages(stages, resume=True, progress=False)
    assert again["stages"] == top["stages"]


def test_missing_data_of_a_later_stage_fails_before_the_first_trains(tmp_path, tiny_model_dirs):
    stages = load_run(_write_config(tmp_path, tiny_model_dirs["bert"], str(tmp_path / "nothing.txt")))
    with pytest.raises(ProtoembedError, match=r"stage 'second': corpus file .*nothing.txt.* not found"):
        train_stages(stages, progress=False)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"stages": []}, "'stages' must be a non-empty list"),
        ({"stages": [{"training": {}}]}, "stage 1: 'name' is required"),
        ({"stages": ["nli"]}, r"stage 1: expected a mapping \(section\), got 'nli'"),
        ({"stages": [{"name": "a/b"}]}, r"stage 1 \('a/b'\): 'name': expected a folder name"),
        ({"stages": [{"name": "a"}, {"name": "a"}]}, r"stage 2 \('a'\): stage names must be distinct"),
        ({"stages": [{"name": "a", "model": "x"}]}, "'model' is set once for all stages"),
        ({"stages": [{"name": "a", "training": {"lr": -1}}]}, r"stage 1 \('a'\): config key 'training.lr'"),
    ],
)
def test_bad_stages_are_one_line_errors(tmp_path, tiny_model_dirs, extra, message):
    path = _write_config(tmp_path, tiny_model_dirs["bert"], "x.txt", **extra)
    with pytest.raises(ProtoembedError, match=message) as err:
        load_run(path)
    assert "\n" not in str(err.value)


def test_a_stage_base_merges_under_the_stage_keys_as_a_config_base_does(tmp_path, tiny_model_dirs):
    (tmp_path / "short.yaml").write_text("training: {max_steps: 7, lr: 0.002}\n", encoding="utf-8")
    path = _write_config(
        tmp_path,
        tiny_model_dirs["bert"],
        "x.txt",
        stages=[{"name": "a", "base": "short.yaml", "training": {"lr": 1e-4}}],
    )
    ((_, cfg),) = load_run(path)
    assert (cfg.training.max_steps, cfg.training.lr) == (7, 1e-4)  # the stage's own keys win


@pytest.mark.parametrize(("stage_base", "top_base"), [("a.yaml", "a.yaml"), ("staged.yaml", "top.yaml")])
def test_a_stage_base_chain_that_loops_is_the_config_include_cycle_error(
    tmp_path, tiny_model_dirs, stage_base, top_base
):
    """A stage's ``base:`` chain coming back on itself (a -> b -> a), or to the config file holding the
    stage, is the one-line error a top-level ``base:`` loop gives, with the config file first."""
    (tmp_path / "a.yaml").write_text("base: b.yaml\n", encoding="utf-8")
    (tmp_path / "b.yaml").write_text("base: a.yaml\n", encoding="utf-8")
    staged = _write_config(
        tmp_path, tiny_model_dirs["bert"], "x.txt", stages=[{"name": "s", "base": stage_base}]
    )
    top = tmp_path / "top.yaml"
    top.write_text(f"base: {top_base}\n", encoding="utf-8")
    loop = [tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "a.yaml"] if stage_base == "a.yaml" else []
    for path in (staged, top):
        with pytest.raises(ProtoembedError) as err:
            load_run(path)
        chain = [path, *loop] if loop else [path, path]
        assert str(err.value) == "config include cycle: " + " -> ".join(str(p) for p in chain)
