"""Embedder = backbone encoder (+ template / soft prompt) + head, and :func:`load`.

Data flow: text -> :class:`~protoembed.encoder.PromptEncoder` (formatting, truncation, soft prompt,
backbone) -> pooling module (head) -> vector. :meth:`Embedder.save` writes the sentence-transformers
layout, so ``SentenceTransformer(path)`` loads the model and
produces the same vectors as ``protoembed.load(path)``.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sentence_transformers.base.modules.module import Module
from tqdm.auto import tqdm

from protoembed.backbones import loading_errors, quiet_transformers, resolve_model_dir
from protoembed.encoder import PromptEncoder
from protoembed.errors import EmptySentenceError, ProtoembedError
from protoembed.heads import HEADS, get_head
from protoembed.inputs import check_batch_size, check_max_seq_length, check_sentences, resolve_device
from protoembed.io import replace_dir
from protoembed.model_card import write_model_card

PROTOEMBED_CONFIG = "protoembed.json"
#: modules.json types written for standard modules (aliases every sentence-transformers version knows).
_ST_TYPES = {
    "Pooling": "sentence_transformers.models.Pooling",
    "Normalize": "sentence_transformers.models.Normalize",
}


class Embedder(torch.nn.Module):
    """A sentence encoder: ``encoder`` (input module) then ``pooler`` (head), optionally L2-normalised.

    Args:
        encoder: the input module (tokenizer + backbone + template / soft prompt).
        pooler: a module turning ``token_embeddings`` into ``sentence_embedding``.
        head: the head's registry name (see :data:`protoembed.heads.HEADS`).
        normalize: L2-normalise the output vectors (as a saved ``Normalize`` module does).
    """

    def __init__(self, encoder: PromptEncoder, pooler: Module, head: str, normalize: bool = False) -> None:
        super().__init__()
        self.encoder = encoder
        self.pooler = pooler
        self.head = head
        self.normalize = normalize

    @property
    def device(self) -> torch.device:
        """Device of the backbone's parameters."""
        return next(self.encoder.auto_model.parameters()).device

    @property
    def dimension(self) -> int:
        """Width of the sentence vectors."""
        return int(self.pooler.get_embedding_dimension())

    @property
    def tokenizer(self):
        """The backbone's tokenizer."""
        return self.encoder.tokenizer

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Padded batch features -> sentence vectors (B, D), with gradients if enabled."""
        features = self.pooler(self.encoder(features))
        embeddings = features["sentence_embedding"]
        return torch.nn.functional.normalize(embeddings, dim=-1) if self.normalize else embeddings

    def features(self, sentences: Sequence[str], allow_empty: bool = False) -> dict[str, torch.Tensor]:
        """Tokenise and pad ``sentences`` into one batch on this embedder's device."""
        batch = self.encoder.collate(*self.encoder.tokenize_ids(sentences, allow_empty))
        return {k: v.to(self.device) for k, v in batch.items()}

    def encode(
        self,
        sentences: Sequence[str] | str,
        batch_size: int = 64,
        normalize: bool | None = None,
        show_progress_bar: bool | None = None,
        convert_to_tensor: bool = False,
        allow_empty: bool = False,
    ) -> np.ndarray | torch.Tensor:
        """Encode sentences to vectors.

        Every sentence is tokenised once up front; identical input rows run once; batches are formed
        from rows of similar token length (longest first) and padded to the batch's own length; the
        forward runs in inference mode.

        Args:
            sentences: the sentences (a single string gives a single vector).
            batch_size: sentences per forward pass.
            normalize: L2-normalise the vectors (default: the model's own setting).
            show_progress_bar: show a progress bar on stderr (default: for more than 1000 sentences
                when stderr is a terminal).
            convert_to_tensor: return a torch tensor on this embedder's device instead of numpy.
            allow_empty: encode empty sentences as the bare template instead of raising an error.
        Returns:
            float32 array (N, D) in the input order ((D,) for a single string; (0, D) for no sentence).
        Raises:
            ProtoembedError: a non-string input (named by its index), ``batch_size`` below 1, or
                (:class:`~protoembed.errors.EmptySentenceError`) empty sentences without ``allow_empty``.
        """
        if normalize is False and self.normalize:
            raise ProtoembedError("this model normalises its vectors; normalize=False cannot undo it")
        check_batch_size(batch_size)
        extra_normalize = bool(normalize) and not self.normalize
        single = isinstance(sentences, str)
        texts = [sentences] if single else check_sentences(sentences)
        if not texts:
            out = torch.zeros((0, self.dimension), dtype=torch.float32, device=self.device)
            return out if convert_to_tensor else out.cpu().numpy()
        try:
            ids, masks = self.encoder.tokenize_ids(texts, allow_empty)
        except ProtoembedError:
            self._raise_empty(texts)
            raise
        # Identical input rows (e.g. sentences that differ only in case for an uncased tokenizer) are
        # run once: ``first`` holds a row per distinct input, ``inverse`` maps every sentence to it.
        distinct: dict[tuple[int, ...], int] = {}
        first: list[int] = []
        inverse = np.empty(len(ids), dtype=np.int64)
        for i, row in enumerate(ids):
            key = (*row, -1 if masks is None else masks[i])
            inverse[i] = distinct.setdefault(key, len(first))
            if inverse[i] == len(first):
                first.append(i)
        ids = [ids[i] for i in first]
        masks = None if masks is None else [masks[i] for i in first]
        order = np.argsort([-len(x) for x in ids], kind="stable")
        out = torch.empty((len(ids), self.dimension), dtype=torch.float32, device=self.device)
        if show_progress_bar is None:  # never into a log file
            show_progress_bar = len(texts) > 1000 and sys.stderr.isatty()
        was_training = self.training
        self.eval()
        with torch.inference_mode():
            for start in tqdm(
                range(0, len(ids), batch_size),
                desc="Encoding",
                disable=not show_progress_bar,
                unit="batch",
                file=sys.stderr,
            ):
                index = order[start : start + batch_size]
                batch = self.encoder.collate(
                    [ids[i] for i in index], None if masks is None else [masks[i] for i in index]
                )
                vectors = self({k: v.to(self.device) for k, v in batch.items()}).float()
                if extra_normalize:  # forward() already normalises when the model itself does
                    vectors = torch.nn.functional.normalize(vectors, dim=-1)
                out[torch.as_tensor(index, device=self.device)] = vectors
        self.train(was_training)
        if len(first) < len(texts):
            out = out[torch.as_tensor(inverse, device=self.device)]
        result = out if convert_to_tensor else out.cpu().numpy()
        return result[0] if single else result

    def _raise_empty(self, texts: list[str]) -> None:
        """Raise :class:`EmptySentenceError` (with their indexes) if some of ``texts`` have no token."""
        empty = [i for i, ids in enumerate(self.encoder.sentence_ids(texts, allow_empty=True)) if not ids]
        if empty:
            raise EmptySentenceError(empty)

    # ----------------------------------------------------------- persistence
    def modules_for_sentence_transformers(self) -> list[Module]:
        """The module list a ``SentenceTransformer`` built from this embedder runs."""
        from sentence_transformers.base.modules.normalize import Normalize

        return [self.encoder, self.pooler] + ([Normalize()] if self.normalize else [])

    def export(self, path: str | os.PathLike, quantize: str | None = None) -> Path:
        """Write an ONNX export (graph from token ids to the vector, tokenizer, template) to ``path``;
        ``quantize="int8"`` for dynamic int8 quantisation. See :mod:`protoembed.export`."""
        from protoembed.export import export_embedder

        return export_embedder(self, path, quantize=quantize)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the model in the sentence-transformers layout; atomic (temp folder, then rename).

        Layout: root = backbone + tokenizer + ``protoembed_encoder.json`` (+ ``soft_prompt.safetensors``),
        ``1_<Pooling>/config.json``, optional ``2_Normalize``, ``modules.json``,
        ``config_sentence_transformers.json``, ``protoembed.json`` (the head's name).
        Returns the final path.
        """
        import sentence_transformers
        import transformers

        from protoembed import __version__

        def build(tmp: Path) -> None:
            entries = []
            for idx, module in enumerate(self.modules_for_sentence_transformers()):
                name = type(module).__name__
                sub = "" if idx == 0 else f"{idx}_{name}"
                (tmp / sub).mkdir(exist_ok=True)
                module.save(str(tmp / sub))
                kind = _ST_TYPES.get(name, f"{type(module).__module__}.{name}")
                if idx == 0 and self.encoder.template is None:  # plain input: sentence-transformers' own
                    kind = "sentence_transformers.models.Transformer"
                entries.append({"idx": idx, "name": str(idx), "path": sub, "type": kind})
            _write_json(tmp / "modules.json", entries)
            versions = {
                "sentence_transformers": sentence_transformers.__version__,
                "transformers": transformers.__version__,
                "pytorch": torch.__version__,
            }
            _write_json(
                tmp / "config_sentence_transformers.json",
                {
                    "__version__": versions,
                    "prompts": {},
                    "default_prompt_name": None,
                    "similarity_fn_name": "cosine",
                },
            )
            _write_json(tmp / PROTOEMBED_CONFIG, {"head": self.head, "protoembed_version": __version__})
            write_model_card(tmp, name=Path(path).name)

        with quiet_transformers():
            return replace_dir(path, build)


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _load_saved(path: Path) -> tuple[PromptEncoder, Module, str, bool]:
    """Read a sentence-transformers / protoembed folder: (encoder, pooler, head name, normalize)."""
    from sentence_transformers.sentence_transformer.modules.pooling import Pooling

    from protoembed.heads import MaskTokenPooling

    modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
    encoder: PromptEncoder | None = None
    pooler: Module | None = None
    normalize = False
    for entry in sorted(modules, key=lambda e: e["idx"]):
        kind = entry["type"].rsplit(".", 1)[-1]
        if entry["idx"] == 0 and kind in ("Transformer", "PromptEncoder"):
            encoder = PromptEncoder.load(str(path), entry["path"])
        elif kind == "Pooling":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                pooler = Pooling.load(str(path), subfolder=entry["path"])
        elif kind == "MaskTokenPooling":
            pooler = MaskTokenPooling.load(str(path), subfolder=entry["path"])
        elif kind == "Normalize":
            normalize = True
        else:
            pooler = _load_registered_module(path, entry)
    if encoder is None or pooler is None:
        raise ProtoembedError(f"{path / 'modules.json'}: expected an input module and a pooling module")
    head = _saved_head_name(path, encoder, pooler)
    return encoder, pooler, head, normalize


def _load_registered_module(path: Path, entry: dict[str, Any]) -> Module:
    """Load a pooling module of one of our registered heads by its dotted type (e.g. a CNN head)."""
    import importlib

    module_name, _, class_name = entry["type"].rpartition(".")
    if not module_name.startswith("protoembed."):
        raise ProtoembedError(f"{path / 'modules.json'}: module type {entry['type']!r} is not supported")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls.load(str(path), subfolder=entry["path"])


def _saved_head_name(path: Path, encoder: PromptEncoder, pooler: Module) -> str:
    config = path / PROTOEMBED_CONFIG
    if config.is_file():
        return json.loads(config.read_text(encoding="utf-8"))["head"]
    if encoder.template is not None:
        return "soft_prompt" if encoder.n_soft_prompt else "mask"
    mode = getattr(pooler, "pooling_mode", "mean")
    mode = mode[0] if isinstance(mode, (list, tuple)) and len(mode) == 1 else mode
    return mode if isinstance(mode, str) else "+".join(mode)


def load(
    spec: str = "default",
    head: str | None = None,
    *,
    template: str | None = None,
    max_seq_length: int | None = None,
    n_soft_prompt: int | None = None,
    soft_prompt_init: str | None = None,
    normalize: bool | None = None,
    device: str | torch.device | None = None,
) -> Embedder:
    """Load a backbone with a head.

    Args:
        spec: ``default`` (packaged all-MiniLM-L6-v2), a Hugging Face model dir, a protoembed /
            sentence-transformers model dir, or a hub id.
        head: ``cls``, ``mean``, ``max``, ``mask``, ``soft_prompt``, ``cnn`` (see :data:`protoembed.heads.HEADS`);
            default: the saved model's head, or ``mean`` for a bare Hugging Face backbone.
        template: template for prompt heads (``<S>`` and ``[MASK]`` placeholders).
        max_seq_length: token budget (sentence tokens only for prompt heads).
        n_soft_prompt: number of soft-prompt vectors (``soft_prompt`` head; default 4).
        soft_prompt_init: ``uniform`` or ``template``.
        normalize: L2-normalise outputs (default: as saved; False for a bare backbone).
        device: torch device (default: CUDA if available, else CPU); see :func:`resolve_device`.
    Returns:
        an :class:`Embedder` in eval mode.
    Raises:
        ProtoembedError: an unknown head, a bad ``max_seq_length`` or device, or a model folder that
            cannot be loaded (named in the message).
    """
    if head is not None:
        get_head(head)  # fail before loading weights
    check_max_seq_length(max_seq_length)
    device = resolve_device(device)
    path = resolve_model_dir(spec)
    from protoembed.export.runtime import is_export_dir, load_export

    if is_export_dir(path):  # an ONNX export: encode runs on ONNX Runtime
        options = dict(template=template, n_soft_prompt=n_soft_prompt, soft_prompt_init=soft_prompt_init)
        options.update(head=head, max_seq_length=max_seq_length, normalize=normalize, device=device)
        return load_export(path, **options)
    if (path / "modules.json").is_file():
        with quiet_transformers(), loading_errors(path):
            encoder, pooler, saved_head, saved_normalize = _load_saved(path)
        overrides = (template, n_soft_prompt, soft_prompt_init)
        if (head is None or head == saved_head) and all(v is None for v in overrides):
            if max_seq_length is not None:
                encoder.max_seq_length = max_seq_length
            embedder = Embedder(encoder, pooler, saved_head, saved_normalize)
        else:
            embedder = build(
                encoder.auto_model,
                encoder.tokenizer,
                head or saved_head,
                template=template,
                max_seq_length=max_seq_length or encoder.max_seq_length,
                n_soft_prompt=n_soft_prompt,
                soft_prompt_init=soft_prompt_init,
                normalize=saved_normalize,
            )
    else:
        from protoembed.backbones import load_backbone

        tokenizer, model = load_backbone(path)
        embedder = build(
            model,
            tokenizer,
            head or "mean",
            template=template,
            max_seq_length=max_seq_length,
            n_soft_prompt=n_soft_prompt,
            soft_prompt_init=soft_prompt_init,
        )
    if normalize is not None:
        embedder.normalize = normalize
    return embedder.to(device).eval()


def build(
    model: torch.nn.Module,
    tokenizer: Any,
    head: str,
    *,
    template: str | None = None,
    max_seq_length: int | None = None,
    n_soft_prompt: int | None = None,
    soft_prompt_init: str | None = None,
    normalize: bool = False,
) -> Embedder:
    """Put a head on an already-loaded backbone (see :func:`load` for the arguments); eval mode."""
    spec = get_head(head)
    check_max_seq_length(max_seq_length)
    if not spec.uses_template and (template is not None or n_soft_prompt):
        raise ProtoembedError(
            f"head {head!r} takes no template; use one of "
            f"{', '.join(n for n, s in HEADS.items() if s.uses_template)}"
        )
    if n_soft_prompt and not spec.n_soft_prompt:
        raise ProtoembedError(f"head {head!r} has no soft prompt; use head 'soft_prompt'")
    encoder = PromptEncoder(
        max_seq_length=max_seq_length,
        template=template or spec.default_template,
        n_soft_prompt=spec.n_soft_prompt if n_soft_prompt is None else n_soft_prompt,
        soft_prompt_init=soft_prompt_init or "uniform",
        tokenizer=tokenizer,
        model=model,
    )
    return Embedder(encoder, spec.make_pooler(encoder.hidden_size), head, normalize).eval()
