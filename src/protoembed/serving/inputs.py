"""A request's inputs, as OpenAI's embeddings API and text-embeddings-inference accept them, made into the
model's input rows.

An input is a text or a token array. A token array is read as text-embeddings-inference and vLLM read it:
the served model's own tokenizer's ids, as ``tokenizer(text)`` returns them (special tokens included), or
without the special tokens (``tokenizer(text, add_special_tokens=False)``); both give the text's vector
(:func:`id_rows`). A client that sends OpenAI's own token ids (tiktoken's) sends numbers that mean nothing
to another model's vocabulary: send the text.

Every problem is an :class:`~protoembed.serving.errors.APIError` naming the input (``input[3]``,
``input[3][17]``) and what was expected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from protoembed.model.batching import longest_row
from protoembed.model.encoder import PromptEncoder
from protoembed.serving.errors import APIError


@dataclass(frozen=True)
class Inputs:
    """A request's inputs: ``texts`` (each a string) or ``ids`` (each a token array), and ``names``, how
    messages name each (``input``, ``input[2]``)."""

    texts: list[str] | None
    ids: list[list[int]] | None
    names: list[str]

    def __len__(self) -> int:
        return len(self.names)


def json_type(value: Any) -> str:
    """How JSON names ``value``'s type (``a number``, ``an object``, ``null``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return "a string"


def _token(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _kind(value: Any) -> str | None:
    """``text``, ``array`` or ``token`` for an item a list of inputs may hold, else ``None``."""
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "array"
    return "token" if _token(value) else None


def check_count(count: int, max_inputs: int, field: str) -> None:
    """Refuse more than ``max_inputs`` inputs in one request (``too_many``)."""
    if count > max_inputs:
        raise APIError(
            "too_many",
            f"{count} inputs in one request; this server takes at most {max_inputs}",
            field,
            "too_many_inputs",
        )


def parse_inputs(value: Any, field: str, max_inputs: int, max_chars: int) -> Inputs:
    """``value`` (a string, a list of strings, a token array or a list of token arrays) as :class:`Inputs`.

    Raises:
        APIError: an empty list, array or text (``empty``); another shape (a list mixing texts and token
            arrays, a token that is not an integer: ``invalid``, each named); more than ``max_inputs``
            inputs or a text longer than ``max_chars`` characters (``too_many``).
    """
    shapes = "a string, a list of strings, a token array (integers) or a list of token arrays"
    if isinstance(value, str):
        inputs = Inputs([value], None, [field])
    elif isinstance(value, list) and value and all(_token(v) for v in value):
        inputs = Inputs(None, [list(value)], [field])
    elif isinstance(value, list):
        if not value:
            raise APIError("empty", f"{field} must not be an empty list", field)
        names = [f"{field}[{i}]" for i in range(len(value))]
        if all(isinstance(v, str) for v in value):
            inputs = Inputs(list(value), None, names)
        elif all(isinstance(v, list) for v in value):
            for name, array in zip(names, value):
                if not array:
                    raise APIError(
                        "empty", f"{name} is an empty token array: every input needs tokens", field
                    )
                bad = next((j for j, token in enumerate(array) if not _token(token)), None)
                if bad is not None:
                    raise APIError(
                        "invalid",
                        f"{name}[{bad}] is {json_type(array[bad])}; a token array holds integers",
                        field,
                    )
            inputs = Inputs(None, [list(array) for array in value], names)
        else:
            kinds = [_kind(v) for v in value]
            i = next(i for i, kind in enumerate(kinds) if kind is None or kind != kinds[0])
            raise APIError("invalid", f"{field} must be {shapes}; {names[i]} is {json_type(value[i])}", field)
    else:
        raise APIError("invalid", f"{field} must be {shapes}, got {json_type(value)}", field)
    check_count(len(inputs), max_inputs, field)
    check_chars(inputs.texts or [], inputs.names, max_chars, field)
    for name, text in zip(inputs.names, inputs.texts or []):
        if not text.strip():
            raise APIError("empty", f"{name} is empty or blank: every input needs text to encode", field)
    return inputs


def check_chars(texts: Sequence[str], names: Sequence[str], max_chars: int, field: str) -> None:
    """Refuse a text longer than ``max_chars`` characters (``too_many``, the first one named)."""
    for name, text in zip(names, texts):
        if len(text) > max_chars:
            raise APIError(
                "too_many",
                f"{name} has {len(text)} characters; this server takes at most {max_chars} per input",
                field,
                "input_too_long",
            )


def too_long(name: str, tokens: int, limit: int, field: str) -> APIError:
    """The refusal of an input of ``tokens`` tokens over the ``limit`` of a row (special tokens
    included), as ``truncate: false`` refuses it (``too_many``)."""
    return APIError(
        "too_many",
        f"{name} has {tokens} tokens; this model takes at most {limit} per input (send truncate: true to cut "
        "it)",
        field,
        "input_too_long",
    )


def check_vocabulary(
    tokenizer: Any, arrays: Sequence[Sequence[int]], names: Sequence[str], field: str
) -> None:
    """Refuse an id outside ``tokenizer``'s vocabulary (``tokenizer``: text-embeddings-inference's
    tokenizer error; its tokenizer would drop the id, this server names it)."""
    vocabulary = len(tokenizer)
    for name, array in zip(names, arrays):
        bad = next((j for j, token in enumerate(array) if not 0 <= token < vocabulary), None)
        if bad is not None:
            raise APIError(
                "tokenizer",
                f"{name}[{bad}] is token {array[bad]}, outside the model's vocabulary (0 to {vocabulary - 1})",
                field,
            )


def sentence_ids_of(encoder: PromptEncoder, inputs: Inputs, field: str, prompt: str = "") -> list[list[int]]:
    """The sentence ids (no special tokens) of token-array ``inputs``, so that the ids of ``tokenizer(text)``
    (special tokens included or not) make the row of ``text``:

    - the special tokens the tokenizer puts around a text (``[CLS]`` ... ``[SEP]``, ``<s>`` ... ``</s>``) are
      taken off where an array starts or ends with them; what remains is the text's ids;
    - with a ``prompt``, those ids are decoded (special tokens skipped, spaces as the tokenizer wrote them)
      and the prompt and the decoded text are tokenised together, as the prompted text is (on a BPE or
      SentencePiece tokenizer the prompt's last token and the text's first one may merge, so joining the
      prompt's ids and the array's would make another row); text-embeddings-inference does the same.

    Raises:
        APIError: an id outside the vocabulary (``tokenizer``), an array of special tokens only (``empty``).
    """
    assert inputs.ids is not None
    tokenizer = encoder.tokenizer
    check_vocabulary(tokenizer, inputs.ids, inputs.names, field)
    before, after = encoder.specials
    arrays = []
    for array in inputs.ids:
        if before and array[: len(before)] == before:
            array = array[len(before) :]
        if after and len(array) >= len(after) and array[len(array) - len(after) :] == after:
            array = array[: len(array) - len(after)]
        arrays.append(array)
    if prompt:
        texts = [
            prompt + tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
            for ids in arrays
        ]
        arrays = encoder.sentence_ids(texts, allow_empty=True)
    for name, ids in zip(inputs.names, arrays):
        if not ids:
            raise APIError("empty", f"{name} holds only special tokens: every input needs tokens", field)
    return arrays


def check_length(
    encoder: PromptEncoder, sentence_ids: Sequence[Sequence[int]], names: Sequence[str], field: str
) -> None:
    """Refuse inputs whose tokens would be cut (text-embeddings-inference's ``truncate: false``).

    Raises:
        APIError: ``too_many``, naming the first input longer than a row holds, with both counts (special
            tokens and template included, as ``/info``'s ``max_input_length`` counts).
    """
    budget = encoder.sentence_budget(encoder.template_ids, encoder.max_seq_length)
    extra = longest_row(encoder) - budget
    for name, ids in zip(names, sentence_ids):
        if len(ids) > budget:
            raise too_long(name, len(ids) + extra, budget + extra, field)
