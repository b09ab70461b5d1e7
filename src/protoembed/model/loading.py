"""Loading above the embedder and the export: :func:`load` (a folder or hub id -> a model) and
:func:`build` (a backbone + a head -> an :class:`~protoembed.model.embedder.Embedder`).

:func:`load` reads three kinds of folder: an export (-> an
:class:`~protoembed.model.export.runtime.ExportedEmbedder` on a registered runtime (:mod:`protoembed.model.runtimes`),
by :func:`~protoembed.model.export.runtime.open_export`), a protoembed / sentence-transformers folder
(``modules.json``: the saved input module, pooling module and ``Normalize``), or a bare Hugging Face
backbone (with a new head). Its settings are a :class:`~protoembed.model.model_spec.ModelSpec`. The torch model and the exports sit below this module; neither imports the other.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import torch
from sentence_transformers.base.modules.module import Module

from protoembed.core.errors import ProtoembedError
from protoembed.inputs.checks import resolve_device
from protoembed.inputs.prompts import kept_default
from protoembed.model.backbones import loading_errors, quiet_transformers, resolve_model_dir
from protoembed.model.batching import check_truncate_dim
from protoembed.model.embedder import PROTOEMBED_CONFIG, Embedder
from protoembed.model.encoder import PromptEncoder
from protoembed.model.export.runtime import is_export_dir, open_export
from protoembed.model.heads import HEADS, get_head
from protoembed.model.model_spec import SOFT_PROMPT_INITS, ModelSpec, model_spec
from protoembed.model.precision import check_fp16
from protoembed.model.protocol import DEFAULT_SCORE_FUNCTION, SentenceEmbedder
from protoembed.model.runtimes import AUTO, check_export_runtime, get_runtime
from protoembed.outputs.st_layout import (
    MODULES_FILE,
    ST_CONFIG_FILE,
    read_matryoshka_dims,
    read_modules,
    read_st_config,
)


def _load_saved(path: Path) -> tuple[PromptEncoder, Module, str, bool]:
    """Read a sentence-transformers / protoembed folder: (encoder, pooler, head name, normalize)."""
    from sentence_transformers.sentence_transformer.modules.pooling import Pooling

    from protoembed.model.heads import MaskTokenPooling

    encoder: PromptEncoder | None = None
    pooler: Module | None = None
    normalize = False
    for entry in read_modules(path):
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
        raise ProtoembedError(f"{path / MODULES_FILE}: expected an input module and a pooling module")
    head = _saved_head_name(path, encoder, pooler)
    return encoder, pooler, head, normalize


def _load_registered_module(path: Path, entry: dict[str, Any]) -> Module:
    """Load a pooling module of one of our registered heads by its dotted type (e.g. a CNN head)."""
    import importlib

    module_name, _, class_name = entry["type"].rpartition(".")
    if not module_name.startswith("protoembed."):
        raise ProtoembedError(f"{path / MODULES_FILE}: module type {entry['type']!r} is not supported")
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
    spec: str | os.PathLike[str] = "default", head: str | None = None, **settings: Any
) -> SentenceEmbedder:
    """Load a backbone with a head: :func:`load_model` of the :class:`~protoembed.model.model_spec.ModelSpec`
    made of the arguments.

    Args:
        spec: ``default`` (packaged all-MiniLM-L6-v2), a Hugging Face model dir, a protoembed /
            sentence-transformers model dir, an export folder, or a hub id.
        head: a registered head (a key of :data:`protoembed.model.heads.HEADS`);
            default: the saved model's head, or ``mean`` for a bare Hugging Face backbone.
        **settings: the other fields of :class:`~protoembed.model.model_spec.ModelSpec`, each described there:
            ``template``, ``max_seq_length``, ``n_soft_prompt``, ``soft_prompt_init``, ``prompts`` (name ->
            text, replacing the saved ones), ``normalize``, ``truncate_dim`` (replacing the saved one),
            ``device``, ``precision`` and ``runtime``.
    Returns:
        an :class:`Embedder` in eval mode, or an :class:`~protoembed.model.export.runtime.ExportedEmbedder`
        for an export folder or an export runtime (same ``encode``).
    Raises:
        ProtoembedError: an unknown setting, head or runtime, a bad ``max_seq_length`` or device, or a
            model folder that cannot be loaded (named in the message).
    """
    return load_model(model_spec(model=spec, head=head, **settings))


def load_model(spec: ModelSpec) -> SentenceEmbedder:
    """The model ``spec`` describes (see :func:`load`): an export folder opened on its runtime, a saved
    protoembed / sentence-transformers folder (re-headed when ``spec`` changes its head, template or
    soft prompt), or a bare backbone with a new head; on ``spec.runtime`` when that runs exports (the
    fp32 export of the torch model, made once and cached)."""
    device = resolve_device(spec.device)  # fail before loading weights
    path = resolve_model_dir(spec.model)
    head, template, max_seq_length = spec.head, spec.template, spec.max_seq_length
    n_soft_prompt, soft_prompt_init = spec.n_soft_prompt, spec.soft_prompt_init
    if (
        spec.precision == "fp16"
        and not is_export_dir(path)
        and not (spec.runtime != AUTO and get_runtime(spec.runtime).runs_exports)
    ):  # the torch forward: on CUDA only, said before the weights load
        check_fp16("precision", device)
    if is_export_dir(path):  # an export: encode runs on a runtime that opens exports
        check_export_runtime(spec.runtime, path)
        return open_export(path, spec)
    saved: dict[str, Any] = {
        "prompts": {},
        "similarity_fn_name": None,
        "default_prompt_name": None,
        "truncate_dim": None,
    }
    if (path / MODULES_FILE).is_file():
        with quiet_transformers(), loading_errors(path):
            encoder, pooler, saved_head, saved_normalize = _load_saved(path)
            saved = read_st_config(path)
            dims = read_matryoshka_dims(path)
        overrides = (template, n_soft_prompt, soft_prompt_init)
        if (head is None or head == saved_head) and all(v is None for v in overrides):
            if max_seq_length is not None:
                encoder.max_seq_length = max_seq_length
            embedder = Embedder(encoder, pooler, saved_head, saved_normalize)
            embedder.matryoshka_dims = dims  # the same vectors: the same sizes
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
        from protoembed.model.backbones import load_backbone

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
    if spec.normalize is not None:
        embedder.normalize = spec.normalize
    embedder.prompts = dict(saved["prompts"] if spec.prompts is None else spec.prompts)
    embedder.default_prompt_name = kept_default(saved.get("default_prompt_name"), embedder.prompts)
    embedder.similarity_fn_name = saved["similarity_fn_name"] or DEFAULT_SCORE_FUNCTION
    truncate_dim = saved["truncate_dim"] if spec.truncate_dim is None else spec.truncate_dim
    where = "" if spec.truncate_dim is not None else f"{path / ST_CONFIG_FILE}: "
    try:
        embedder.truncate_dim = check_truncate_dim(truncate_dim, embedder.pooled_dimension)
    except ProtoembedError as err:
        raise ProtoembedError(f"{where}{err}") from None
    if spec.runtime != AUTO and get_runtime(spec.runtime).runs_exports:  # its fp32 export, made once, cached
        from protoembed.model.export.cache import onnx_embedder

        return onnx_embedder(embedder.to("cpu").eval(), runtime=spec.runtime, precision=spec.precision)
    if spec.precision is not None:
        embedder.precision = spec.precision
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
    """Put a head on an already-loaded backbone (the arguments: fields of
    :class:`~protoembed.model.model_spec.ModelSpec`, checked there); eval mode."""
    settings = dict(template=template, max_seq_length=max_seq_length, n_soft_prompt=n_soft_prompt)
    model_spec(head=head, soft_prompt_init=soft_prompt_init, normalize=normalize, **settings)
    spec = get_head(head)
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
        soft_prompt_init=soft_prompt_init or SOFT_PROMPT_INITS[0],
        tokenizer=tokenizer,
        model=model,
    )
    return Embedder(encoder, spec.make_pooler(encoder.hidden_size), head, normalize).eval()
