"""The ONNX Runtime runtime (registry entry ``onnx``): write ``onnx/model.onnx`` and run it.

Writing (:func:`write_onnx`, ``protoembed export --format onnx``): the traced graph
(:func:`protoembed.model.export.graph.trace_graph`), then ONNX Runtime's transformer optimiser fuses attention,
LayerNorm and GELU (kept only if it reproduces the traced graph to 1e-4 on a probe batch); ``int8`` then
quantises the matrix multiplications (ONNX Runtime's quantiser: int8 weights with a scale per output
column) and gives their activations fixed scales calibrated on padded batches of real sentences (the
caller's texts, else the staged Wikipedia sample: :mod:`protoembed.model.export.calibration`), so a text's
vector does not depend on the other texts of its batch.

Running (:func:`load_onnx` -> :class:`OnnxEmbedder`): ONNX Runtime's CPU provider with, for speed, one
intra-op thread per free core (:mod:`protoembed.core.threads`), every graph optimisation and sequential execution (the graph is one chain of
layers: parallel execution only adds scheduling).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from protoembed.core.errors import ProtoembedError
from protoembed.core.threads import intra_op_threads
from protoembed.model.export import graph as tracing
from protoembed.model.export.calibration import calibration_feeds
from protoembed.model.export.layout import GRAPH_FILE
from protoembed.model.export.quiet import stdout_to_log
from protoembed.model.export.runtime import ExportedEmbedder

if TYPE_CHECKING:
    from protoembed.model.embedder import Embedder
    from protoembed.model.encoder import PromptEncoder

logger = logging.getLogger(__name__)


def session_options(threads: int | None = None) -> Any:
    """ONNX Runtime options: ``threads`` intra-op threads (default: the free usable cores,
    :func:`protoembed.core.threads.intra_op_threads`), all optimisations,
    and intra-op threads that sleep between operators instead of spinning.

    Spinning threads gain nothing measurable on idle cores, and on busy ones (a server's own HTTP threads
    and its clients, another job) a spinning thread holds the core that the thread it waits for needs:
    small batches then take about twice as long (``benchmarks/serve.py`` runs a server and its clients on
    the same cores)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = intra_op_threads(threads)
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
    """Write ``model``'s graph as ``folder / onnx/model.onnx``: traced, fused (``optimize``), quantised
    (``quantize="int8"``, activation scales calibrated on the ``calibration`` sentences). Returns (input names, output names,
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
        _quantize_int8(graph, calibration_feeds(model.encoder, calibration or [], inputs))
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


def _quantize_int8(path: Path, feeds: list[dict[str, np.ndarray]]) -> None:
    """Replace the graph at ``path`` by its int8 version with fixed activation scales: ONNX Runtime's
    quantisation of the matrix multiplications (and the fused attention's projections): int8 weights,
    one scale per output column, 7-bit (no int16 saturation in AVX2's u8 x s8 multiply-add); then each
    activation's run-time quantisation (``DynamicQuantizeLinear``: a scale per tensor, i.e. per batch)
    becomes a ``QuantizeLinear`` with the scale and zero point of its range over the ``feeds``
    (calibration batches; :func:`calibrated_ranges`), so a text's vector does not depend on the other
    texts of its batch nor on their padding."""
    import onnx
    from onnx import helper, numpy_helper
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
            op_types_to_quantize=["MatMul", "Attention"],
            weight_type=QuantType.QInt8,
            per_channel=True,  # one scale per output column: 4-5x closer to fp32 than one per matrix
            reduce_range=True,  # 7-bit weights: no int16 saturation in AVX2's u8 x s8 multiply-add
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},  # fused ops have no shape info
        )
    finally:
        root.setLevel(level)
    model = onnx.load(str(path))
    dynamic = [node for node in model.graph.node if node.op_type == "DynamicQuantizeLinear"]
    ranges = calibrated_ranges(fp32, [node.input[0] for node in dynamic], feeds)
    fp32.unlink()
    nodes = []
    for node in model.graph.node:
        if node.op_type != "DynamicQuantizeLinear":
            nodes.append(node)
            continue
        scale, zero_point = uint8_quantisation(*ranges[node.input[0]])
        quantized, scale_name, zero_point_name = node.output
        model.graph.initializer.extend(
            [numpy_helper.from_array(scale, scale_name), numpy_helper.from_array(zero_point, zero_point_name)]
        )
        nodes.append(
            helper.make_node("QuantizeLinear", [node.input[0], scale_name, zero_point_name], [quantized])
        )
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    logger.info("int8: %d activations quantised with calibrated scales", len(dynamic))
    onnx.save(model, str(path))


def calibrated_ranges(
    path: Path, names: list[str], feeds: list[dict[str, np.ndarray]]
) -> dict[str, tuple[float, float]]:
    """(min, max) of each fp32 tensor in ``names`` of the graph at ``path`` over the ``feeds`` (every
    element, padding included, as run-time quantisation sees them)."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    model = onnx.load(str(path))
    outputs = {output.name for output in model.graph.output}
    model.graph.output.extend(
        helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in names if name not in outputs
    )
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    low = dict.fromkeys(names, 0.0)
    high = dict.fromkeys(names, 0.0)
    for feed in feeds:
        for name, values in zip(names, session.run(names, feed)):
            low[name] = min(low[name], float(values.min()))
            high[name] = max(high[name], float(values.max()))
    return {name: (low[name], high[name]) for name in names}


def uint8_quantisation(low: float, high: float) -> tuple[np.ndarray, np.ndarray]:
    """The uint8 scale and zero point of the range [low, high] widened to hold 0, as ONNX's
    ``DynamicQuantizeLinear`` computes them at run time: scale = (max - min) / 255, zero point =
    round(-min / scale)."""
    low, high = min(low, 0.0), max(high, 0.0)
    scale = max((high - low) / 255.0, float(np.finfo(np.float32).tiny))
    zero_point = np.clip(np.round(-low / scale), 0, 255)
    return np.array(scale, dtype=np.float32), np.array(zero_point, dtype=np.uint8)
