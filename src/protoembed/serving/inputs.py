"""A request's inputs, as OpenAI's embeddings API and text-embeddings-inference accept them, made into the
model's input rows.

An input is a text or a token array. Token ids are the served model's own tokenizer's ids of the text
alone (``tokenizer(text, add_special_tokens=False)``, as text-embeddings-inference defines them): the
server wraps them in the model's template or special tokens, as ``encode`` wraps a text's tokens, so
``encode(text)`` and the ids of ``text`` give the same vector (a model that lower-cases its inputs
lower-cases text only: ids are taken as they are). A client that sends OpenAI's own token ids (tiktoken's)
sends numbers that mean nothing to another model's vocabulary: send the text.

Every problem is an :class:`InputError` naming the input (``input[3]``, ``input[3][17]``) and what was
expected; its ``status`` is 400, or 413 for more inputs, characters or tokens than the server takes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from protoembed.model.encoder import PromptEncoder


class InputError(ValueError):
    """A request's input refused: ``status`` (400 or 413), the message, and a ``code`` for 413s."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


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


def parse_inputs(value: Any, field: str, max_inputs: int, max_chars: int) -> Inputs:
    """``value`` (a string, a list of strings, a token array or a list of token arrays) as :class:`Inputs`.

    Raises:
        InputError: another shape (a list mixing texts and token arrays, a token that is not an integer,
            an empty list or array, a blank text: 400, each named), more than ``max_inputs`` inputs or a
            text longer than ``max_chars`` characters (413).
    """
    shapes = "a string, a list of strings, a token array (integers) or a list of token arrays"
    if isinstance(value, str):
        inputs = Inputs([value], None, [field])
    elif isinstance(value, list) and value and all(_token(v) for v in value):
        inputs = Inputs(None, [list(value)], [field])
    elif isinstance(value, list):
        if not value:
            raise InputError(400, f"{field} must not be an empty list")
        names = [f"{field}[{i}]" for i in range(len(value))]
        if all(isinstance(v, str) for v in value):
            inputs = Inputs(list(value), None, names)
        elif all(isinstance(v, list) for v in value):
            for name, array in zip(names, value):
                if not array:
                    raise InputError(400, f"{name} is an empty token array: every input needs tokens")
                bad = next((j for j, token in enumerate(array) if not _token(token)), None)
                if bad is not None:
                    raise InputError(
                        400, f"{name}[{bad}] is {json_type(array[bad])}; a token array holds integers"
                    )
            inputs = Inputs(None, [list(array) for array in value], names)
        else:
            kinds = [_kind(v) for v in value]
            i = next(i for i, kind in enumerate(kinds) if kind is None or kind != kinds[0])
            raise InputError(400, f"{field} must be {shapes}; {names[i]} is {json_type(value[i])}")
    else:
        raise InputError(400, f"{field} must be {shapes}, got {json_type(value)}")
    if len(inputs) > max_inputs:
        raise InputError(
            413,
            f"{len(inputs)} inputs in one request; this server takes at most {max_inputs}",
            "too_many_inputs",
        )
    for name, text in zip(inputs.names, inputs.texts or []):
        if len(text) > max_chars:
            raise InputError(
                413,
                f"{name} has {len(text)} characters; this server takes at most {max_chars} per input",
                "input_too_long",
            )
        if not text.strip():
            raise InputError(400, f"{name} is empty or blank: every input needs text to encode")
    return inputs


def id_rows(
    encoder: PromptEncoder, inputs: Inputs, prompt: str = ""
) -> tuple[list[list[int]], list[int] | None]:
    """The input rows of token-array ``inputs``: ``prompt``'s tokens, then each array, wrapped in the
    model's template or special tokens (:meth:`~protoembed.model.encoder.PromptEncoder.wrap`), as ``encode``
    builds a text's row.

    Raises:
        InputError: an id outside the vocabulary, or an array (with the prompt) longer than the tokens a
            row keeps (400, naming the input and the limits).
    """
    assert inputs.ids is not None
    vocabulary = len(encoder.tokenizer)
    budget = encoder.sentence_budget(encoder.template_ids, encoder.max_seq_length)
    head = encoder.tokenizer(prompt, add_special_tokens=False)["input_ids"] if prompt else []
    rows, masks = [], []
    for name, array in zip(inputs.names, inputs.ids):
        bad = next((j for j, token in enumerate(array) if not 0 <= token < vocabulary), None)
        if bad is not None:
            raise InputError(
                400,
                f"{name}[{bad}] is token {array[bad]}, outside the model's vocabulary (0 to {vocabulary - 1})",
            )
        if len(head) + len(array) > budget:
            prompted = f" ({len(head)} of them the prompt's)" if head else ""
            raise InputError(
                400,
                f"{name} has {len(head) + len(array)} tokens{prompted}; this model takes at most {budget} per "
                "input (its max_seq_length, special tokens apart)",
            )
        row, mask = encoder.wrap([*head, *array], encoder.template_ids, encoder.max_seq_length)
        rows.append(row)
        masks.append(mask)
    return rows, None if encoder.template_ids is None else [int(m) for m in masks]


def too_long(encoder: PromptEncoder, texts: Sequence[str], names: Sequence[str]) -> None:
    """Refuse texts whose tokens would be cut (text-embeddings-inference's ``truncate: false``).

    Raises:
        InputError: 413 naming the first input longer than the tokens a row keeps, with both counts.
    """
    budget = encoder.sentence_budget(encoder.template_ids, encoder.max_seq_length)
    for name, ids in zip(names, encoder.sentence_ids(texts, allow_empty=True)):
        if len(ids) > budget:
            raise InputError(
                413,
                f"{name} has {len(ids)} tokens; this model takes at most {budget} per input (send "
                "truncate: true to cut it)",
                "input_too_long",
            )
