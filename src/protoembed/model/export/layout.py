"""Names of an export folder and ``protoembed export``'s ``--quantize`` values (no heavy imports: the CLI
reads them). The formats and runtimes are the registry's: :mod:`protoembed.model.runtimes`.

An export folder holds its format's graph (``onnx/model.onnx``: :data:`GRAPH_FILE`;
``openvino/openvino_model.xml`` + ``.bin`` for ``--format openvino``) and ``protoembed_export.json``
(:data:`EXPORT_CONFIG`, whose ``format_version`` is at most :data:`FORMAT_VERSION`). Besides the graph's
description, the config keeps the model's input prompts (:data:`PROMPTS`, name -> text; absent in
folders of older versions: none) and its score function (:data:`SIMILARITY_FN_NAME`; absent: cosine).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from protoembed.core.errors import ProtoembedError

if TYPE_CHECKING:
    from protoembed.model.runtimes.base import RuntimeSpec

#: Bumped whenever a reader of an older version could misread a newer folder (2: OpenVINO folders).
FORMAT_VERSION = 2
EXPORT_CONFIG = "protoembed_export.json"
#: Keys of :data:`EXPORT_CONFIG`: the model's input prompts, its default prompt's name and its score
#: function (the names of ``config_sentence_transformers.json``).
PROMPTS = "prompts"
DEFAULT_PROMPT_NAME = "default_prompt_name"
SIMILARITY_FN_NAME = "similarity_fn_name"
GRAPH_FILE = "onnx/model.onnx"
#: Values of ``--quantize`` (fp32 when not given).
QUANTIZE = ("int8",)


def is_export_dir(path: str | os.PathLike) -> bool:
    """True if ``path`` is a folder written by :func:`~protoembed.model.export.export_embedder`."""
    return (Path(path) / EXPORT_CONFIG).is_file()


def check_export_target(
    path: str | os.PathLike, quantize: str | None, format: str
) -> tuple[RuntimeSpec, Path]:
    """Everything an export checks before it reads the model: the format (its writer returned), the
    quantisation, the packages the writer needs, and the output folder ``path`` (returned), which must be
    new, empty or an earlier export (it is replaced). Cheap: ``protoembed export`` runs it before loading.

    Raises:
        ProtoembedError: an unknown format or quantisation, a missing optional package (with the pip
            command), a folder that holds something else.
    """
    from protoembed.model.runtimes import DEFAULT_FORMAT, format_writer

    writer = format_writer(format)
    if quantize is not None and quantize not in QUANTIZE:
        raise ProtoembedError(f"unknown quantisation {quantize!r}: expected one of {', '.join(QUANTIZE)}")
    format_writer(DEFAULT_FORMAT).require()  # every export is traced to ONNX first
    writer.require()
    target = Path(path)
    occupied = target.exists() and (not target.is_dir() or any(target.iterdir()))
    if occupied and not is_export_dir(target):
        raise ProtoembedError(f"{target}: exists and is not a protoembed export; choose a new folder")
    return writer, target
