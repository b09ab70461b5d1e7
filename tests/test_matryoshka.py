"""Matryoshka training (``objective.matryoshka``): the wrapped loss against the weighted sum of the plain
formulas on cut, re-normalised vectors computed by hand (float64 loops on vectors from the evaluation
path), one full-size dim against the plain objective, GradCache against the plain Matryoshka step,
sentence-transformers' ``MatryoshkaLoss(MultipleNegativesRankingLoss)`` against supervised SimCSE (loss and
gradients), the options' and sizes' one-line errors, and what a saved model says about its dims.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import protoembed
from grad_cache_cases import (
    CASES,
    MINI_BATCH,
    batch_for,
    gradients,
    max_relative_difference,
    twin,
    write_one_pair,
)
from protoembed.core.errors import ProtoembedError
from protoembed.objectives import build_objective, plan_objective
from protoembed.objectives.cache import grad_cache_step
from protoembed.objectives.registry import OptionError
from protoembed.outputs.st_layout import read_matryoshka_dims

S1 = ["a man is playing a guitar .", "the cat sat on the mat .", "two dogs run in a field .", "stocks fell ."]
S2 = ["a woman slices an onion .", "a child rides a horse .", "the quick brown fox jumps .", "it means so ."]
S3 = ["the cat sat .", "a man is playing .", "stocks fell after the report .", "two dogs are running ."]
SCORES = [4.2, 0.4, 2.5, 5.0]
LABELS = [1, 0, 2, 1]
#: the tiny models' width is 32: the full size, then three cuts (given unsorted, weights paired)
DIMS, WEIGHTS = [8, 32, 4, 16], [2.0, 1.0, 0.5, 1.5]
SORTED = [(32, 1.0), (16, 1.5), (8, 2.0), (4, 0.5)]
MATRYOSHKA = {"dims": DIMS, "weights": WEIGHTS}
BATCHES = {
    "cosine_regression": {"sentence1": S1, "sentence2": S2, "score": SCORES},
    "nli_softmax": {"sentence1": S1, "sentence2": S2, "label": LABELS},
    "simcse_sup": {"anchor": S1, "positive": S2, "negative": S3},
    "simcse": {"text": S1},
}


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (see conftest)."""


def _np(x: torch.Tensor) -> np.ndarray:
    return x.detach().double().cpu().numpy()


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x)


def infonce(h, h_pos, h_neg, tau: float = 0.05) -> float:
    """Gao et al. 2021 Eq. 5 on unit vectors (Eq. 4 without ``h_neg``)."""
    h, h_pos = [_unit(x) for x in h], [_unit(x) for x in h_pos]
    h_neg = None if h_neg is None else [_unit(x) for x in h_neg]
    total = 0.0
    for i in range(len(h)):
        logits = [h[i] @ p / tau for p in h_pos] + ([h[i] @ q / tau for q in h_neg] if h_neg else [])
        top = max(logits)
        total += -(logits[i] - top - math.log(sum(math.exp(z - top) for z in logits)))
    return total / len(h)


def regression(u, v, scores) -> float:
    return sum((float(_unit(a) @ _unit(b)) - s / 5) ** 2 for a, b, s in zip(u, v, scores)) / len(scores)


def classification(u, v, labels, weight, bias, d: int, normalize: bool) -> float:
    """SBERT's softmax loss at size ``d``: the classifier's first ``d`` columns of each of its three blocks."""
    blocks = weight.reshape(weight.shape[0], 3, -1)[:, :, :d].reshape(weight.shape[0], -1)
    total = 0.0
    for a, b, label in zip(u, v, labels):
        a, b = (_unit(a[:d]), _unit(b[:d])) if normalize else (a[:d], b[:d])
        logits = blocks @ np.concatenate([a, b, np.abs(a - b)]) + bias
        top = logits.max()
        total += -(logits[label] - top - math.log(np.exp(logits - top).sum()))
    return total / len(labels)


def mlp(objective, x: np.ndarray) -> np.ndarray:
    """The training MLP (Linear + Tanh) in float64 numpy."""
    linear = objective.mlp.dense
    return np.tanh(x @ _np(linear.weight).T + _np(linear.bias))


def load(model_dir: Path, head: str = "mean", **settings):
    torch.manual_seed(0)
    return protoembed.load(str(model_dir), head=head, **settings)


def by_hand(name: str, objective, batch: dict, mlp_mode: str | None = None) -> float:
    """sum_j w_j * (the objective's formula on the vectors cut to d_j), every column embedded separately by
    the evaluation path (``Embedder.encode``: the model's head, no MLP; a cut of a normalised vector has the direction of the raw cut)."""
    embedder = objective.embedder
    with torch.no_grad():
        enc = {
            k: _np(embedder.encode(v, convert_to_tensor=True))
            for k, v in batch.items()
            if isinstance(v[0], str)
        }
    total = 0.0
    for d, w in SORTED:
        if name == "cosine_regression":
            term = regression(enc["sentence1"][:, :d], enc["sentence2"][:, :d], batch["score"])
        elif name == "nli_softmax":
            c = objective.classifier
            term = classification(
                enc["sentence1"],
                enc["sentence2"],
                batch["label"],
                _np(c.weight),
                _np(c.bias),
                d,
                embedder.normalize,
            )
        else:

            def view(x: np.ndarray, d: int = d) -> np.ndarray:
                if mlp_mode == "keep":  # evaluation reads the MLP's output: cut after it
                    return mlp(objective, x)[:, :d]
                if mlp_mode == "train":  # the MLP reads the cut padded with zeros
                    padded = np.concatenate([x[:, :d], np.zeros((len(x), x.shape[1] - d))], axis=1)
                    return mlp(objective, padded)
                return x[:, :d]

            if name == "simcse":  # dropout off: both views are the same vectors
                term = infonce(view(enc["text"]), view(enc["text"]), None)
            else:
                term = infonce(view(enc["anchor"]), view(enc["positive"]), view(enc["negative"]))
        total += w * term
    return total


@pytest.mark.parametrize(
    ("name", "head", "options"),
    [
        ("cosine_regression", "mean", {}),
        ("nli_softmax", "mean", {}),
        ("simcse_sup", "cls", {"mlp": "none"}),
        ("simcse_sup", "cls", {"mlp": "keep"}),
        ("simcse", "cls", {"mlp": "train"}),
        ("simcse", "mean", {"mlp": "none"}),
    ],
)
def test_loss_is_the_weighted_sum_of_the_formula_on_cut_vectors(tiny_model_dirs, name, head, options) -> None:
    embedder = load(tiny_model_dirs["bert"], head).double()
    objective = build_objective(name, embedder, matryoshka=MATRYOSHKA, **options).double().eval()
    with torch.no_grad():
        loss = float(objective(BATCHES[name]))
    expected = by_hand(name, objective, BATCHES[name], options.get("mlp"))
    assert loss == pytest.approx(expected, rel=1e-7)
    plain = build_objective(name, load(tiny_model_dirs["bert"], head).double(), **options).double().eval()
    with torch.no_grad():
        assert abs(loss - float(plain(BATCHES[name]))) > 1e-3  # the cuts add their own terms


def test_nli_softmax_normalised_after_the_cut(tiny_model_dirs) -> None:
    embedder = load(tiny_model_dirs["bert"], normalize=True).double()
    objective = build_objective("nli_softmax", embedder, matryoshka=MATRYOSHKA).double().eval()
    with torch.no_grad():
        loss = float(objective(BATCHES["nli_softmax"]))
    assert loss == pytest.approx(by_hand("nli_softmax", objective, BATCHES["nli_softmax"]), rel=1e-7)


ALL_CASES = {
    **CASES,
    "cosine_regression": ("cosine_regression", "mean", {}),
    "nli_softmax": ("nli_softmax", "mean", {}),
}


def _build(model_dir: Path, case: str, templates: Path, **extra):
    name, head, options = ALL_CASES[case]
    options = {k: (str(templates) if v == "<one-pair>" else v) for k, v in options.items()}
    torch.manual_seed(0)
    embedder = protoembed.load(str(model_dir), head=head)
    return build_objective(name, embedder, **options, **extra)


def _batch(case: str) -> dict:
    if case in ("cosine_regression", "nli_softmax"):
        return BATCHES[case]
    return batch_for(case)


@pytest.fixture()
def one_pair(tmp_path: Path) -> Path:
    return write_one_pair(tmp_path)


@pytest.mark.parametrize("case", list(ALL_CASES))
def test_one_full_size_dim_is_the_plain_objective(tiny_model_dirs, one_pair: Path, case: str) -> None:
    plain = _build(tiny_model_dirs["bert"], case, one_pair).train()
    wrapped = _build(tiny_model_dirs["bert"], case, one_pair, matryoshka={"dims": [32]}).train()
    batch = _batch(case)
    if hasattr(plain, "collate"):  # one draw of ConPVP's templates for both
        batch = plain.collate(batch)
    torch.manual_seed(5)
    expected = plain(batch)
    expected.backward()
    torch.manual_seed(5)  # dropout on: the same masks
    loss = wrapped(batch)
    loss.backward()
    assert loss.item() == expected.item()
    got, ref = gradients(wrapped), gradients(plain)
    assert got.keys() == ref.keys() and len(ref) > 10
    for key in ref:
        assert torch.equal(got[key], ref[key]), key


@pytest.mark.parametrize("case", list(CASES))
def test_grad_cache_equals_the_plain_matryoshka_step(tiny_model_dirs, one_pair: Path, case: str) -> None:
    # float64, dropout off, as tests/test_grad_cache.py compares a cached step with a plain one
    plain = _build(tiny_model_dirs["bert"], case, one_pair, matryoshka=MATRYOSHKA).double().eval()
    cached = twin(plain)
    views = plain.collate(batch_for(case))
    expected = plain(views)
    expected.backward()
    loss = grad_cache_step(cached, views, MINI_BATCH)
    assert len(views) > MINI_BATCH
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert max_relative_difference(gradients(cached), gradients(plain)) < 1e-5


def test_n_dims_per_step_samples_dims_from_the_torch_generator(tiny_model_dirs) -> None:
    embedder = load(tiny_model_dirs["bert"]).double()
    options = {**MATRYOSHKA, "n_dims_per_step": 2}
    objective = build_objective("cosine_regression", embedder, matryoshka=options).double().eval()
    torch.manual_seed(3)
    picked = sorted(torch.randperm(4)[:2].tolist())
    torch.manual_seed(3)
    with torch.no_grad():
        loss = float(objective(BATCHES["cosine_regression"]))
    with torch.no_grad():
        u, v = (
            _np(embedder.encode(BATCHES["cosine_regression"][k], convert_to_tensor=True))
            for k in ("sentence1", "sentence2")
        )
    expected = sum(w * regression(u[:, :d], v[:, :d], SCORES) for d, w in (SORTED[i] for i in picked))
    assert loss == pytest.approx(expected, rel=1e-7)


# ------------------------------------------------------- sentence-transformers' MatryoshkaLoss
def test_supervised_simcse_step_equals_matryoshka_mnrl(tiny_model_dirs, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MatryoshkaLoss, MultipleNegativesRankingLoss

    saved = load(tiny_model_dirs["bert"]).save(tmp_path / "model")
    ours = protoembed.load(str(saved)).double().eval()
    st = SentenceTransformer(str(saved), device="cpu").double().eval()
    # MNRL: cosine x 20 (tau 0.05), cross-entropy over [positives; negatives]; no MLP
    objective = build_objective("simcse_sup", ours, mlp="none", matryoshka=MATRYOSHKA).double().eval()
    loss = objective(BATCHES["simcse_sup"])
    loss.backward()
    st_loss = MatryoshkaLoss(st, MultipleNegativesRankingLoss(st), DIMS, WEIGHTS)(
        [st.preprocess(S1), st.preprocess(S2), st.preprocess(S3)], None
    )
    st_loss.backward()
    assert loss.item() == pytest.approx(st_loss.item(), rel=1e-10)
    a = {k: p.grad for k, p in ours.encoder.auto_model.named_parameters() if p.grad is not None}
    b = {k: p.grad for k, p in st[0].auto_model.named_parameters() if p.grad is not None}
    assert a.keys() == b.keys() and len(a) > 10
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-8, atol=1e-12, msg=key)


# ---------------------------------------------------------------------------- errors
def test_cross_encoder_is_refused_before_torch() -> None:
    code = (
        "import sys\n"
        "from protoembed.objectives import plan_objective\n"
        "try:\n"
        "    plan_objective('cross_encoder', {'matryoshka': {'dims': [8]}})\n"
        "except Exception as err:\n"
        "    print(err)\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [
        "objective 'cross_encoder': option 'matryoshka': cross_encoder compares no embeddings to cut "
        "(Matryoshka training wraps simcse, promptbert, conpvp, cosine_regression, nli_softmax, simcse_sup)",
        "False",
    ]


@pytest.mark.parametrize(
    ("matryoshka", "message"),
    [
        ({"dims": [8, 8]}, "option 'matryoshka': dims must be distinct, got 8 twice in [8, 8]"),
        ({"dims": [8, 0]}, "option 'matryoshka.dims.1': must be at least 1, got 0"),
        ({"dims": []}, "option 'matryoshka.dims': must not be empty, got []"),
        (
            {"dims": [8, 4], "weights": [1]},
            "option 'matryoshka': weights must have one weight per dim: 2 dims [8, 4], 1 weights",
        ),
        ({"dims": [8], "weights": [0]}, "option 'matryoshka.weights.0': must be a positive number, got 0"),
        ({"dim": [8]}, "unknown option 'matryoshka.dim' (known: dims, weights, n_dims_per_step)"),
    ],
)
def test_bad_options_are_one_line(matryoshka: dict, message: str) -> None:
    with pytest.raises(OptionError) as err:
        plan_objective("simcse_sup", {"matryoshka": matryoshka})
    assert str(err.value) == f"objective 'simcse_sup': {message}"


def test_dims_sorted_largest_first_with_their_weights() -> None:
    options = plan_objective("simcse", {"matryoshka": MATRYOSHKA}).options.matryoshka
    assert list(zip(options.dims, options.weights)) == SORTED


def test_dims_above_the_model_size(tiny_model_dirs, tmp_path: Path) -> None:
    from protoembed.training.config import config_from_dict
    from protoembed.training.preflight import check_model

    too_big = {"dims": [64, 16]}
    with pytest.raises(ProtoembedError) as err:  # at build time
        build_objective("simcse", load(tiny_model_dirs["bert"], "cls"), matryoshka=too_big)
    assert str(err.value) == (
        "objective option matryoshka.dims: 64 is above the embedding size of the embedder (head 'cls', "
        "dimension 32): expected dims of at most 32, got [64, 16]"
    )
    model = str(tiny_model_dirs["bert"])
    cfg = config_from_dict(
        {"model": model, "objective": {"name": "simcse", "matryoshka": too_big}, "data": {"corpus": "x.txt"}}
    )
    with pytest.raises(ProtoembedError) as err:  # before torch: the model folder's config.json
        check_model([("", cfg)])
    assert str(err.value) == (
        f"objective option matryoshka.dims: 64 is above the embedding size of base model {model} "
        f"(hidden_size in {Path(model) / 'config.json'}): expected dims of at most 32, got [64, 16]"
    )


# ------------------------------------------------------------------------- what is saved
@pytest.mark.parametrize("mlp_mode", ["keep", "none"])
def test_saved_model_lists_its_dims(tiny_model_dirs, tmp_path: Path, mlp_mode: str) -> None:
    from sentence_transformers import SentenceTransformer

    objective = build_objective(
        "simcse_sup", load(tiny_model_dirs["bert"], "cls"), mlp=mlp_mode, matryoshka=MATRYOSHKA
    )
    objective.save(tmp_path / "m")
    saved = json.loads((tmp_path / "m" / "protoembed.json").read_text(encoding="utf-8"))
    assert saved["matryoshka_dims"] == [32, 16, 8, 4] == read_matryoshka_dims(tmp_path / "m")
    card = (tmp_path / "m" / "README.md").read_text(encoding="utf-8")
    assert (
        "| Matryoshka dimensions | 32, 16, 8, 4 (trained so that the first d dimensions are an embedding) |"
        in card
    )
    # the folder is still a sentence-transformers model, with the vectors protoembed gives
    st = SentenceTransformer(str(tmp_path / "m"), device="cpu", trust_remote_code=mlp_mode == "keep")
    ours = protoembed.load(str(tmp_path / "m"))
    np.testing.assert_allclose(st.encode(S1), ours.encode(S1), rtol=1e-5, atol=1e-6)
    assert ours.matryoshka_dims == [32, 16, 8, 4]  # loaded with them, so saved again with them
    assert read_matryoshka_dims(ours.save(tmp_path / "again")) == [32, 16, 8, 4]
    assert protoembed.load(str(tmp_path / "m"), head="mean").matryoshka_dims is None  # another head
    plain = build_objective("simcse_sup", load(tiny_model_dirs["bert"], "cls"))
    plain.save(tmp_path / "plain")
    assert read_matryoshka_dims(tmp_path / "plain") is None
    assert "Matryoshka" not in (tmp_path / "plain" / "README.md").read_text(encoding="utf-8")
