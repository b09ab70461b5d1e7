"""Supervised objectives (cosine_regression, nli_softmax, simcse_sup): each loss against an independent
computation, against sentence-transformers' own losses (value and gradients), every head, one forward,
what is saved, bad batches, and a tiny training run on STS-B-like pairs.

The independent computations embed each column separately through the evaluation path of the embedder
(``Embedder.encode``, dropout off) and evaluate the papers' formulas with float64 loops.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import protoembed
from protoembed.core.errors import ProtoembedError
from protoembed.data.training.examples import NLI_LABELS
from protoembed.objectives import REGISTRY, build_objective, plan_objective
from tiny_models import without_dropout
from training_helpers import tiny_config, write_corpus

S1 = [
    "a man is playing a guitar .",
    "the cat sat on the mat and looked out of the window .",
    "two dogs are running through a field of grass .",
    "stocks fell sharply after the report on monday .",
]
S2 = [
    "a woman is slicing an onion .",
    "a child is riding a horse while people watch the game .",
    "the quick brown fox jumps over the lazy dog .",
    "this sentence means something .",
]
S3 = [
    "the cat sat on the mat .",
    "a man is playing .",
    "stocks fell after the report .",
    "two dogs are running .",
]
SCORES = [4.2, 0.4, 2.5, 5.0]
#: scores whose fifth is exact in float32 (sentence-transformers casts the labels to float32)
EXACT_SCORES = [4.375, 0.625, 2.5, 5.0]
LABELS = [1, 0, 2, 1]
TAU = 0.05
PAIRS = {"sentence1": S1, "sentence2": S2}
BATCHES = {
    "cosine_regression": {**PAIRS, "score": SCORES},
    "nli_softmax": {**PAIRS, "label": LABELS},
    "simcse_sup": {"anchor": S1, "positive": S2, "negative": S3},
}
HEADS = {
    "cls": {},
    "mean": {},
    "max": {},
    "cnn": {},
    "mask": {"template": 'This sentence : "<S>" means [MASK] .'},
}


# ------------------------------------------------------------------ independent formulas
def _np(x: torch.Tensor) -> np.ndarray:
    return x.detach().double().cpu().numpy()


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def sbert_regression(u, v, scores, scale: float = 5.0) -> float:
    """1/N sum_i (cos(u_i, v_i) - s_i / scale)^2."""
    return sum((_cos(a, b) - s / scale) ** 2 for a, b, s in zip(u, v, scores)) / len(scores)


def sbert_classification(u, v, labels, weight, bias, multiplication: bool = False) -> float:
    """Mean of -log softmax(W [u; v; |u - v|] + b)[label], with explicit log-sum-exp."""
    total = 0.0
    for a, b, label in zip(u, v, labels):
        x = np.concatenate([a, b, np.abs(a - b)] + ([a * b] if multiplication else []))
        logits = [float(weight[k] @ x + bias[k]) for k in range(len(NLI_LABELS))]
        top = max(logits)
        total += -(logits[label] - top - math.log(sum(math.exp(z - top) for z in logits)))
    return total / len(labels)


def simcse_eq5(h, h_pos, h_neg, tau: float = TAU) -> float:
    """Gao et al. 2021 Eq. 5 (without ``h_neg``: Eq. 5 with positives only)."""
    total = 0.0
    for i in range(len(h)):
        numerator = math.exp(_cos(h[i], h_pos[i]) / tau)
        denominator = sum(math.exp(_cos(h[i], h_pos[j]) / tau) for j in range(len(h)))
        if h_neg is not None:
            denominator += sum(math.exp(_cos(h[i], h_neg[j]) / tau) for j in range(len(h)))
        total += -math.log(numerator / denominator)
    return total / len(h)


def load(model_dir: Path, head: str, **kwargs):
    torch.manual_seed(0)
    return protoembed.load(str(model_dir), head=head, **{**HEADS.get(head, {}), **kwargs})


def expected_loss(name: str, objective, batch: dict) -> float:
    """The loss of ``batch`` from each column embedded separately by the evaluation path."""
    embedder = objective.embedder
    with torch.no_grad():
        enc = {
            k: embedder.encode(v, convert_to_tensor=True) for k, v in batch.items() if isinstance(v[0], str)
        }
        if name == "cosine_regression":
            return sbert_regression(_np(enc["sentence1"]), _np(enc["sentence2"]), batch["score"])
        if name == "nli_softmax":
            c = objective.classifier
            return sbert_classification(
                _np(enc["sentence1"]),
                _np(enc["sentence2"]),
                batch["label"],
                _np(c.weight),
                _np(c.bias),
                objective.options.multiplication,
            )
        z = {k: _np(objective.project(v)) for k, v in enc.items()}
        return simcse_eq5(z["anchor"], z["positive"], z.get("negative"))


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (see conftest)."""


# ----------------------------------------------------------- every head, every objective
@pytest.mark.parametrize("kind", ["bert", "albert"])
@pytest.mark.parametrize("head", list(HEADS))
@pytest.mark.parametrize("name", list(BATCHES))
def test_loss_matches_the_paper_formula_with_every_head(
    tiny_model_dirs, kind: str, head: str, name: str
) -> None:
    embedder = load(tiny_model_dirs[kind], head)
    objective = build_objective(name, embedder).eval()  # dropout off
    batch = BATCHES[name]
    with torch.no_grad():
        loss = float(objective(batch))
    assert loss == pytest.approx(expected_loss(name, objective, batch), rel=1e-5, abs=1e-6)
    objective.train()
    objective(batch).backward()  # and it trains: gradients reach the first layer of the backbone
    grad = embedder.encoder.auto_model.get_input_embeddings().weight.grad
    assert grad is not None and grad.abs().sum() > 0


@pytest.mark.parametrize(
    ("name", "options", "batch"),
    [
        ("cosine_regression", {"score_scale": 1.0}, {**PAIRS, "score": [0.9, 0.1, 0.5, 1.0]}),
        ("nli_softmax", {"multiplication": True}, BATCHES["nli_softmax"]),
        ("simcse_sup", {}, {"anchor": S1, "positive": S2}),  # no hard negatives: (N, N) logits
        ("simcse_sup", {"temperature": 0.5, "mlp": "none"}, BATCHES["simcse_sup"]),
    ],
)
def test_options_match_their_formulas(tiny_model_dirs, name: str, options: dict, batch: dict) -> None:
    objective = build_objective(name, load(tiny_model_dirs["bert"], "cls"), **options).eval()
    with torch.no_grad():
        loss = float(objective(batch))
    if name == "cosine_regression":
        embedder = objective.embedder
        with torch.no_grad():
            u, v = (
                _np(embedder.encode(batch[k], convert_to_tensor=True)) for k in ("sentence1", "sentence2")
            )
        expected = sbert_regression(u, v, batch["score"], scale=1.0)
    elif name == "simcse_sup" and "temperature" in options:
        embedder = objective.embedder
        with torch.no_grad():
            z = [
                _np(embedder.encode(batch[k], convert_to_tensor=True))
                for k in ("anchor", "positive", "negative")
            ]
        expected = simcse_eq5(*z, tau=0.5)
    else:
        expected = expected_loss(name, objective, batch)
    assert loss == pytest.approx(expected, rel=1e-5, abs=1e-6)


# ------------------------------------------------------- sentence-transformers' own losses
def _st_pair(model_dir: Path, tmp_path: Path, normalize: bool):
    """(objective embedder, SentenceTransformer) with the same weights, both float64, dropout off."""
    from sentence_transformers import SentenceTransformer

    saved = load(model_dir, "mean", normalize=normalize).save(tmp_path / "model")
    ours = protoembed.load(str(saved)).double().eval()
    st = SentenceTransformer(str(saved), device="cpu").double().eval()
    assert ours.normalize == normalize and (len(st) == 3) == normalize  # Normalize module or not
    return ours, st


def _backbone_grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: p.grad for k, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("kind", ["bert", "albert"])
def test_cosine_regression_equals_cosine_similarity_loss(tiny_model_dirs, tmp_path: Path, kind: str) -> None:
    from sentence_transformers.sentence_transformer.losses import CosineSimilarityLoss

    ours, st = _st_pair(tiny_model_dirs[kind], tmp_path, normalize=False)
    objective = build_objective("cosine_regression", ours).eval()
    loss = objective({**PAIRS, "score": EXACT_SCORES})
    loss.backward()
    st_loss = CosineSimilarityLoss(st)(
        [st.preprocess(S1), st.preprocess(S2)], torch.tensor(EXACT_SCORES, dtype=torch.float64) / 5
    )
    st_loss.backward()
    assert loss.item() == pytest.approx(st_loss.item(), rel=1e-10)
    a, b = _backbone_grads(ours.encoder.auto_model), _backbone_grads(st[0].auto_model)
    assert a.keys() == b.keys() and len(a) > 10
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-8, atol=1e-12, msg=key)


@pytest.mark.parametrize(
    ("kind", "normalize", "multiplication"),
    [("bert", False, False), ("albert", False, False), ("bert", True, False), ("bert", False, True)],
)
def test_nli_softmax_equals_softmax_loss(
    tiny_model_dirs, tmp_path: Path, kind: str, normalize: bool, multiplication: bool
) -> None:
    from sentence_transformers.sentence_transformer.losses import SoftmaxLoss

    ours, st = _st_pair(tiny_model_dirs[kind], tmp_path, normalize)
    objective = build_objective("nli_softmax", ours, multiplication=multiplication).double().eval()
    st_loss_module = SoftmaxLoss(
        st, ours.dimension, len(NLI_LABELS), concatenation_sent_multiplication=multiplication
    ).double()
    with torch.no_grad():
        st_loss_module.classifier.weight.copy_(objective.classifier.weight)
        st_loss_module.classifier.bias.copy_(objective.classifier.bias)
    loss = objective(BATCHES["nli_softmax"])
    loss.backward()
    st_loss = st_loss_module([st.preprocess(S1), st.preprocess(S2)], torch.tensor(LABELS))
    st_loss.backward()
    assert loss.item() == pytest.approx(st_loss.item(), rel=1e-10)
    pairs = [
        (_backbone_grads(ours.encoder.auto_model), _backbone_grads(st[0].auto_model)),
        (_backbone_grads(objective.classifier), _backbone_grads(st_loss_module.classifier)),
    ]
    for a, b in pairs:
        assert a.keys() == b.keys() and a
        for key in a:
            torch.testing.assert_close(a[key], b[key], rtol=1e-8, atol=1e-12, msg=key)


# ------------------------------------------------------------- one forward, what is saved
@pytest.mark.parametrize(("name", "rows"), [("cosine_regression", 2), ("nli_softmax", 2), ("simcse_sup", 3)])
def test_columns_in_one_forward_or_one_each(tiny_model_dirs, name: str, rows: int) -> None:
    """``joint``: one forward of every column; ``column``: a forward per column, each padded to its own
    longest row (the widths an independent tokenisation of each column gives)."""
    embedder = load(tiny_model_dirs["bert"], "mean")
    objective = build_objective(name, embedder).train()
    calls: list[tuple[int, int]] = []
    handle = embedder.encoder.auto_model.register_forward_hook(
        lambda module, args, kwargs, out: calls.append(tuple(out.last_hidden_state.shape[:2])),
        with_kwargs=True,
    )
    batch = BATCHES[name]
    columns = [c for c in ("sentence1", "sentence2", "anchor", "positive", "negative") if c in batch]
    widths = [embedder.features(batch[c])["input_ids"].size(1) for c in columns]
    try:
        objective.views.padding = "joint"
        objective(batch).backward()
        assert calls == [(rows * len(S1), max(widths))]
        calls.clear()
        objective.views.padding = "column"
        objective(batch).backward()
        assert calls == [(len(S1), width) for width in widths] and len(calls) == rows
    finally:
        handle.remove()


def test_save_keeps_the_embedder_and_leaves_the_classifier(tiny_model_dirs, tmp_path: Path) -> None:
    embedder = load(tiny_model_dirs["bert"], "mean")
    objective = build_objective("nli_softmax", embedder)
    assert objective.eval_embedder() is embedder
    assert {n for n, _ in objective.named_parameters() if n.startswith("classifier.")} == {
        "classifier.weight",
        "classifier.bias",
    }
    assert objective.classifier.weight.shape == (3, 3 * 32)
    objective.save(tmp_path / "nli")
    saved_keys = {k for f in (tmp_path / "nli").rglob("*.safetensors") for k in load_file(f)}
    assert saved_keys and not any("classifier" in k for k in saved_keys)
    with torch.no_grad():
        expected = embedder.eval().encode(S1)
    np.testing.assert_allclose(protoembed.load(str(tmp_path / "nli")).encode(S1), expected, atol=1e-6)


def test_simcse_sup_keeps_the_mlp_at_evaluation(tiny_model_dirs, tmp_path: Path) -> None:
    embedder = load(tiny_model_dirs["bert"], "cls")
    objective = build_objective("simcse_sup", embedder).eval()
    assert objective.options.mlp == "keep" and objective.config()["mlp"] == "keep"
    with torch.no_grad():
        expected = objective.mlp(embedder.encode(S1, convert_to_tensor=True)).numpy()
    objective.save(tmp_path / "sup")
    np.testing.assert_allclose(protoembed.load(str(tmp_path / "sup")).encode(S1), expected, atol=1e-6)
    assert build_objective("simcse_sup", embedder, mlp="train").eval_embedder() is embedder


def test_registry_columns_and_heads() -> None:
    assert {"cosine_regression", "nli_softmax", "simcse_sup"} <= set(REGISTRY)
    assert plan_objective("cosine_regression").columns == ("sentence1", "sentence2", "score")
    assert plan_objective("nli_softmax").columns == ("sentence1", "sentence2", "label")
    assert plan_objective("simcse_sup").columns == ("anchor", "positive")
    assert [plan_objective(n).head for n in BATCHES] == ["mean", "mean", "cls"]


# ----------------------------------------------------------------------------- bad input
def test_bad_batches_and_options(tiny_model_dirs) -> None:
    embedder = load(tiny_model_dirs["bert"], "mean")
    regression = build_objective("cosine_regression", embedder)
    softmax = build_objective("nli_softmax", embedder)
    sup = build_objective("simcse_sup", embedder)
    cases = [
        (
            lambda: regression(PAIRS),
            r"objective 'cosine_regression': the batch has no column 'score' \(it has sentence1, sentence2\); "
            r"it needs sentence1, sentence2, score",
        ),
        (lambda: softmax({"sentence1": S1, "sentence2": S2, "score": SCORES}), "no column 'label'"),
        (lambda: sup({"sentence1": S1, "sentence2": S2}), "no column 'anchor'"),
        (lambda: sup(S1), "a batch is a mapping of columns"),
        (lambda: softmax({**PAIRS, "label": [0, 1, 3, 2]}), r"label 3 is not an index into contradiction"),
        (lambda: softmax({**PAIRS, "label": ["entailment"] * 4}), "label 'entailment' is not an index"),
        (lambda: softmax({**PAIRS, "label": [0.0, 1.0, 2.0, 1.0]}), "label 0.0 is not an index"),
        (
            lambda: regression({**PAIRS, "score": SCORES[:2]}),
            r"same length > 0 \(sentence1 4, sentence2 4, score 2",
        ),
        (lambda: build_objective("cosine_regression", embedder, score_scale=0), "option 'score_scale'"),
        (lambda: build_objective("nli_softmax", embedder, temperature=0.1), "unknown option 'temperature'"),
        (lambda: build_objective("simcse_sup", embedder, mlp="always"), "option 'mlp'"),
    ]
    for make, message in cases:
        with pytest.raises(ProtoembedError, match=message):
            make()


# -------------------------------------------------------------------- tiny training runs
STS_LINES = [
    f"main-captions\tMSRvid\t2012test\t{i:04d}\t{score:.3f}\t{a}\t{b}"
    for i, (a, b, score) in enumerate(zip((S1 + S2) * 3, (S2 + S3) * 3, SCORES * 6))
]


def test_training_runs_on_sts_pairs_and_checks_columns_before_step_one(
    tiny_model_dirs, tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))
    from protoembed.training import train

    corpus = tmp_path / "sts-train.csv"  # the stsb format, inferred from the name
    corpus.write_text("\n".join(STS_LINES) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    model_dir = without_dropout(tiny_model_dirs["bert"], tmp_path / "bert")
    cfg = tiny_config(
        model_dir,
        corpus,
        out,
        objective="cosine_regression",
        max_steps=2,
        eval_steps=2,
        batch_size=len(STS_LINES),  # step 1's batch is every pair: its loss does not depend on the order
    )
    factory, built = _recording_factory()
    results = train(cfg, objective_factory=factory)
    log = [json.loads(x) for x in (out / "training_log.jsonl").read_text().splitlines()]
    assert log[0]["data"]["columns"] == ["sentence1", "sentence2", "score"]
    assert log[0]["data"]["examples"] == len(STS_LINES)
    losses = [e["loss"] for e in log if e["event"] == "train"]
    batch = {"sentence1": (S1 + S2) * 3, "sentence2": (S2 + S3) * 3, "score": SCORES * 6}  # STS_LINES
    assert len(losses) == 2
    assert losses[0] == pytest.approx(expected_loss("cosine_regression", built[0], batch), rel=1e-4)
    assert losses[1] != pytest.approx(losses[0], rel=1e-6)  # step 1 changed the model
    assert results["best_step"] == 2 and (out / "best" / "modules.json").is_file()

    text = write_corpus(tmp_path / "corpus.txt")
    cfg = tiny_config(tiny_model_dirs["bert"], text, tmp_path / "text", objective="cosine_regression")
    with pytest.raises(ProtoembedError, match=r"has columns text; objective 'cosine_regression' needs "):
        train(cfg)
    assert not (tmp_path / "text" / "training_log.jsonl").exists() or all(
        json.loads(x)["event"] != "train"
        for x in (tmp_path / "text" / "training_log.jsonl").read_text().splitlines()
    )


def _recording_factory():
    """``(objective_factory, built)``: the library's factory, keeping a copy of each objective as built
    (its initial weights, randomly initialised parts included) in ``built``, in evaluation mode."""
    import copy

    from protoembed.training.components import build_objective_from_config

    built = []

    def factory(cfg, embedder):
        objective = build_objective_from_config(cfg, embedder)
        built.append(copy.deepcopy(objective).eval())
        return objective

    return factory, built


def _nli_jsonl(path: Path) -> Path:
    """8 premises, each with an entailment, a contradiction and a neutral hypothesis (24 pairs)."""
    rows = [
        {"sentence1": f"{premise} {i}", "sentence2": hypothesis, "gold_label": label}
        for i, premise in enumerate(S1 + S2)
        for hypothesis, label in zip(S3, ("entailment", "contradiction", "neutral"))
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("objective", "head", "columns", "examples"),
    [
        ("nli_softmax", "mean", ["sentence1", "sentence2", "label"], 24),
        # NLI pairs -> triplets; head mean, not simcse_sup's default cls: a random tiny BERT's [CLS] states
        # are all alike (cos 0.99999), which would leave the loss at log(2 x batch) whatever the formula
        ("simcse_sup", "mean", ["anchor", "positive", "negative"], 8),
    ],
)
def test_training_runs_on_nli_pairs(
    tiny_model_dirs,
    tmp_path: Path,
    data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    objective: str,
    head: str,
    columns: list[str],
    examples: int,
) -> None:
    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))
    from protoembed.training import train

    corpus = _nli_jsonl(tmp_path / "snli_train.jsonl")  # the snli_jsonl format, inferred from the name
    out = tmp_path / "run"
    model_dir = without_dropout(tiny_model_dirs["bert"], tmp_path / "bert")
    cfg = tiny_config(
        model_dir,
        corpus,
        out,
        objective=objective,
        head=head,
        max_steps=2,
        eval_steps=2,
        batch_size=examples,  # step 1's batch is every example: its loss does not depend on the order
    )
    factory, built = _recording_factory()
    train(cfg, objective_factory=factory)
    log = [json.loads(x) for x in (out / "training_log.jsonl").read_text().splitlines()]
    assert (log[0]["data"]["columns"], log[0]["data"]["examples"]) == (columns, examples)
    losses = [e["loss"] for e in log if e["event"] == "train"]
    # the examples as _nli_jsonl wrote them: every pair with its label, or each premise with its
    # entailment as positive and its contradiction as hard negative
    premises = [f"{premise} {i}" for i, premise in enumerate(S1 + S2)]
    if objective == "nli_softmax":
        batch = {
            "sentence1": [p for p in premises for _ in range(3)],
            "sentence2": S3[:3] * len(premises),
            "label": [NLI_LABELS.index(x) for x in ("entailment", "contradiction", "neutral")]
            * len(premises),
        }
    else:
        batch = {"anchor": premises, "positive": [S3[0]] * len(premises), "negative": [S3[1]] * len(premises)}
    assert len(losses) == 2
    assert losses[0] == pytest.approx(expected_loss(objective, built[0], batch), rel=1e-4)
    assert losses[1] != pytest.approx(losses[0], rel=1e-6)  # step 1 changed the model
    model = protoembed.load(str(out / "best"))
    assert model.head == head and model.encode(S1).shape == (4, 32)


# ------------------------------------------------------------- 2 processes == 1 process
#: (objective, head, batch of 6 examples): the two processes hold 3 examples each.
DDP_CASES = {
    "simcse_sup": ("cls", {"anchor": S1 + S2[:2], "positive": S2 + S3[:2], "negative": S3 + S1[:2]}),
    "simcse_sup_pairs": ("cls", {"anchor": S1 + S2[:2], "positive": S2 + S3[:2]}),
    "cosine_regression": (
        "mean",
        {"sentence1": S1 + S2[:2], "sentence2": S2 + S3[:2], "score": SCORES + [1.0, 3.0]},
    ),
    "nli_softmax": ("mean", {"sentence1": S1 + S2[:2], "sentence2": S2 + S3[:2], "label": LABELS + [2, 0]}),
}


def _ddp_objective(model_dir: str, case: str):
    head, _ = DDP_CASES[case]
    torch.manual_seed(0)  # same MLP / classifier in every process (DDP also broadcasts rank 0's)
    embedder = protoembed.load(model_dir, head=head)
    return build_objective(case.removesuffix("_pairs"), embedder).double().eval()  # eval: dropout off


def _ddp_worker(rank: int, world: int, port: int, model_dir: str, out: str) -> None:
    import os

    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        for case, (_, batch) in DDP_CASES.items():
            objective = _ddp_objective(model_dir, case)
            ddp = torch.nn.parallel.DistributedDataParallel(objective, find_unused_parameters=True)
            loss = ddp({k: v[rank * 3 : (rank + 1) * 3] for k, v in batch.items()})
            loss.backward()
            grads = {k: p.grad.clone() for k, p in objective.named_parameters() if p.grad is not None}
            torch.save({"loss": loss.item(), "grads": grads}, Path(out) / f"{case}-{rank}.pt")
            del ddp, objective, loss  # free DDP's reducer while its process group lives
            dist.barrier()
        dist.barrier()  # both ranks done before either closes gloo's pairs (else one can abort at exit)
    finally:
        dist.destroy_process_group()


def test_two_processes_equal_one_process_on_the_concatenated_batch(tiny_model_dirs, tmp_path: Path) -> None:
    """simcse_sup gathers anchors, positives and hard negatives over processes: each process reports the
    global batch's loss and DDP's averaged gradients equal the 1-process gradients. The siamese
    objectives need no gather: the mean of the processes' losses (equal halves) and the averaged
    gradients equal the 1-process ones. Float64, to 1e-8."""
    import socket

    import torch.multiprocessing as mp

    model_dir = str(tiny_model_dirs["bert"])
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    world = 2
    mp.spawn(_ddp_worker, args=(world, port, model_dir, str(tmp_path)), nprocs=world)
    for case, (_, batch) in DDP_CASES.items():
        objective = _ddp_objective(model_dir, case)
        reference = objective(batch)
        reference.backward()
        expected = {k: p.grad for k, p in objective.named_parameters() if p.grad is not None}
        results = [torch.load(tmp_path / f"{case}-{rank}.pt") for rank in range(world)]
        if case.startswith("simcse_sup"):
            assert all(r["loss"] == pytest.approx(reference.item(), rel=1e-8) for r in results), case
        else:
            assert sum(r["loss"] for r in results) / world == pytest.approx(reference.item(), rel=1e-8), case
        for result in results:
            assert result["grads"].keys() == expected.keys(), case
            for key, grad in expected.items():
                torch.testing.assert_close(
                    result["grads"][key], grad, rtol=1e-8, atol=1e-10, msg=f"{case} {key}"
                )
