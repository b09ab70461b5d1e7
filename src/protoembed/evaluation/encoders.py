"""The ``encode(sentences) -> array`` callable every evaluation suite takes, built around a model loader.

:class:`LazyEncoder` decides three things once, on its first call: it loads the model (so that a suite
reads and validates its data before the slow load), runs it on a registered runtime (torch, ONNX Runtime,
OpenVINO, ...: :mod:`protoembed.runtimes`; on a torch model an fp32 export made once and cached:
:func:`protoembed.export.cache.onnx_embedder`), and with
``cache_embeddings`` keeps its vectors in an :class:`~protoembed.evaluation.embedding_cache.EmbeddingStore`
keyed by the model's digest, the runtime and the precision. ``protoembed eval`` builds one from its options; from Python::

    encode = LazyEncoder(lambda: protoembed.load("path/to/model"), runtime="onnx", cache_embeddings=True)
    evaluate_sts(encode, data_dir)

Nothing heavy is imported until the first call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from protoembed.core.errors import EmptySentenceError, ProtoembedError
from protoembed.model.runtimes import AUTO, check_runtime

if TYPE_CHECKING:
    import numpy as np

    from protoembed.model.protocol import SentenceEmbedder

logger = logging.getLogger(__name__)


class LazyEncoder:
    """``encode(sentences) -> array (n, d)`` that loads the model on its first call.

    Args:
        load: returns the torch :class:`~protoembed.Embedder` to evaluate (called once, on the first
            encode).
        batch_size: sentences per forward pass.
        allow_empty: encode sentences without tokens as the bare template instead of raising an error.
        runtime: ``auto`` (the model as ``load`` returns it), ``torch``, or a registered runtime that
            opens exports (``onnx``, ``openvino``, ...) for that runtime on the export (a torch model: its
            cached fp32 export; see :func:`protoembed.export.cache.with_runtime`).
        cache_embeddings: look vectors up in, and add them to, the model's on-disk embedding store.
        show_progress_bar: passed to the model's ``encode`` (``None``: the model's default).
        tokenizer_workers, max_tokens_per_batch: passed to the model's ``encode`` (the encode pipeline:
            :mod:`protoembed.batching`; the vectors do not depend on them).

    :attr:`prompts` are the model's input prompts (the retrieval suite's query and document prompts).
    After the first call, :attr:`model` is the loaded model (or its ONNX export) and, with
    ``cache_embeddings``, :attr:`store` its
    :class:`~protoembed.evaluation.embedding_cache.EmbeddingStore`; both are ``None`` before.

    Raises:
        ProtoembedError: an unknown ``runtime`` (at construction); on a call, sentences without tokens
            when ``allow_empty`` is off (the first one named).
    """

    def __init__(
        self,
        load: Callable[[], SentenceEmbedder],
        *,
        batch_size: int = 64,
        allow_empty: bool = False,
        runtime: str = AUTO,
        cache_embeddings: bool = False,
        show_progress_bar: bool | None = None,
        tokenizer_workers: int | None = None,
        max_tokens_per_batch: int | None = None,
    ) -> None:
        check_runtime(runtime)
        #: the pipeline's keywords given (none: the model's encode is called without them)
        self.pipeline = {
            name: value
            for name, value in (
                ("tokenizer_workers", tokenizer_workers),
                ("max_tokens_per_batch", max_tokens_per_batch),
            )
            if value is not None
        }
        self.load = load
        self.batch_size = batch_size
        self.allow_empty = allow_empty
        self.runtime = runtime
        self.cache_embeddings = cache_embeddings
        self.show_progress_bar = show_progress_bar
        self.model: SentenceEmbedder | None = None
        self.store = None

    def _load(self) -> None:
        """Load the model, switch it to the asked runtime, then (as asked) open its embedding store."""
        from protoembed.model.export.cache import with_runtime

        model = with_runtime(self.load(), self.runtime)  # ``auto``: as loaded
        self.model = model
        if self.cache_embeddings:  # keyed by the weights (or export files), runtime and precision
            from protoembed.evaluation.embedding_cache import EmbeddingStore, store_folder
            from protoembed.model.export.cache import model_digest

            key = f"{model.runtime}-{model.precision}" + ("-allow-empty" if self.allow_empty else "")
            self.store = EmbeddingStore(self._encode, store_folder(model_digest(model), key))

    @property
    def prompts(self) -> dict[str, str]:
        """The model's input prompts (name -> text, :func:`protoembed.input_prompts.prompts_of`), the
        model loaded first if not done yet (``{}`` for a model without any)."""
        from protoembed.inputs.prompts import prompts_of

        if self.model is None:
            self._load()
        return prompts_of(self.model)

    def _encode(self, sentences: Sequence[str]) -> np.ndarray:
        """The loaded model's vectors of ``sentences`` (no store)."""
        import numpy as np

        try:
            vectors = self.model.encode(
                sentences,
                batch_size=self.batch_size,
                show_progress_bar=self.show_progress_bar,
                allow_empty=self.allow_empty,
                **self.pipeline,
            )
        except EmptySentenceError as err:
            first = sentences[err.indexes[0]]
            raise ProtoembedError(
                f"{len(err.indexes)} sentence(s) of the benchmark data have no tokens (first: {first!r}); "
                "pass --allow-empty to encode them as the template alone"
            ) from None
        return np.asarray(vectors)

    def __call__(self, sentences: Sequence[str]) -> np.ndarray:
        """Vectors of ``sentences`` (float32 ``(n, d)``), loading the model first if not done yet."""
        if self.model is None:
            self._load()
        return self.store(sentences) if self.store is not None else self._encode(sentences)
