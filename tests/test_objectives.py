"""Objectives: each loss against an independent computation of its formula, gradients, one forward, errors.

The independent computations encode every view separately with the evaluation path of the embedder
(``Embedder.encode`` / ``PromptEncoder`` features, dropout off) and evaluate the paper's equations with
explicit float64 loops, so they share no code with the objectives' batching or loss.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

import protoembed
from protoembed.core.errors import ProtoembedError
from protoembed.inputs.template_sets import template_set
from protoembed.inputs.templates import Template, tokenize_template
from protoembed.model.loading import build
from protoembed.objectives import REGISTRY, build_objective

SENTENCES = [
    "a man is playing a guitar .",
    "the cat sat on the mat and looked out of the window .",
    "two dogs are running through a field of grass .",
    "stocks fell sharply after the report on monday .",
]
TAU = 0.05


# ------------------------------------------------------------------ independent formulas
def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def eq1(v, c_pos, c_neg, tau: float = TAU) -> float:
    """ConPVP Eq. 1 with loops: -log(e^{s(v_i,c+_i)/t} / sum_k (e^{s(v_i,c+_k)/t} + e^{s(v_i,c-_k)/t}))."""
    v, c_pos = np.asarray(v, np.float64), np.asarray(c_pos, np.float64)
    c_neg = None if c_neg is None else np.asarray(c_neg, np.float64)
    total = 0.0
    for i in range(len(v)):
        numerator = math.exp(_cos(v[i], c_pos[i]) / tau)
        denominator = 0.0
        for k in range(len(v)):
            denominator += math.exp(_cos(v[i], c_pos[k]) / tau)
            if c_neg is not None:
                denominator += math.exp(_cos(v[i], c_neg[k]) / tau)
        total += -math.log(numerator / denominator)
    return total / len(v)


def _np(x: torch.Tensor) -> np.ndarray:
    return x.detach().double().cpu().numpy()


def mask_states(embedder, template: str, sentences: list[str]) -> torch.Tensor:
    """[MASK] states of ``sentences`` in ``template`` via a separate mask-head embedder (same backbone)."""
    enc = embedder.encoder
    other = build(enc.auto_model, enc.tokenizer, "mask", template=template, max_seq_length=enc.max_seq_length)
    # eval() first: a new module is in train mode, and encode() restores that mode on the shared backbone
    return other.eval().encode(sentences, convert_to_tensor=True)


def per_sentence(embedder, templates: list[str], sentences: list[str]) -> torch.Tensor:
    return torch.cat([mask_states(embedder, t, [s]) for t, s in zip(templates, sentences)])


def encoder_mask_state(encoder, sentences, template_text: str | None, template_only: bool) -> torch.Tensor:
    """[MASK] state through ``encoder`` (its own template when ``template_text`` is None); optionally with
    the sentence tokens and the row's first and last tokens ([CLS], [SEP]) masked out of attention, so
    that only the template attends (ConPVP code denoising)."""
    if template_text is None:
        ids, masks = encoder.tokenize_ids(sentences)
        head = len(
            tokenize_template(Template(encoder.template), encoder.tokenizer, encoder.n_soft_prompt).head
        )
    else:
        tpl = tokenize_template(Template(template_text), encoder.tokenizer)
        head = len(tpl.head)
        built = [tpl.build(encoder.tokenizer(s, add_special_tokens=False)["input_ids"]) for s in sentences]
        ids, masks = [b[0] for b in built], [b[1] for b in built]
    features = encoder.collate(ids, masks)
    if template_text is not None and encoder.soft_prompt is not None:  # a discrete prototype: no soft prompt
        features["soft_prompt_rows"] = torch.zeros(len(sentences), dtype=torch.bool)
    if template_only:
        for row, sentence in enumerate(sentences):
            length = len(encoder.tokenizer(sentence, add_special_tokens=False)["input_ids"])
            features["attention_mask"][row, head : head + length] = 0
            features["attention_mask"][row, 0] = 0  # [CLS]
            features["attention_mask"][row, len(ids[row]) - 1] = 0  # [SEP]
    with torch.no_grad():
        states = encoder(features)["token_embeddings"]
    return states[torch.arange(len(sentences)), features["mask_index"]]


def load(tiny_dir: Path, head: str):
    torch.manual_seed(0)
    return protoembed.load(str(tiny_dir), head=head)


@pytest.fixture()
def bert_dir(tiny_model_dirs) -> Path:
    return tiny_model_dirs["bert"]


@pytest.fixture()
def one_pair_file(tmp_path: Path) -> Path:
    path = tmp_path / "one.txt"
    path.write_text(
        '[positive]\nThis sentence : "<S>" means [MASK] .\n[negative]\n"<S>" is not a [MASK] one\n',
        encoding="utf-8",
    )
    return path


# ---------------------------------------------------------------------------- ConPVP
def test_conpvp_matches_eq1(tiny_model_dir: Path) -> None:
    embedder = load(tiny_model_dir, "soft_prompt")
    objective = build_objective("conpvp", embedder, templates="paper", seed=3).eval()
    with torch.no_grad():
        loss = objective(SENTENCES)
    positives = [p for p, _ in objective.last_templates]
    negatives = [q for _, q in objective.last_templates]
    paper_pos, paper_neg = template_set("paper")
    assert set(positives) <= {t.text for t in paper_pos} and set(negatives) <= {t.text for t in paper_neg}
    with torch.no_grad():
        v = objective.mlp(embedder.encode(SENTENCES, convert_to_tensor=True))
        c_pos = objective.mlp(per_sentence(embedder, positives, SENTENCES))
        c_neg = objective.mlp(per_sentence(embedder, negatives, SENTENCES))
    expected = eq1(_np(v), _np(c_pos), _np(c_neg))
    assert float(loss) == pytest.approx(expected, rel=1e-4, abs=1e-4)


def test_conpvp_ablations_match_their_formulas(bert_dir: Path, one_pair_file: Path) -> None:
    embedder = load(bert_dir, "soft_prompt")
    pos_text = 'This sentence : "<S>" means [MASK] .'
    with torch.no_grad():
        v = _np(embedder.encode(SENTENCES, convert_to_tensor=True))
        c_pos = _np(mask_states(embedder, pos_text, SENTENCES))
        no_neg = build_objective(
            "conpvp", embedder, templates=str(one_pair_file), negative_prototypes=False, mlp="none"
        ).eval()
        assert float(no_neg(SENTENCES)) == pytest.approx(eq1(v, c_pos, None), rel=1e-4)
        no_proto = build_objective("conpvp", embedder, prototypes=False, mlp="none").eval()
        assert float(no_proto(SENTENCES)) == pytest.approx(
            eq1(v, v, None), rel=1e-4
        )  # dropout off: views equal

    manual = load(bert_dir, "mask")  # PromptBERT's template as the anchor
    objective = build_objective("conpvp", manual, anchor="manual", templates=str(one_pair_file), mlp="none")
    with torch.no_grad():
        loss = objective.eval()(SENTENCES)
        v = _np(manual.encode(SENTENCES, convert_to_tensor=True))
        c_pos = _np(mask_states(manual, pos_text, SENTENCES))
        c_neg = _np(mask_states(manual, '"<S>" is not a [MASK] one', SENTENCES))
    assert float(loss) == pytest.approx(eq1(v, c_pos, c_neg), rel=1e-4)


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_conpvp_attention_mask_denoising(tiny_model_dirs, kind: str, one_pair_file: Path) -> None:
    embedder = load(tiny_model_dirs[kind], "soft_prompt")
    objective = build_objective(
        "conpvp", embedder, templates=str(one_pair_file), denoise="attention_mask", mlp="none"
    ).eval()
    with torch.no_grad():
        loss = objective(SENTENCES)
    enc = embedder.encoder
    views = []
    for text in (None, 'This sentence : "<S>" means [MASK] .', '"<S>" is not a [MASK] one'):
        full = encoder_mask_state(enc, SENTENCES, text, template_only=False)
        alone = encoder_mask_state(enc, SENTENCES, text, template_only=True)
        views.append(_np(full - alone))
    assert float(loss) == pytest.approx(eq1(*views), rel=1e-4)


def test_anchor_rows_are_the_evaluation_input(tiny_model_dir: Path) -> None:
    embedder = protoembed.load(str(tiny_model_dir), head="soft_prompt", max_seq_length=3)
    objective = build_objective("conpvp", embedder)
    rows = objective.views.wrap(objective.anchor, objective.views.sentence_ids(SENTENCES), soft=True)
    ids, masks = embedder.encoder.tokenize_ids(SENTENCES)
    assert rows.ids == ids and rows.mask_index == masks


def test_template_draws_are_seeded_and_resumable(bert_dir: Path) -> None:
    embedder = load(bert_dir, "soft_prompt")
    a = build_objective("conpvp", embedder, seed=7).eval()
    b = build_objective("conpvp", embedder, seed=7).eval()
    with torch.no_grad():
        a(SENTENCES)
        b(SENTENCES)
        assert a.last_templates == b.last_templates
        state = a.state_dict()
        a(SENTENCES)
        c = build_objective("conpvp", embedder, seed=99).eval()
        c.load_state_dict(state)
        c(SENTENCES)
    assert c.last_templates == a.last_templates
    draws = a.draw(4000, 8)
    assert sorted(set(draws)) == list(range(8)) and max(np.bincount(draws)) < 600  # roughly uniform


# ------------------------------------------------------------------- SimCSE / PromptBERT
@pytest.mark.parametrize("head", ["cls", "mean", "mask"])
def test_simcse_matches_infonce(bert_dir: Path, head: str) -> None:
    embedder = load(bert_dir, head)
    objective = build_objective("simcse", embedder).eval()
    with torch.no_grad():
        loss = objective(SENTENCES)
        z = _np(objective.mlp(embedder.encode(SENTENCES, convert_to_tensor=True)))
    assert float(loss) == pytest.approx(eq1(z, z, None), rel=1e-4)  # dropout off: the two views coincide


def _default_positions(model, ids: torch.Tensor) -> torch.Tensor:
    embeddings = model.embeddings
    if hasattr(embeddings, "create_position_ids_from_input_ids"):  # RoBERTa: from padding_idx + 1
        return embeddings.create_position_ids_from_input_ids(ids, embeddings.padding_idx)
    return torch.arange(ids.size(1)).unsqueeze(0)


def _template_alone_state(encoder, template_text: str, sentence: str) -> torch.Tensor:
    """[MASK] state of the template without the sentence, positions as in the full input minus the sentence."""
    tpl = tokenize_template(Template(template_text), encoder.tokenizer)
    sentence_ids = encoder.tokenizer(sentence, add_special_tokens=False)["input_ids"]
    full, _ = tpl.build(sentence_ids)
    positions = _default_positions(encoder.auto_model, torch.tensor([full]))[0].tolist()
    head, s = len(tpl.head), len(sentence_ids)
    alone, mask = tpl.build([])
    kept = positions[:head] + positions[head + s :]
    with torch.no_grad():
        ids = torch.tensor([alone])  # with its attention mask: without one, transformers reads a jump in
        # position_ids as the start of another packed sequence and masks across it
        out = encoder.auto_model(
            input_ids=ids, attention_mask=torch.ones_like(ids), position_ids=torch.tensor([kept])
        ).last_hidden_state
    return out[0, mask]


@pytest.mark.parametrize("kind", ["bert", "roberta"])
@pytest.mark.parametrize("denoise", [False, True])
def test_promptbert_matches_infonce(tiny_model_dirs, kind: str, denoise: bool) -> None:
    embedder = load(tiny_model_dirs[kind], "mask")
    objective = build_objective("promptbert", embedder, denoise=denoise).eval()
    with torch.no_grad():
        loss = objective(SENTENCES)
        h1 = embedder.encode(SENTENCES, convert_to_tensor=True)
        second = objective.second_template  # the other template of the authors' pair for the family
        h2 = mask_states(embedder, second, SENTENCES)
        if denoise:
            enc = embedder.encoder
            h1 = h1 - torch.stack([_template_alone_state(enc, enc.template, s) for s in SENTENCES])
            h2 = h2 - torch.stack([_template_alone_state(enc, second, s) for s in SENTENCES])
        z1, z2 = _np(objective.mlp(h1)), _np(objective.mlp(h2))
    assert float(loss) == pytest.approx(eq1(z1, z2, None), rel=1e-4, abs=1e-6)  # float32 sums near 0


# ------------------------------------------------------------------ gradients, one forward
def test_gradients_reach_soft_prompt_backbone_and_mlp(bert_dir: Path) -> None:
    embedder = load(bert_dir, "soft_prompt")
    objective = build_objective("conpvp", embedder, denoise="attention_mask").train()
    objective(SENTENCES).backward()
    model = embedder.encoder.auto_model
    grads = {
        "soft_prompt": embedder.encoder.soft_prompt.grad,
        "word_embeddings": model.get_input_embeddings().weight.grad,
        "first_layer": next(model.encoder.layer[0].parameters()).grad,
        "last_layer": next(model.encoder.layer[-1].parameters()).grad,
        "mlp": objective.mlp.dense.weight.grad,
    }
    for name, grad in grads.items():
        assert grad is not None and grad.abs().sum() > 0, name


@pytest.mark.parametrize(
    ("name", "head", "options", "rows"),
    [
        ("conpvp", "soft_prompt", {}, 3),
        ("conpvp", "soft_prompt", {"denoise": "attention_mask"}, 6),
        ("conpvp", "soft_prompt", {"negative_prototypes": False}, 2),
        ("conpvp", "soft_prompt", {"prototypes": False}, 2),
        ("conpvp", "mask", {"anchor": "manual"}, 3),
        ("simcse", "cls", {}, 2),
        ("promptbert", "mask", {"denoise": False}, 2),
    ],
)
def test_views_in_one_forward_or_a_block_each(
    bert_dir: Path, name: str, head: str, options: dict, rows: int
) -> None:
    """``joint``: every view in one forward; ``column``: a forward per view of ``n`` rows."""
    embedder = load(bert_dir, head)
    objective = build_objective(name, embedder, **options).train()
    calls: list[int] = []
    handle = embedder.encoder.auto_model.register_forward_hook(
        lambda module, args, kwargs, out: calls.append(out.last_hidden_state.size(0)), with_kwargs=True
    )
    try:
        objective.views.padding = "joint"
        objective(SENTENCES).backward()
        assert calls == [rows * len(SENTENCES)]
        calls.clear()
        objective.views.padding = "column"
        objective(SENTENCES).backward()
        assert calls == [len(SENTENCES)] * rows
    finally:
        handle.remove()


def test_promptbert_denoise_is_one_forward_joint(bert_dir: Path) -> None:
    embedder = load(bert_dir, "mask")
    objective = build_objective("promptbert", embedder, denoise=True).train()
    objective.views.padding = "joint"
    calls: list[int] = []
    handle = embedder.encoder.auto_model.register_forward_hook(lambda m, a, out: calls.append(1))
    try:
        objective(SENTENCES)
    finally:
        handle.remove()
    assert calls == [1]


# ----------------------------------------------------------------- evaluation model
def test_eval_embedder_drops_or_keeps_the_mlp(bert_dir: Path, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    embedder = load(bert_dir, "soft_prompt")
    assert build_objective("conpvp", embedder).eval_embedder() is embedder
    assert build_objective("conpvp", embedder, mlp="none").mlp is None
    objective = build_objective("conpvp", embedder, mlp="keep")
    kept = objective.eval_embedder()
    with torch.no_grad():
        expected = objective.mlp(embedder.encode(SENTENCES, convert_to_tensor=True)).numpy()
    np.testing.assert_allclose(kept.encode(SENTENCES), expected, atol=1e-5)
    path = kept.save(tmp_path / "kept")
    np.testing.assert_allclose(protoembed.load(str(path)).encode(SENTENCES), expected, atol=1e-5)
    st = SentenceTransformer(str(path), device="cpu", trust_remote_code=True)
    np.testing.assert_allclose(st.encode(SENTENCES), expected, atol=1e-5)
    assert objective.config()["mlp"] == "keep" and objective.config()["objective"] == "conpvp"


# ----------------------------------------------------------------------------- errors
def test_template_sets(tmp_path: Path) -> None:
    paper_pos, paper_neg = template_set("paper")
    official_pos, official_neg = template_set("official")
    assert (len(paper_pos), len(paper_neg), len(official_pos), len(official_neg)) == (8, 8, 9, 8)
    assert '" <S> " , is related to " [MASK] "' in {t.text for t in official_pos}
    assert any("inconsistent to" in t.text for t in official_neg)
    assert any("not means" in t.text for t in official_neg)
    bad = tmp_path / "bad.txt"
    bad.write_text("[positive]\n# fine\nBy <S> they mean [MASK] .\n[negative]\nno sentence slot [MASK]\n")
    with pytest.raises(ProtoembedError, match=rf"{bad}:5"):
        template_set(str(bad))
    no_section = tmp_path / "flat.txt"
    no_section.write_text("By <S> they mean [MASK] .\n")
    with pytest.raises(ProtoembedError, match=rf"{no_section}:1"):
        template_set(str(no_section))
    only_pos = tmp_path / "pos.txt"
    only_pos.write_text("[positive]\nBy <S> they mean [MASK] .\n")
    with pytest.raises(ProtoembedError, match="no negative templates"):
        template_set(str(only_pos))
    with pytest.raises(ProtoembedError, match="nonexistent"):
        template_set("nonexistent")


def test_option_errors(bert_dir: Path) -> None:
    soft = load(bert_dir, "soft_prompt")
    cls = load(bert_dir, "cls")
    for name in REGISTRY:  # every registered objective names itself and the unknown option
        with pytest.raises(
            ProtoembedError, match=rf"^objective '{name}': unknown option 'temprature' \(known: "
        ):
            build_objective(name, soft, temprature=0.1)
    cases = [
        (lambda: build_objective("nope", soft), "unknown objective 'nope'"),
        (lambda: build_objective("conpvp", soft, temprature=0.1), "unknown option 'temprature'"),
        (lambda: build_objective("simcse", cls, denoise=True), "unknown option 'denoise'"),
        (lambda: build_objective("conpvp", soft, denoise="position"), "denoise"),
        (lambda: build_objective("conpvp", soft, mlp="always"), "mlp"),
        (
            lambda: build_objective("conpvp", soft, prototypes="no"),
            "option 'prototypes': expected true or false",
        ),
        (
            lambda: build_objective("simcse", cls, temperature=-1.0),
            "option 'temperature': must be a positive number",
        ),
        (lambda: build_objective("conpvp", cls), "needs head 'soft_prompt'"),
        (lambda: build_objective("conpvp", soft, anchor="manual"), "needs head 'mask'"),
        (lambda: build_objective("promptbert", soft), "needs head 'mask'"),
        (lambda: build_objective("promptbert", load(bert_dir, "mask"), second_template="x"), "<S>"),
        (lambda: build_objective("conpvp", soft, templates="/no/such/file"), "no such file"),
        (lambda: build_objective("conpvp", soft)(["fine .", "   "]), "no tokens"),
    ]
    for make, message in cases:
        with pytest.raises(ProtoembedError, match=message):
            make()


# ------------------------------------------------------------- one input path, one position rule
def test_objective_owns_the_truncation_of_training_inputs(bert_dir: Path) -> None:
    embedder = load(bert_dir, "soft_prompt")
    assert embedder.encoder.max_seq_length is None
    objective = build_objective("conpvp", embedder, max_seq_length=2)
    rows = objective.views.wrap(objective.anchor, objective.views.sentence_ids(SENTENCES), soft=True)
    assert [length for _, length in rows.span] == [2] * len(SENTENCES)
    assert embedder.encoder.max_seq_length is None  # evaluation still reads whole sentences
    full, _ = embedder.encoder.tokenize_ids(SENTENCES)
    assert all(
        len(a) - len(b) == len(s) - 2
        for a, b, s in zip(full, rows.ids, objective.views.sentence_ids(SENTENCES))
    )


def test_position_offset_is_one_rule_for_encoder_and_views(tiny_model_dirs) -> None:
    """A CamemBERT-like model (model type without "roberta", position embeddings with a padding index)
    numbers positions from padding_idx + 1: the encoder's length budget and the views' explicit position
    ids follow the model's own ``create_position_ids_from_input_ids``."""
    from transformers import AutoTokenizer, CamembertConfig, CamembertModel

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dirs["roberta"]))
    torch.manual_seed(0)
    config = CamembertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=40,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = CamembertModel(config, add_pooling_layer=False).eval()
    embeddings = model.embeddings
    embedder = build(model, tokenizer, "mask")
    encoder = embedder.encoder
    assert encoder.position_offset == embeddings.padding_idx + 1 == tokenizer.pad_token_id + 1
    assert encoder.position_budget == 40 - encoder.position_offset
    long = " ".join(["a man is playing a guitar ."] * 20)
    ids, _ = encoder.tokenize_ids([long])
    assert len(ids[0]) == encoder.position_budget
    assert embedder.encode([long]).shape == (1, 32)  # the longest row fits the position embeddings

    objective = build_objective("promptbert", embedder, denoise=False, mlp="none").eval()
    views = objective.views
    rows = views.wrap(views.anchor_template, views.sentence_ids([long, *SENTENCES]))
    rows.positions[0] = [views.position_offset + p for p in range(len(rows.ids[0]))]  # explicit positions
    features = views.collate(rows, torch.device("cpu"))
    own = embeddings.create_position_ids_from_input_ids(features["input_ids"], embeddings.padding_idx)
    real = features["attention_mask"].bool()
    assert torch.equal(features["position_ids"][real], own[real])
    with torch.no_grad():
        explicit = encoder(dict(features))["token_embeddings"]
        implicit = encoder({k: v for k, v in features.items() if k != "position_ids"})["token_embeddings"]
    torch.testing.assert_close(explicit[real], implicit[real])
