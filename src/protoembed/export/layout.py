"""Names of an export folder and the options of ``protoembed export`` (no heavy imports: the CLI reads them).

An export folder holds ``onnx/model.onnx`` (:data:`GRAPH_FILE`) and ``protoembed_export.json``
(:data:`EXPORT_CONFIG`, whose ``format_version`` is :data:`FORMAT_VERSION`).
"""

from __future__ import annotations

#: Bumped whenever a reader of an older version could misread a newer folder.
FORMAT_VERSION = 1
EXPORT_CONFIG = "protoembed_export.json"
GRAPH_FILE = "onnx/model.onnx"
#: Values of ``--quantize`` (fp32 when not given).
QUANTIZE = ("int8",)
