"""Input prompts: a text a model prepends to each input of a role (``query``, ``document``) before encoding.

Retrieval models are often trained with one prefix for queries and another (or none) for documents
(E5's ``"query: "`` / ``"passage: "``). A model keeps them as ``prompts`` in its saved
``config_sentence_transformers.json`` (name -> text), as sentence-transformers does, so that
``sentence_transformers.SentenceTransformer(path).encode(texts, prompt_name="query")`` and protoembed give
the same inputs. A prompt is plain text put in front of the sentence, so with a template head (``mask``,
``soft_prompt``) the prompted sentence fills the template's sentence slot.

This module is the one home of the prompt names and of the rule that applies a prompt. A prompt is applied
once, by the model's ``encode``: every caller that encodes with a role (the retrieval suite,
``protoembed.search``, ``protoembed mine``, ``protoembed encode --prompt``, the trainer's selection) names it
(``encode(texts, prompt_name="query")``: :func:`encode_with_role`) and never puts its text in front itself,
so a model's :func:`resolved_prompt` (a named prompt, else its ``default_prompt_name``'s) is the one text
in front of every input. A role the model lacks is no prompt, not the default prompt, as in
sentence-transformers, whose ``SentenceTransformer`` defines ``query`` and ``document`` as empty prompts
(``_default_prompts``) and refuses any other unknown name.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
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


def resolved_prompt(model: Any, prompt_name: str | None = None, prompt: str | None = None) -> str:
    """The text ``model.encode(..., prompt_name=prompt_name, prompt=prompt)`` puts before each input:
    ``prompt`` itself, else the model's prompt ``prompt_name`` (:func:`prompt_text`), else (neither given)
    its ``default_prompt_name``'s, as sentence-transformers resolves it; ``""`` for none.

    Raises:
        ProtoembedError: as :func:`prompt_text`.
    """
    if prompt_name is None and prompt is None:
        prompt_name = getattr(model, "default_prompt_name", None)
    return prompt_text(prompts_of(model), prompt_name, prompt)


def takes_prompt_name(encode: Callable[..., Any]) -> bool:
    """Whether ``encode`` has a parameter named ``prompt_name`` (protoembed's and sentence-transformers'
    ``encode``, :class:`~protoembed.evaluation.encoders.LazyEncoder`); ``False`` for a callable whose
    signature cannot be read."""
    try:
        return "prompt_name" in inspect.signature(encode).parameters
    except (TypeError, ValueError):
        return False


def encode_with_role(encode: Callable[..., Any], texts: list[str], role: str, **kwargs: Any) -> Any:
    """``texts`` encoded with the prompt of ``role`` (:data:`QUERY`, :data:`DOCUMENT`), the prompt applied
    once: ``encode(texts, prompt_name=role, **kwargs)`` when ``encode`` takes a ``prompt_name``
    (:func:`takes_prompt_name`), so the model applies its own prompt of that role (none when it has none;
    never its default prompt). A plain ``encode`` without that parameter cannot be told a prompt: it gets
    the texts with the role's prompt of its ``prompts`` (:func:`prompts_of` of the object it is bound to,
    else of the callable itself; none without ``prompts``) put in front, and must put none of its own.
    Returns what ``encode`` returns.

    Raises:
        ProtoembedError: as ``encode``.
    """
    if takes_prompt_name(encode):
        return encode(texts, prompt_name=role, **kwargs)
    owner = getattr(encode, "__self__", encode)
    return encode(apply_prompt(texts, prompt_text(prompts_of(owner), role)), **kwargs)


def apply_prompt(sentences: Sequence[str] | str, text: str) -> list[str] | str:
    """``sentences`` with the prompt ``text`` put in front of each (a new list; ``sentences`` itself when
    ``text`` is empty); a single string gives a single string. Input that is not iterable, and items
    that are not strings, are passed through, for the encoder to refuse (an item by its index)."""
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
