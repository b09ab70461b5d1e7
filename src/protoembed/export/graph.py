"""Write an :class:`~protoembed.Embedder` as one ONNX graph plus its tokenizer and template.

The graph maps the padded token rows to the final vector, with everything after tokenisation inside:

    input_ids (B, T), attention_mask (B, T) [, mask_index (B,) for template heads]
      -> word embeddings, soft-prompt vectors written into the slots before [MASK] (ConPVP anchor)
      -> backbone -> [MASK] gather / cls / mean / max / cnn pooling -> L2 normalisation (if the model has it)
      -> sentence_embedding (B, D)   [and last_hidden_state (B, T, H) for cls / mean / max]

It is traced from the model's own torch modules (``Embedder.forward``), so there is no second
implementation of any head. Batch and length are dynamic axes. After tracing (TorchScript exporter,
opset 17, eager attention) ONNX Runtime's transformer optimiser fuses attention, LayerNorm and GELU
(kept only if it reproduces the traced graph to 1e-4 on a probe batch); ``int8`` then applies ONNX
Runtime's dynamic quantisation to the matrix multiplications (int8 weights with a scale per output
column, activations quantised per batch at run time).

Folder layout: ``onnx/model.onnx``, the tokenizer files, ``config.json`` (the backbone's config, for
the position budget), ``protoembed_encoder.json`` (template, soft-prompt count, max_seq_length) and
``protoembed_export.json`` (format version, head, inputs, outputs, quantisation). For cls / mean / max
also ``modules.json``, ``sentence_bert_config.json`` and ``1_Pooling/`` (+ ``2_Normalize/``): the
convention under which ``SentenceTransformer(OUT, backend="onnx")`` reads ``onnx/model.onnx`` and pools
its ``last_hidden_state`` itself.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from protoembed.errors import ProtoembedError
from protoembed.export.layout import EXPORT_CONFIG, FORMAT_VERSION, FORMATS, GRAPH_FILE, QUANTIZE
from protoembed.io import clean_stale_temp, replace_dir
from protoembed.model_card import write_model_card
from protoembed.st_layout import (
    NORMALIZE,
    POOLING,
    TRANSFORMER,
    LayoutModule,
    library_versions,
    write_json,
    write_modules,
    write_st_config,
)
from protoembed.version import __version__

if TYPE_CHECKING:
    from protoembed.embedder import Embedder

logger = logging.getLogger(__name__)

OPSET = 17
#: Heads whose folder also follows sentence-transformers' ONNX convention (their pooling is ST's own).
ST_HEADS = ("cls", "mean", "max")
_PROBE = ["a man is playing a guitar .", "two dogs run through a field of tall grass while people watch ."]


def require_onnx() -> None:
    """Raise a one-line error when the optional ``onnx`` / ``onnxruntime`` packages are missing."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError as err:
        raise ProtoembedError(
            f"ONNX export and inference need the optional packages ({err.name} is missing): "
            "pip install 'protoembed[onnx]'"
        ) from None


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
        features = self.embedder.pooler(self.embedder.encoder(features))
        vectors = features["sentence_embedding"]
        if self.embedder.normalize:
            vectors = torch.nn.functional.normalize(vectors, dim=-1)
        return (vectors, features["token_embeddings"]) if self.with_states else vectors


def export_embedder(
    embedder: Embedder,
    path: str | os.PathLike,
    quantize: str | None = None,
    optimize: bool = True,
    format: str = "onnx",
    calibration: Sequence[str] | None = None,
    data_dir: str | os.PathLike | None = None,
) -> Path:
    """Export ``embedder`` to the folder ``path`` (atomically: temp folder, then rename).

    Args:
        embedder: a torch :class:`~protoembed.Embedder` (any head; moved to a CPU fp32 copy if needed).
        path: output folder; replaced if it holds an earlier export, refused if it holds anything else.
            Built in a hidden temp sibling and renamed into place, so an interrupted export leaves
            no half-written folder.
        quantize: ``None`` (fp32) or ``"int8"``: ONNX Runtime's dynamic quantisation of the matrix
            multiplications (``onnx``), NNCF's calibrated post-training quantisation (``openvino``).
        optimize: fuse attention / LayerNorm / GELU with ONNX Runtime's transformer optimiser (``onnx``).
        format: ``onnx`` (``onnx/model.onnx``) or ``openvino`` (``openvino/openvino_model.xml`` + ``.bin``,
            see :mod:`protoembed.export.openvino`).
        calibration: sentences the OpenVINO int8 scales are calibrated on (default: the staged
            Wikipedia sample under ``data_dir`` / ``$PROTOEMBED_DATA``).
    Returns:
        the folder written.
    Raises:
        ProtoembedError: an unknown format or quantisation, a missing optional package (with the pip
            command), a folder that holds something else, no calibration text.
    """
    if format not in FORMATS:
        raise ProtoembedError(f"unknown export format {format!r}: expected one of {', '.join(FORMATS)}")
    if quantize is not None and quantize not in QUANTIZE:
        raise ProtoembedError(f"unknown quantisation {quantize!r}: expected one of {', '.join(QUANTIZE)}")
    require_onnx()  # the torch exporter writes ONNX; OpenVINO converts that
    if format == "openvino":
        from protoembed.export.openvino import require_openvino

        require_openvino()
    target = Path(path)
    occupied = target.exists() and (not target.is_dir() or any(target.iterdir()))
    if occupied and not (target / EXPORT_CONFIG).is_file():
        raise ProtoembedError(f"{target}: exists and is not a protoembed export; choose a new folder")
    sentences = None
    if format == "openvino" and quantize == "int8":
        from protoembed.export.openvino import calibration_sentences

        sentences = calibration_sentences(calibration, data_dir)  # before the slow trace
    model = embedder
    if embedder.device.type != "cpu" or next(embedder.parameters()).dtype != torch.float32:
        model = copy.deepcopy(embedder).to("cpu", torch.float32)
    head = embedder.head

    def build(tmp: Path) -> None:
        with_states = head in ST_HEADS
        if format == "onnx":
            graph = tmp / GRAPH_FILE
            graph.parent.mkdir()
            inputs, outputs, fused = _write_graph(model.eval(), graph, with_states, optimize)
            if quantize == "int8":
                _quantize_int8(graph)
            extra: dict[str, Any] = {"graph": GRAPH_FILE, "fused": fused}
        else:
            inputs, outputs, extra = _write_openvino(model.eval(), tmp, with_states, sentences)
        encoder = model.encoder
        encoder.tokenizer.save_pretrained(str(tmp))
        encoder.auto_model.config.save_pretrained(str(tmp))
        encoder.save_config(str(tmp))
        if with_states:
            _write_sentence_transformers_layout(model, tmp)
        config = {
            # an ONNX folder stays readable by readers of version 1; an OpenVINO one is version 2
            "format_version": FORMAT_VERSION if format == "openvino" else 1,
            "protoembed_version": __version__,
            "format": format,
            "head": head,
            "normalize": bool(model.normalize),
            "dimension": int(model.dimension),
            "inputs": inputs,
            "outputs": outputs,
            "opset": OPSET,
            "quantize": quantize,
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
    logger.info("exported %s head (%s, %s) to %s", head, format, quantize or "fp32", target)
    return target


def _write_openvino(
    embedder: Embedder, folder: Path, with_states: bool, calibration: list[str] | None
) -> tuple[list, list, dict[str, Any]]:
    """Trace ``embedder`` (no ONNX Runtime fusions), convert it to OpenVINO IR in ``folder`` (NNCF int8
    when ``calibration`` sentences are given); returns (inputs, outputs, config entries: the IR, its
    files' sizes, and the precision OpenVINO runs it in on this CPU)."""
    from protoembed.export import openvino

    traced = folder / "traced" / "model.onnx"
    traced.parent.mkdir()
    inputs, outputs, _ = _write_graph(embedder, traced, with_states, optimize=False)
    feeds = None
    if calibration is not None:
        feeds = openvino.calibration_feeds(embedder.encoder, calibration, inputs)
    ir = folder / openvino.IR_FILE
    openvino.convert_to_ir(traced, ir, feeds)
    for file in traced.parent.iterdir():
        file.unlink()
    traced.parent.rmdir()
    files = {
        name: (folder / name).stat().st_size for name in (openvino.IR_FILE, openvino.IR_FILE[:-4] + ".bin")
    }
    extra = {
        "graph": openvino.IR_FILE,
        "files": files,
        # what the CPU plugin picked where the export was written (each load logs its own)
        "inference_precision": openvino.inference_precision_here(),
        "exported_on": openvino.cpu_name(),
    }
    return inputs, outputs, extra


def _write_graph(
    embedder: Embedder, path: Path, with_states: bool, optimize: bool
) -> tuple[list, list, bool]:
    """Trace ``embedder`` to ``path``; returns (input names, output names, whether fusion was kept)."""
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
    raw = path.with_name("traced.onnx")
    try:
        backbone.set_attn_implementation("eager")  # plain MatMul/Softmax: the pattern the fusers know
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Graph(embedder, with_states).eval(),  # the exporter restores this mode afterwards
                tuple(probe[name] for name in inputs),
                str(raw),
                input_names=inputs,
                output_names=outputs,
                dynamic_axes=axes,
                opset_version=OPSET,
                do_constant_folding=True,
                dynamo=False,
            )
    finally:
        backbone.set_attn_implementation(previous)
    feeds = {name: probe[name].numpy() for name in inputs}
    fused = False
    if optimize:
        fused = _fuse(raw, path, backbone.config, feeds)
    if not fused:
        os.replace(raw, path)
    raw.unlink(missing_ok=True)
    return inputs, outputs, fused


def _fuse(raw: Path, path: Path, config: Any, feeds: dict[str, np.ndarray]) -> bool:
    """ONNX Runtime's offline transformer fusions; True if the fused graph matches ``raw`` to 1e-4."""
    from onnxruntime.transformers.optimizer import optimize_model

    try:
        with contextlib.redirect_stdout(None):
            model = optimize_model(
                str(raw),
                model_type="bert",
                num_heads=int(config.num_attention_heads),
                hidden_size=int(config.hidden_size),
                opt_level=0,
            )
        model.save_model_to_file(str(path))
    except Exception as err:  # an unknown pattern: keep the traced graph
        logger.warning("transformer fusion failed (%s); keeping the traced graph", err)
        return False
    before = _run(raw, feeds)
    after = _run(path, feeds)
    diff = float(np.abs(before - after).max())
    if diff > 1e-4:
        logger.warning("fused graph differs by %.2e; keeping the traced graph", diff)
        path.unlink()
        return False
    counts = model.get_fused_operator_statistics()
    logger.info("fused operators: %s", {k: v for k, v in counts.items() if v})
    return True


def _run(path: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(["sentence_embedding"], feeds)[0]


def _quantize_int8(path: Path, op_types: tuple[str, ...] = ("MatMul", "Attention")) -> None:
    """Replace ``path`` by its dynamically quantised version: int8 weights for every MatMul (and the
    fused attention's projection), one scale per output column, activations (uint8) quantised per batch
    at run time."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fp32 = path.with_name("fp32.onnx")
    os.replace(path, fp32)
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantiser logs advice through the root logger
    try:
        quantize_dynamic(
            str(fp32),
            str(path),
            op_types_to_quantize=list(op_types),
            weight_type=QuantType.QInt8,
            per_channel=True,  # one scale per output column: 4-5x closer to fp32 than one per matrix
            reduce_range=True,  # 7-bit weights: no int16 saturation in AVX2's u8 x s8 multiply-add
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},  # fused ops have no shape info
        )
    finally:
        root.setLevel(level)
    fp32.unlink()


def _write_sentence_transformers_layout(embedder: Embedder, folder: Path) -> None:
    """modules.json + Pooling (+ an empty ``2_Normalize``) + the configs: sentence-transformers' ONNX
    backend convention (the graph replaces the root module's weights)."""
    embedder.encoder.save_sentence_bert_config(folder)
    modules = [LayoutModule(TRANSFORMER), LayoutModule(POOLING, embedder.pooler)]
    if embedder.normalize:
        modules.append(LayoutModule(NORMALIZE))
    write_modules(folder, modules)
    write_st_config(folder, library_versions("sentence_transformers"))
