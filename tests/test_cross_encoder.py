"""The cross_encoder objective (GLUE-style pair fine-tuning) and the cross-encoder STS evaluation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import pearsonr, spearmanr

import protoembed
from protoembed.core.errors import ProtoembedError
from protoembed.evaluation.cross_encoder import evaluate_cross_encoder_sts
from protoembed.model.loading import build
from protoembed.objectives import build_objective, objective_class, plan_objective
from protoembed.objectives.cross_encoder import CrossEncoderObjective
from protoembed.objectives.registry import OptionError
from training_helpers import Interrupt, stop_after, tiny_config

S1 = ["a man is playing a guitar .", "two dogs are running through a field of grass .", "the cat sat ."]
S2 = ["a woman is slicing an onion .", "a child is riding a horse .", "the cat sat on the mat ."]
SCORES = [0.4, 2.5, 4.2]
LABELS = [0, 2, 1]
#: STS-B-like pairs: (score, sentence1, sentence2).
STSB_PAIRS = [
    (5.0, "a man is playing a guitar .", "a man is playing a guitar ."),
    (0.2, "a woman is slicing an onion .", "stocks fell sharply after the report on monday ."),
    (3.6, "two dogs are running through a field of grass .", "two dogs are running through a field ."),
    (1.0, "the cat sat on the mat .", "a child is riding a horse ."),
    (4.4, "the quick brown fox jumps over the lazy dog .", "the quick brown fox jumps over the dog ."),
    (2.0, "a child is riding a horse while people watch the game .", "people watch the game ."),
    (0.8, "this sentence means something .", "the cat looked out of the window ."),
    (3.0, "a man is playing a guitar .", "a man is playing ."),
]


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (see conftest)."""


def _objective(model_dir: Path, task: str = "regression", max_seq_length: int | None = 32):
    torch.manual_seed(0)
    embedder = protoembed.load(str(model_dir), head="cls", device="cpu")
    return build_objective("cross_encoder", embedder, max_seq_length=max_seq_length, task=task)


def _batch(task: str) -> dict[str, list]:
    gold = {"score": SCORES} if task == "regression" else {"label": LABELS}
    return {"sentence1": list(S1), "sentence2": list(S2), **gold}


def _logits_by_hand(objective: CrossEncoderObjective, task: str) -> torch.Tensor:
    """The pair logits from the backbone's [CLS] state and the head's weights, written out."""
    model = objective.classifiers[task]
    backbone = objective.embedder.encoder.auto_model
    features = objective.embedder.tokenizer(S1, S2, padding=True, return_tensors="pt")
    h = backbone(**features).last_hidden_state[:, 0]
    kind = backbone.config.model_type
    if kind == "roberta":  # RobertaClassificationHead: dense, tanh, out_proj on <s>
        x = torch.tanh(F.linear(h, model.classifier.dense.weight, model.classifier.dense.bias))
        return F.linear(x, model.classifier.out_proj.weight, model.classifier.out_proj.bias)
    pooler = backbone.pooler.dense if kind == "bert" else backbone.pooler  # ALBERT: a Linear
    pooled = torch.tanh(F.linear(h, pooler.weight, pooler.bias))
    return F.linear(pooled, model.classifier.weight, model.classifier.bias)


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_loss_is_the_head_on_the_pair_cls_state(tiny_model_dir, task):
    # eval: no dropout, so the two paths agree; no truncation (the budget is the position embeddings')
    objective = _objective(tiny_model_dir, task, max_seq_length=None).eval()
    model = objective.classifiers[task]
    assert model.base_model is objective.embedder.encoder.auto_model  # the embedder's backbone itself
    assert model.config.num_labels == (1 if task == "regression" else 3)
    with torch.no_grad():
        loss = objective(_batch(task))
        logits = _logits_by_hand(objective, task)
    if task == "regression":  # GLUE STS-B: MSE on the raw 0-5 score
        expected = F.mse_loss(logits.squeeze(-1), torch.tensor(SCORES))
    else:
        expected = F.cross_entropy(logits, torch.tensor(LABELS))
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        torch.testing.assert_close(
            objective.scores(S1, S2), logits.squeeze(-1) if task == "regression" else logits
        )


@pytest.mark.parametrize("loss", ["mse", "bce"])
def test_regression_loss_option(tiny_model_dirs, loss, tmp_path):
    # GLUE: MSE on the raw score; sentence-transformers' STS-B recipe: BCE with logits on score / 5
    torch.manual_seed(0)
    embedder = protoembed.load(str(tiny_model_dirs["bert"]), head="cls", device="cpu")
    objective = build_objective("cross_encoder", embedder, task="regression", loss=loss).eval()
    with torch.no_grad():
        value = objective(_batch("regression"))
        s = _logits_by_hand(objective, "regression").squeeze(-1).double()
    y = torch.tensor(SCORES, dtype=torch.float64)
    if loss == "mse":
        expected = ((s - y) ** 2).mean()
    else:
        p = torch.sigmoid(s)
        expected = -(y / 5 * torch.log(p) + (1 - y / 5) * torch.log(1 - p)).mean()
    assert value.dtype == torch.float32
    torch.testing.assert_close(value.double(), expected, rtol=1e-5, atol=1e-6)
    # the saved CrossEncoder predicts what the loss was trained on: the score (mse) or score / 5 (bce)
    from sentence_transformers import CrossEncoder

    objective.save(tmp_path / "best")
    cross = CrossEncoder(str(tmp_path / "best" / "cross_encoder"), device="cpu")
    predicted = cross.predict(list(zip(S1, S2)))
    np.testing.assert_allclose(
        predicted, (torch.sigmoid(s) if loss == "bce" else s).numpy(), atol=1e-5, rtol=0
    )


def test_the_pair_is_one_input_truncated_to_max_seq_length(tiny_model_dirs):
    objective = _objective(tiny_model_dirs["bert"], max_seq_length=12)
    tokenizer = objective.embedder.tokenizer
    features = objective.pair_features([S1[1]], [S2[1]])
    ids = features["input_ids"][0].tolist()
    assert len(ids) == 12  # every token of the pair counts
    assert (
        ids[0] == tokenizer.cls_token_id
        and ids.count(tokenizer.sep_token_id) == 2
        and ids[-1] == tokenizer.sep_token_id
    )
    second = ids.index(tokenizer.sep_token_id) + 1
    assert features["token_type_ids"][0].tolist() == [0] * second + [1] * (12 - second)
    untruncated = objective.pair_features([S1[0]], [S2[0]], max_length=100)["input_ids"][0].tolist()
    assert untruncated == tokenizer(S1[0], S2[0])["input_ids"]


def test_a_training_step_changes_the_evaluated_embedder(tiny_model_dirs):
    objective = _objective(tiny_model_dirs["albert"], "classification")
    embedder = objective.eval_embedder()
    assert embedder is objective.embedder and embedder.head == "cls"
    before = embedder.encode(S1)
    optimizer = torch.optim.SGD(objective.parameters(), lr=0.5)
    objective.train()
    objective(_batch("classification")).backward()
    optimizer.step()
    after = embedder.encode(S1)
    assert np.abs(after - before).max() > 1e-4
    # the head's parameters are in objective.parameters() once each, with the backbone's
    backbone = {id(p) for p in embedder.encoder.auto_model.parameters()}
    head = [p for p in objective.parameters() if id(p) not in backbone]
    assert sum(p.numel() for p in head) == sum(
        p.numel() for p in objective.classifiers["classification"].classifier.parameters()
    )


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_saved_cross_encoder_predicts_our_scores(tiny_model_dir, task, tmp_path):
    from sentence_transformers import CrossEncoder

    objective = _objective(tiny_model_dir, task)
    objective.train()
    objective(_batch(task)).backward()  # a real (non-initial) state is saved
    for p in objective.parameters():
        if p.grad is not None:
            p.data -= 0.1 * p.grad
    objective.save(tmp_path / "best")
    objective.eval()
    with torch.no_grad():
        ours = objective.scores(S1, S2).numpy()
    cross = CrossEncoder(str(tmp_path / "best" / "cross_encoder"), device="cpu")
    assert isinstance(cross.activation_fn, torch.nn.Identity)  # raw 0-5 scores, not a sigmoid
    predicted = cross.predict(list(zip(S1, S2)))
    assert predicted.shape == ours.shape
    np.testing.assert_allclose(predicted, ours, atol=1e-5, rtol=0)
    if task == "classification":
        assert cross.config.id2label == {0: "contradiction", 1: "entailment", 2: "neutral"}
    # best/ is the embedder: its own head (cls), and the mean head over the same backbone
    cls_model = protoembed.load(str(tmp_path / "best"), device="cpu")
    assert cls_model.head == "cls"
    np.testing.assert_allclose(cls_model.encode(S1), objective.eval_embedder().encode(S1), atol=1e-5)
    mean_model = protoembed.load(str(tmp_path / "best"), head="mean", device="cpu")
    same_backbone = build(objective.embedder.encoder.auto_model, objective.embedder.tokenizer, "mean")
    np.testing.assert_allclose(mean_model.encode(S1), same_backbone.encode(S1), atol=1e-5)


def test_auto_task_follows_the_columns_and_is_kept(tiny_model_dirs, tmp_path):
    objective = _objective(tiny_model_dirs["bert"], "auto")
    assert objective.columns == ("sentence1", "sentence2", ("score", "label"))
    assert plan_objective("cross_encoder", {"task": "classification"}).columns == (
        "sentence1",
        "sentence2",
        "label",
    )
    assert objective.task is None and set(objective.classifiers) == {"regression", "classification"}
    with pytest.raises(ProtoembedError, match="nothing to save before the first batch"):
        objective.save(tmp_path / "early")
    both = {**_batch("regression"), "label": LABELS}  # SICK: a score and a label -> regression
    objective(both)
    assert objective.task == "regression"
    with pytest.raises(ProtoembedError, match="task 'regression' needs a 'score' column"):
        objective(_batch("classification"))
    resumed = _objective(tiny_model_dirs["bert"], "auto")
    resumed.load_state_dict(objective.state_dict())  # a checkpoint keeps the task
    assert resumed.task == "regression"
    nli = _objective(tiny_model_dirs["bert"], "auto")
    nli(_batch("classification"))
    assert nli.task == "classification"


def test_bad_input_is_a_one_line_error(tiny_model_dirs):
    objective = _objective(tiny_model_dirs["bert"], "auto")
    with pytest.raises(ProtoembedError) as err:
        objective({"sentence1": S1, "sentence2": S2})
    assert str(err.value) == (
        "objective 'cross_encoder': a batch needs a 'score' or a 'label' column (got: sentence1, sentence2)"
    )
    with pytest.raises(ProtoembedError, match="a batch needs a 'sentence2' column"):
        objective({"sentence1": S1, "score": SCORES})
    regression = _objective(tiny_model_dirs["bert"], "regression")
    assert regression.columns == ("sentence1", "sentence2", "score")  # checked against the data before step 1
    with pytest.raises(ProtoembedError) as err:
        regression(_batch("classification"))
    assert str(err.value) == (
        "objective 'cross_encoder': task 'regression' needs a 'score' column (got: sentence1, sentence2, "
        "label); for NLI labels use task 'classification'"
    )
    classification = _objective(tiny_model_dirs["bert"], "classification")
    with pytest.raises(ProtoembedError, match="NLI label 3: expected an index 0-2"):
        classification({"sentence1": S1, "sentence2": S2, "label": [0, 1, 3]})
    with pytest.raises(ProtoembedError, match="a gold score is not a finite number"):
        regression({"sentence1": S1, "sentence2": S2, "score": [1.0, float("nan"), 2.0]})
    with pytest.raises(OptionError, match="option 'task': expected"):
        _objective(tiny_model_dirs["bert"], "similarity")
    with pytest.raises(OptionError, match="option 'loss': expected"):
        build_objective("cross_encoder", regression.embedder, task="regression", loss="l1")


def _write_stsb(path: Path, pairs: list[tuple[float, str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        f"main-captions\tMSRvid\t2012test\t{i:04d}\t{s:.3f}\t{a}\t{b}" for i, (s, a, b) in enumerate(pairs)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def stsb_data(tmp_path: Path) -> Path:
    """A data directory with STS-B-like train/dev/test splits (SentEval's layout)."""
    root = tmp_path / "data"
    for split, pairs in (("train", STSB_PAIRS * 2), ("dev", STSB_PAIRS), ("test", STSB_PAIRS[::-1])):
        _write_stsb(root / "senteval" / "STS" / "STSBenchmark" / f"sts-{split}.csv", pairs)
    return root


def test_training_run_writes_the_embedder_and_the_cross_encoder(
    tiny_model_dirs, stsb_data, tmp_path, monkeypatch
):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from protoembed.training import train

    monkeypatch.setenv("PROTOEMBED_DATA", str(stsb_data))
    out = tmp_path / "run"
    corpus = stsb_data / "senteval" / "STS" / "STSBenchmark" / "sts-train.csv"
    cfg = tiny_config(
        tiny_model_dirs["bert"], corpus, out, objective="cross_encoder", head="cls", batch_size=4, max_steps=2
    )
    results = train(cfg)
    assert results["best_step"] == 2 and (out / "best" / "modules.json").is_file()
    log = [json.loads(x) for x in (out / "training_log.jsonl").read_text().splitlines()]
    assert log[0]["objective"]["task"] == "auto" and log[0]["data"]["columns"][-1] == "score"
    assert [e["step"] for e in log if e["event"] == "train"] == [1, 2]
    assert protoembed.load(str(out / "best"), head="mean", device="cpu").encode(S1).shape == (3, 32)
    # Table II: the saved cross-encoder on the test split, against the same model run by transformers
    result = evaluate_cross_encoder_sts(out / "best", stsb_data, batch_size=8, device="cpu")  # one batch
    folder = out / "best" / "cross_encoder"
    model = AutoModelForSequenceClassification.from_pretrained(str(folder)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    test = STSB_PAIRS[::-1]
    with torch.no_grad():
        features = tokenizer([p[1] for p in test], [p[2] for p in test], padding=True, return_tensors="pt")
        scores = model(**features).logits.squeeze(-1).numpy()
    gold = [p[0] for p in test]
    row = result["tasks"]["STSBenchmark"]
    assert row["n"] == len(test) and result["split"] == "test"
    assert row["spearman"] == pytest.approx(spearmanr(scores, gold)[0] * 100, abs=1e-6)
    assert row["pearson"] == pytest.approx(pearsonr(scores, gold)[0] * 100, abs=1e-4)
    assert result["avg"] == row["spearman"]
    # the CLI's --cross-encoder gives the same numbers
    from protoembed.cli import main

    cli_out = tmp_path / "ce.json"
    args = ["eval", "sts", "--model", str(out / "best"), "--cross-encoder", "--tasks", "STS-B"]
    assert main([*args, "--batch-size", "8", "--device", "cpu", "--output", str(cli_out)]) == 0
    cli = json.loads(cli_out.read_text())
    assert cli["scorer"] == "cross-encoder" and cli["tasks"] == json.loads(json.dumps(result["tasks"]))


def test_a_regression_run_keeps_the_best_cross_encoder_by_its_own_dev_score(
    tiny_model_dirs, stsb_data, tmp_path, monkeypatch, caplog
):
    """best/ of a regression run is the checkpoint whose pair scores correlate best with STS-B dev (not
    the one whose encoder embeds single sentences best): each logged dev score equals, for the kept
    model, scipy's Spearman of transformers' own outputs on the dev pairs; an NLI run and a run given an
    evaluator score the encoder's embeddings."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from protoembed.training import train

    monkeypatch.setenv("PROTOEMBED_DATA", str(stsb_data))
    corpus = stsb_data / "senteval" / "STS" / "STSBenchmark" / "sts-train.csv"
    out = tmp_path / "run"
    settings = {"max_steps": 6, "eval_steps": 2, "batch_size": 4, "lr": 3e-3}
    with caplog.at_level("INFO", logger="protoembed.training"):
        train(
            tiny_config(
                tiny_model_dirs["bert"], corpus, out, objective="cross_encoder", head="cls", **settings
            )
        )
    log = [json.loads(x) for x in (out / "training_log.jsonl").read_text().splitlines()]
    evals = [e for e in log if e["event"] == "eval"]
    assert [e["step"] for e in evals] == [2, 4, 6] and {e["dev_scorer"] for e in evals} == {"objective"}
    # the log line and the card say the dev score is the pair scores', the STS average the embeddings'
    results = json.loads((out / "results.json").read_text())
    assert results["best_dev_scorer"] == "objective"
    said = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("best dev score"))
    assert said.startswith(
        f"best dev score {results['best_dev_score']:.2f} at step {results['best_step']} (spearman x100 on "
        f"STSBenchmark (dev split), scored by the model's own pair scores (a cross-encoder)); test avg "
        f"{results['avg']:.2f} (sts: STSBenchmark)"
    )
    card = (out / "best" / "README.md").read_text(encoding="utf-8")
    assert (
        f"| dev score there | {results['best_dev_score']:.2f} (spearman x100 on STSBenchmark (dev split), "
        "scored by the model's own pair scores (a cross-encoder)) |" in card
    )
    best = max(evals, key=lambda e: e["dev_score"])
    assert evals[-1]["best_step"] == best["step"]
    folder = out / "best" / "cross_encoder"
    model = AutoModelForSequenceClassification.from_pretrained(str(folder)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    with torch.no_grad():
        features = tokenizer(
            [p[1] for p in STSB_PAIRS], [p[2] for p in STSB_PAIRS], padding=True, return_tensors="pt"
        )
        scores = model(**features).logits.squeeze(-1).numpy()
    independent = spearmanr(scores, [p[0] for p in STSB_PAIRS])[0] * 100
    assert best["dev_score"] == pytest.approx(independent, abs=1e-6)
    # a given evaluator replaces the objective's own score
    calls = []
    custom = tmp_path / "custom"
    cfg = tiny_config(
        tiny_model_dirs["bert"], corpus, custom, objective="cross_encoder", head="cls", **settings
    )
    train(cfg, evaluator=lambda embedder: calls.append(embedder) or 1.0)
    log = [json.loads(x) for x in (custom / "training_log.jsonl").read_text().splitlines()]
    assert len(calls) == 3 and {e["dev_scorer"] for e in log if e["event"] == "eval"} == {"evaluator"}
    # classification has no similarity score of its own: None, so the encoder's embeddings are scored
    objective = _objective(tiny_model_dirs["bert"], "classification")
    objective(_batch("classification"))
    assert objective.dev_pair_scores(["a man walks"], ["a man is walking"]) is None


def test_cross_encoder_evaluation_refuses_bad_models(tiny_model_dirs, stsb_data, tmp_path):
    with pytest.raises(ProtoembedError, match="no such folder"):
        evaluate_cross_encoder_sts(tmp_path / "missing", stsb_data)
    objective = _objective(tiny_model_dirs["roberta"], "classification")
    objective(_batch("classification"))
    objective.save(tmp_path / "nli")
    with pytest.raises(ProtoembedError, match="has 3 outputs; STS needs a model with one score per pair"):
        evaluate_cross_encoder_sts(tmp_path / "nli", stsb_data, device="cpu")


def test_registered():
    assert objective_class("cross_encoder") is CrossEncoderObjective
    assert plan_objective("cross_encoder").head == "cls"


def test_default_backbone_keeps_its_pooler_and_round_trips(tmp_path):
    """all-MiniLM-L6-v2 (BERT): the HF head uses the checkpoint's pooler; the saved model predicts our scores."""
    from safetensors.torch import load_file
    from sentence_transformers import CrossEncoder

    from protoembed.model.backbones import default_model_path

    objective = build_objective(
        "cross_encoder",
        protoembed.load("default", head="cls", device="cpu"),
        max_seq_length=128,
        task="regression",
    )
    model = objective.classifiers["regression"]
    assert type(model).__name__ == "BertForSequenceClassification"
    saved = load_file(str(Path(default_model_path()) / "model.safetensors"))
    torch.testing.assert_close(model.bert.pooler.dense.weight, saved["pooler.dense.weight"], rtol=0, atol=0)
    objective(_batch("regression"))
    objective.save(tmp_path / "best")
    objective.eval()
    with torch.no_grad():
        ours = objective.scores(S1, S2).numpy()
    predicted = CrossEncoder(str(tmp_path / "best" / "cross_encoder"), device="cpu").predict(
        list(zip(S1, S2))
    )
    np.testing.assert_allclose(predicted, ours, atol=1e-5, rtol=0)


def test_resumed_run_ends_with_the_same_model(tiny_model_dirs, stsb_data, tmp_path, monkeypatch):
    """The checkpoint holds the shared backbone under two names and the auto task; a resumed run
    (stopped after step 3, checkpoint at step 2) ends where a straight run does."""
    from protoembed.outputs.run_layout import CHECKPOINT_DIR
    from protoembed.training import train

    monkeypatch.setenv("PROTOEMBED_DATA", str(stsb_data))
    corpus = stsb_data / "senteval" / "STS" / "STSBenchmark" / "sts-train.csv"
    settings = {"max_steps": 6, "eval_steps": 2, "keep_checkpoint": True, "warmup": 1, "batch_size": 4}

    def config(out: Path):
        return tiny_config(
            tiny_model_dirs["bert"], corpus, out, objective="cross_encoder", head="cls", **settings
        )

    straight, broken = tmp_path / "straight", tmp_path / "broken"
    train(config(straight))
    with pytest.raises(Interrupt):
        train(config(broken), callback=stop_after(3))
    train(config(broken), resume=True)

    def weights(out: Path) -> dict[str, torch.Tensor]:
        (file,) = (out / CHECKPOINT_DIR).glob("pytorch_model*.bin")
        return torch.load(file, map_location="cpu", weights_only=True)

    a, b = weights(straight), weights(broken)
    assert a.keys() == b.keys() and int(a["task_code"]) == 1  # regression, from the score column
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=1e-6, msg=key)
    from sentence_transformers import CrossEncoder

    pairs = list(zip(S1, S2))
    np.testing.assert_allclose(
        CrossEncoder(str(straight / "best" / "cross_encoder"), device="cpu").predict(pairs),
        CrossEncoder(str(broken / "best" / "cross_encoder"), device="cpu").predict(pairs),
        atol=1e-6,
    )
