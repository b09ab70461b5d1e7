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
