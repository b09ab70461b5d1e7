"""The ONNX Runtime runtime (registry entry ``onnx``): write ``onnx/model.onnx`` and run it.

Writing (:func:`write_onnx`, ``protoembed export --format onnx``): the traced graph
(:func:`protoembed.export.graph.trace_graph`), then ONNX Runtime's transformer optimiser fuses attention,
LayerNorm and GELU (kept only if it reproduces the traced graph to 1e-4 on a probe batch); ``int8`` then
applies ONNX Runtime's dynamic quantisation to the matrix multiplications (int8 weights with a scale per
output column, activations quantised per batch at run time).

Running (:func:`load_onnx` -> :class:`OnnxEmbedder`): ONNX Runtime's CPU provider with, for speed, one
intra-op thread per core, every graph optimisation and sequential execution (the graph is one chain of
layers: parallel execution only adds scheduling).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from protoembed.errors import ProtoembedError
from protoembed.export import graph as tracing
from protoembed.export.layout import GRAPH_FILE
from protoembed.export.quiet import stdout_to_log
from protoembed.export.runtime import ExportedEmbedder

if TYPE_CHECKING:
    from protoembed.embedder import Embedder
    from protoembed.encoder import PromptEncoder

logger = logging.getLogger(__name__)


def session_options(threads: int | None = None) -> Any:
    """ONNX Runtime options: ``threads`` intra-op threads (default: the usable cores), all optimisations,
    and intra-op threads that sleep between operators instead of spinning.

    Spinning threads gain nothing measurable on idle cores, and on busy ones (a server's own HTTP threads
    and its clients, another job) a spinning thread holds the core that the thread it waits for needs:
    small batches then take about twice as long (``benchmarks/serve.py`` runs a server and its clients on
    the same cores)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or len(os.sched_getaffinity(0))
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


class OnnxEmbedder(ExportedEmbedder):
    """An export run by ONNX Runtime (CPU provider); ``session`` is its ``InferenceSession``."""

    def __init__(self, encoder: PromptEncoder, session: Any, config: dict[str, Any], normalize: bool) -> None:
        super().__init__(encoder, config, normalize)
        self.session = session

    def run(self, feeds: dict[str, np.ndarray]) -> torch.Tensor:
        """One batch through the session."""
        return torch.from_numpy(self.session.run(["sentence_embedding"], feeds)[0])


def load_onnx(
    root: Path,
    config: dict[str, Any],
    encoder: PromptEncoder,
    normalize: bool,
    threads: int | None,
    precision: str | None,
) -> OnnxEmbedder:
    """The export folder ``root`` (its ``config``) on ONNX Runtime: an :class:`OnnxEmbedder` over
    ``encoder``'s tokenisation with ``threads`` intra-op threads. ``precision`` was checked against the
    registry entry (fp32 only) before.

    Raises:
        ProtoembedError: the graph file is missing or cannot be loaded (named).
    """
    import onnxruntime as ort

    graph = root / config.get("graph", GRAPH_FILE)
    if not graph.is_file():
        raise ProtoembedError(f"{graph}: graph file missing; export the model again")
    try:
        session = ort.InferenceSession(
            str(graph), sess_options=session_options(threads), providers=["CPUExecutionProvider"]
        )
    except Exception as err:  # truncated or corrupt protobuf
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ProtoembedError(
            f"{graph}: cannot load the ONNX graph (truncated or corrupt?): {first}"
        ) from None
    return OnnxEmbedder(encoder, session, config, normalize)


def write_onnx(
    model: Embedder,
    folder: Path,
    with_states: bool,
    *,
    quantize: str | None = None,
    optimize: bool = True,
    calibration: list[str] | None = None,
) -> tuple[list[str], list[str], dict[str, Any]]:
    """Write ``model``'s graph as ``folder / onnx/model.onnx``: traced, fused (``optimize``), dynamically
    quantised (``quantize="int8"``; ``calibration`` is not read). Returns (input names, output names,
    config entries: the graph's path and whether fusion was kept)."""
    graph = folder / GRAPH_FILE
    graph.parent.mkdir()
    raw = graph.with_name("traced.onnx")
    inputs, outputs, feeds = tracing.trace_graph(model, raw, with_states)
    fused = optimize and _fuse(raw, graph, model.encoder.auto_model.config, feeds)
    if not fused:
        os.replace(raw, graph)
    raw.unlink(missing_ok=True)
    if quantize == "int8":
        _quantize_int8(graph)
    return inputs, outputs, {"graph": GRAPH_FILE, "fused": fused}


def _fuse(raw: Path, path: Path, config: Any, feeds: dict[str, np.ndarray]) -> bool:
    """ONNX Runtime's offline transformer fusions; True if the fused graph matches ``raw`` to 1e-4."""
    from onnxruntime.transformers.optimizer import optimize_model

    try:
        with stdout_to_log(logger, "onnxruntime"):
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
    """``sentence_embedding`` of the graph at ``path`` for ``feeds`` (a plain CPU session)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(["sentence_embedding"], feeds)[0]


#: Activation rows are quantised symmetrically to [-ROW_RANGE, ROW_RANGE] and stored as uint8 around
#: ROW_OFFSET (the zero point of ``MatMulInteger``'s u8 x s8 product, which every x86 CPU runs).
ROW_RANGE = 127
ROW_OFFSET = 128
#: Weights: 7 bits (reduce range), so AVX2's u8 x s8 multiply-add cannot saturate its int16 sums.
WEIGHT_RANGE = 63


def _quantize_int8(path: Path) -> None:
    """Replace the graph at ``path`` by its int8 version: every MatMul by a constant 2-D weight becomes an
    integer matrix multiplication (``MatMulInteger``, int32 sums) of int8 weights, one scale per output
    column, by the activations quantised at run time with one scale per row (per token: the row's
    largest absolute value over :data:`ROW_RANGE`), then rescaled to fp32 by both scales.

    A row's scale is read from that row alone, so a text's vector does not depend on the other texts of
    its batch nor on their padding (ONNX Runtime's own dynamic quantisation takes one scale per tensor,
    i.e. per batch). The fused attention's input projections stay fp32."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    graph = model.graph
    weights = {init.name: init for init in graph.initializer}
    opset = next(entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx"))
    nodes: list[Any] = []
    added: list[Any] = []
    for node in graph.node:
        weight = weights.get(node.input[1]) if node.op_type == "MatMul" else None
        if weight is None or len(weight.dims) != 2:
            nodes.append(node)
            continue
        prefix = f"int8_{len(added) // 2}"
        matrix = numpy_helper.to_array(weight).astype(np.float32)
        scale = np.maximum(np.abs(matrix).max(axis=0), np.finfo(np.float32).tiny) / WEIGHT_RANGE
        added.append(numpy_helper.from_array(np.round(matrix / scale).astype(np.int8), f"{prefix}_w"))
        added.append(numpy_helper.from_array(scale.astype(np.float32), f"{prefix}_w_scale"))
        nodes.extend(_row_quantised_matmul(node, prefix, opset))
    quantised = len(added) // 2
    constants = {
        "int8_inv_range": np.float32(1.0 / ROW_RANGE),
        "int8_tiny": np.float32(np.finfo(np.float32).tiny),
        "int8_offset": np.float32(ROW_OFFSET),
        "int8_low": np.float32(0.0),
        "int8_high": np.float32(2 * ROW_OFFSET - 1),
        "int8_zero_point": np.uint8(ROW_OFFSET),
    }
    if opset >= 18:
        constants["int8_last_axis"] = np.array([-1], dtype=np.int64)
    added.extend(numpy_helper.from_array(np.asarray(value), name) for name, value in constants.items())
    used = {name for node in nodes for name in node.input}
    kept = [init for init in graph.initializer if init.name in used]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept + added)
    logger.info("int8: %d matrix multiplications quantised with per-row activation scales", quantised)
    tmp = path.with_name("int8.onnx")
    onnx.save(model, str(tmp))
    os.replace(tmp, path)


def _row_quantised_matmul(node: Any, prefix: str, opset: int) -> list[Any]:
    """The nodes that compute ``node`` (``X @ W``, W replaced by ``{prefix}_w`` int8 and its column scales
    ``{prefix}_w_scale``) with X quantised per row: s = max(|X|, last axis) / 127, q = round(X / s) + 128
    (uint8), then ``MatMulInteger(q, W, 128) * s * w_scale``. ``opset``: the graph's (ReduceMax takes its
    axes as an input from opset 18, as an attribute before)."""
    from onnx import TensorProto, helper

    x, out = node.input[0], node.output[0]

    def name(part: str) -> str:
        return f"{prefix}_{part}"

    return [
        helper.make_node("Abs", [x], [name("abs")]),
        helper.make_node("ReduceMax", [name("abs"), "int8_last_axis"], [name("max")], keepdims=1)
        if opset >= 18
        else helper.make_node("ReduceMax", [name("abs")], [name("max")], axes=[-1], keepdims=1),
        helper.make_node("Max", [name("max"), "int8_tiny"], [name("max_pos")]),
        helper.make_node("Mul", [name("max_pos"), "int8_inv_range"], [name("scale")]),
        helper.make_node("Div", [x, name("scale")], [name("ratio")]),
        helper.make_node("Round", [name("ratio")], [name("rounded")]),
        helper.make_node("Add", [name("rounded"), "int8_offset"], [name("shifted")]),
        helper.make_node("Clip", [name("shifted"), "int8_low", "int8_high"], [name("clipped")]),
        helper.make_node("Cast", [name("clipped")], [name("q")], to=TensorProto.UINT8),
        helper.make_node("MatMulInteger", [name("q"), name("w"), "int8_zero_point"], [name("int32")]),
        helper.make_node("Cast", [name("int32")], [name("sums")], to=TensorProto.FLOAT),
        helper.make_node("Mul", [name("sums"), name("scale")], [name("row_scaled")]),
        helper.make_node("Mul", [name("row_scaled"), name("w_scale")], [out]),
    ]
