"""Input prompts: a text a model prepends to each input of a role (``query``, ``document``) before encoding.

Retrieval models are often trained with one prefix for queries and another (or none) for documents
(E5's ``"query: "`` / ``"passage: "``). A model keeps them as ``prompts`` in its saved
``config_sentence_transformers.json`` (name -> text), as sentence-transformers does, so that
``sentence_transformers.SentenceTransformer(path).encode(texts, prompt_name="query")`` and protoembed give
the same inputs. A prompt is plain text put in front of the sentence, so with a template head (``mask``,
``soft_prompt``) the prompted sentence fills the template's sentence slot.

This module is the one home of the prompt names and of the rule that applies a prompt; the retrieval suite,
``protoembed.search``, ``protoembed mine`` and ``protoembed encode --prompt`` use it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from protoembed.core.errors import ProtoembedError

logger = logging.getLogger(__name__)

#: The prompt of queries (the retrieval suite's queries, ``search``'s queries, ``mine``'s anchors).
QUERY = "query"
#: The prompt of documents (a corpus, ``mine``'s positives and candidate negatives).
DOCUMENT = "document"
#: The roles the library itself asks prompts for.
ROLES = (QUERY, DOCUMENT)


def prompts_of(model: Any) -> dict[str, str]:
    """The model's prompts (name -> text); ``{}`` for a model or ``encode`` callable without any."""
    prompts = getattr(model, "prompts", None)
    return dict(prompts) if isinstance(prompts, Mapping) else {}


def prompt_text(prompts: Mapping[str, str], prompt_name: str | None = None, prompt: str | None = None) -> str:
    """The text to prepend: ``prompt`` itself, else the model's prompt ``prompt_name``.

    A role the library asks for (:data:`ROLES`) that the model does not define is the empty prompt (a
    model without prompts encodes queries and documents alike); any other unknown name is an error.

    Raises:
        ProtoembedError: both ``prompt`` and ``prompt_name`` given, or an unknown ``prompt_name`` outside
            :data:`ROLES` (the message lists the model's prompts).
    """
    if prompt is not None and prompt_name is not None:
        raise ProtoembedError("give either a prompt text or a prompt name, not both")
    if prompt is not None:
        return prompt
    if prompt_name is None:
        return ""
    if prompt_name in prompts:
        return prompts[prompt_name]
    if prompt_name in ROLES:
        return ""
    known = ", ".join(sorted(prompts)) or "none"
    raise ProtoembedError(f"unknown prompt name {prompt_name!r}; the model's prompts: {known}")


def apply_prompt(
    sentences: Sequence[str] | str,
    prompts: Mapping[str, str],
    prompt_name: str | None = None,
    prompt: str | None = None,
) -> list[str] | str:
    """``sentences`` with :func:`prompt_text` prepended to each (a new list; ``sentences`` itself when the
    prompt is empty); a single string gives a single string. Input that is not iterable, and items that
    are not strings, are passed through, for the encoder to refuse (an item by its index)."""
    text = prompt_text(prompts, prompt_name, prompt)
    if not text:
        return sentences
    if isinstance(sentences, str):
        return text + sentences
    if not isinstance(sentences, Iterable):
        return sentences
    return [text + s if isinstance(s, str) else s for s in sentences]


def kept_default(default_prompt_name: str | None, prompts: Mapping[str, str]) -> str | None:
    """A model's default prompt name once its prompts are replaced: kept when the new prompts have it, else
    ``None`` (logged: replacing the prompts drops a default they no longer define)."""
    if default_prompt_name is None or default_prompt_name in prompts:
        return default_prompt_name
    logger.info("the new prompts have no %r: the model no longer has a default prompt", default_prompt_name)
    return None
