"""A toy runtime in one module: ONNX Runtime behind a wrapper that records every batch it runs.

With its one registry entry (:data:`test_runtimes.TOY`, added by :func:`protoembed.model.runtimes.register_runtime`)
it is a runtime like the packaged ones: ``protoembed.load(path, runtime="toy")``, ``--runtime toy``,
``LazyEncoder(..., runtime="toy")``. It writes no export format; it runs ONNX exports (and a torch model
through its cached ONNX export).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from protoembed.model.encoder import PromptEncoder
from protoembed.model.export.runtime import ExportedEmbedder
from protoembed.model.runtimes import get_runtime

#: The runtime it wraps.
WRAPPED = "onnx"


class RecordingEmbedder(ExportedEmbedder):
    """Runs each batch on the wrapped runtime's model ``inner`` and records its shape in :attr:`calls`."""

    def __init__(self, inner: ExportedEmbedder) -> None:
        super().__init__(inner.encoder, inner.config, inner.normalize)
        self.inner = inner
        #: (rows, tokens) of every batch run, in order
        self.calls: list[tuple[int, int]] = []

    def run(self, feeds: dict[str, np.ndarray]) -> torch.Tensor:
        """One batch (int64 arrays by input name) -> the wrapped runtime's ``sentence_embedding``."""
        self.calls.append(tuple(feeds["input_ids"].shape))
        return self.inner.run(feeds)


def load_recording(
    root: Path,
    config: dict[str, Any],
    encoder: PromptEncoder,
    normalize: bool,
    threads: int | None,
    precision: str | None,
) -> RecordingEmbedder:
    """The registry loader: the export folder ``root`` opened by the wrapped runtime, wrapped."""
    return RecordingEmbedder(get_runtime(WRAPPED).load(root, config, encoder, normalize, threads, precision))
