"""PromptBERT: two discrete templates as the two views, the ``[MASK]`` state as the sentence vector."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from protoembed.core.errors import ProtoembedError
from protoembed.inputs.templates import PROMPTBERT_SECOND_TEMPLATE, PROMPTBERT_TEMPLATE
from protoembed.model.embedder import Embedder
from protoembed.objectives.base import ContrastiveObjective, batch_sentences
from protoembed.objectives.registry import PromptBERTOptions
from protoembed.objectives.views import Rows, ViewBatch

#: PromptBERT's two views in the authors' run script (kongds/Prompt-BERT, ``run.sh``: ``unsup-bert``'s
#: and ``unsup-roberta``'s ``--mask_embedding_sentence_template`` and ``..._different_template``), per
#: backbone family: (anchor = evaluation template, second view). The script writes them as
#: ``*cls*_This_sentence_of_"*sent_0*"_means*mask*.*sep+*`` (``_`` a space) and tokenises the text before
#: and after the sentence as two pieces; the RoBERTa pair is spelled here so that protoembed's tokenisation
#: gives the same ids under byte-level BPE, which reads spaces: the piece after the sentence is
#: `` ' means<mask>.`` (a space before the quote, none before the mask and the period), hence the second
#: space after ``<S>`` (one joining space is dropped) and ``means[MASK].``.
AUTHORS_VIEWS: dict[str, tuple[str, str]] = {
    "bert": (PROMPTBERT_SECOND_TEMPLATE, PROMPTBERT_TEMPLATE),
    "roberta": ("This sentence : '<S>  ' means[MASK].", "The sentence : '<S>  ' means[MASK]."),
}
#: ``config.model_type`` of the backbones that take the RoBERTa pair (the script's ``'roberta' in`` name).
ROBERTA_FAMILY = ("roberta", "xlm-roberta", "camembert")


def backbone_family(embedder: Embedder) -> str:
    """``roberta`` for a RoBERTa-like backbone (:data:`ROBERTA_FAMILY`), else ``bert`` (BERT, ALBERT,
    MiniLM, ...): the key of :data:`AUTHORS_VIEWS`."""
    model_type = getattr(embedder.encoder.auto_model.config, "model_type", "")
    return "roberta" if model_type in ROBERTA_FAMILY else "bert"


def default_second_template(anchor: str, family: str) -> str:
    """The second view when the config names none: the other template of the authors' pair for
    ``family`` (their second view when ``anchor``, the embedder's template, is their anchor; their anchor
    when ``anchor`` is their second view, e.g. the mask head's default template under BERT)."""
    first, second = AUTHORS_VIEWS[family]
    return first if anchor == second else second


class PromptBERT(ContrastiveObjective):
    """Unsupervised PromptBERT (Jiang et al., 2022, Sec. 5: prompt-based contrastive learning).

    The two views of sentence ``x_i`` are the ``[MASK]`` states of ``x_i`` in two different templates:
    the anchor ``h_i`` in the embedder's own template (the one used at evaluation) and ``h_i'`` in
    ``second_template``, both in one forward of 2N rows. The PromptBERT authors' run script
    (kongds/Prompt-BERT, ``run.sh``, :data:`AUTHORS_VIEWS`) anchors BERT on
    ``This sentence of "<S>" means [MASK] .`` with ``This sentence : "<S>" means [MASK] .`` as the second
    view, and RoBERTa on ``This sentence : '<S>' means [MASK] .`` with ``The sentence : '<S>' means
    [MASK] .`` (spelled for byte-level BPE as in :data:`AUTHORS_VIEWS`); the roles matter, since InfoNCE
    runs over the anchor's rows. The configs set the embedder's ``template`` to the authors' anchor; the
    default ``second_template`` is the other template of the pair. With template denoising
    (PromptBERT Eq. 3) each view is ``h_i - \\hat h_i``, where ``\\hat h_i`` is the ``[MASK]`` state of
    the template alone, run with the position ids its tokens would have if the ``len(x_i)`` sentence
    tokens were present (computed in the same forward, one row per template and sentence length, with
    gradients). The loss is SimCSE's InfoNCE between the two views::

        l_i = -log( e^{cos(h_i, h_i')/tau} / sum_j e^{cos(h_i, h_j')/tau} )

    As in the authors' unsupervised runs, denoising is used in training only (evaluation is the plain
    ``[MASK]`` state), and the MLP is applied after the subtraction, in training only by default.

    Inputs:
        a list of N raw sentences.

    Requirements:
        head ``mask`` (a discrete template, no soft prompt).

    Example::

        anchor = AUTHORS_VIEWS["bert"][0]  # the default backbone is BERT-like
        embedder = protoembed.load("default", head="mask", template=anchor)
        loss = build_objective("promptbert", embedder, denoise=True).train()(sentences)

    Citation: Ting Jiang, Jian Jiao, Shaohan Huang, Zihan Zhang, Deqing Wang, Fuzhen Zhuang, Furu Wei,
    Haizhen Huang, Denvy Deng, Qi Zhang. "PromptBERT: Improving BERT Sentence Embeddings with Prompts."
    EMNLP 2022. https://arxiv.org/abs/2201.04337
    """

    options: PromptBERTOptions

    def __init__(
        self,
        embedder: Embedder,
        options: PromptBERTOptions | None = None,
        *,
        max_seq_length: int | None = None,
    ) -> None:
        super().__init__(embedder, options, max_seq_length=max_seq_length)
        encoder = embedder.encoder
        if encoder.template is None or encoder.soft_prompt is not None:
            raise ProtoembedError(
                f"objective 'promptbert' needs head 'mask' (a discrete template); the embedder has head "
                f"{embedder.head!r}"
            )
        #: the second view's template text (the option, else the authors' pair's other template).
        self.second_template = self.options.second_template or default_second_template(
            encoder.template, backbone_family(embedder)
        )
        self.first = self.views.template(encoder.template)
        self.second = self.views.template(self.second_template)

    def build_rows(
        self, batch: Mapping[str, Sequence[str]] | Sequence[str]
    ) -> tuple[Rows, int, dict[str, torch.Tensor]]:
        """2N view rows, then (denoising) one template-alone row per template and sentence length;
        ``index["denoise"]`` (2N,) is the template-alone row of each view row."""
        ids = self.views.sentence_ids(batch_sentences(batch))
        n = len(ids)
        rows = self.views.wrap(self.first, ids).extend(self.views.wrap(self.second, ids))
        lookups: list[int] = []
        if self.options.denoise:
            for view, template in enumerate((self.first, self.second)):
                lengths = [length for _, length in rows.span[view * n : (view + 1) * n]]
                unique = sorted(set(lengths))
                base = len(rows)
                rows.extend(self.views.template_alone(template, unique))
                lookups.extend(base + unique.index(length) for length in lengths)
        index = {"denoise": torch.tensor(lookups, dtype=torch.long)} if lookups else {}
        return rows, n, index

    def loss(self, states: torch.Tensor, batch: ViewBatch) -> torch.Tensor:
        """InfoNCE between the two (denoised) views."""
        n = batch.n
        views = states[: 2 * n]
        if "denoise" in batch.index:
            views = views - states[batch.index["denoise"]]
        return self.infonce(views, n)
