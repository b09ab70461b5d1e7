"""Write an :class:`~protoembed.Embedder` as one graph plus its tokenizer and template: the export folder.

The graph maps the padded token rows to the final vector, with everything after tokenisation inside:

    input_ids (B, T), attention_mask (B, T) [, mask_index (B,) for template heads]
      -> word embeddings, soft-prompt vectors written into the slots before [MASK] (ConPVP anchor)
      -> backbone -> [MASK] gather / cls / mean / max / cnn pooling -> the first ``truncate_dim`` dimensions
      (if the model has one) -> L2 normalisation (if the model has it)
      -> sentence_embedding (B, D)   [and last_hidden_state (B, T, H) for cls / mean / max]

It is traced from the model's own forward (``Embedder.embed``, which training and ``encode`` run too),
so there is no second implementation of any head: :func:`trace_graph` (TorchScript exporter, opset 17,
eager attention; batch and length are dynamic axes). What the traced graph becomes is the format's:
:func:`export_embedder` hands it to the writer of the runtime registered for ``format``
(:mod:`protoembed.model.runtimes`; ONNX Runtime's fusions and dynamic int8 in :mod:`protoembed.model.export.onnx`,
OpenVINO IR and NNCF int8 in :mod:`protoembed.model.export.openvino`).

Folder layout: the format's graph files (``onnx/model.onnx``, or ``openvino/openvino_model.xml`` +
``.bin``), the tokenizer files, ``config.json`` (the backbone's config, for the position budget),
``protoembed_encoder.json`` (template, soft-prompt count, max_seq_length), ``protoembed_export.json``
(format version, format, head, inputs, outputs, quantisation and the writer's own entries) and a model
card. For cls / mean / max also ``modules.json``, ``sentence_bert_config.json`` and ``1_Pooling/``
(+ ``2_Normalize/``): the convention under which ``SentenceTransformer(OUT, backend=FORMAT)`` reads the
graph and pools its ``last_hidden_state`` itself.
"""

from __future__ import annotations

import copy
import logging
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from protoembed.core.version import __version__
from protoembed.model.export.layout import (
    DEFAULT_PROMPT_NAME,
    EXPORT_CONFIG,
    PROMPTS,
    SIMILARITY_FN_NAME,
    check_export_target,
)
from protoembed.model.model_card import write_model_card
from protoembed.model.runtimes import DEFAULT_FORMAT
from protoembed.outputs.io import clean_stale_temp, replace_dir
from protoembed.outputs.st_layout import (
    NORMALIZE,
    POOLING,
    TRANSFORMER,
    LayoutModule,
    library_versions,
    write_json,
    write_modules,
    write_st_config,
)

if TYPE_CHECKING:
    from protoembed.model.embedder import Embedder

logger = logging.getLogger(__name__)

OPSET = 17
#: Heads whose folder also follows sentence-transformers' ONNX convention (their pooling is ST's own).
ST_HEADS = ("cls", "mean", "max")
_PROBE = ["a man is playing a guitar .", "two dogs run through a field of tall grass while people watch ."]


class _Graph(torch.nn.Module):
    """The traced function: padded rows -> ``sentence_embedding`` (and the token states, optionally)."""

    def __init__(self, embedder: Embedder, with_states: bool) -> None:
        super().__init__()
        self.embedder = embedder
        self.with_states = with_states

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, mask_index: torch.Tensor | None = None
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        features = {"input_ids": input_ids, "attention_mask": attention_mask}
        if mask_index is not None:
            features["mask_index"] = mask_index
        # the model's own forward and cut: no second implementation
        outputs = self.embedder.embed(features, truncate_dim=self.embedder.truncate_dim)
        vectors = outputs["sentence_embedding"]
        return (vectors, outputs["token_embeddings"]) if self.with_states else vectors


def export_embedder(
    embedder: Embedder,
    path: str | os.PathLike,
    quantize: str | None = None,
    optimize: bool = True,
    format: str = DEFAULT_FORMAT,
    calibration: Sequence[str] | str | os.PathLike | None = None,
    data_dir: str | os.PathLike | None = None,
) -> Path:
    """Export ``embedder`` to the folder ``path`` (atomically: temp folder, then rename).

    Args:
        embedder: a torch :class:`~protoembed.Embedder` (any head; moved to a CPU fp32 copy if needed).
        path: output folder; replaced if it holds an earlier export, refused if it holds anything else.
            Built in a hidden temp sibling and renamed into place, so an interrupted export leaves
            no half-written folder.
        quantize: ``None`` (fp32) or ``"int8"``: the format's quantisation, calibrated on
            ``calibration`` (``onnx``: int8 matrix multiplications with fixed activation scales;
            ``openvino``: NNCF's post-training quantisation).
        optimize: let the writer optimise the graph (``onnx``: fuse attention / LayerNorm / GELU).
        format: an export format of :func:`protoembed.model.runtimes.export_formats` (``onnx``:
            ``onnx/model.onnx``; ``openvino``: ``openvino/openvino_model.xml`` + ``.bin``).
        calibration: sentences the int8 scales are calibrated on (a list, or a file of one per line), for
            a format that calibrates (default: the format's own, e.g. the staged Wikipedia sample under the
            data directory: ``data_dir``, ``$PROTOEMBED_DATA`` or the default).
    Returns:
        the folder written.
    Raises:
        ProtoembedError: an unknown format or quantisation, a missing optional package (with the pip
            command), a folder that holds something else, no calibration text.
    """
    writer, target = check_export_target(path, quantize, format)
    sentences = None
    if writer.calibration is not None and quantize is not None:  # before the slow trace
        sentences = writer.calibrate(calibration, data_dir)
    model = embedder
    if embedder.device.type != "cpu" or next(embedder.parameters()).dtype != torch.float32:
        model = copy.deepcopy(embedder).to("cpu", torch.float32)
    head = embedder.head

    def build(tmp: Path) -> None:
        with_states = head in ST_HEADS
        inputs, outputs, extra = writer.write(
            model.eval(), tmp, with_states, quantize=quantize, optimize=optimize, calibration=sentences
        )
        encoder = model.encoder
        encoder.tokenizer.save_pretrained(str(tmp))
        encoder.auto_model.config.save_pretrained(str(tmp))
        encoder.save_config(str(tmp))
        if with_states:
            _write_sentence_transformers_layout(model, tmp)
        config = {
            # the oldest version that reads the format: an ONNX folder stays readable by readers of 1
            "format_version": writer.format_version,
            "protoembed_version": __version__,
            "format": format,
            "head": head,
            "normalize": bool(model.normalize),
            "dimension": int(model.dimension),
            "inputs": inputs,
            "outputs": outputs,
            "opset": OPSET,
            "quantize": quantize,
            PROMPTS: dict(model.prompts),
            DEFAULT_PROMPT_NAME: model.default_prompt_name,
            SIMILARITY_FN_NAME: model.similarity_fn_name,
            **extra,
        }
        write_json(tmp / EXPORT_CONFIG, config)
        write_model_card(tmp, name=target.name)

    clean_stale_temp(target.parent)  # what an export killed by kill -9 left, whatever its name
    was_training = embedder.training
    try:
        replace_dir(target, build)
    finally:  # tracing runs in eval mode; the caller's model keeps its own
        embedder.train(was_training)
    # DEBUG: the caller reports the folder (the command prints it; --verbose would show it twice)
    logger.debug("exported %s head (%s, %s) to %s", head, format, quantize or "fp32", target)
    return target


def trace_graph(
    embedder: Embedder, path: Path, with_states: bool
) -> tuple[list[str], list[str], dict[str, np.ndarray]]:
    """Trace ``embedder`` (TorchScript exporter, opset :data:`OPSET`, eager attention: the pattern
    the fusers know) to the ONNX graph ``path``; returns (input names, output names, the probe batch's
    feeds, for a writer that checks what it makes of the graph)."""
    encoder = embedder.encoder
    ids, masks = encoder.tokenize_ids(_PROBE, allow_empty=True)
    probe = encoder.collate(ids, masks)
    inputs = ["input_ids", "attention_mask"] + (["mask_index"] if masks is not None else [])
    outputs = ["sentence_embedding"] + (["last_hidden_state"] if with_states else [])
    axes: dict[str, dict[int, str]] = {"input_ids": {0: "batch", 1: "length"}}
    axes["attention_mask"] = {0: "batch", 1: "length"}
    axes["sentence_embedding"] = {0: "batch"}
    if masks is not None:
        axes["mask_index"] = {0: "batch"}
    if with_states:
        axes["last_hidden_state"] = {0: "batch", 1: "length"}
    backbone = encoder.auto_model
    previous = backbone.config._attn_implementation
    try:
        backbone.set_attn_implementation("eager")  # plain MatMul/Softmax: the pattern the fusers know
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Graph(embedder, with_states).eval(),  # the exporter restores this mode afterwards
                tuple(probe[name] for name in inputs),
                str(path),
                input_names=inputs,
                output_names=outputs,
                dynamic_axes=axes,
                opset_version=OPSET,
                do_constant_folding=True,
                dynamo=False,
            )
    finally:
        backbone.set_attn_implementation(previous)
    return inputs, outputs, {name: probe[name].numpy() for name in inputs}


def _write_sentence_transformers_layout(embedder: Embedder, folder: Path) -> None:
    """modules.json + Pooling (+ an empty ``2_Normalize``) + the configs: sentence-transformers' ONNX
    backend convention (the graph replaces the root module's weights)."""
    embedder.encoder.save_sentence_bert_config(folder)
    modules = [LayoutModule(TRANSFORMER), LayoutModule(POOLING, embedder.pooler)]
    if embedder.normalize:
        modules.append(LayoutModule(NORMALIZE))
    write_modules(folder, modules)
    write_st_config(
        folder,
        library_versions("sentence_transformers"),
        embedder.prompts,
        embedder.similarity_fn_name,
        truncate_dim=embedder.truncate_dim,
    )
