"""The OpenVINO runtime (registry entry ``openvino``): write the traced graph as OpenVINO IR (optionally
NNCF int8) and run it, or an ONNX export's graph.

Writing (:func:`write_openvino`, ``protoembed export --format openvino``): the graph traced from the
model's own torch modules (the one the ONNX export starts from, before ONNX Runtime's fusions, which
OpenVINO does not need: its CPU plugin fuses attention, LayerNorm and GELU itself) is converted by
``openvino.convert_model`` and saved in fp32 as ``openvino/openvino_model.xml`` + ``.bin``:
sentence-transformers' OpenVINO file names. ``int8`` applies NNCF post-training quantisation
(``nncf.quantize``, transformer preset: int8 weights and activations of the matrix multiplications,
scales calibrated on padded batches of real sentences: the caller's texts, else the first sentences of
the staged Wikipedia sample).

Running (:func:`load_openvino` -> :class:`OpenVinoEmbedder`): OpenVINO's CPU plugin compiles the IR (or
an ONNX export's graph, which its ONNX reader takes as it is) with one inference thread per free usable core (:mod:`protoembed.core.threads`)
and the latency hint. Its inference precision is bf16 on CPUs with native bf16 (AVX512-BF16 or AMX) and
f32 elsewhere unless ``precision`` asks for one; the precision it ran in is logged on load and reported
by :attr:`OpenVinoEmbedder.precision`. ``--runtime auto``'s rule for it: :func:`picked_by_auto`.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from protoembed.core.errors import ProtoembedError, missing_package
from protoembed.core.threads import intra_op_threads
from protoembed.model.export import graph as tracing
from protoembed.model.export.calibration import (  # noqa: F401 (CALIBRATION_*, calibration_sentences: read from here)
    CALIBRATION_BATCH,
    CALIBRATION_BATCHES,
    CALIBRATION_CORPUS,
    calibration_feeds,
    calibration_sentences,
)
from protoembed.model.export.layout import GRAPH_FILE
from protoembed.model.export.runtime import ExportedEmbedder

if TYPE_CHECKING:
    from protoembed.model.embedder import Embedder
    from protoembed.model.encoder import PromptEncoder
    from protoembed.model.runtimes.base import RuntimeSpec

logger = logging.getLogger(__name__)

#: The IR written by ``--format openvino`` (and its weights, ``.bin`` beside it).
IR_FILE = "openvino/openvino_model.xml"
# OpenVINO's element type names -> protoembed's precision names
_PRECISION_NAMES = {"bf16": "bf16", "f32": "fp32", "f16": "fp16"}
_HINTS = {"bf16": "bf16", "fp32": "f32"}


@functools.lru_cache(maxsize=1)
def core() -> Any:
    """The process's one ``openvino.Core``: kept alive as long as any model it compiled (a compiled model
    outliving its Core can crash when it is freed)."""
    import openvino as ov

    return ov.Core()


def picked_by_auto(spec: RuntimeSpec, config: dict[str, Any]) -> bool:
    """``--runtime auto``'s rule for OpenVINO on an export with ``config``: an fp32 graph on a CPU with
    native bf16 (AVX512-BF16 or AMX; OpenVINO runs it in bf16 there) with ``spec``'s package installed.
    (An OpenVINO folder has no other reader, so ``auto`` picks OpenVINO for it whatever this says.)"""
    from protoembed.model.precision import native_bf16

    return not config.get("quantize") and native_bf16("cpu") and spec.available()


def compile_config(threads: int | None, precision: str | None) -> dict[str, Any]:
    """The CPU plugin's settings: ``threads`` inference threads (default: the free usable cores,
    :func:`protoembed.core.threads.intra_op_threads`), the latency
    hint (one stream: batches run one after another), and the inference precision when one is asked
    (``fp32`` -> f32, ``bf16`` -> bf16; ``None``: :func:`inference_precision_here`)."""
    config: dict[str, Any] = {
        "INFERENCE_NUM_THREADS": intra_op_threads(threads),
        "PERFORMANCE_HINT": "LATENCY",
    }
    config["INFERENCE_PRECISION_HINT"] = _HINTS[precision or inference_precision_here()]
    return config


def precision_name(element_type: Any) -> str:
    """An OpenVINO element type (``bf16``, ``f32``) in protoembed's precision names (``bf16``, ``fp32``)."""
    name = element_type.get_type_name() if hasattr(element_type, "get_type_name") else str(element_type)
    return _PRECISION_NAMES.get(name, name)


def compiled_precision(compiled: Any) -> str:
    """The inference precision a compiled model runs in (``bf16``, ``fp32``)."""
    return precision_name(compiled.get_property("INFERENCE_PRECISION_HINT"))


def compile_graph(
    graph: Path, threads: int | None = None, precision: str | None = None, weights: Path | None = None
) -> Any:
    """Read ``graph`` (IR ``.xml`` with ``weights``, or ``.onnx``) and compile it for the CPU.

    Raises:
        ProtoembedError: a file that is missing or cannot be read (truncated, corrupt), named.
    """
    for file in (graph, weights):
        if file is not None and not file.is_file():
            raise ProtoembedError(f"{file}: graph file missing; export the model again")
    try:
        reader = core()
        model = reader.read_model(str(graph), str(weights) if weights is not None else "")
        return reader.compile_model(model, "CPU", compile_config(threads, precision))
    except Exception as err:  # a truncated or corrupt file
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ProtoembedError(
            f"{graph}: OpenVINO cannot read the graph (truncated or corrupt?): {first}"
        ) from None


def convert_to_ir(onnx_graph: Path, target: Path, calibration: list[dict[str, np.ndarray]] | None) -> None:
    """Convert the traced ONNX graph to fp32 IR at ``target`` (``.xml`` + ``.bin``); with
    ``calibration`` (feeds of padded batches), NNCF int8 post-training quantisation first. What the
    converter and NNCF print on stdout is logged at DEBUG instead."""
    import openvino as ov

    from protoembed.model.export.quiet import stdout_to_log

    with stdout_to_log(logger, "openvino"):  # its arguments and timings, NNCF's bars and log lines
        model = ov.convert_model(str(onnx_graph))
        if calibration is not None:
            model = _quantize(model, calibration)
    target.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(model, str(target), compress_to_fp16=False)


def _quantize(model: Any, calibration: list[dict[str, np.ndarray]]) -> Any:
    """NNCF post-training int8 quantisation with the transformer preset over ``calibration``. NNCF's own
    log lines (its logger writes them to stdout) go through logging instead, from WARNING up: to stderr
    like protoembed's warnings."""
    try:
        import nncf
    except ImportError:
        raise missing_package("an int8 OpenVINO export", "nncf", "openvino") from None
    nncf_logger = logging.getLogger("nncf")
    saved = nncf_logger.level, nncf_logger.propagate, list(nncf_logger.handlers)
    nncf_logger.setLevel(logging.WARNING)
    nncf_logger.propagate = True
    for handler in saved[2]:
        nncf_logger.removeHandler(handler)
    try:
        return nncf.quantize(
            model,
            nncf.Dataset(calibration),
            model_type=nncf.ModelType.TRANSFORMER,
            subset_size=len(calibration),
        )
    finally:
        nncf_logger.setLevel(saved[0])
        nncf_logger.propagate = saved[1]
        for handler in saved[2]:
            nncf_logger.addHandler(handler)


def inference_precision_here() -> str:
    """The precision an fp32 graph runs in here when none is asked: ``bf16`` on a CPU with native bf16
    (:func:`protoembed.model.precision.native_bf16`: AVX512-BF16 or AMX, where OpenVINO's CPU plugin picks it by
    itself), else ``fp32``. Decided by protoembed's flags, not the plugin, so that a simulated CPU
    (:data:`protoembed.model.precision.CPU_FLAGS_ENV`) decides it too."""
    from protoembed.model.precision import native_bf16

    return "bf16" if native_bf16("cpu") else "fp32"


def cpu_name() -> str:
    """The CPU's name as OpenVINO reports it."""
    return str(core().get_property("CPU", "FULL_DEVICE_NAME"))


def run_compiled(request: Any, feeds: dict[str, np.ndarray]) -> torch.Tensor:
    """Run one batch on an infer request; the ``sentence_embedding`` output as an fp32 tensor (copied)."""
    request.infer(feeds)
    return torch.from_numpy(np.array(request.get_tensor("sentence_embedding").data, dtype=np.float32))


class OpenVinoEmbedder(ExportedEmbedder):
    """An export run by OpenVINO's CPU plugin; ``compiled`` is its ``CompiledModel`` (one infer request,
    reused batch after batch)."""

    def __init__(
        self, encoder: PromptEncoder, compiled: Any, config: dict[str, Any], normalize: bool
    ) -> None:
        super().__init__(encoder, config, normalize)
        self.compiled = compiled
        self._request = compiled.create_infer_request()
        self._compiled_precision = compiled_precision(compiled)  # fixed once compiled

    @property
    def precision(self) -> str:
        """``int8`` for a quantised export, else what OpenVINO computes in here (``bf16`` / ``fp32``)."""
        return self.config.get("quantize") or self._compiled_precision

    def run(self, feeds: dict[str, np.ndarray]) -> torch.Tensor:
        """One batch through the compiled model."""
        return run_compiled(self._request, feeds)


def load_openvino(
    root: Path,
    config: dict[str, Any],
    encoder: PromptEncoder,
    normalize: bool,
    threads: int | None,
    precision: str | None,
) -> OpenVinoEmbedder:
    """The export folder ``root`` (its ``config``: the IR of an OpenVINO export, or an ONNX export's
    graph) compiled by OpenVINO with ``threads`` inference threads in ``precision`` (``None``:
    :func:`inference_precision_here`): an :class:`OpenVinoEmbedder` over ``encoder``'s tokenisation.

    Raises:
        ProtoembedError: a graph file missing, or whose size differs from the one the export recorded
            (refused before OpenVINO reads it), or that OpenVINO cannot read (named).
    """
    graph = root / config.get("graph", GRAPH_FILE)
    weights = graph.with_suffix(".bin") if graph.suffix == ".xml" else None
    for name, size in config.get("files", {}).items():
        file = root / name
        if not file.is_file():
            raise ProtoembedError(f"{file}: graph file missing; export the model again")
        if file.stat().st_size != size:
            raise ProtoembedError(
                f"{file}: {file.stat().st_size} bytes, the export wrote {size} (truncated?); export the model again"
            )
    compiled = compile_graph(graph, threads, precision, weights)
    return OpenVinoEmbedder(encoder, compiled, config, normalize)


def write_openvino(
    model: Embedder,
    folder: Path,
    with_states: bool,
    *,
    quantize: str | None = None,
    optimize: bool = True,
    calibration: list[str] | None = None,
) -> tuple[list[str], list[str], dict[str, Any]]:
    """Trace ``model`` (no ONNX Runtime fusions: ``optimize`` is not read; the CPU plugin fuses itself),
    convert it to OpenVINO IR in ``folder`` (NNCF int8 on the ``calibration`` sentences when
    ``quantize="int8"``); returns (inputs, outputs, config entries: the IR, its files' sizes, and the
    precision OpenVINO runs it in on this CPU)."""
    traced = folder / "traced" / "model.onnx"
    traced.parent.mkdir()
    inputs, outputs, _ = tracing.trace_graph(model, traced, with_states)
    feeds = None
    if quantize is not None:
        feeds = calibration_feeds(model.encoder, calibration or [], inputs)
    ir = folder / IR_FILE
    convert_to_ir(traced, ir, feeds)
    for file in traced.parent.iterdir():
        file.unlink()
    traced.parent.rmdir()
    files = {name: (folder / name).stat().st_size for name in (IR_FILE, IR_FILE[:-4] + ".bin")}
    extra = {
        "graph": IR_FILE,
        "files": files,
        # what the CPU plugin picked where the export was written (each load logs its own)
        "inference_precision": inference_precision_here(),
        "exported_on": cpu_name(),
    }
    return inputs, outputs, extra
