"""Templates: discrete prompts with a sentence slot ``<S>`` and a ``[MASK]`` slot.

A template such as ``This sentence : "<S>" means [MASK] .`` (PromptBERT; ConPVP Table 1) is split
around ``<S>`` into a prefix and a suffix, each losing ONE joining space next to ``<S>`` (a second space is
kept: byte-level BPE tokenizers such as RoBERTa's read it, ``'<S>  ' means`` ends the sentence with
`` ' means``). Tokenising replaces ``[MASK]`` with the backbone's own mask
token (``[MASK]`` for BERT/ALBERT, ``<mask>`` for RoBERTa). Prefix and suffix are tokenised once and
the sentence's tokens are placed between them, so truncation only ever shortens the sentence.

Soft-prompt slots (ConPVP Sec. 3, "continuous prompt"): ``n_soft`` placeholder positions inserted right
before the mask token; the encoder overwrites their input embeddings with trainable vectors.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from protoembed.core.errors import ProtoembedError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

SENTENCE_SLOT = "<S>"
MASK_SLOT = "[MASK]"

#: PromptBERT's best template for BERT (Jiang et al. 2022): the mask head's default, ConPVP's ``w/ manual``.
PROMPTBERT_TEMPLATE = 'This sentence : "<S>" means [MASK] .'
#: The other template of the PromptBERT authors' BERT pair (their anchor and evaluation template; see
#: :data:`protoembed.objectives.promptbert.AUTHORS_VIEWS`).
PROMPTBERT_SECOND_TEMPLATE = 'This sentence of "<S>" means [MASK] .'
#: The soft-prompt anchor of the ConPVP authors' code: ``[CLS] sentence P P P P [MASK] . [SEP]``.
SOFT_PROMPT_TEMPLATE = "<S> [MASK] ."


@dataclass(frozen=True)
class Template:
    """A discrete template with exactly one ``<S>`` and one ``[MASK]``.

    Args:
        text: the template, e.g. ``'This sentence : "<S>" means [MASK] .'``.
        source: where it came from (file:line), used in error messages.
    """

    text: str
    source: str = ""

    def __post_init__(self) -> None:
        where = f"{self.source}: " if self.source else ""
        for slot in (SENTENCE_SLOT, MASK_SLOT):
            count = self.text.count(slot)
            if count != 1:
                raise ProtoembedError(
                    f"{where}template {self.text!r} must contain {slot} exactly once (found {count})"
                )

    @cached_property
    def prefix(self) -> str:
        """Text before ``<S>`` (may contain ``[MASK]``) without one joining space."""
        return self.text.split(SENTENCE_SLOT)[0].removesuffix(" ")

    @cached_property
    def suffix(self) -> str:
        """Text after ``<S>`` (may contain ``[MASK]``) without one joining space."""
        return self.text.split(SENTENCE_SLOT)[1].removeprefix(" ")


@dataclass(frozen=True)
class TemplateIds:
    """A template tokenised for one tokenizer: ids around the sentence, special tokens included.

    ``input_ids = head + sentence_ids + tail``; ``mask_offset`` is the mask token's index inside
    ``head`` (``mask_in_head``) or inside ``tail``; soft-prompt slots are already inserted.
    """

    head: tuple[int, ...]
    tail: tuple[int, ...]
    mask_in_head: bool
    mask_offset: int

    def build(self, sentence_ids: list[int]) -> tuple[list[int], int]:
        """Return ``(input_ids, mask_index)`` for one tokenised sentence."""
        ids = [*self.head, *sentence_ids, *self.tail]
        mask = (
            self.mask_offset if self.mask_in_head else len(self.head) + len(sentence_ids) + self.mask_offset
        )
        return ids, mask


def special_tokens_around(tokenizer: PreTrainedTokenizerBase) -> tuple[list[int], list[int]]:
    """The special ids a tokenizer puts before and after a single sequence (e.g. [CLS] / [SEP])."""
    probe = tokenizer.mask_token or tokenizer.unk_token or "a"
    inner = list(tokenizer(probe, add_special_tokens=False)["input_ids"])
    full = list(tokenizer(probe, add_special_tokens=True)["input_ids"])
    for at in range(len(full) - len(inner) + 1):
        if full[at : at + len(inner)] == inner:
            return full[:at], full[at + len(inner) :]
    raise ProtoembedError(f"tokenizer {type(tokenizer).__name__}: cannot find where it adds special tokens")


def tokenize_template(template: Template, tokenizer: PreTrainedTokenizerBase, n_soft: int = 0) -> TemplateIds:
    """Tokenise a template's prefix and suffix for ``tokenizer`` and add its special tokens.

    Args:
        template: the discrete template.
        tokenizer: a Hugging Face tokenizer with a mask token.
        n_soft: number of soft-prompt placeholder slots to insert right before the mask token; their id
            is the pad token's (the mask token's without one), their input embeddings are overwritten.
    Returns:
        the :class:`TemplateIds` for ``template``.
    """
    if tokenizer.mask_token is None:
        raise ProtoembedError(
            f"tokenizer {type(tokenizer).__name__} has no mask token; prompt heads need one"
        )
    mask_id = tokenizer.convert_tokens_to_ids(tokenizer.mask_token)
    before, after = special_tokens_around(tokenizer)

    def ids(text: str) -> list[int]:
        text = text.replace(MASK_SLOT, tokenizer.mask_token)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    head, tail = before + ids(template.prefix), ids(template.suffix) + after
    mask_in_head = mask_id in head[len(before) :]
    part = head if mask_in_head else tail
    offset = part.index(mask_id, len(before) if mask_in_head else 0)
    if n_soft:
        slot = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else mask_id
        part[offset:offset] = [slot] * n_soft
        offset += n_soft
    return TemplateIds(tuple(head), tuple(tail), mask_in_head, offset)
