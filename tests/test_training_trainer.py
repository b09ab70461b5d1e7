"""The Accelerate training loop on the tiny BERT with a stand-in objective (no dependency on objectives/)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

import protoembed
from protoembed.core.errors import ProtoembedError
from protoembed.outputs.run_layout import CHECKPOINT_DIR
from protoembed.training import train
from training_helpers import Interrupt, standin_factory, stop_after, tiny_config, write_corpus


def load_sts_task(task, data_dir, variant="senteval", split="test"):
    """An STS task's pairs, read through its entry."""
    from protoembed.evaluation.tasks import get_task

    return get_task(task, "sts").load(data_dir, variant, split)


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (see conftest)."""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt")


@pytest.fixture(autouse=True)
def benchmark_data(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))


def _final_weights(output_dir: Path) -> dict[str, torch.Tensor]:
    files = list((output_dir / CHECKPOINT_DIR).glob("pytorch_model*.bin"))
    assert len(files) == 1, files
    return torch.load(files[0], map_location="cpu", weights_only=True)


def _losses(output_dir: Path) -> dict[int, float]:
    entries = [json.loads(x) for x in (output_dir / "training_log.jsonl").read_text().splitlines()]
    return {e["step"]: e["loss"] for e in entries if e["event"] == "train"}


def test_run_writes_best_model_results_and_log(tiny_model_dirs, corpus, tmp_path):
    out = tmp_path / "run"
    results = train(tiny_config(tiny_model_dirs["bert"], corpus, out), objective_factory=standin_factory())
    saved = json.loads((out / "results.json").read_text())
    assert saved == json.loads(json.dumps(results))
    assert set(saved["tasks"]) == {"STSBenchmark"} and saved["model"] == str(out / "best")
    log = [json.loads(x) for x in (out / "training_log.jsonl").read_text().splitlines()]
    assert log[0]["event"] == "start" and log[0]["data"]["files"][0]["skipped"]["empty_line"] == 1
    evals = {e["step"]: e["dev_score"] for e in log if e["event"] == "eval"}
    assert list(evals) == [2, 4, 5]  # every eval_steps and at the end
    # best/ is the first evaluation with the highest recorded dev score
    best = max(evals, key=lambda step: (evals[step], -step))
    assert saved["best_step"] == best and saved["best_dev_score"] == evals[best]
    assert [e["step"] for e in log if e["event"] == "train"] == [1, 2, 3, 4, 5]
    assert log[-1]["event"] == "end"
    assert not (out / CHECKPOINT_DIR).exists()  # removed once finished (keep_checkpoint: false)
    # the best model is a loadable sentence-transformers folder that reproduces the dev score: Spearman
    # x100 of the cosines of its vectors against the gold scores of STS-B dev, computed here
    model = protoembed.load(str(out / "best"), device="cpu")
    assert (out / "best" / "modules.json").is_file()
    dev = load_sts_task("STSBenchmark", None, split="dev")
    distinct = list(dict.fromkeys([*dev.sentences1, *dev.sentences2]))  # encoded once each, as in training
    vectors = dict(zip(distinct, model.encode(distinct, batch_size=256).astype(np.float64)))
    u, v = (np.stack([vectors[s] for s in side]) for side in (dev.sentences1, dev.sentences2))
    cosines = (u * v).sum(1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1))
    same = np.array([a == b for a, b in zip(dev.sentences1, dev.sentences2)])
    cosines[same] = 1.0  # a pair of one sentence twice is a tie at 1, not ranked by rounding noise
    assert u.shape == (len(dev), 32) and len(dev) == 1500
    # to 1e-3: the evaluation's float32 cosines rank pairs of equal vectors (texts tokenised alike) by
    # rounding, these float64 ones by theirs (1.6e-4 apart on the untrained tiny BERT)
    assert spearmanr(cosines, dev.scores)[0] * 100 == pytest.approx(saved["best_dev_score"], abs=1e-3)
    # max_seq_length truncates training inputs only: the saved model keeps the base's limit (a bare
    # Hugging Face backbone: none, whole sentences)
    assert model.encoder.max_seq_length is None
    # a second run into the same folder is refused; --resume on a finished run returns its results
    with pytest.raises(ProtoembedError, match="already holds a training run"):
        train(tiny_config(tiny_model_dirs["bert"], corpus, out), objective_factory=standin_factory())
    again = train(
        tiny_config(tiny_model_dirs["bert"], corpus, out), resume=True, objective_factory=standin_factory()
    )
    assert again["avg"] == saved["avg"]


def test_a_trained_model_keeps_the_base_models_limit_and_names_its_dev_score(
    tiny_model_dirs, corpus, tmp_path, caplog
):
    """A base saved with max_seq_length 20 (as the default backbone's 256): best/ truncates at 20, not at
    the backbone's position limit, whatever the config's training max_seq_length (16); the log line gives
    the dev score with 2 decimals and says what it scored, the card too (results.json: every digit)."""
    from protoembed.outputs.run_layout import dev_score_name

    base = protoembed.load(str(tiny_model_dirs["bert"]), head="mean", max_seq_length=20).save(tmp_path / "b")
    assert json.loads((base / "sentence_bert_config.json").read_text())["max_seq_length"] == 20
    out = tmp_path / "run"
    with caplog.at_level("INFO", logger="protoembed.training"):
        results = train(tiny_config(base, corpus, out, max_steps=2), objective_factory=standin_factory())
    assert json.loads((out / "best" / "sentence_bert_config.json").read_text())["max_seq_length"] == 20
    assert protoembed.load(str(out / "best")).max_seq_length == 20
    saved = json.loads((out / "results.json").read_text())
    assert saved["best_dev_scorer"] == "embedder" and saved["best_dev_score"] == results["best_dev_score"]
    name = dev_score_name(saved)
    assert name == "spearman x100 on STSBenchmark (dev split), scored by the embeddings"
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("best dev score")]
    assert said == [
        f"best dev score {saved['best_dev_score']:.2f} at step 2 ({name}); test avg {saved['avg']:.2f} "
        f"(sts: STSBenchmark); model in {out / 'best'}; "
        f"{saved['tokens_per_second']:,.0f} tokens/s"  # no MFU on a CPU
    ]
    card = (out / "best" / "README.md").read_text(encoding="utf-8")
    assert f"| dev score there | {saved['best_dev_score']:.2f} ({name}) |" in card


@pytest.mark.parametrize(
    ("objective", "head", "extra"),
    [
        ("standin", "mean", {}),
        ("conpvp", "soft_prompt", {}),  # conpvp: its template draws must resume too
        ("conpvp", "soft_prompt", {"mini_batch_size": 4}),  # GradCache: chunks replay their dropout
    ],
)
def test_resume_ends_with_the_same_model_as_an_uninterrupted_run(
    tiny_model_dirs, corpus, tmp_path, objective, head, extra
):
    """Stop after step 3 (checkpoint at step 2), resume, compare with a straight run (crosses an epoch)."""
    model = tiny_model_dirs["bert"]
    straight, broken = tmp_path / "straight", tmp_path / "broken"
    settings = {"max_steps": 6, "eval_steps": 2, "keep_checkpoint": True, "warmup": 1, **extra}
    factory = standin_factory() if objective == "standin" else None

    def config(out):
        return tiny_config(model, corpus, out, objective=objective, head=head, **settings)

    train(config(straight), objective_factory=factory)

    with pytest.raises(Interrupt):
        train(config(broken), objective_factory=factory, callback=stop_after(3))
    assert not (broken / "results.json").exists()
    assert json.loads((broken / CHECKPOINT_DIR / "trainer_state.json").read_text())["step"] == 2
    train(config(broken), resume=True, objective_factory=factory)

    a, b = _final_weights(straight), _final_weights(broken)
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=1e-6, msg=key)
    assert _losses(straight) == pytest.approx(_losses(broken), abs=1e-6)
    assert json.loads((straight / "results.json").read_text())["avg"] == pytest.approx(
        json.loads((broken / "results.json").read_text())["avg"], abs=1e-6
    )
    log = [json.loads(x)["event"] for x in (broken / "training_log.jsonl").read_text().splitlines()]
    assert log.count("resume") == 1 and log.count("end") == 1


def test_nan_loss_stops_naming_the_step_and_keeps_the_checkpoint(tiny_model_dirs, corpus, tmp_path):
    out = tmp_path / "nan"
    stale = out / ".checkpoint.tmp-999999999-killed"  # what a kill -9 during a checkpoint save leaves
    stale.mkdir(parents=True)
    with pytest.raises(ProtoembedError, match=r"loss is nan at step 3 .*checkpoint \(step 2\) is kept"):
        train(tiny_config(tiny_model_dirs["bert"], corpus, out), objective_factory=standin_factory(nan_at=3))
    assert not stale.exists()  # removed by the next checkpoint save
    state = json.loads((out / CHECKPOINT_DIR / "trainer_state.json").read_text())
    assert state["step"] == 2 and (out / "best").is_dir() and not (out / "results.json").exists()
    last = json.loads((out / "training_log.jsonl").read_text().splitlines()[-1])
    assert last == {"event": "non_finite_loss", "step": 3, "epoch": 0, "loss": "nan"}


def test_bad_inputs(tiny_model_dirs, corpus, tmp_path):
    model = tiny_model_dirs["bert"]
    with pytest.raises(ProtoembedError, match=r"batch_size 64 is larger than the training data \(32 usable"):
        train(tiny_config(model, corpus, tmp_path / "a", batch_size=64), objective_factory=standin_factory())
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n\n", encoding="utf-8")
    with pytest.raises(ProtoembedError, match="no usable sentence"):
        train(tiny_config(model, empty, tmp_path / "b"), objective_factory=standin_factory())
    cfg = tiny_config(model, corpus, tmp_path / "c")
    cfg.output_dir = None
    with pytest.raises(ProtoembedError, match="no output directory"):
        train(cfg, objective_factory=standin_factory())


def test_dev_metric_is_injectable(tiny_model_dirs, corpus, tmp_path):
    """``evaluator=`` replaces STS-B dev Spearman in choosing best/; it sees whole-sentence inputs."""
    scores = iter([1.0, 3.0, 2.0])  # evaluations at steps 2, 4 and 5
    seen: list[int | None] = []

    def evaluator(embedder) -> float:
        seen.append(embedder.encoder.max_seq_length)
        return next(scores)

    out = tmp_path / "custom"
    results = train(
        tiny_config(tiny_model_dirs["bert"], corpus, out),
        objective_factory=standin_factory(),
        evaluator=evaluator,
    )
    assert results["best_step"] == 4 and results["best_dev_score"] == 3.0
    assert seen == [None, None, None]  # max_seq_length (16) truncates training inputs only
    log = [json.loads(x) for x in (out / "training_log.jsonl").read_text().splitlines()]
    assert [e["dev_score"] for e in log if e["event"] == "eval"] == [1.0, 3.0, 2.0]


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_dev_score_is_protoembed_eval_of_best_in_the_training_precision(
    tiny_model_dirs, corpus, tmp_path, monkeypatch, precision
):
    """The dev evaluation encodes as ``protoembed eval --precision P`` encodes the saved model, and the
    dev texts are tokenised at the first evaluation only."""
    from protoembed.model.encoder import PromptEncoder

    tokenised: list[str] = []
    token_ids = PromptEncoder.token_ids

    def counting(self, sentences):
        tokenised.extend(sentences)
        return token_ids(self, sentences)

    monkeypatch.setattr(PromptEncoder, "token_ids", counting)
    out = tmp_path / precision
    cfg = tiny_config(
        tiny_model_dirs["bert"], corpus, out, max_steps=4, eval_steps=2, precision=precision, test_tasks=[]
    )
    saved = train(cfg, objective_factory=standin_factory())
    evals = [
        json.loads(x)
        for x in (out / "training_log.jsonl").read_text().splitlines()
        if json.loads(x)["event"] == "eval"
    ]
    assert [e["step"] for e in evals] == [2, 4]
    dev = load_sts_task("STSBenchmark", None, split="dev")
    distinct = set(dev.sentences1) | set(dev.sentences2)
    assert distinct <= set(tokenised) and sum(text in distinct for text in tokenised) == len(distinct)
    again = protoembed.evaluate(
        str(out / "best"), ["STSBenchmark"], split="dev", precision=precision, batch_size=256
    )
    score = again["sts"]["tasks"]["STSBenchmark"]["spearman"]
    assert again["sts"]["precision"] == precision
    assert score == pytest.approx(saved["best_dev_score"], abs=1e-6)
