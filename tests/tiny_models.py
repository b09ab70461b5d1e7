"""Tiny random BERT / ALBERT / RoBERTa backbones with tokenizers trained on a little text.

Hub downloads are impossible here, so tests build their own: a ``tokenizers`` tokenizer of the right
kind (WordPiece / SentencePiece-Unigram / byte-level BPE) trained on :data:`CORPUS`, wrapped in the
matching ``transformers`` tokenizer class, and a 2-layer model with random weights, saved to a folder
that ``protoembed.load`` reads like any Hugging Face model directory.

The trained tokenizers are kept in ``tests/tiny_tokenizers/<kind>.json`` (``python tests/tiny_models.py``
trains and writes them again): the WordPiece and Unigram trainers break ties between equally frequent
pieces in a per-process hash order, so a tokenizer trained in each session would give every session
another vocabulary, and with the seeded weights another model.
"""

from __future__ import annotations

from pathlib import Path

CORPUS = [
    "a man is playing a guitar .",
    "a woman is slicing an onion .",
    "the quick brown fox jumps over the lazy dog .",
    "this sentence : means something . is this review positive ? negative news topic article",
    "given , we assume that in summary they mean without inconsistent with totally different from",
    "which does not denote is not a one belongs to a definitely about the of",
    "two dogs are running through a field of grass .",
    "a child is riding a horse while people watch the game .",
    "stocks fell sharply after the report on monday .",
    "the cat sat on the mat and looked out of the window .",
    'this sentence : " a dog " means [MASK] . by " it " they mean <mask> .',
] * 20

#: The trained tokenizers, one ``tokenizer.json`` per kind (see the module docstring).
TOKENIZERS = Path(__file__).resolve().parent / "tiny_tokenizers"
#: Each kind's special tokens, role -> token, in the order the trainer gives them their ids.
SPECIALS = {
    "bert": {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"},
    "albert": {"pad": "<pad>", "unk": "<unk>", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"},
    "roberta": {"bos": "<s>", "pad": "<pad>", "eos": "</s>", "unk": "<unk>", "mask": "<mask>"},
}
KINDS = tuple(SPECIALS)


def build_tiny_model(kind: str, path: Path, hidden: int = 32, layers: int = 2, seed: int = 0) -> Path:
    """Create a tiny random ``kind`` model + tokenizer in ``path`` and return ``path``."""
    import torch
    from transformers import (
        AlbertConfig,
        AlbertModel,
        AlbertTokenizerFast,
        BertConfig,
        BertModel,
        BertTokenizerFast,
        RobertaConfig,
        RobertaModel,
        RobertaTokenizerFast,
    )

    torch.manual_seed(seed)
    common = dict(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=128,
    )
    if kind == "bert":
        tokenizer = _wrap(BertTokenizerFast, kind)
        model = BertModel(BertConfig(vocab_size=len(tokenizer), **common), add_pooling_layer=False)
    elif kind == "albert":
        tokenizer = _wrap(AlbertTokenizerFast, kind)
        config = AlbertConfig(vocab_size=len(tokenizer), embedding_size=16, pad_token_id=0, **common)
        model = AlbertModel(config, add_pooling_layer=False)
    elif kind == "roberta":
        tokenizer = _wrap(RobertaTokenizerFast, kind, cls="<s>", sep="</s>")
        config = RobertaConfig(
            vocab_size=len(tokenizer), pad_token_id=1, **{**common, "max_position_embeddings": 130}
        )
        model = RobertaModel(config, add_pooling_layer=False)
    else:
        raise ValueError(f"unknown kind {kind!r}")
    from protoembed.model.backbones import quiet_transformers

    path.mkdir(parents=True, exist_ok=True)
    with quiet_transformers():  # no shard-writing bar in the test output
        tokenizer.save_pretrained(str(path))
        model.save_pretrained(str(path))
    return path


def _wrap(tokenizer_class, kind: str, **roles: str):
    """A ``transformers`` tokenizer around the kept trained tokenizer of ``kind`` (:data:`TOKENIZERS`), its
    :data:`SPECIALS` and any further ``roles`` (role -> token) named."""
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(TOKENIZERS / f"{kind}.json"))
    named = {**SPECIALS[kind], **roles}
    return tokenizer_class(tokenizer_object=raw, **{f"{role}_token": t for role, t in named.items()})


def train_tokenizer(kind: str):
    """A ``tokenizers.Tokenizer`` of ``kind`` trained on :data:`CORPUS`, with its post-processor: WordPiece
    (300 pieces, lower-cased), SentencePiece-Unigram (200) or byte-level BPE (400)."""
    from tokenizers import BertWordPieceTokenizer, ByteLevelBPETokenizer, SentencePieceUnigramTokenizer
    from tokenizers.processors import RobertaProcessing, TemplateProcessing

    if kind not in SPECIALS:
        raise ValueError(f"unknown kind {kind!r}")
    specials = list(SPECIALS[kind].values())
    if kind == "bert":
        raw = BertWordPieceTokenizer(lowercase=True)
        raw.train_from_iterator(CORPUS, vocab_size=300, special_tokens=specials)
    elif kind == "albert":
        raw = SentencePieceUnigramTokenizer()
        raw.train_from_iterator(CORPUS, vocab_size=200, special_tokens=specials, unk_token="<unk>")
        raw._tokenizer.post_processor = TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
        )
    else:
        raw = ByteLevelBPETokenizer()
        raw.train_from_iterator(CORPUS, vocab_size=400, special_tokens=specials)
        raw._tokenizer.post_processor = RobertaProcessing(("</s>", 2), ("<s>", 0))
    return raw._tokenizer


if __name__ == "__main__":  # train the tokenizers again and keep them
    TOKENIZERS.mkdir(exist_ok=True)
    for name in KINDS:
        train_tokenizer(name).save(str(TOKENIZERS / f"{name}.json"))


def specials_only_mean(path: Path):
    """What an empty sentence encodes to with ``allow_empty`` and head ``mean`` (documented: the bare
    ``[CLS] [SEP]``), computed with ``transformers`` alone: the backbone on those two tokens, their states
    averaged. A float32 numpy vector."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from protoembed.model.backbones import quiet_transformers

    with quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        model = AutoModel.from_pretrained(str(path)).eval()
    with torch.no_grad():
        states = model(input_ids=torch.tensor([[tokenizer.cls_token_id, tokenizer.sep_token_id]]))
    return states.last_hidden_state[0].mean(0).numpy()


def without_dropout(path: Path, copy: Path) -> Path:
    """A copy of the tiny model in ``path`` with dropout probabilities 0, so that a training step's loss is
    the evaluation-mode loss of its batch (computable in a test from the initial weights)."""
    import json
    import shutil

    shutil.copytree(path, copy)
    config = json.loads((copy / "config.json").read_text(encoding="utf-8"))
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout_prob"):
        if key in config:
            config[key] = 0.0
    (copy / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return copy
