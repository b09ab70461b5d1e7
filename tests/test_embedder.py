"""Embedder: every head on tiny BERT / ALBERT / RoBERTa, save/load round trips, sentence-transformers interop."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

import protoembed
from protoembed.core.errors import ProtoembedError
from protoembed.model.heads import HEADS

SENTENCES = [
    "a man is playing a guitar .",
    "two dogs are running through a field of grass while the cat sat on the mat .",
    "hello",
    "stocks fell sharply after the report on monday .",
    "a woman is slicing an onion .",
]
PROMPT_HEADS = [name for name, spec in HEADS.items() if spec.uses_template]


@pytest.mark.parametrize("head", list(HEADS))
def test_save_load_round_trip_matches_sentence_transformers(tiny_model_dir, head, tmp_path):
    embedder = protoembed.load(str(tiny_model_dir), head=head)
    vectors = embedder.encode(SENTENCES, batch_size=2)
    assert vectors.shape == (len(SENTENCES), embedder.dimension)
    assert vectors.dtype == np.float32

    saved = embedder.save(tmp_path / "model")
    modules = json.loads((saved / "modules.json").read_text())
    assert [m["idx"] for m in modules] == [0, 1]
    assert modules[0]["path"] == "" and modules[1]["path"].startswith("1_")

    reloaded = protoembed.load(str(saved))
    assert reloaded.head == head
    assert reloaded.encoder.template == embedder.encoder.template
    assert reloaded.encoder.n_soft_prompt == embedder.encoder.n_soft_prompt
    np.testing.assert_array_equal(reloaded.encode(SENTENCES, batch_size=2), vectors)

    # cls/mean/max are sentence-transformers' own modules; other heads import ours (needs trust in ST >= 6).
    st = SentenceTransformer(str(saved), device="cpu", trust_remote_code=head not in ("cls", "mean", "max"))
    assert np.abs(st.encode(SENTENCES, batch_size=3) - vectors).max() <= 1e-5


def test_encode_keeps_input_order(tiny_model_dirs):
    embedder = protoembed.load(str(tiny_model_dirs["bert"]), head="mean")
    batched = embedder.encode(SENTENCES, batch_size=2)
    one_by_one = np.stack([embedder.encode(s) for s in SENTENCES])
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)
    as_tensor = embedder.encode(SENTENCES, convert_to_tensor=True)
    assert isinstance(as_tensor, torch.Tensor) and as_tensor.shape == batched.shape


def test_mean_head_equals_masked_average_of_token_states(tiny_model_dirs):
    embedder = protoembed.load(str(tiny_model_dirs["albert"]), head="mean")
    tok = embedder.tokenizer
    for sentence, vector in zip(SENTENCES, embedder.encode(SENTENCES)):
        ids = tok(sentence, return_tensors="pt")
        with torch.no_grad():
            states = embedder.encoder.auto_model(**ids).last_hidden_state[0]
        np.testing.assert_allclose(vector, states.mean(0).numpy(), atol=1e-5)


def test_cls_and_max_heads_by_hand(tiny_model_dirs):
    path = str(tiny_model_dirs["roberta"])
    cls, mx = protoembed.load(path, head="cls"), protoembed.load(path, head="max")
    ids = cls.tokenizer(SENTENCES[0], return_tensors="pt")
    with torch.no_grad():
        states = cls.encoder.auto_model(**ids).last_hidden_state[0]
    np.testing.assert_allclose(cls.encode(SENTENCES[0]), states[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(mx.encode(SENTENCES[0]), states.max(0).values.numpy(), atol=1e-5)


def test_mask_head_reads_the_rendered_mask_token(tiny_model_dir):
    embedder = protoembed.load(str(tiny_model_dir), head="mask")
    tok = embedder.tokenizer
    ids, masks = embedder.encoder.tokenize_ids(["a man is playing"])
    assert ids[0][masks[0]] == tok.convert_tokens_to_ids(tok.mask_token)
    assert ids[0].count(tok.convert_tokens_to_ids(tok.mask_token)) == 1
    # the full input is [CLS] template-with-sentence [SEP], built from pieces
    with torch.no_grad():
        states = embedder.encoder.auto_model(input_ids=torch.tensor(ids)).last_hidden_state[0]
    np.testing.assert_allclose(embedder.encode("a man is playing"), states[masks[0]].numpy(), atol=1e-5)


def test_roberta_renders_its_own_mask_token(tiny_model_dirs):
    embedder = protoembed.load(str(tiny_model_dirs["roberta"]), head="mask")
    ids, masks = embedder.encoder.tokenize_ids(["a dog"])
    assert embedder.tokenizer.convert_ids_to_tokens(ids[0])[masks[0]] == "<mask>"


def test_prompt_heads_truncate_only_the_sentence(tiny_model_dir):
    long = " ".join(["the quick brown fox jumps over the lazy dog ."] * 30)
    for head in PROMPT_HEADS:
        embedder = protoembed.load(str(tiny_model_dir), head=head, max_seq_length=5)
        tmpl = embedder.encoder._template_ids
        ids, masks = embedder.encoder.tokenize_ids([long, "a man"])
        sentence_ids = embedder.tokenizer(long, add_special_tokens=False)["input_ids"][:5]
        assert ids[0] == [*tmpl.head, *sentence_ids, *tmpl.tail]
        mask_id = embedder.tokenizer.convert_tokens_to_ids(embedder.tokenizer.mask_token)
        assert ids[0][masks[0]] == mask_id and ids[1][masks[1]] == mask_id
        # with no explicit budget the backbone's positions bound the sentence, template kept whole
        unbounded = protoembed.load(str(tiny_model_dir), head=head)
        ids, masks = unbounded.encoder.tokenize_ids([long])
        assert len(ids[0]) == unbounded.encoder.position_budget and ids[0][masks[0]] == mask_id
        assert unbounded.encode(long).shape == (unbounded.dimension,)


def test_plain_heads_truncate_like_sentence_transformers(tiny_model_dirs, tmp_path):
    long = " ".join(["the quick brown fox jumps over the lazy dog ."] * 30)
    embedder = protoembed.load(str(tiny_model_dirs["bert"]), head="mean", max_seq_length=8)
    ids, _ = embedder.encoder.tokenize_ids([long])
    assert len(ids[0]) == 8
    st = SentenceTransformer(str(embedder.save(tmp_path / "m")), device="cpu")
    assert np.abs(st.encode([long]) - embedder.encode([long])).max() <= 1e-5


def test_soft_prompt_overwrites_the_slots_before_the_mask(tiny_model_dirs):
    embedder = protoembed.load(str(tiny_model_dirs["albert"]), head="soft_prompt", n_soft_prompt=3)
    encoder = embedder.encoder
    assert encoder.soft_prompt.shape == (3, encoder.auto_model.get_input_embeddings().embedding_dim)
    assert (
        float(encoder.soft_prompt.detach().min()) >= 0.0 and float(encoder.soft_prompt.detach().max()) < 1.0
    )  # U[0, 1)
    ids, masks = encoder.tokenize_ids(["a man is playing"])
    words = encoder.auto_model.get_input_embeddings()(torch.tensor(ids)).detach().clone()
    words[0, masks[0] - 3 : masks[0]] = encoder.soft_prompt.detach()
    with torch.no_grad():
        states = encoder.auto_model(inputs_embeds=words).last_hidden_state[0]
    np.testing.assert_allclose(embedder.encode("a man is playing"), states[masks[0]].numpy(), atol=1e-5)


def test_soft_prompt_template_initialisation(tiny_model_dirs):
    embedder = protoembed.load(str(tiny_model_dirs["bert"]), head="soft_prompt", soft_prompt_init="template")
    encoder = embedder.encoder
    ids = embedder.tokenizer(encoder.soft_prompt_init_text, add_special_tokens=False)["input_ids"][:4]
    table = encoder.auto_model.get_input_embeddings().weight
    torch.testing.assert_close(encoder.soft_prompt.detach(), table[ids].detach())


def test_user_template_and_reload(tiny_model_dirs, tmp_path):
    template = 'By "<S>" they mean [MASK] .'
    embedder = protoembed.load(str(tiny_model_dirs["bert"]), head="mask", template=template)
    reloaded = protoembed.load(str(embedder.save(tmp_path / "m")))
    assert reloaded.encoder.template == template
    np.testing.assert_array_equal(reloaded.encode(SENTENCES), embedder.encode(SENTENCES))


@pytest.mark.parametrize("head", ["mask", "cls"])
def test_empty_sentence_is_named_or_encoded_on_request_as_the_bare_template(tiny_model_dirs, head):
    """With ``allow_empty`` a blank sentence is the template with nothing in its sentence slot (``[CLS]
    [SEP]`` without a template): the backbone's state at the mask token (``[CLS]``) of that text,
    tokenised whole by the tokenizer and run through the Hugging Face model by hand."""
    embedder = protoembed.load(str(tiny_model_dirs["bert"]), head=head, device="cpu")
    with pytest.raises(ProtoembedError, match=r"index 1\b"):
        embedder.encode(["ok", "   "])
    vectors = embedder.encode(["ok", "   ", ""], allow_empty=True)
    tokenizer = embedder.tokenizer
    template = embedder.encoder.template
    if head == "mask":
        assert template == 'This sentence : "<S>" means [MASK] .'
        text = template.replace("<S>", "").replace("[MASK]", tokenizer.mask_token)
        ids = tokenizer(text)["input_ids"]
        position = ids.index(tokenizer.mask_token_id)
    else:
        assert template is None
        ids, position = [tokenizer.cls_token_id, tokenizer.sep_token_id], 0
    with torch.no_grad():
        states = embedder.encoder.auto_model(input_ids=torch.tensor([ids])).last_hidden_state[0]
    bare = states[position].numpy()
    assert not embedder.normalize
    np.testing.assert_allclose(vectors[1], bare, rtol=0, atol=1e-6)
    np.testing.assert_allclose(vectors[2], bare, rtol=0, atol=1e-6)
    assert np.abs(vectors[0] - bare).max() > 1e-3  # "ok" is not the bare template


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"head": "nope"}, "unknown head 'nope'"),
        ({"head": "mask", "template": "no sentence slot [MASK]"}, "must contain <S>"),
        ({"head": "mask", "template": "only <S> here"}, r"must contain \[MASK\]"),
        ({"head": "cls", "template": "<S> [MASK]"}, "takes no template"),
    ],
)
def test_bad_options_are_one_line_errors(tiny_model_dirs, kwargs, message):
    with pytest.raises(ProtoembedError, match=message) as info:
        protoembed.load(str(tiny_model_dirs["bert"]), **kwargs)
    assert "\n" not in str(info.value)


def test_bad_model_specs(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ProtoembedError, match="neither a Hugging Face model"):
        protoembed.load(str(tmp_path))
    with pytest.raises(ProtoembedError, match="cannot be reached"):
        protoembed.load("some-org/no-such-model-here")
    with pytest.raises(ProtoembedError, match="no such directory"):
        protoembed.load("./missing/dir/../x")


def test_default_model_equals_sentence_transformers():
    from protoembed.model.backbones import default_model_path

    embedder = protoembed.load("default")
    assert embedder.head == "mean" and embedder.normalize
    st = SentenceTransformer(default_model_path(), device="cpu")
    assert np.abs(st.encode(SENTENCES) - embedder.encode(SENTENCES)).max() <= 1e-5


def test_a_new_head_is_its_file_plus_one_registry_line(monkeypatch, tmp_path, tiny_model_dirs):
    """A head written as one module and registered by one HEADS entry loads, encodes, is accepted by a
    training config and listed by --help, with nothing else edited (here: mean pooling times the square
    root of the token count, checked against the mean head)."""
    from protoembed.model.heads import HeadSpec, heads_help
    from protoembed.training.config import config_from_dict

    (tmp_path / "sqrt_head.py").write_text(
        "from sentence_transformers.sentence_transformer.modules.pooling import Pooling\n\n\n"
        "def sqrt_pooler(hidden):\n"
        '    return Pooling(hidden, pooling_mode="mean_sqrt_len_tokens")\n',
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(HEADS, "sqrt", HeadSpec("sqrt", "sqrt_head:sqrt_pooler", "mean times sqrt(tokens)"))
    model = str(tiny_model_dirs["bert"])
    vectors = protoembed.load(model, head="sqrt", device="cpu").encode(SENTENCES)
    means = protoembed.load(model, head="mean", device="cpu").encode(SENTENCES)
    tokenizer = protoembed.load(model, head="mean", device="cpu").tokenizer
    counts = np.array([len(tokenizer(s)["input_ids"]) for s in SENTENCES], dtype=np.float32)
    np.testing.assert_allclose(vectors, means * np.sqrt(counts)[:, None], rtol=1e-5, atol=1e-6)
    cfg = config_from_dict({"head": "sqrt", "objective": "simcse", "data": {"corpus": "x.txt"}})
    assert cfg.head == "sqrt" and "sqrt: mean times sqrt(tokens)" in heads_help()


def test_soft_prompt_rows_are_filled_without_a_device_sync(tiny_model_dirs):
    """A batch mixing anchors (soft prompt) and prototypes (``soft_prompt_rows`` False) of different
    lengths: the slots right before each flagged row's mask hold the soft prompt, every other position its
    word embedding (a loop per row is the reference), the soft prompt gets the gradient of its slots alone,
    and no operator whose output shape depends on the data runs (indexing by a boolean mask, which waits for
    the device to count it)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    embedder = protoembed.load(str(tiny_model_dirs["bert"]), head="soft_prompt", n_soft_prompt=2)
    encoder = embedder.encoder
    ids, masks = encoder.tokenize_ids(["a man is playing a guitar", "the cat", "two dogs run"])
    features = encoder.collate(ids, masks)
    features["soft_prompt_rows"] = torch.tensor([True, False, True])

    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.seen: set[str] = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            indexes = [
                i for a in args if isinstance(a, (list, tuple)) for i in a if isinstance(i, torch.Tensor)
            ]
            if any(i.dtype == torch.bool for i in indexes) or func.__name__.startswith("nonzero"):
                self.seen.add(str(func))
            return func(*args, **(kwargs or {}))

    with Ops() as ops:
        embeds = encoder.input_embeddings(features)
    assert not ops.seen, ops.seen  # the shapes follow from the batch's alone
    words = encoder.auto_model.get_input_embeddings()(features["input_ids"]).detach()
    expected = words.clone()
    for row, flagged in enumerate(features["soft_prompt_rows"].tolist()):
        if flagged:
            mask = int(features["mask_index"][row])
            expected[row, mask - 2 : mask] = encoder.soft_prompt.detach()
    torch.testing.assert_close(embeds.detach(), expected, atol=0, rtol=0)
    embeds.sum().backward()
    torch.testing.assert_close(encoder.soft_prompt.grad, torch.full_like(encoder.soft_prompt, 2.0))  # 2 rows
