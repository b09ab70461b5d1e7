"""Loading above the embedder and the export: :func:`load` (a folder or hub id -> a model) and
:func:`build` (a backbone + a head -> an :class:`~protoembed.embedder.Embedder`).

:func:`load` reads three kinds of folder: an export (-> an
:class:`~protoembed.export.runtime.ExportedEmbedder` on a registered runtime (:mod:`protoembed.runtimes`),
by :func:`~protoembed.export.runtime.load_export`), a protoembed / sentence-transformers folder
(``modules.json``: the saved input module, pooling module and ``Normalize``), or a bare Hugging Face
backbone (with a new head). The torch model and the exports sit below this module; neither imports the other.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import torch
from sentence_transformers.base.modules.module import Module

from protoembed.backbones import loading_errors, quiet_transformers, resolve_model_dir
from protoembed.embedder import PROTOEMBED_CONFIG, Embedder
from protoembed.encoder import PromptEncoder
from protoembed.errors import ProtoembedError
from protoembed.export.runtime import is_export_dir, load_export
from protoembed.heads import HEADS, get_head
from protoembed.inputs import check_max_seq_length, resolve_device
from protoembed.precision import check_precision
from protoembed.protocol import SentenceEmbedder
from protoembed.runtimes import AUTO, check_export_runtime, check_runtime, get_runtime
from protoembed.st_layout import MODULES_FILE, read_modules


def _load_saved(path: Path) -> tuple[PromptEncoder, Module, str, bool]:
    """Read a sentence-transformers / protoembed folder: (encoder, pooler, head name, normalize)."""
    from sentence_transformers.sentence_transformer.modules.pooling import Pooling

    from protoembed.heads import MaskTokenPooling

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
    spec: str = "default",
    head: str | None = None,
    *,
    template: str | None = None,
    max_seq_length: int | None = None,
    n_soft_prompt: int | None = None,
    soft_prompt_init: str | None = None,
    normalize: bool | None = None,
    device: str | torch.device | None = None,
    precision: str | None = None,
    runtime: str = AUTO,
) -> SentenceEmbedder:
    """Load a backbone with a head.

    Args:
        spec: ``default`` (packaged all-MiniLM-L6-v2), a Hugging Face model dir, a protoembed /
            sentence-transformers model dir, or a hub id.
        head: a registered head (a key of :data:`protoembed.heads.HEADS`);
            default: the saved model's head, or ``mean`` for a bare Hugging Face backbone.
        template: template for prompt heads (``<S>`` and ``[MASK]`` placeholders).
        max_seq_length: token budget (sentence tokens only for prompt heads).
        n_soft_prompt: number of soft-prompt vectors (``soft_prompt`` head; default 4).
        soft_prompt_init: ``uniform`` or ``template``.
        normalize: L2-normalise outputs (default: as saved; False for a bare backbone).
        device: torch device (default: CUDA if available, else CPU); see :func:`resolve_device`.
        precision: ``fp32`` (default for torch) or ``bf16`` for :meth:`Embedder.encode` (bf16 autocast
            forward, fp32 pooling, normalisation and vectors; see :mod:`protoembed.precision`). For an
            export: one of the runtime's entry's ``precisions`` (OpenVINO's inference precision, default
            bf16 on CPUs with native bf16, else fp32; ONNX Runtime: fp32 only); an int8 export runs in
            int8 only, asking another is an error.
        runtime: ``auto`` (default: torch for a torch model; for an export the registry's rule,
            :func:`protoembed.runtimes.auto_runtime`) or a key of :data:`protoembed.runtimes.RUNTIMES`
            (``torch``, ``onnx``, ``openvino``, ...; a torch model on a runtime that opens exports: its
            fp32 export, made once and cached, on that runtime).
    Returns:
        an :class:`Embedder` in eval mode, or an :class:`~protoembed.export.runtime.ExportedEmbedder`
        for an export folder or an export runtime (same ``encode``).
    Raises:
        ProtoembedError: an unknown head, a bad ``max_seq_length`` or device, or a model folder that
            cannot be loaded (named in the message).
    """
    if head is not None:
        get_head(head)  # fail before loading weights
    if precision is not None:
        check_precision(precision)
    check_max_seq_length(max_seq_length)
    device = resolve_device(device)
    path = resolve_model_dir(spec)
    check_runtime(runtime)
    if is_export_dir(path):  # an export: encode runs on a runtime that opens exports
        check_export_runtime(runtime, path)
        options = dict(template=template, n_soft_prompt=n_soft_prompt, soft_prompt_init=soft_prompt_init)
        options.update(head=head, max_seq_length=max_seq_length, normalize=normalize, device=device)
        return load_export(path, runtime=runtime, precision=precision, **options)
    if (path / MODULES_FILE).is_file():
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
    if runtime != AUTO and get_runtime(runtime).runs_exports:  # its fp32 export, made once and cached
        from protoembed.export.cache import onnx_embedder

        return onnx_embedder(embedder.to("cpu").eval(), runtime=runtime, precision=precision)
    if precision is not None:
        embedder.precision = precision
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
