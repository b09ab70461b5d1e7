"""ConPVP: contrastive learning with prompt-derived virtual semantic prototypes (and its ablations)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from protoembed.core.errors import ProtoembedError
from protoembed.inputs.template_sets import template_set
from protoembed.inputs.templates import TemplateIds
from protoembed.model.embedder import Embedder
from protoembed.objectives.base import ContrastiveObjective, batch_sentences
from protoembed.objectives.distributed import world
from protoembed.objectives.registry import ConPVPOptions
from protoembed.objectives.views import Rows, ViewBatch


class ConPVP(ContrastiveObjective):
    """ConPVP (Zeng et al., 2022, Eq. 1): pull each anchor towards its positive prototype, away from the
    other sentences' prototypes and from every negative prototype.

    For sentence ``x_i``: the anchor ``v_i`` is the ``[MASK]`` state of ``[x_i; t_1..t_4; [MASK]]`` (a
    4-vector continuous prompt: head ``soft_prompt``, what is evaluated); the positive prototype
    ``c+_i`` is the ``[MASK]`` state of ``x_i`` in a template drawn uniformly from T+, the negative
    prototype ``c-_i`` the same with a template from T- (one draw per sentence, seeded generator). With
    ``sim`` the cosine similarity and ``tau`` the temperature, Eq. 1 is::

        l_i = -log( e^{sim(v_i, c+_i)/tau} / sum_k ( e^{sim(v_i, c+_k)/tau} + e^{sim(v_i, c-_k)/tau} ) )

    i.e. cross-entropy over the (N, 2N) logits ``[cos(V, C+) | cos(V, C-)] / tau`` with target ``i``.
    The three views (3N rows) go through the backbone in ONE padded forward, in train mode (dropout on),
    with gradients through all three (nothing detached), as in the authors' code (with
    ``training.mini_batch_size``, every view and denoising row goes through GradCache instead,
    :mod:`protoembed.objectives.cache`: same loss and gradients). Across processes the
    anchors and both prototype sets are gathered (logits (N·W, 2N·W)).

    Inputs:
        a list of N raw sentences.

    Requirements:
        head ``soft_prompt`` (``anchor: soft``) or head ``mask`` (``anchor: manual``); the anchor is the
        embedder's own input format, so training and evaluation see the same input.

    Ablations and the authors' code, by option: ``denoise: attention_mask`` adds a second pass (same
    forward, 3N more rows) whose attention mask keeps only the template tokens; its ``[MASK]`` state is
    subtracted from the full pass for every view (training only; evaluation reads the plain anchor
    state). ``prototypes: false``: the positive of ``v_i`` is a second dropout view of the same anchor
    input (``negative_prototypes`` is then unused). ``seed``: the draws' generator is seeded with
    ``seed + 1000003 * rank``. The soft-prompt initialisation (``uniform`` / ``template``) belongs to the
    embedder (``protoembed.load(..., soft_prompt_init=...)``).

    Example::

        embedder = protoembed.load("default", head="soft_prompt")
        objective = build_objective("conpvp", embedder, templates="official", denoise="attention_mask")
        loss = objective.train()(sentences)

    Citation: Jiali Zeng, Yongjing Yin, Yufan Jiang, Shuangzhi Wu, Yunbo Cao. "Contrastive Learning with
    Prompt-derived Virtual Semantic Prototypes for Unsupervised Sentence Embedding." Findings of EMNLP
    2022. https://arxiv.org/abs/2211.03348
    """

    options: ConPVPOptions

    def __init__(
        self, embedder: Embedder, options: ConPVPOptions | None = None, *, max_seq_length: int | None = None
    ) -> None:
        super().__init__(embedder, options, max_seq_length=max_seq_length)
        encoder = embedder.encoder
        if self.options.anchor == "soft" and encoder.soft_prompt is None:
            raise ProtoembedError(
                f"objective 'conpvp' (anchor: soft) needs head 'soft_prompt'; the embedder has head "
                f"{embedder.head!r} (use anchor: manual with head 'mask' for the w/ manual ablation)"
            )
        if self.options.anchor == "manual" and (encoder.template is None or encoder.soft_prompt is not None):
            raise ProtoembedError(
                f"objective 'conpvp' with anchor: manual needs head 'mask' (a discrete template); "
                f"the embedder has head {embedder.head!r}"
            )
        self.anchor: TemplateIds = self.views.anchor_template
        positives, negatives = template_set(self.options.templates)
        self.positive_texts = [t.text for t in positives]
        self.negative_texts = [t.text for t in negatives]
        self.positives = [self.views.template(t) for t in self.positive_texts]
        self.negatives = [self.views.template(t) for t in self.negative_texts]
        self._generator: torch.Generator | None = None
        self._step_draw_state: torch.Tensor | None = None
        self._batch_generator: torch.Generator | None = None
        #: with DataLoader workers, draw each batch's templates from a generator keyed by the batch.
        self.keyed_draws = bool(self.options.prototypes)
        #: the (T+, T-) template texts drawn for each sentence of the last batch (for logs and tests).
        self.last_templates: list[tuple[str | None, str | None]] = []

    # ------------------------------------------------------------ draws
    @property
    def generator(self) -> torch.Generator:
        """The template-draw generator, seeded with ``seed + rank`` on first use."""
        if self._generator is None:
            rank, _ = world()
            self._generator = torch.Generator().manual_seed(int(self.options.seed) + 1_000_003 * rank)
        return self._generator

    def draw(self, n: int, count: int) -> list[int]:
        """``n`` indices drawn uniformly from ``range(count)`` (from the batch's own generator, if any)."""
        generator = self._batch_generator if self._batch_generator is not None else self.generator
        return torch.randint(count, (n,), generator=generator).tolist()

    def get_extra_state(self) -> dict[str, Any]:
        """The draw generator's state after the last step's draws, so that a resumed run draws the same
        templates."""
        if self._step_draw_state is not None:
            return {"generator": self._step_draw_state}
        return {"generator": None if self._generator is None else self._generator.get_state()}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_extra_state`."""
        if state.get("generator") is not None:
            self.generator.set_state(state["generator"])
            self._step_draw_state = None

    # ----------------------------------------------------------- one step
    def build_rows(
        self, batch: Mapping[str, Sequence[str]] | Sequence[str]
    ) -> tuple[Rows, int, dict[str, torch.Tensor]]:
        """The anchor, c+ and c- views (or the ablation's), N rows each, then (denoising) their
        template-only copies; draws the templates of this batch."""
        ids = self.views.sentence_ids(batch_sentences(batch))
        n = len(ids)
        soft = self.options.anchor == "soft"
        rows = self.views.wrap(self.anchor, ids, soft=soft)
        if self.options.prototypes:
            pos = self.draw(n, len(self.positives))
            rows.extend(self.views.wrap([self.positives[i] for i in pos], ids))
            neg: list[int | None] = [None] * n
            if self.options.negative_prototypes:
                neg = self.draw(n, len(self.negatives))
                rows.extend(self.views.wrap([self.negatives[i] for i in neg], ids))
            self.last_templates = [
                (self.positive_texts[p], None if q is None else self.negative_texts[q])
                for p, q in zip(pos, neg)
            ]
        else:
            rows.extend(self.views.wrap(self.anchor, ids, soft=soft))  # second dropout view of the anchor
            self.last_templates = [(None, None)] * n
        if self.options.denoise == "attention_mask":
            rows.extend(self.views.template_only_attention(rows))
        return rows, n, {}

    def collate(
        self, batch: Mapping[str, Sequence[str]] | Sequence[str], draw_key: int | None = None
    ) -> ViewBatch:
        """The rows of one step, with the draw generator's state after its draws (see :meth:`loss`).

        ``draw_key``: draw this batch's templates from a generator seeded with it instead of the running
        one (DataLoader workers, which hold copies of the objective; see
        :class:`protoembed.training.step.Collator`).
        """
        if draw_key is None:
            rows, n, index = self.build_rows(batch)
            return self.views.batch(rows, n, index, draw_state=self.generator.get_state())
        self._batch_generator = torch.Generator().manual_seed(draw_key)
        try:
            rows, n, index = self.build_rows(batch)
        finally:
            self._batch_generator = None
        return self.views.batch(rows, n, index)

    def loss(self, states: torch.Tensor, batch: ViewBatch) -> torch.Tensor:
        """Eq. 1 (or the selected ablation) from the vectors of every row.

        Also records the batch's ``draw_state`` as the one a checkpoint saves: the training loader may
        have collated (and drawn the templates of) the next batch already.
        """
        if batch.draw_state is not None:
            self._step_draw_state = batch.draw_state
        if self.options.denoise == "attention_mask":
            half = states.size(0) // 2
            states = states[:half] - states[half:]
        return self.infonce(states, batch.n)

    def config(self) -> dict[str, Any]:
        """Options plus the embedder's soft-prompt settings."""
        encoder = self.embedder.encoder
        extra = {"n_soft_prompt": encoder.n_soft_prompt, "soft_prompt_init": encoder.soft_prompt_init}
        return {**super().config(), **(extra if encoder.soft_prompt is not None else {})}


__all__ = ["ConPVP"]
