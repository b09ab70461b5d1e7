"""``training.report_to``: Accelerate's trackers log what ``training_log.jsonl`` logs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from protoembed.core.errors import ProtoembedError
from protoembed.training import train
from protoembed.training.config import TRACKERS
from protoembed.training.trackers import PACKAGES, PROJECT, TRACKER_DIR
from training_helpers import Interrupt, standin_factory, stop_after, tiny_config, write_corpus


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (see conftest)."""


def test_the_tracker_names_are_accelerates() -> None:
    from accelerate.tracking import LOGGER_TYPE_TO_CLASS

    assert set(TRACKERS) == set(LOGGER_TYPE_TO_CLASS) == set(PACKAGES)


def test_tensorboard_events_hold_the_loss_and_the_dev_score(
    tiny_model_dirs, tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))
    out = tmp_path / "run"
    cfg = tiny_config(tiny_model_dirs["bert"], write_corpus(tmp_path / "c.txt"), out, report_to="tensorboard")
    assert cfg.training.report_to == ["tensorboard"]

    # interrupted after step 3 (checkpoint at 2) and resumed: TensorBoard drops the redone step 3
    with pytest.raises(Interrupt):
        train(cfg, objective_factory=standin_factory(), callback=stop_after(3))
    train(cfg, resume=True, objective_factory=standin_factory())
    log = [json.loads(x) for x in (out / "training_log.jsonl").read_text().splitlines()]
    events = EventAccumulator(str(out / TRACKER_DIR / PROJECT))
    events.Reload()

    def scalars(tag: str) -> dict[int, float]:
        steps = [e.step for e in events.Scalars(tag)]
        assert len(steps) == len(set(steps)), steps  # every step once
        return {e.step: e.value for e in events.Scalars(tag)}

    train_log = {e["step"]: e for e in log if e["event"] == "train"}
    assert scalars("train/loss") == pytest.approx({s: e["loss"] for s, e in train_log.items()}, rel=1e-6)
    assert scalars("train/lr") == pytest.approx({s: e["lr"] for s, e in train_log.items()}, rel=1e-6)
    dev = {e["step"]: e["dev_score"] for e in log if e["event"] == "eval"}
    assert set(dev) == {2, 4, 5} and scalars("eval/dev_score") == pytest.approx(dev, rel=1e-6)
    assert scalars("test/sts_avg") == pytest.approx({5: log[-1]["test_avg"]}, rel=1e-6)


def test_unknown_or_missing_trackers_are_one_line_errors_naming_the_key(
    tiny_model_dirs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = write_corpus(tmp_path / "c.txt")
    with pytest.raises(
        ProtoembedError,
        match=r"^<dict>: config key 'training.report_to.1': expected aim, .*, got 'tensorbord'$",
    ):
        tiny_config(tiny_model_dirs["bert"], corpus, tmp_path / "a", report_to=["tensorboard", "tensorbord"])
    monkeypatch.setitem(sys.modules, "wandb", None)  # wandb cannot be imported
    cfg = tiny_config(tiny_model_dirs["bert"], corpus, tmp_path / "b", report_to=["wandb"])
    steps: list[int] = []
    with pytest.raises(
        ProtoembedError, match=r"^training.report_to: tracker 'wandb' needs the package wandb"
    ):
        train(cfg, objective_factory=standin_factory(), callback=lambda e: steps.append(e["step"]))
    assert steps == [] and not (tmp_path / "b" / "training_log.jsonl").exists()
