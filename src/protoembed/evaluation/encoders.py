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

import functools
import hashlib
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from protoembed.core.errors import EmptySentenceError, ProtoembedError
from protoembed.model.runtimes import AUTO, check_runtime

if TYPE_CHECKING:
    import numpy as np

    from protoembed.evaluation.embedding_cache import EmbeddingStore
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

    :attr:`prompts` are the model's input prompts (the retrieval suite's query and document prompts); a
    call's ``prompt_name`` is passed to the model's ``encode``, which applies it.
    After the first call, :attr:`model` is the loaded model (or its ONNX export) and, with
    ``cache_embeddings``, :attr:`store` the
    :class:`~protoembed.evaluation.embedding_cache.EmbeddingStore` of the calls without a prompt name;
    both are ``None`` before. A store holds the vectors of one prompt text (the one the model puts in
    front: :func:`~protoembed.inputs.prompts.resolved_prompt`): the texts without a prompt in the
    runtime's folder, those of a prompt in a folder named after the prompt's SHA-256 besides.

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
        self.store: EmbeddingStore | None = None
        #: the stores by the prompt text their vectors were encoded with
        self.stores: dict[str, EmbeddingStore] = {}
        self._store_key = ("", "")  # the model's digest, its runtime and precision

    def _load(self) -> None:
        """Load the model, switch it to the asked runtime, then (as asked) open its embedding store."""
        from protoembed.model.export.cache import with_runtime

        model = with_runtime(self.load(), self.runtime)  # ``auto``: as loaded
        self.model = model
        if self.cache_embeddings:  # keyed by the weights (or export files), runtime and precision
            from protoembed.model.export.cache import model_digest

            key = f"{model.runtime}-{model.precision}" + ("-allow-empty" if self.allow_empty else "")
            self._store_key = (model_digest(model), key)
            self.store = self._store_of(None)

    def _store_of(self, prompt_name: str | None) -> EmbeddingStore:
        """The embedding store of the calls with ``prompt_name``: one per prompt text the model applies.

        Raises:
            ProtoembedError: an unknown ``prompt_name``."""
        from protoembed.evaluation.embedding_cache import EmbeddingStore, store_folder
        from protoembed.inputs.prompts import resolved_prompt

        prompt = resolved_prompt(self.model, prompt_name)
        if prompt not in self.stores:
            suffix = f"-prompt-{hashlib.sha256(prompt.encode()).hexdigest()[:16]}" if prompt else ""
            encode = functools.partial(self._encode, prompt_name=prompt_name)
            digest, key = self._store_key
            self.stores[prompt] = EmbeddingStore(encode, store_folder(digest, key + suffix))
        return self.stores[prompt]

    @property
    def prompts(self) -> dict[str, str]:
        """The model's input prompts (name -> text, :func:`protoembed.input_prompts.prompts_of`), the
        model loaded first if not done yet (``{}`` for a model without any)."""
        from protoembed.inputs.prompts import prompts_of

        if self.model is None:
            self._load()
        return prompts_of(self.model)

    def _encode(self, sentences: Sequence[str], prompt_name: str | None = None) -> np.ndarray:
        """The loaded model's vectors of ``sentences`` with its prompt ``prompt_name`` (no store)."""
        import numpy as np

        try:
            vectors = self.model.encode(
                sentences,
                batch_size=self.batch_size,
                show_progress_bar=self.show_progress_bar,
                allow_empty=self.allow_empty,
                **({} if prompt_name is None else {"prompt_name": prompt_name}),  # a bare encode takes none
                **self.pipeline,
            )
        except EmptySentenceError as err:
            first = sentences[err.indexes[0]]
            raise ProtoembedError(
                f"{len(err.indexes)} sentence(s) of the benchmark data have no tokens (first: {first!r}); "
                "pass --allow-empty to encode them as the template alone"
            ) from None
        return np.asarray(vectors)

    def __call__(self, sentences: Sequence[str], prompt_name: str | None = None) -> np.ndarray:
        """Vectors of ``sentences`` (float32 ``(n, d)``) with the model's prompt ``prompt_name`` (``None``:
        its default prompt, if any; as its ``encode`` applies them), loading the model first if not done
        yet."""
        if self.model is None:
            self._load()
        if self.store is None:
            return self._encode(sentences, prompt_name)
        return self._store_of(prompt_name)(sentences)


class CutEncoder(LazyEncoder):
    """The :class:`LazyEncoder` of one width of a ``--dims`` run: the first ``dim`` dimensions of the
    vectors of ``encoders.full`` (the model it loads, its runtime, store and pipeline), L2-normalised
    after the cut when the model normalises (:func:`protoembed.model.batching.truncate`: what a run at
    ``truncate_dim=dim`` gives). The :class:`CutEncoders` of one run share their full vectors: each
    sentence list is encoded once, whatever the number of widths scored."""

    def __init__(self, encoders: CutEncoders, dim: int) -> None:
        super().__init__(encoders.full.load)
        self.encoders = encoders
        self.dim = dim

    def _load(self) -> None:
        """The full encoder's model, loaded once for every width."""
        full = self.encoders.full
        if full.model is None:
            full._load()
        self.model = full.model

    def __call__(self, sentences: Sequence[str], prompt_name: str | None = None) -> np.ndarray:
        """The cut vectors of ``sentences`` (float32 ``(n, dim)``).

        Raises:
            ProtoembedError: a ``dim`` above the width of the model's vectors."""
        import torch

        from protoembed.model.batching import check_truncate_dim, truncate

        if self.model is None:
            self._load()
        vectors = self.encoders.vectors(sentences, prompt_name)
        check_truncate_dim(self.dim, vectors.shape[1])
        return truncate(torch.from_numpy(vectors), self.dim, bool(self.model.normalize)).numpy()


class CutEncoders:
    """The :class:`CutEncoder` of each of ``dims`` over one :class:`LazyEncoder` (``full``), which encodes
    each sentence list once (its vectors kept for the run: the suites of ``--dims`` encode the same
    sentences once per width)."""

    def __init__(self, full: LazyEncoder, dims: Sequence[int]) -> None:
        self.full = full
        self.by_dim = {dim: CutEncoder(self, dim) for dim in dims}
        self._kept: dict[tuple[str | None, tuple[str, ...]], np.ndarray] = {}

    def vectors(self, sentences: Sequence[str], prompt_name: str | None) -> np.ndarray:
        """The full vectors of ``sentences`` with the prompt ``prompt_name``, encoded on the first ask."""
        key = (prompt_name, tuple(sentences))
        if key not in self._kept:
            self._kept[key] = self.full(sentences, prompt_name)
        return self._kept[key]
