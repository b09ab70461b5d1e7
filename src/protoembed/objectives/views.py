"""Build the rows of one training forward: several templated views of the same sentences in one batch.

Each sentence is tokenised once; every view wraps those ids in a template, through the encoder's own
:meth:`~protoembed.model.encoder.PromptEncoder.sentence_ids` and :meth:`~protoembed.model.encoder.PromptEncoder.wrap`
(only the sentence is truncated; ``max_seq_length`` counts sentence tokens with a template, all tokens
without one), so a view in the embedder's own format is exactly its evaluation input except for the
truncation, which the objective owns.

How a step's rows meet the backbone (:data:`PADDINGS`, ``training.padding``, :func:`segments`): the rows
come in blocks of ``n`` (one block per column or view: anchors, positives, negatives; ConPVP's anchor,
``c+`` and ``c-`` views and their denoising copies), and a step runs

- ``joint``: one forward over all rows, padded to the longest;
- ``column``: one forward per block, each padded to its own longest row (what sentence-transformers'
  losses do, a forward per column);
- ``auto``: the rows sorted by length and cut into the forwards that pad fewest tokens once each forward
  costs :data:`FORWARD_TOKENS` more (length buckets: titles in one forward, snippets in another; the
  short and the long sentences of a SimCSE batch apart). Where no cut pays, one forward in row order,
  which is ``joint``.

Rows are independent in the backbone, so the vectors are the same either way (to float rounding) with
dropout off; with dropout on, the masks are drawn per forward, so they differ. The sorted rows go back to
the step's order before the loss (:meth:`ViewBatch.in_step_order`).

Besides the plain rows, two kinds of *denoising* rows are supported (see the objectives):

- ``attention_mask`` (ConPVP authors' code): the same ids with the sentence and the special tokens
  around the row (``[CLS]`` and ``[SEP]``) masked out of attention, so the mask state sees the template
  tokens only;
- ``position`` (PromptBERT): the template alone (no sentence tokens), with the position ids the template
  tokens would have if the sentence were present.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace

import torch

from protoembed.core.errors import ProtoembedError
from protoembed.inputs.templates import Template, TemplateIds, tokenize_template
from protoembed.model.encoder import PromptEncoder
from protoembed.objectives.registry import FORWARD_TOKENS, PADDINGS


@dataclass
class Rows:
    """Unpadded rows: ids, mask index, soft-prompt flag, sentence span and optional explicit positions."""

    ids: list[list[int]] = field(default_factory=list)
    mask_index: list[int | None] = field(default_factory=list)
    soft: list[bool] = field(default_factory=list)
    span: list[tuple[int, int]] = field(default_factory=list)  # (start, length) of the sentence tokens
    positions: list[list[int] | None] = field(default_factory=list)
    attend_sentence: list[bool] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    def extend(self, other: Rows) -> Rows:
        """Append ``other``'s rows (in place) and return self."""
        for name in FIELDS:
            getattr(self, name).extend(getattr(other, name))
        return self

    def select(self, order: Sequence[int]) -> Rows:
        """A new :class:`Rows` of these rows in ``order`` (row ``order[k]`` as row ``k``)."""
        return Rows(**{name: [getattr(self, name)[i] for i in order] for name in FIELDS})


#: the per-row lists of :class:`Rows`
FIELDS = tuple(f.name for f in fields(Rows))


@dataclass
class ViewBatch:
    """The padded rows of one training step, as tensors: what the DataLoader's collate function hands to
    the objective (built on CPU, then moved to the model's device) and what a cached step chunks.

    Attributes:
        features: encoder features of all ``R`` rows: ``input_ids`` and ``attention_mask`` (R, T), and as
            the views need them ``mask_index`` (R,), ``position_ids`` (R, T), ``soft_prompt_rows`` (R,).
        lengths: (R,) tokens of each row, padding excluded (the attention mask may hide some of them).
        n: examples in the batch (the views of example ``i`` are rows ``i``, ``n + i``, ...).
        index: what the objective's loss needs to read the rows back (e.g. PromptBERT's denoising rows).
        draw_state: state of a template-draw generator after this batch's draws (ConPVP), so that a
            checkpoint taken after this step records it even when the next batch was already collated.
        segments: ``(start, end)`` of the rows of :attr:`features` of each forward of the step, in order
            (:func:`segments`); empty: one forward over all rows.
        order: the step's row behind each row of :attr:`features` and :attr:`lengths` (``auto``'s rows
            sorted by length; on the host); ``None``: the step's order.
    """

    features: dict[str, torch.Tensor]
    lengths: torch.Tensor
    n: int
    index: dict[str, torch.Tensor] = field(default_factory=dict)
    draw_state: torch.Tensor | None = None
    segments: tuple[tuple[int, int], ...] = ()
    order: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.lengths.numel())

    def to(self, device: torch.device | str, non_blocking: bool = False) -> ViewBatch:
        """The same batch with its features and index on ``device`` (Accelerate's loader calls this);
        :attr:`lengths` and :attr:`order` stay on the host, so :meth:`rows` and the trainer's token count
        read them without waiting for the device."""
        move = {"device": device, "non_blocking": non_blocking}
        return replace(
            self,
            features={k: v.to(**move) for k, v in self.features.items()},
            index={k: v.to(**move) for k, v in self.index.items()},
        )

    def pin_memory(self) -> ViewBatch:
        """The same batch in page-locked host memory (the DataLoader's ``pin_memory`` calls this), so that
        :meth:`to` a CUDA device with ``non_blocking`` overlaps the copy; :attr:`lengths` stays pageable
        (it never leaves the host), as does :attr:`order`."""
        return replace(
            self,
            features={k: v.pin_memory() for k, v in self.features.items()},
            index={k: v.pin_memory() for k, v in self.index.items()},
        )

    def rows(self, start: int = 0, end: int | None = None) -> dict[str, torch.Tensor]:
        """Features of rows ``start:end``, padding cut to the longest of them: exactly what padding those
        rows alone would give (right padding). A new dict, so the encoder may add keys to it."""
        end = len(self) if end is None else end
        width = int(self.lengths[start:end].max()) if end > start else 0
        return {k: v[start:end, :width] if v.dim() >= 2 else v[start:end] for k, v in self.features.items()}

    def forwards(self) -> list[tuple[int, int]]:
        """``(start, end)`` of the rows of each forward of this step (:attr:`segments`, else all rows)."""
        return list(self.segments) or [(0, len(self))]

    def in_step_order(self, vectors: torch.Tensor) -> torch.Tensor:
        """``vectors`` of the rows in :attr:`features`' order (the forwards' outputs, concatenated), put
        back in the step's row order that the losses index (row ``i`` of view ``v`` at ``v * n + i``)."""
        if self.order is None:
            return vectors
        return vectors.index_select(0, torch.argsort(self.order).to(vectors.device))


def segments(
    lengths: Sequence[int], n: int, padding: str, forward_tokens: int = FORWARD_TOKENS
) -> tuple[tuple[int, ...] | None, tuple[tuple[int, int], ...]]:
    """The forwards of a step's rows (see the module docstring): ``(order, bounds)``, the rows in the
    order the forwards read them (``None``: row order) and ``(start, end)`` of each forward's rows in that
    order (``()``: one forward).

    ``column``: a block of ``n`` rows per forward (the last may be shorter). ``auto``: the rows sorted by
    length (ties in row order), cut where the padded tokens plus ``forward_tokens`` per forward are
    fewest (a cut between two rows of equal length never pays, so the cuts are searched between
    lengths: quadratic in the distinct lengths); one forward in row order when no cut pays.

    Args:
        lengths: the tokens of each row (padding excluded), in row order.
        n: the rows of one block (the step's examples).
        padding: one of :data:`PADDINGS`.
        forward_tokens: ``auto``'s price of a forward, in padded tokens (:data:`FORWARD_TOKENS`).
    """
    if padding not in PADDINGS:
        raise ProtoembedError(f"padding: expected one of {', '.join(PADDINGS)}, got {padding!r}")
    rows = len(lengths)
    if padding == "joint" or rows < 2:
        return None, ()
    if padding == "column":
        blocks = tuple((start, min(start + n, rows)) for start in range(0, rows, max(n, 1)))
        return None, blocks if len(blocks) > 1 else ()
    order = sorted(range(rows), key=lengths.__getitem__)
    width = [lengths[i] for i in order]
    ends = [end for end in range(1, rows) if width[end] != width[end - 1]] + [rows]
    # best[e] = (cost, previous end) of the sorted rows [0, e) in forwards ending at e
    best: dict[int, tuple[int, int]] = {0: (0, 0)}
    for e in ends:
        best[e] = min((best[b][0] + (e - b) * width[e - 1] + forward_tokens, b) for b in best)
    bounds, e = [], rows
    while e:
        bounds.append((best[e][1], e))
        e = best[e][1]
    if len(bounds) == 1:
        return None, ()
    return tuple(order), tuple(reversed(bounds))


class ViewBuilder:
    """Turns sentences into template views for one encoder (tokenizer, truncation, soft-prompt slots).

    Args:
        encoder: the embedder's input module.
        max_seq_length: truncation of the training inputs (see :meth:`PromptEncoder.sentence_budget`);
            ``None`` = whatever the position embeddings allow.
    """

    def __init__(self, encoder: PromptEncoder, max_seq_length: int | None = None) -> None:
        self.encoder = encoder
        #: how a step's rows are split into forwards (:data:`PADDINGS`; a run sets ``training.padding``:
        #: :meth:`~protoembed.objectives.plan.ObjectivePlan.build`)
        self.padding = "auto"
        #: ``auto``'s price of one more forward, in padded tokens (:data:`FORWARD_TOKENS`)
        self.forward_tokens = FORWARD_TOKENS
        self.tokenizer = encoder.tokenizer
        self.max_seq_length = max_seq_length
        self._cache: dict[tuple[str, int], TemplateIds] = {}
        #: first position id of a sequence (RoBERTa-style models count from padding_idx + 1).
        self.position_offset = encoder.position_offset
        #: number of special tokens the tokenizer puts before / after a sequence ([CLS] / [SEP]).
        self.n_special = tuple(len(x) for x in encoder.specials)

    def template(self, text: str, n_soft: int = 0) -> TemplateIds:
        """The tokenised template (cached)."""
        key = (text, n_soft)
        if key not in self._cache:
            self._cache[key] = tokenize_template(Template(text), self.tokenizer, n_soft)
        return self._cache[key]

    @property
    def anchor_template(self) -> TemplateIds | None:
        """The embedder's own input format (template + soft-prompt slots), or ``None`` without a template."""
        return self.encoder.template_ids

    def sentence_ids(self, sentences: Sequence[str]) -> list[list[int]]:
        """Token ids of each sentence, without special tokens; an empty sentence is an error."""
        if not sentences:
            raise ProtoembedError("a training batch needs at least one sentence")
        return self.encoder.sentence_ids(sentences)

    def wrap(
        self,
        template: TemplateIds | Sequence[TemplateIds] | None,
        sentence_ids: list[list[int]],
        soft: bool = False,
    ) -> Rows:
        """One row per sentence wrapped in ``template`` (one for all, one per sentence, or ``None``: the
        special tokens only), truncated to ``max_seq_length``."""
        if template is None or isinstance(template, TemplateIds):
            templates: Sequence[TemplateIds | None] = [template] * len(sentence_ids)
        else:
            templates = list(template)
        rows = Rows()
        for tpl, ids in zip(templates, sentence_ids):
            row, mask = self.encoder.wrap(ids, tpl, self.max_seq_length)
            head, tail = self.encoder.specials if tpl is None else (tpl.head, tpl.tail)
            rows.ids.append(row)
            rows.mask_index.append(mask)
            rows.soft.append(soft)
            rows.span.append((len(head), len(row) - len(head) - len(tail)))
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

    def batch(
        self,
        rows: Rows,
        n: int,
        index: dict[str, torch.Tensor] | None = None,
        draw_state: torch.Tensor | None = None,
    ) -> ViewBatch:
        """``rows`` padded into a :class:`ViewBatch` on CPU (``n`` examples; ``index``: see there), its
        forwards chosen by :attr:`padding` (:func:`segments`: ``auto``'s rows sorted by length)."""
        lengths = [len(ids) for ids in rows.ids]
        order, bounds = segments(lengths, n, self.padding, self.forward_tokens)
        if order is not None:
            rows = rows.select(order)
            lengths = [lengths[i] for i in order]
        return ViewBatch(
            features=self.collate(rows, torch.device("cpu")),
            lengths=torch.tensor(lengths, dtype=torch.long),
            n=n,
            index=dict(index or {}),
            draw_state=draw_state,
            segments=bounds,
            order=None if order is None else torch.tensor(order, dtype=torch.long),
        )

    def collate(self, rows: Rows, device: torch.device) -> dict[str, torch.Tensor]:
        """Pad ``rows`` into one batch of encoder features on ``device``."""
        masks = None if any(m is None for m in rows.mask_index) else rows.mask_index
        features = self.encoder.collate(rows.ids, masks)
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
