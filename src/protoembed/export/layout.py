"""Names of an export folder and the options of ``protoembed export`` (no heavy imports: the CLI reads them).

An export folder holds ``onnx/model.onnx`` (:data:`GRAPH_FILE`; ``openvino/openvino_model.xml`` + ``.bin``
for ``--format openvino``) and ``protoembed_export.json``
(:data:`EXPORT_CONFIG`, whose ``format_version`` is :data:`FORMAT_VERSION`).
"""

from __future__ import annotations

from protoembed.errors import ProtoembedError

#: Bumped whenever a reader of an older version could misread a newer folder (2: OpenVINO folders).
FORMAT_VERSION = 2
EXPORT_CONFIG = "protoembed_export.json"
GRAPH_FILE = "onnx/model.onnx"
#: Values of ``--format``: the graph file ONNX Runtime (and OpenVINO) reads, or OpenVINO's IR.
FORMATS = ("onnx", "openvino")
#: Values of ``--quantize`` (fp32 when not given).
QUANTIZE = ("int8",)
#: Values of ``--runtime``: ``auto`` (torch for a torch model; for an export, the rule of
#: :func:`protoembed.export.runtime.auto_runtime`), ``torch``, ``onnx`` (ONNX Runtime), ``openvino``.
RUNTIMES = ("auto", "torch", "onnx", "openvino")
#: The runtimes an export folder can run on.
EXPORT_RUNTIMES = ("auto", "onnx", "openvino")


def check_runtime(runtime: str, known: tuple[str, ...] = RUNTIMES, what: str = "") -> str:
    """``runtime`` if it is one of ``known``, else a one-line :class:`ProtoembedError` (``what``: e.g.
    ``" for an export"``)."""
    if runtime not in known:
        raise ProtoembedError(f"unknown runtime {runtime!r}{what}: expected one of {', '.join(known)}")
    return runtime
