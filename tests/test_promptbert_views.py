"""PromptBERT's two views are the token ids the PromptBERT authors' run script builds, per backbone family.

The reference is the script's own recipe (kongds/Prompt-BERT, ``run.sh`` ``unsup-bert`` / ``unsup-roberta``
and ``train.py``'s ``prepare_features``), written out here from its template strings: ``*mask*`` becomes the
mask token, ``*cls*`` / ``*sep+*`` vanish, the text is split at ``*sent_0*`` into a front and a back piece
(``_`` a space; RoBERTa's front piece stripped), the row is ``encode(front)[:-1] + sentence[:32] +
encode(back)[1:]`` with the sentence encoded without special tokens.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import protoembed
from protoembed.inputs.templates import PROMPTBERT_TEMPLATE
from protoembed.objectives import build_objective
from protoembed.objectives.promptbert import AUTHORS_VIEWS, default_second_template
from protoembed.training.config import load_config

REPO = Path(__file__).resolve().parents[1]
#: ``run.sh``: (--mask_embedding_sentence_template, --mask_embedding_sentence_different_template).
RUN_SH = {
    "bert": (
        '*cls*_This_sentence_of_"*sent_0*"_means*mask*.*sep+*',
        '*cls*_This_sentence_:_"*sent_0*"_means*mask*.*sep+*',
    ),
    "roberta": (
        "*cls*_This_sentence_:_'_*sent_0*_'_means*mask*.*sep+*",
        "*cls*_The_sentence_:_'_*sent_0*_'_means*mask*.*sep+*",
    ),
}
#: Each family's configs with PromptBERT (anchor = the config's template, second = objective.second_template).
CONFIGS = {
    "bert": [
        "configs/bert-base-uncased/promptbert.yaml",
        "configs/bert-base-uncased/promptbert-authors.yaml",
        "configs/bert-large-uncased/promptbert.yaml",
        "configs/cpu/promptbert.yaml",
    ],
    "roberta": [
        "configs/roberta-base/promptbert.yaml",
        "configs/roberta-base/promptbert-authors.yaml",
        "configs/roberta-large/promptbert.yaml",
    ],
}
SENTENCES = [
    "A man is playing a guitar.",
    "two dogs are running through a field, aren't they?",
    " ".join(["the quick brown fox jumps over the lazy dog"] * 6),  # over 32 tokens: truncated
]
MAX_LEN = 32


def authors_row(tokenizer, template: str, sentence: str, family: str) -> list[int]:
    """The script's input ids of ``sentence`` in ``template`` (its own string syntax)."""
    text = (
        template.replace("*mask*", tokenizer.mask_token)
        .replace("*sep+*", "")
        .replace("*cls*", "")
        .replace("*sent_0*", " ")
    )
    front, back = (piece.replace("_", " ") for piece in text.split(" "))
    if family == "roberta":
        front = front.strip()
    sentence_ids = tokenizer.encode(sentence, add_special_tokens=False)[:MAX_LEN]
    return tokenizer.encode(front)[:-1] + sentence_ids + tokenizer.encode(back)[1:]


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_views_are_the_authors_ids(tiny_model_dirs, family):
    anchor, second = AUTHORS_VIEWS[family]
    embedder = protoembed.load(str(tiny_model_dirs[family]), head="mask", template=anchor, device="cpu")
    objective = build_objective("promptbert", embedder, max_seq_length=MAX_LEN, denoise=True)
    assert objective.second_template == second  # the default second view of the authors' anchor
    rows, n, _ = objective.build_rows(SENTENCES)
    tokenizer = embedder.tokenizer
    first_ref, second_ref = RUN_SH[family]
    assert n == len(SENTENCES)
    assert rows.ids[:n] == [authors_row(tokenizer, first_ref, s, family) for s in SENTENCES]
    assert rows.ids[n : 2 * n] == [authors_row(tokenizer, second_ref, s, family) for s in SENTENCES]
    # evaluation reads the anchor: the embedder's own rows are the first view (whole sentences here)
    ids, _ = embedder.encoder.tokenize_ids(SENTENCES[:2])
    assert ids == [authors_row(tokenizer, first_ref, s, family) for s in SENTENCES[:2]]


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_configs_use_the_authors_views(family):
    for path in CONFIGS[family]:
        cfg = load_config(REPO / path)
        assert (cfg.template, cfg.objective.options["second_template"]) == AUTHORS_VIEWS[family], path
    authors = load_config(REPO / CONFIGS[family][1]).training
    assert (authors.batch_size, authors.lr, authors.epochs, authors.eval_steps) == (256, 1e-5, 1, 125)
    assert authors.precision == "fp16"
    assert load_config(REPO / CONFIGS[family][1]).max_seq_length == MAX_LEN
    assert load_config(REPO / CONFIGS[family][1]).objective.options["denoise"] is True


def test_default_second_view_is_the_other_template_of_the_pair():
    bert_anchor, bert_second = AUTHORS_VIEWS["bert"]
    assert default_second_template(bert_anchor, "bert") == bert_second
    # the mask head's default template is the authors' BERT second view: the anchor becomes the other one
    assert default_second_template(PROMPTBERT_TEMPLATE, "bert") == bert_anchor
    assert default_second_template(PROMPTBERT_TEMPLATE, "roberta") == AUTHORS_VIEWS["roberta"][1]


def test_conpvp_manual_keeps_the_searched_template():
    # ConPVP's `w/ manual` ablation: the mask head's default, PromptBERT's best BERT template
    assert PROMPTBERT_TEMPLATE == 'This sentence : "<S>" means [MASK] .'
    for backbone in ("bert-base-uncased", "bert-large-uncased", "roberta-base", "roberta-large", "cpu"):
        cfg = load_config(REPO / "configs" / backbone / "conpvp-manual.yaml")
        assert cfg.template is None and cfg.head == "mask"
