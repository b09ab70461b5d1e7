"""Embedder = backbone encoder (+ template / soft prompt) + head.

Data flow: text -> :class:`~protoembed.model.encoder.PromptEncoder` (formatting, truncation, soft prompt,
backbone) -> pooling module (head) -> vector; ``encode`` is the :class:`~protoembed.model.batching.BatchEncoder`
loop over this module's forward pass. :meth:`Embedder.save` writes the sentence-transformers layout, so
``SentenceTransformer(path)`` loads the model and produces the same vectors as ``protoembed.load(path)``
(reading and building are in :mod:`protoembed.model.loading`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch
from sentence_transformers.base.modules.module import Module

from protoembed.core.version import __version__
from protoembed.model.backbones import quiet_transformers
from protoembed.model.batching import BatchEncoder, Encodes, check_truncate_dim, truncate
from protoembed.model.encoder import PromptEncoder
from protoembed.model.model_card import write_model_card
from protoembed.model.precision import (
    AUTOCAST_DTYPES,
    check_fp16,
    check_precision,
    native_bf16,
    warn_emulated_bf16,
)
from protoembed.model.protocol import DEFAULT_SCORE_FUNCTION
from protoembed.model.runtimes import TORCH
from protoembed.outputs.io import replace_dir
from protoembed.outputs.st_layout import (
    MATRYOSHKA_DIMS,
    PROTOEMBED_CONFIG,
    TRANSFORMER,
    LayoutModule,
    library_versions,
    module_type,
    write_json,
    write_modules,
    write_st_config,
)


class Embedder(torch.nn.Module, Encodes):
    """A sentence encoder: ``encoder`` (input module) then ``pooler`` (head), optionally L2-normalised.

    Args:
        encoder: the input module (tokenizer + backbone + template / soft prompt).
        pooler: a module turning ``token_embeddings`` into ``sentence_embedding``.
        head: the head's registry name (see :data:`protoembed.model.heads.HEADS`).
        normalize: L2-normalise the output vectors (as a saved ``Normalize`` module does).
        precision: ``fp32``, ``bf16`` or ``fp16`` (CUDA): the backbone's forward in :meth:`encode` (see
            :mod:`protoembed.model.precision`); training always runs the forward as the trainer sets it.
        prompts: input prompts, name -> text prepended to each input by ``encode(prompt_name=...)``
            (:mod:`protoembed.inputs.prompts`; ``query`` and ``document`` are the retrieval roles).
        similarity_fn_name: the score function of its vectors (``cosine``, ``dot``;
            :data:`~protoembed.model.protocol.SCORE_FUNCTIONS`).
        truncate_dim: the width :meth:`encode` and the export cut the vectors to (``None``: the full
            vector; :func:`~protoembed.model.batching.truncate`), saved in
            ``config_sentence_transformers.json`` as sentence-transformers saves its own.
    """

    #: where :meth:`encode` runs (an export's embedder names its runtime: ``onnx``, ``openvino``, ...)
    runtime = TORCH

    def __init__(
        self,
        encoder: PromptEncoder,
        pooler: Module,
        head: str,
        normalize: bool = False,
        precision: str = "fp32",
        prompts: dict[str, str] | None = None,
        similarity_fn_name: str = DEFAULT_SCORE_FUNCTION,
        truncate_dim: int | None = None,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.pooler = pooler
        self.head = head
        self.normalize = normalize
        self.precision = check_precision(precision)
        self.prompts: dict[str, str] = dict(prompts or {})
        self.similarity_fn_name = similarity_fn_name
        self.truncate_dim = check_truncate_dim(truncate_dim, self.pooled_dimension)
        #: the sizes this model was trained to be cut to (Matryoshka, largest first; set by the objective
        #: that trains it); ``None``: none. Saved in ``protoembed.json``.
        self.matryoshka_dims: list[int] | None = None

    @property
    def device(self) -> torch.device:
        """Device of the backbone's parameters."""
        return next(self.encoder.auto_model.parameters()).device

    @property
    def pooled_dimension(self) -> int:
        """Width of the head's vectors, before any cut."""
        return int(self.pooler.get_embedding_dimension())

    @property
    def max_seq_length(self) -> int | None:
        """The token budget of the tokenisation (sentence tokens only for prompt heads)."""
        return self.encoder.max_seq_length

    @property
    def tokenizer(self):
        """The backbone's tokenizer."""
        return self.encoder.tokenizer

    def embed(
        self,
        features: dict[str, torch.Tensor],
        normalize: bool | None = None,
        precision: str = "fp32",
        truncate_dim: int | None = None,
    ) -> dict[str, torch.Tensor]:
        """The one forward pass that training, :meth:`encode` and the export run: padded batch features ->
        the head's outputs, ``sentence_embedding`` (B, D) and ``token_embeddings`` (B, T, H).

        Args:
            features: ``input_ids``, ``attention_mask`` (and ``mask_index`` for prompt heads).
            normalize: L2-normalise ``sentence_embedding`` (default: :attr:`normalize`; the objectives
                pass False, their losses take cosines of the raw head output).
            precision: ``bf16`` (``fp16``) runs the backbone under bf16 (fp16) autocast and the head and
                normalisation in fp32 on its fp32-cast token embeddings (see :mod:`protoembed.model.precision`).
            truncate_dim: cut ``sentence_embedding`` to its first ``truncate_dim`` dimensions before the
                normalisation (:func:`~protoembed.model.batching.truncate`; ``None``: no cut; the export
                passes :attr:`truncate_dim`).
        """
        if precision == "fp32":
            encoded = self.encoder(features)
        else:
            device_type = self.device.type
            if precision == "bf16" and not native_bf16(self.device):
                warn_emulated_bf16(device_type)
            with torch.autocast(device_type=device_type, dtype=getattr(torch, AUTOCAST_DTYPES[precision])):
                encoded = self.encoder(features)
            encoded = {
                k: v.float() if torch.is_tensor(v) and v.is_floating_point() else v
                for k, v in encoded.items()
            }
        pooled = self.pooler(encoded)
        pooled["sentence_embedding"] = truncate(
            pooled["sentence_embedding"], truncate_dim, self.normalize if normalize is None else normalize
        )
        return pooled

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Padded batch features -> sentence vectors (B, D), with gradients if enabled (:meth:`embed`)."""
        return self.embed(features)["sentence_embedding"]

    def inference_forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """:meth:`forward` at :attr:`precision` (fp32 vectors out)."""
        return self.embed(features, precision=self.precision)["sentence_embedding"].float()

    def features(self, sentences: Sequence[str], allow_empty: bool = False) -> dict[str, torch.Tensor]:
        """Tokenise and pad ``sentences`` into one batch on this embedder's device."""
        batch = self.encoder.collate(*self.encoder.tokenize_ids(sentences, allow_empty))
        return {k: v.to(self.device) for k, v in batch.items()}

    @contextlib.contextmanager
    def encoding(self, precision: str | None) -> Iterator[None]:
        """Eval mode and ``precision`` (``None``: :attr:`precision`) for one :meth:`encode`, restored
        afterwards (:meth:`protoembed.model.batching.Encodes.encoding`); ``fp16`` off CUDA refused
        (:func:`~protoembed.model.precision.check_fp16`)."""
        chosen = self.precision if precision is None else check_precision(precision)
        if chosen == "fp16":
            check_fp16("precision", self.device)
        was_training, saved_precision = self.training, self.precision
        self.eval()
        self.precision = chosen
        try:
            yield
        finally:
            self.train(was_training)
            self.precision = saved_precision

    def batch_encoder(self) -> BatchEncoder:
        """The encode loop over this embedder's tokenisation and its forward pass (at its current device
        and ``normalize`` setting)."""
        return BatchEncoder(
            self.encoder, self.inference_forward, self.pooled_dimension, self.device, self.normalize
        )

    # ----------------------------------------------------------- persistence
    def modules_for_sentence_transformers(self) -> list[Module]:
        """The module list a ``SentenceTransformer`` built from this embedder runs."""
        from sentence_transformers.base.modules.normalize import Normalize

        return [self.encoder, self.pooler] + ([Normalize()] if self.normalize else [])

    def save(self, path: str | os.PathLike) -> Path:
        """Write the model in the sentence-transformers layout; atomic (temp folder, then rename).

        Layout: root = backbone + tokenizer + ``protoembed_encoder.json`` (+ ``soft_prompt.safetensors``),
        ``1_<Pooling>/config.json``, optional ``2_Normalize``, ``modules.json``,
        ``config_sentence_transformers.json`` (with :attr:`prompts`, :attr:`similarity_fn_name` and
        :attr:`truncate_dim` when set),
        ``protoembed.json`` (the head's name, the Matryoshka sizes if trained with them); the
        sentence-transformers files are those of :mod:`protoembed.outputs.st_layout`. Returns the final path.
        """

        def build(tmp: Path) -> None:
            modules = [LayoutModule(module_type(m), m) for m in self.modules_for_sentence_transformers()]
            if self.encoder.template is None:  # plain input: sentence-transformers' own module reads it
                modules[0] = LayoutModule(TRANSFORMER, self.encoder)
            write_modules(tmp, modules)
            versions = library_versions("sentence_transformers", "transformers", "pytorch")
            write_st_config(
                tmp,
                versions,
                self.prompts,
                self.similarity_fn_name,
                self.default_prompt_name,
                self.truncate_dim,
            )
            saved = {"head": self.head, "protoembed_version": __version__}
            if self.matryoshka_dims:
                saved[MATRYOSHKA_DIMS] = list(self.matryoshka_dims)
            write_json(tmp / PROTOEMBED_CONFIG, saved)
            write_model_card(tmp, name=Path(path).name)

        with quiet_transformers():
            return replace_dir(path, build)
