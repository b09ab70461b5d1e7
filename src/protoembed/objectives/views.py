"""Build the rows of one training forward: several templated views of the same sentences in one batch.

Each sentence is tokenised once; every view wraps those ids in a template (only the sentence is
truncated, ``max_seq_length`` counts sentence tokens, exactly as :class:`~protoembed.encoder.PromptEncoder`
does at evaluation). Rows of different views are padded together so that the backbone runs once.

Besides the plain rows, two kinds of *denoising* rows are supported (see the objectives):

- ``attention_mask`` (ConPVP authors' code): the same ids with the sentence and the special tokens
  around the row (``[CLS]`` and ``[SEP]``) masked out of attention, so the mask state sees the template
  tokens only;
- ``position`` (PromptBERT): the template alone (no sentence tokens), with the position ids the template
  tokens would have if the sentence were present.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from protoembed.encoder import PromptEncoder
from protoembed.errors import ProtoembedError
from protoembed.prompts import Template, TemplateIds, special_tokens_around, tokenize_template


@dataclass
class Rows:
    """Unpadded rows: ids, mask index, soft-prompt flag, sentence span and optional explicit positions."""

    ids: list[list[int]] = field(default_factory=list)
    mask_index: list[int] = field(default_factory=list)
    soft: list[bool] = field(default_factory=list)
    span: list[tuple[int, int]] = field(default_factory=list)  # (start, length) of the sentence tokens
    positions: list[list[int] | None] = field(default_factory=list)
    attend_sentence: list[bool] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    def extend(self, other: Rows) -> Rows:
        """Append ``other``'s rows (in place) and return self."""
        for name in ("ids", "mask_index", "soft", "span", "positions", "attend_sentence"):
            getattr(self, name).extend(getattr(other, name))
        return self


class ViewBuilder:
    """Turns sentences into template views for one encoder (tokenizer, truncation, soft-prompt slots).

    Args:
        encoder: the embedder's input module.
    """

    def __init__(self, encoder: PromptEncoder) -> None:
        self.encoder = encoder
        self.tokenizer = encoder.tokenizer
        self._cache: dict[tuple[str, int], TemplateIds] = {}
        embeddings = getattr(encoder.auto_model, "embeddings", None)
        padding_idx = getattr(embeddings, "padding_idx", None)
        #: first position id of a sequence (RoBERTa-style models count from padding_idx + 1).
        self.position_offset = int(padding_idx) + 1 if padding_idx is not None else 0
        before, after = special_tokens_around(self.tokenizer)
        #: number of special tokens the tokenizer puts before / after a sequence ([CLS] / [SEP]).
        self.n_special = (len(before), len(after))

    def template(self, text: str, n_soft: int = 0) -> TemplateIds:
        """The tokenised template (cached)."""
        key = (text, n_soft)
        if key not in self._cache:
            self._cache[key] = tokenize_template(Template(text), self.tokenizer, n_soft)
        return self._cache[key]

    @property
    def anchor_template(self) -> TemplateIds | None:
        """The embedder's own input format (template + soft-prompt slots), or ``None`` without a template."""
        if self.encoder.template is None:
            return None
        return self.template(self.encoder.template, self.encoder.n_soft_prompt)

    def sentence_ids(self, sentences: Sequence[str]) -> list[list[int]]:
        """Token ids of each sentence, without special tokens; an empty sentence is an error."""
        texts = [str(s).strip() for s in sentences]
        if not texts:
            raise ProtoembedError("a training batch needs at least one sentence")
        if self.encoder.do_lower_case:
            texts = [t.lower() for t in texts]
        ids = [list(x) for x in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]
        empty = [i for i, x in enumerate(ids) if not x]
        if empty:
            raise ProtoembedError(
                f"{len(empty)} training sentence(s) have no tokens (batch index {empty[0]}); "
                "empty lines must be removed from the corpus"
            )
        return ids

    def _budget(self, head: int, tail: int) -> int:
        room = self.encoder.position_budget - head - tail
        if room <= 0:
            raise ProtoembedError("template too long for the backbone's position embeddings")
        limit = self.encoder.max_seq_length
        return min(limit or room, room)

    def wrap(
        self, template: TemplateIds | Sequence[TemplateIds], sentence_ids: list[list[int]], soft: bool = False
    ) -> Rows:
        """One row per sentence wrapped in ``template`` (one template for all, or one per sentence)."""
        templates = [template] * len(sentence_ids) if isinstance(template, TemplateIds) else list(template)
        rows = Rows()
        for tpl, ids in zip(templates, sentence_ids):
            ids = ids[: self._budget(len(tpl.head), len(tpl.tail))]
            row, mask = tpl.build(ids)
            rows.ids.append(row)
            rows.mask_index.append(mask)
            rows.soft.append(soft)
            rows.span.append((len(tpl.head), len(ids)))
            rows.positions.append(None)
            rows.attend_sentence.append(True)
        return rows

    @staticmethod
    def template_only_attention(rows: Rows) -> Rows:
        """Copies of ``rows`` that attend to their template tokens only (ConPVP code denoising).

        The sentence and the special tokens around the row ([CLS], [SEP]) are masked out of attention,
        as in the ConPVP authors' template-only pass.
        """
        out = Rows(
            ids=list(rows.ids),
            mask_index=list(rows.mask_index),
            soft=list(rows.soft),
            span=list(rows.span),
            positions=list(rows.positions),
            attend_sentence=[False] * len(rows),
        )
        return out

    def template_alone(self, template: TemplateIds, lengths: Sequence[int]) -> Rows:
        """The template without its sentence, positions shifted as if ``length`` tokens were there."""
        rows = Rows()
        head, tail = len(template.head), len(template.tail)
        for length in lengths:
            row, mask = template.build([])
            rows.ids.append(row)
            rows.mask_index.append(mask)
            rows.soft.append(False)
            rows.span.append((head, 0))
            o = self.position_offset
            rows.positions.append([o + p for p in range(head)] + [o + head + length + p for p in range(tail)])
            rows.attend_sentence.append(True)
        return rows

    def collate(self, rows: Rows, device: torch.device) -> dict[str, torch.Tensor]:
        """Pad ``rows`` into one batch of encoder features on ``device``."""
        features = self.encoder.collate(rows.ids, rows.mask_index)
        if not all(rows.attend_sentence):
            attention = features["attention_mask"]
            n_before, n_after = self.n_special
            for r, (start, length) in enumerate(rows.span):
                if not rows.attend_sentence[r]:
                    end = len(rows.ids[r])
                    attention[r, :n_before] = 0
                    attention[r, start : start + length] = 0
                    attention[r, end - n_after : end] = 0
        if any(p is not None for p in rows.positions):
            width = features["input_ids"].size(1)
            o = self.position_offset
            positions = torch.full_like(features["input_ids"], o)
            for r, pos in enumerate(rows.positions):
                pos = pos if pos is not None else [o + p for p in range(len(rows.ids[r]))]
                positions[r, : len(pos)] = torch.tensor(pos[:width], dtype=torch.long)
            features["position_ids"] = positions
        if self.encoder.soft_prompt is not None:
            features["soft_prompt_rows"] = torch.tensor(rows.soft, dtype=torch.bool)
        return {k: v.to(device) for k, v in features.items()}
