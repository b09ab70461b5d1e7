"""Names of an export folder and ``protoembed export``'s ``--quantize`` values (no heavy imports: the CLI
reads them). The formats and runtimes are the registry's: :mod:`protoembed.runtimes`.

An export folder holds its format's graph (``onnx/model.onnx``: :data:`GRAPH_FILE`;
``openvino/openvino_model.xml`` + ``.bin`` for ``--format openvino``) and ``protoembed_export.json``
(:data:`EXPORT_CONFIG`, whose ``format_version`` is at most :data:`FORMAT_VERSION`). Besides the graph's
description, the config keeps the model's input prompts (:data:`PROMPTS`, name -> text; absent in
folders of older versions: none) and its score function (:data:`SIMILARITY_FN_NAME`; absent: cosine).
"""

from __future__ import annotations

#: Bumped whenever a reader of an older version could misread a newer folder (2: OpenVINO folders).
FORMAT_VERSION = 2
EXPORT_CONFIG = "protoembed_export.json"
#: Keys of :data:`EXPORT_CONFIG`: the model's input prompts and its score function (the names of
#: ``config_sentence_transformers.json``).
PROMPTS = "prompts"
SIMILARITY_FN_NAME = "similarity_fn_name"
GRAPH_FILE = "onnx/model.onnx"
#: Values of ``--quantize`` (fp32 when not given).
QUANTIZE = ("int8",)
