"""The packaged template sets, word for word: ``paper`` = ConPVP Table 1, ``official`` = the authors' code."""

from __future__ import annotations

from pathlib import Path

import pytest

from protoembed.inputs.template_sets import template_set
from protoembed.inputs.templates import MASK_SLOT, SENTENCE_SLOT, tokenize_template

# ConPVP (Zeng et al., 2022), Table 1, transcribed from the paper.
TABLE_1_POSITIVE = [
    'Given "<S>" , we assume that "[MASK]"',
    '"<S>" , is this review positive ? [MASK] .',
    '"<S>" , is [MASK] news',
    '"<S>" , is a [MASK] one',
    '"<S>" . In summary : "[MASK]"',
    'By "<S>" they mean [MASK] .',
    'Article "<S>" belongs to a [MASK] topic',
    'This sentence : "<S>" means [MASK] .',
]
TABLE_1_NEGATIVE = [
    '"<S>" , is this review negative ? [MASK] .',
    'Without "<S>" , they mean [MASK] .',
    '"<S>" is inconsistent with "[MASK]"',
    '"<S>" is totally different from : "[MASK]"',
    '"<S>" which does not denote [MASK]',
    '"<S>" is not a [MASK] one',
    'This sentence : "<S>" does not mean [MASK] .',
    'Article "<S>" is definitely not about the [MASK] topic',
]

# The authors' released code (github.com/lemon0830/promptCSE at de343d7043fb421f2d130f660d87360d1bad5c30,
# ConPVP/train.py, prepare_features), prefix + sentence + suffix written with <S> for the sentence.
AUTHORS_POSITIVE = [
    'Given " <S> " , we assume that " [MASK] "',
    '" <S> " , Is this review positive ? [MASK] .',
    '" <S> " , is related to " [MASK] "',
    '" <S> " is a [MASK] news',
    '" <S> " is a [MASK] one',
    '" <S> " . In summary : " [MASK] "',
    'By " <S> " they mean [MASK] .',
    'Article " <S> " belongs to a [MASK] topic',
    'This sentence : " <S> " means [MASK] .',
]
AUTHORS_NEGATIVE = [
    '" <S> " , Is this review negative ? [MASK] .',
    'Without " <S> " they mean [MASK] .',
    '" <S> " is inconsistent to " [MASK] "',
    '" <S> " is totally different to : " [MASK] "',
    '" <S> " which not denotes [MASK] .',
    '" <S> " is not a [MASK] one',
    'This sentence : " <S> " not means [MASK] .',
    'Article " <S> " is definitely not about the [MASK] topic',
]


def _texts(name: str) -> tuple[list[str], list[str]]:
    positives, negatives = template_set(name)
    return [t.text for t in positives], [t.text for t in negatives]


def test_paper_set_is_table_1_word_for_word() -> None:
    assert _texts("paper") == (TABLE_1_POSITIVE, TABLE_1_NEGATIVE)


def test_official_set_is_the_authors_lists_word_for_word() -> None:
    assert _texts("official") == (AUTHORS_POSITIVE, AUTHORS_NEGATIVE)


@pytest.mark.parametrize("sentence", ["a man is playing a guitar .", "stocks fell sharply"])
def test_official_ids_equal_the_authors_concatenated_string(
    tiny_model_dirs: dict[str, Path], sentence: str
) -> None:
    """Our prefix / sentence / suffix ids equal the tokenised string prefix + sentence + suffix."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dirs["bert"]))
    sentence_ids = tokenizer(sentence, add_special_tokens=False)["input_ids"]
    positives, negatives = template_set("official")
    for template in positives + negatives:
        text = template.text.replace(SENTENCE_SLOT, sentence).replace(MASK_SLOT, tokenizer.mask_token)
        ids, mask = tokenize_template(template, tokenizer).build(sentence_ids)
        assert ids == tokenizer(text)["input_ids"], template.text
        assert ids[mask] == tokenizer.mask_token_id
