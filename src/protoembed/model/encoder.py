"""The input module: tokenizer + Hugging Face encoder, with optional template and soft prompt.

``PromptEncoder`` is a sentence-transformers ``InputModule`` (saved in the model's root folder), so
``SentenceTransformer(path)`` imports it by dotted path and runs exactly our code.

Input formats:
- no template: ``[CLS] sentence [SEP]``, truncated to ``max_seq_length`` tokens in all (as
  sentence-transformers' ``Transformer`` does);
- template ``T`` with ``<S>``/``[MASK]``: ``[CLS] prefix(T) sentence suffix(T) [SEP]``; only the sentence is
  truncated, ``max_seq_length`` counts sentence tokens;
- soft prompt (ConPVP anchor): ``n_soft_prompt`` placeholder slots right before the mask token whose input
  embeddings are replaced by a trainable ``(n_soft_prompt, hidden)`` matrix; positions are added as usual.

Features out of :meth:`forward`: ``token_embeddings`` (B, T, H), plus the inputs (``input_ids``,
``attention_mask`` and, with a template, ``mask_index`` (B,)).

Every input row, at evaluation and in the training objectives (:mod:`protoembed.objectives.views`), is
built by one path: :meth:`PromptEncoder.sentence_ids` (strip, lower-case, tokenise without special
tokens) then :meth:`PromptEncoder.wrap` (truncate the sentence, wrap it in the template or the special
tokens).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from sentence_transformers.base.modules.input_module import InputModule

from protoembed.core.errors import EmptySentenceError, ProtoembedError
from protoembed.inputs.templates import Template, TemplateIds, special_tokens_around, tokenize_template
from protoembed.model.backbones import load_backbone
from protoembed.outputs.st_layout import read_sentence_bert_config, write_sentence_bert_config

logger = logging.getLogger(__name__)

SOFT_PROMPT_FILE = "soft_prompt.safetensors"
#: Held around a tokenizer call that may change the tokenizer's state (:meth:`PromptEncoder.raw_ids`).
_TOKENIZER_CALL = threading.Lock()
SOFT_PROMPT_INITS = ("uniform", "template")


def pad_rows(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-pad token rows to the longest: ``(input_ids, attention_mask)``, int64 arrays (B, T), filled
    in one vectorised step (the rows' ids laid end to end land on the mask's ones in row-major order)."""
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    width = int(lengths.max()) if len(rows) else 0
    attention = (np.arange(width) < lengths[:, None]).astype(np.int64)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    ids[attention.astype(bool)] = np.fromiter(
        itertools.chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum())
    )
    return ids, attention


def position_offset(model: torch.nn.Module) -> int:
    """Position id of a sequence's first token: ``padding_idx + 1`` for models whose position embeddings
    have a padding index (RoBERTa, XLM-R, CamemBERT, MPNet... number positions from there, as their
    ``create_position_ids_from_input_ids`` does), else 0 (BERT, ALBERT, MiniLM...)."""
    embeddings = getattr(model, "embeddings", None)
    padding_idx = getattr(getattr(embeddings, "position_embeddings", None), "padding_idx", None)
    return int(padding_idx) + 1 if padding_idx is not None else 0


class PromptEncoder(InputModule):
    """Backbone encoder with optional discrete template and continuous (soft) prompt.

    Args:
        model_name_or_path: local Hugging Face model directory (weights + tokenizer).
        max_seq_length: token budget (whole input without a template, the sentence alone with one);
            ``None`` = what the backbone's position embeddings allow.
        template: a template with ``<S>`` and ``[MASK]``; the sentence embedding is the mask state.
        n_soft_prompt: number of trainable prompt vectors placed right before the mask token.
        soft_prompt_init: ``uniform`` (U[0, 1), the ConPVP authors' code) or ``template`` (the word
            embeddings of ``soft_prompt_init_text``'s first tokens, cycled).
        soft_prompt_init_text: words whose embeddings seed the ``template`` initialisation.
        do_lower_case: lower-case sentences before tokenising.
        tokenizer, model: already-loaded objects (skip loading from ``model_name_or_path``).
    """

    config_file_name = "protoembed_encoder.json"
    config_keys = [
        "max_seq_length",
        "template",
        "n_soft_prompt",
        "soft_prompt_init",
        "soft_prompt_init_text",
        "do_lower_case",
    ]
    save_in_root = True

    def __init__(
        self,
        model_name_or_path: str | None = None,
        *,
        max_seq_length: int | None = None,
        template: str | None = None,
        n_soft_prompt: int = 0,
        soft_prompt_init: str = "uniform",
        soft_prompt_init_text: str = 'This sentence : " means',
        do_lower_case: bool = False,
        tokenizer: Any = None,
        model: torch.nn.Module | None = None,
    ) -> None:
        super().__init__()
        if tokenizer is None or model is None:
            tokenizer, model = load_backbone(model_name_or_path)
        self.tokenizer = tokenizer
        self.auto_model = model
        self.max_seq_length = max_seq_length
        self.do_lower_case = do_lower_case
        self.n_soft_prompt = int(n_soft_prompt)
        self.soft_prompt_init = soft_prompt_init
        self.soft_prompt_init_text = soft_prompt_init_text
        if self.n_soft_prompt and template is None:
            raise ProtoembedError("a soft prompt needs a template with a [MASK] slot")
        self.template = template
        self._template_ids: TemplateIds | None = None
        if template is not None:
            self._template_ids = tokenize_template(Template(template), tokenizer, self.n_soft_prompt)
        #: the special ids around a plain input ([CLS] / [SEP]).
        self.specials: tuple[list[int], list[int]] = special_tokens_around(tokenizer)
        self.soft_prompt: torch.nn.Parameter | None = None
        if self.n_soft_prompt:
            self.soft_prompt = torch.nn.Parameter(self._init_soft_prompt())

    # ----------------------------------------------------------------- set-up
    @property
    def hidden_size(self) -> int:
        """Width H of the backbone's token states."""
        return int(self.auto_model.config.hidden_size)

    def get_embedding_dimension(self) -> int:
        """Width of the token embeddings this module outputs (sentence-transformers API)."""
        return self.hidden_size

    def _init_soft_prompt(self) -> torch.Tensor:
        """Initial ``(n_soft_prompt, E)`` soft prompt (E = word-embedding width) (ConPVP authors' code: uniform on [0, 1))."""
        if self.soft_prompt_init not in SOFT_PROMPT_INITS:
            raise ProtoembedError(
                f"soft_prompt_init {self.soft_prompt_init!r}: expected one of {', '.join(SOFT_PROMPT_INITS)}"
            )
        if self.soft_prompt_init == "uniform":
            width = self.auto_model.get_input_embeddings().embedding_dim  # ALBERT: E, not H
            return torch.rand(self.n_soft_prompt, width)
        ids = self.tokenizer(self.soft_prompt_init_text, add_special_tokens=False)["input_ids"]
        if not ids:
            raise ProtoembedError("soft_prompt_init_text has no tokens")
        ids = [ids[i % len(ids)] for i in range(self.n_soft_prompt)]
        return self.auto_model.get_input_embeddings().weight[ids].detach().clone()

    @property
    def template_ids(self) -> TemplateIds | None:
        """The template tokenised for this tokenizer (soft-prompt slots included), or ``None``."""
        return self._template_ids

    @property
    def position_offset(self) -> int:
        """Position id of the first token (see :func:`position_offset`)."""
        return position_offset(self.auto_model)

    @property
    def position_budget(self) -> int:
        """Most tokens (special tokens included) the backbone's position embeddings accept."""
        limit = int(getattr(self.auto_model.config, "max_position_embeddings", 512)) - self.position_offset
        model_max = getattr(self.tokenizer, "model_max_length", limit) or limit
        return min(limit, int(model_max))

    # ----------------------------------------------------------- tokenising
    #: while :meth:`remembering_ids` is open: sentence -> its :meth:`raw_ids` (``None``: none kept)
    id_memory: dict[str, list[int]] | None = None

    @contextlib.contextmanager
    def remembering_ids(self, memory: dict[str, list[int]]) -> Iterator[None]:
        """While open, :meth:`raw_ids` looks each sentence up in ``memory`` and adds those it tokenises,
        so texts encoded again (a training run's dev set, at every evaluation) are tokenised once."""
        saved, self.id_memory = self.id_memory, memory
        try:
            yield
        finally:
            self.id_memory = saved

    def raw_ids(self, sentences: Sequence[str]) -> list[list[int]]:
        """Token ids of each sentence (stripped, lower-cased with ``do_lower_case``), no special tokens, no
        check: the tokenizer's own ids for those texts (from :attr:`id_memory` where it holds them).
        """
        memory = self.id_memory
        if memory is None:
            return self.token_ids(sentences)
        missing = [s for s in dict.fromkeys(sentences) if s not in memory]
        if missing:
            memory.update(zip(missing, self.token_ids(missing)))
        return [memory[s] for s in sentences]

    def token_ids(self, sentences: Sequence[str]) -> list[list[int]]:
        """:meth:`raw_ids` computed: the tokenizer called on every sentence.

        A fast tokenizer in its plain state (no truncation or padding set on it, special tokens not
        split) is called directly (``encode_batch_fast``: no offsets computed, the same ids as
        ``tokenizer(texts, add_special_tokens=False)``); that only reads its state, so threads may call
        this at once (the Rust call releases the GIL). Any other tokenizer is called as usual, one call at
        a time.
        """
        texts = [str(s).strip() for s in sentences]
        if self.do_lower_case:
            texts = [t.lower() for t in texts]
        if not texts:
            return []
        backend = getattr(self.tokenizer, "_tokenizer", None)
        if (
            getattr(self.tokenizer, "is_fast", False)
            and backend is not None
            and backend.truncation is None
            and backend.padding is None
            and backend.encode_special_tokens == bool(getattr(self.tokenizer, "split_special_tokens", False))
        ):
            encode = getattr(backend, "encode_batch_fast", backend.encode_batch)
            return [encoding.ids for encoding in encode(texts, add_special_tokens=False)]
        # verbose=False: transformers' "sequence length is longer than the specified maximum" warning
        # names the tokenizer's limit, not ours; tokenize_ids says what is cut and to what length. One
        # call at a time: this call may reset a fast tokenizer's state, which another thread would see.
        with _TOKENIZER_CALL:
            tokenized = self.tokenizer(texts, add_special_tokens=False, verbose=False)
        return [list(x) for x in tokenized["input_ids"]]

    def sentence_ids(self, sentences: Sequence[str], allow_empty: bool = False) -> list[list[int]]:
        """Token ids of each sentence (:meth:`raw_ids`: stripped, lower-cased with ``do_lower_case``), no
        special tokens.

        Raises:
            ProtoembedError: a sentence without tokens, naming its index (unless ``allow_empty``).
        """
        ids = self.raw_ids(sentences)
        self._check_empty([len(x) for x in ids], allow_empty)
        return ids

    def sentence_budget(self, template: TemplateIds | None, max_seq_length: int | None) -> int:
        """Most sentence tokens a row keeps.

        Without a template ``max_seq_length`` counts every token (special tokens included), with one it
        counts sentence tokens (the template always survives); ``None`` = what the position embeddings
        allow.
        """
        head, tail = self.specials if template is None else (template.head, template.tail)
        room = self.position_budget - len(head) - len(tail)
        if room <= 0:
            raise ProtoembedError("template too long for the backbone's position embeddings")
        if max_seq_length is None:
            return room
        limit = max_seq_length - len(head) - len(tail) if template is None else max_seq_length
        return max(0, min(limit, room))

    def wrap(
        self, sentence_ids: list[int], template: TemplateIds | None, max_seq_length: int | None
    ) -> tuple[list[int], int | None]:
        """One input row: ``(input_ids, mask index or None)``.

        ``sentence_ids`` (from :meth:`sentence_ids`) are truncated to :meth:`sentence_budget` and wrapped
        in ``template`` (``[CLS] prefix sentence suffix [SEP]``) or, without one, in the special tokens.
        """
        ids = sentence_ids[: self.sentence_budget(template, max_seq_length)]
        if template is None:
            before, after = self.specials
            return [*before, *ids, *after], None
        return template.build(ids)

    def rows(self, sentence_ids: list[list[int]]) -> tuple[list[list[int]], list[int] | None]:
        """This encoder's input rows of ``sentence_ids`` (:meth:`wrap` with its template and
        ``max_seq_length``): ``(input_ids per sentence, mask index per sentence or None)``."""
        template = self.template_ids
        if template is None:  # the common case, without a call per row
            before, after = self.specials
            budget = self.sentence_budget(None, self.max_seq_length)
            return [[*before, *ids[:budget], *after] for ids in sentence_ids], None
        rows = [self.wrap(ids, template, self.max_seq_length) for ids in sentence_ids]
        return [ids for ids, _ in rows], [mask for _, mask in rows]

    def tokenize_ids(
        self, sentences: Sequence[str], allow_empty: bool = False
    ) -> tuple[list[list[int]], list[int] | None]:
        """Tokenise sentences into this encoder's input rows (its template, its ``max_seq_length``), unpadded.

        Args:
            sentences: the raw sentences.
            allow_empty: if False, a sentence with no tokens (after stripping) raises an error naming its
                index; if True it is encoded as the template (or ``[CLS] [SEP]``) alone.
        Returns:
            ``(input_ids per sentence, mask index per sentence or None without a template)``.
        """
        sentence_ids = self.sentence_ids(sentences, allow_empty)
        lengths = [len(ids) for ids in sentence_ids]
        budget = self.sentence_budget(self.template_ids, self.max_seq_length)
        cut = [n for n in lengths if n > budget]
        self.log_truncation(len(cut), len(lengths), max(cut, default=0))
        return self.rows(sentence_ids)

    def log_truncation(self, cut: int, total: int, longest: int) -> None:
        """Log once (a warning) that ``cut`` of ``total`` inputs are longer than :meth:`sentence_budget`
        and cut to it (``longest``: the longest one's sentence tokens); nothing when ``cut`` is 0."""
        if not cut:
            return
        budget = self.sentence_budget(self.template_ids, self.max_seq_length)
        limit = f"max_seq_length {self.max_seq_length}" if self.max_seq_length else "the backbone's limit"
        logger.warning(
            "%d of %d input(s) truncated to %d sentence tokens (%s; the longest had %d)",
            cut,
            total,
            budget,
            limit,
            longest,
        )

    @staticmethod
    def _check_empty(lengths: list[int], allow_empty: bool) -> None:
        if allow_empty:
            return
        empty = [i for i, n in enumerate(lengths) if n <= 0]
        if empty:
            raise EmptySentenceError(empty)

    @property
    def pad_id(self) -> int:
        """The id padding fills rows with (the tokenizer's pad token, else 0)."""
        return self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

    def collate(
        self, input_ids: list[list[int]], mask_index: list[int] | None = None
    ) -> dict[str, torch.Tensor]:
        """Pad a batch of token id lists into model features (right padding; :func:`pad_rows`)."""
        ids, attention = pad_rows(input_ids, self.pad_id)
        features = {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(attention)}
        if mask_index is not None:
            features["mask_index"] = torch.tensor(mask_index, dtype=torch.long)
        return features

    def preprocess(
        self, inputs: Sequence[str], prompt: str | None = None, **kwargs
    ) -> dict[str, torch.Tensor]:
        """sentence-transformers hook: tokenise and pad a batch of sentences."""
        if prompt:
            inputs = [prompt + text for text in inputs]
        return self.collate(*self.tokenize_ids(inputs))

    # ---------------------------------------------------------------- forward
    def input_embeddings(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Word embeddings of ``input_ids`` with the soft-prompt slots overwritten (B, T, H).

        The ``n_soft_prompt`` slots right before ``mask_index`` are replaced in every row, or only in the
        rows flagged by an optional boolean feature ``soft_prompt_rows`` (B,) (batches that mix anchors with
        discrete-template prototypes, ConPVP).

        Written with shapes fixed by the batch alone (a slot mask and a gather, no boolean indexing), so
        the forward never waits for the device to count the flagged rows.
        """
        embeds = self.auto_model.get_input_embeddings()(features["input_ids"])
        k = self.n_soft_prompt
        positions = torch.arange(embeds.size(1), device=embeds.device)
        # offset j in [0, k): the row's j-th soft-prompt slot (the k positions right before its mask)
        offset = positions.unsqueeze(0) - (features["mask_index"].to(embeds.device).unsqueeze(1) - k)
        in_slot = (offset >= 0) & (offset < k)
        if "soft_prompt_rows" in features:
            in_slot = in_slot & features["soft_prompt_rows"].to(embeds.device).bool().unsqueeze(1)
        prompt = self.soft_prompt.to(embeds.dtype)[offset.clamp(0, k - 1)]
        return torch.where(in_slot.unsqueeze(-1), prompt, embeds)

    def forward(self, features: dict[str, torch.Tensor], **kwargs) -> dict[str, torch.Tensor]:
        """Run the backbone; adds ``token_embeddings`` (B, T, H) to ``features``.

        Optional features: ``position_ids`` (B, T) (e.g. position-shifted template denoising) and
        ``soft_prompt_rows`` (see :meth:`input_embeddings`).
        """
        inputs: dict[str, torch.Tensor] = {"attention_mask": features["attention_mask"]}
        if "position_ids" in features:
            inputs["position_ids"] = features["position_ids"]
        if self.soft_prompt is not None:
            inputs["inputs_embeds"] = self.input_embeddings(features)
        else:
            inputs["input_ids"] = features["input_ids"]
        output = self.auto_model(**inputs, return_dict=True)
        features["token_embeddings"] = output.last_hidden_state
        return features

    # ----------------------------------------------------------- persistence
    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        """Write the backbone, tokenizer, our config and (if any) ``soft_prompt.safetensors``.

        Also writes ``sentence_bert_config.json`` so that sentence-transformers' own ``Transformer``
        module can load the same folder when no template is used.
        """
        self.auto_model.save_pretrained(output_path, safe_serialization=safe_serialization)
        self.tokenizer.save_pretrained(output_path)
        self.save_config(output_path)
        self.save_sentence_bert_config(output_path)
        if self.soft_prompt is not None:
            save_file(
                {"soft_prompt": self.soft_prompt.detach().cpu().contiguous()},
                os.path.join(output_path, SOFT_PROMPT_FILE),
            )

    def save_sentence_bert_config(self, folder: str | os.PathLike[str]) -> None:
        """Write ``sentence_bert_config.json`` into ``folder``: ``max_seq_length`` (the backbone's budget
        when unset) and ``do_lower_case``, what sentence-transformers' own ``Transformer`` module reads."""
        write_sentence_bert_config(folder, self.max_seq_length or self.position_budget, self.do_lower_case)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", **kwargs) -> PromptEncoder:
        """Load from a folder written by :meth:`save` (or a plain Hugging Face / sentence-transformers one)."""
        root = Path(model_name_or_path) / subfolder
        config: dict[str, Any] = {}
        if (root / cls.config_file_name).is_file():
            config = json.loads((root / cls.config_file_name).read_text(encoding="utf-8"))
        else:
            config = read_sentence_bert_config(root) or {}
        config.update({k: v for k, v in kwargs.items() if k in cls.config_keys and v is not None})
        encoder = cls(str(root), **{k: v for k, v in config.items() if k in cls.config_keys})
        if encoder.soft_prompt is not None and (root / SOFT_PROMPT_FILE).is_file():
            encoder.soft_prompt.data.copy_(load_file(str(root / SOFT_PROMPT_FILE))["soft_prompt"])
        return encoder
