"""Runtime registry: name -> :class:`RuntimeSpec` (a :class:`~protoembed.core.registry.Registry`). A new
runtime is one module (its loader, and its writer if it writes an export format) plus one entry here (or
one :func:`register_runtime` call).

Everything that names runtimes or export formats reads this table: ``--runtime``'s choices and help,
``export --format``'s check and help, :func:`check_runtime` (``protoembed.load``, ``LazyEncoder``, the
export cache), the ``auto`` rule (:func:`auto_runtime`), which runtime opens and writes an export folder,
the precision rule, the pip extras and the model card's ``library_name``. No torch here.
"""

from __future__ import annotations

from typing import Any

from protoembed.core.errors import ProtoembedError
from protoembed.core.registry import Registry
from protoembed.model.precision import CPU_PRECISIONS, PRECISIONS
from protoembed.model.runtimes.base import RuntimeSpec

#: The ``--runtime`` value that lets the model pick (see :func:`auto_runtime`).
AUTO = "auto"
#: The runtime of a torch model (the one ``auto`` keeps a torch model on).
TORCH = "torch"
#: The format ``export`` writes by default; every export is traced to it first (the torch exporter writes
#: ONNX), a torch model's cached export (``--runtime`` other than torch) is in it, and a folder whose
#: config names no format (version 1) is in it.
DEFAULT_FORMAT = "onnx"

RUNTIMES: Registry[RuntimeSpec] = Registry(
    "runtime",
    [
        RuntimeSpec(
            TORCH,
            label="PyTorch",
            description="the torch model itself (CUDA, MPS or CPU)",
            library_name="sentence-transformers",
            precisions=PRECISIONS,
        ),
        RuntimeSpec(
            "onnx",
            label="ONNX Runtime",
            description="ONNX Runtime on the CPU (protoembed[onnx])",
            library_name="onnx",
            format="onnx",
            format_label="ONNX",
            format_help="onnx/model.onnx",
            quantize_help="int8 matrix multiplications, activation scales calibrated on --calibration",
            writer="protoembed.model.export.onnx:write_onnx",
            calibration="protoembed.model.export.calibration:calibration_sentences",
            reads=("onnx",),
            loader="protoembed.model.export.onnx:load_onnx",
            auto_priority=10,
            auto_help="otherwise",
            extra="onnx",
            requires=("onnx", "onnxruntime"),
        ),
        RuntimeSpec(
            "openvino",
            label="OpenVINO",
            description="OpenVINO's CPU plugin (protoembed[openvino])",
            library_name="openvino",
            format="openvino",
            format_label="OpenVINO",
            format_help="openvino/openvino_model.xml + .bin, OpenVINO's IR",
            format_version=2,
            quantize_help="NNCF post-training quantisation calibrated on --calibration",
            writer="protoembed.model.export.openvino:write_openvino",
            calibration="protoembed.model.export.calibration:calibration_sentences",
            reads=("onnx", "openvino"),
            loader="protoembed.model.export.openvino:load_openvino",
            precisions=CPU_PRECISIONS,
            default_precision="protoembed.model.export.openvino:inference_precision_here",
            auto_priority=20,
            auto_when="protoembed.model.export.openvino:picked_by_auto",
            auto_help="for an fp32 graph where it is installed and the CPU has native bf16 (AVX512-BF16 or "
            "AMX); for an OpenVINO export always (its only reader)",
            extra="openvino",
            requires=("openvino",),
        ),
    ],
)


def register_runtime(spec: RuntimeSpec, *, replace: bool = False) -> RuntimeSpec:
    """Add ``spec`` to :data:`RUNTIMES` (``--runtime``'s choices of parsers built afterwards included);
    returns it. With ``replace``, an entry of the same name is replaced.

    Raises:
        ProtoembedError: its name is ``auto``, it has no loader (it would run nothing: only the torch
            runtime, built in, runs without one), its format already has another runtime's writer, or its
            name is already registered and ``replace`` is false.
    """
    if spec.name == AUTO:
        raise ProtoembedError(f"runtime {AUTO!r} is reserved: it names the rule that picks a runtime")
    if spec.loader is None:  # only the torch runtime runs without one: a new entry never falls back to it
        raise ProtoembedError(
            f"runtime {spec.name!r} has no loader: a runtime opens export folders "
            "(loader='module:function', see protoembed.model.runtimes.base.RuntimeSpec)"
        )
    writer = export_formats().get(spec.format) if spec.format is not None else None
    if writer is not None and writer.name != spec.name:
        raise ProtoembedError(f"export format {spec.format!r} already has a writer")
    return RUNTIMES.register(spec, replace=replace)


def runtime_choices() -> tuple[str, ...]:
    """The values of ``--runtime``: ``auto`` and every registered runtime."""
    return (AUTO, *RUNTIMES)


def export_runtimes() -> tuple[str, ...]:
    """The registered runtimes that open export folders."""
    return tuple(name for name, spec in RUNTIMES.items() if spec.runs_exports)


def check_runtime(runtime: str) -> str:
    """``runtime`` if it is ``auto`` or registered, else a one-line :class:`ProtoembedError` listing the
    choices."""
    if runtime not in runtime_choices():
        raise ProtoembedError(RUNTIMES.unknown(runtime, runtime_choices()))
    return runtime


def get_runtime(name: str) -> RuntimeSpec:
    """The registered runtime ``name`` (see :func:`check_runtime` for the error; ``auto`` is a rule to
    resolve first, not a runtime)."""
    if check_runtime(name) == AUTO:
        raise ProtoembedError(f"runtime {AUTO!r} is a rule, not a runtime: resolve it first")
    return RUNTIMES[name]


def check_export_runtime(runtime: str, root: Any) -> str:
    """``runtime`` if it can open the export folder ``root`` (``auto`` or a runtime that opens exports),
    else a one-line :class:`ProtoembedError` naming those that can."""
    if check_runtime(runtime) != AUTO and not RUNTIMES[runtime].runs_exports:
        able = ", ".join(export_runtimes())
        raise ProtoembedError(f"{root}: an export has no {runtime} weights; use --runtime {able} or {AUTO}")
    return runtime


def export_formats() -> dict[str, RuntimeSpec]:
    """Export format -> the runtime that writes it (``export --format``'s values)."""
    return {spec.format: spec for spec in RUNTIMES.values() if spec.format is not None}


def format_writer(format: str, what: str = "unknown export format") -> RuntimeSpec:
    """The runtime that writes ``format``, else a one-line :class:`ProtoembedError` (``what``: how the
    message names the value, e.g. ``--format``)."""
    formats = export_formats()
    if format not in formats:
        raise ProtoembedError(f"{what} {format!r}: expected one of {', '.join(formats)}")
    return formats[format]


def folder_format(config: dict[str, Any]) -> str:
    """The export format of a folder with this ``protoembed_export.json`` (:data:`DEFAULT_FORMAT` when it
    names none)."""
    return config.get("format") or DEFAULT_FORMAT


def by_priority() -> list[RuntimeSpec]:
    """The runtimes that open exports, in ``auto``'s order (highest :attr:`~RuntimeSpec.auto_priority`
    first, then in registration order)."""
    return sorted((s for s in RUNTIMES.values() if s.runs_exports), key=lambda spec: -spec.auto_priority)


def readers(format: str) -> list[RuntimeSpec]:
    """The runtimes that run exports in ``format``, in ``auto``'s order (:func:`by_priority`)."""
    return [spec for spec in by_priority() if format in spec.reads]


def auto_runtime(config: dict[str, Any]) -> str:
    """The runtime ``auto`` picks for an export with this config: of the runtimes that read its format
    (highest :attr:`~RuntimeSpec.auto_priority` first), the first whose rule
    (:attr:`~RuntimeSpec.auto_when`) holds, else the first. With the entries here:

    - an OpenVINO folder (``--format openvino``): ``openvino`` (its only reader);
    - an int8 ONNX folder: ``onnx`` (its quantised attention operators are ONNX Runtime's);
    - an fp32 ONNX folder: ``openvino`` where the CPU has native bf16 (AVX512-BF16 or AMX) and the
      ``openvino`` package is installed (it runs the graph in bf16 there), else ``onnx``.
    """
    candidates = readers(folder_format(config))
    if not candidates:
        raise ProtoembedError(f"no registered runtime reads the export format {folder_format(config)!r}")
    return next((spec for spec in candidates if spec.picked_by_auto(config)), candidates[0]).name


def runs_on(config: dict[str, Any], where: str = "here") -> str:
    """What ``--runtime auto`` runs an export with this config on (decided on this machine; ``where``
    names it in the text), and, where that is not the format's own runtime in the export's own precision,
    what gives that one: e.g. ``"OpenVINO in bf16 under --runtime auto here (--runtime onnx: ONNX Runtime
    in fp32)"`` for an fp32 ONNX export on a CPU with native bf16, ``"... (--precision fp32: OpenVINO in
    fp32)"`` where only the precision differs. ``protoembed export`` prints it and the model card states
    it, so an fp32 graph that ``auto`` runs in bf16 says so."""
    picked = RUNTIMES[auto_runtime(config)]
    precision = picked.runs_in(config)
    text = f"{picked.label} in {precision} under --runtime {AUTO} {where}"
    own = format_writer(folder_format(config))
    exported = config.get("quantize") or "fp32"
    if picked.name != own.name:
        return f"{text} (--runtime {own.name}: {own.label} in {own.runs_in(config)})"
    if precision != exported:
        return f"{text} (--precision {exported}: {own.label} in {exported})"
    return text


def runtimes_help() -> str:
    """``--runtime``'s help: ``auto``'s rule, then one ``name: description`` per runtime."""
    rules = "; ".join(f"{spec.name} {spec.auto_help}" for spec in by_priority() if spec.auto_help)
    listed = "; ".join(f"{name}: {spec.description}" for name, spec in RUNTIMES.items())
    return (
        f"{AUTO} (default): {TORCH} for a torch model; for an export folder, of the runtimes that read its "
        f"format: {rules}. {listed}. A runtime other than {TORCH} on a torch model runs its fp32 "
        f"{DEFAULT_FORMAT} export, made once and cached in $PROTOEMBED_CACHE/{DEFAULT_FORMAT}"
    )


def formats_help() -> str:
    """``export --format``'s help: each format, its files and the runtimes that run it."""
    parts = []
    for format, spec in export_formats().items():
        run_by = " or ".join(reader.label for reader in readers(format))
        extra = f"; needs protoembed[{spec.extra}]" if spec.extra else ""
        parts.append(f"{format} ({spec.format_help}, run by {run_by}{extra})")
    return f"{', '.join(parts)}; default {DEFAULT_FORMAT}"


def quantize_help() -> str:
    """What ``--quantize int8`` does in each format, for ``export --quantize``'s help."""
    return "; ".join(f"{format}: {spec.quantize_help}" for format, spec in export_formats().items())


def calibrated_formats() -> tuple[str, ...]:
    """The export formats whose int8 export calibrates on text (``export --calibration``)."""
    return tuple(format for format, spec in export_formats().items() if spec.calibration is not None)


__all__ = [
    "AUTO",
    "DEFAULT_FORMAT",
    "RUNTIMES",
    "TORCH",
    "RuntimeSpec",
    "auto_runtime",
    "runs_on",
    "by_priority",
    "calibrated_formats",
    "check_export_runtime",
    "check_runtime",
    "export_formats",
    "export_runtimes",
    "folder_format",
    "format_writer",
    "formats_help",
    "get_runtime",
    "quantize_help",
    "readers",
    "register_runtime",
    "runtime_choices",
    "runtimes_help",
]
