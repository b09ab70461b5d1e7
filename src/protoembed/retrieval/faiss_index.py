"""An optional FAISS index for corpora beyond exact search (``pip install 'protoembed[faiss]'``).

:class:`FaissIndex` scores by inner product over the vectors it is given (the caller L2-normalises them
for cosine: :func:`protoembed.retrieval.semantic_search.rank` does). Below :data:`EXACT_BELOW` rows it is an
exact flat index (``IndexFlatIP``); from there on an inverted-file index (``IndexIVFFlat``, Jegou et al.,
"Product quantization for nearest neighbor search", TPAMI 2011, section 5 without the quantisation):
``nlist`` k-means cells (default about the square root of the corpus size), each query scored exactly
against the rows of its ``nprobe`` nearest cells only. With ``nprobe = nlist`` every row is scored and
the result is the exact search's; below, recall against exact search is measured by
``benchmarks/search_faiss.py``. Rankings are ordered as :func:`protoembed.retrieval.semantic_search.top_k`'s: by
score, then by corpus index.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from protoembed.core.errors import ProtoembedError, missing_package, pip_extra

logger = logging.getLogger(__name__)

#: Corpora with fewer rows get the exact flat index.
EXACT_BELOW = 50_000
#: Training rows per k-means cell (the training sample is at most ``nlist`` times this).
TRAIN_PER_CELL = 64
#: Default ``nprobe``: this fraction of the cells (at least one).
NPROBE_FRACTION = 1 / 16
#: The pip command that installs FAISS.
PIP_FAISS = pip_extra("faiss")


def require_faiss() -> Any:
    """The ``faiss`` module.

    Raises:
        ProtoembedError: FAISS is not installed (the message gives :data:`PIP_FAISS`).
    """
    try:
        import faiss
    except ImportError:
        raise missing_package("the faiss index", "faiss", "faiss") from None
    return faiss


def default_nlist(n: int) -> int:
    """The inverted-file index's cell count for ``n`` rows: about ``sqrt(n)`` (at least 1)."""
    return max(1, round(math.sqrt(n)))


def default_nprobe(nlist: int) -> int:
    """Cells visited per query by default: :data:`NPROBE_FRACTION` of ``nlist`` (at least 1)."""
    return max(1, round(nlist * NPROBE_FRACTION))


def _positive(name: str, value: int | None) -> int | None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1
    ):
        raise ProtoembedError(f"{name} must be a positive integer, got {value!r}")
    return value


class FaissIndex:
    """A FAISS inner-product index over ``corpus``.

    Args:
        corpus: ``(n, d)`` vectors (float32 copies are made; normalise them first for cosine).
        nlist: inverted-file cells (default :func:`default_nlist`); only with ``n >= exact_below``.
        nprobe: cells visited per query (default :func:`default_nprobe`; clipped to ``nlist``).
        exact_below: corpora with fewer rows get the exact ``IndexFlatIP``.
        seed: the k-means training sample's and initialisation's seed.
    Attributes:
        index: the FAISS index; ``nlist`` / ``nprobe``: 0 for the flat index.
    Raises:
        ProtoembedError: faiss missing, a corpus that is not 2-d, a non-positive ``nlist`` or ``nprobe``.
    """

    def __init__(
        self,
        corpus: np.ndarray,
        nlist: int | None = None,
        nprobe: int | None = None,
        exact_below: int = EXACT_BELOW,
        seed: int = 0,
    ) -> None:
        faiss = require_faiss()
        _positive("nlist", nlist)
        _positive("nprobe", nprobe)
        x = np.ascontiguousarray(corpus, dtype=np.float32)
        if x.ndim != 2:
            raise ProtoembedError(f"expected a 2-d array of vectors (rows, dimension), got shape {x.shape}")
        n, d = x.shape
        if n < exact_below:
            self.index, self.nlist, self.nprobe = faiss.IndexFlatIP(d), 0, 0
        else:
            self.nlist = min(nlist or default_nlist(n), n)
            self.nprobe = min(nprobe or default_nprobe(self.nlist), self.nlist)
            quantizer = faiss.IndexFlatIP(d)
            index = faiss.IndexIVFFlat(quantizer, d, self.nlist, faiss.METRIC_INNER_PRODUCT)
            index.cp.seed = seed
            index.cp.spherical = (
                True  # unit-norm centroids: inner-product assignment is not drawn to long ones
            )
            sample = x
            if n > self.nlist * TRAIN_PER_CELL:
                rows = np.random.default_rng(seed).choice(n, self.nlist * TRAIN_PER_CELL, replace=False)
                sample = x[np.sort(rows)]
            index.train(sample)
            index.nprobe = self.nprobe
            self.index, self._quantizer = index, quantizer  # the quantizer must outlive the index
            logger.info("faiss IVF-Flat index: %d rows, nlist %d, nprobe %d", n, self.nlist, self.nprobe)
        self.index.add(x)

    def __len__(self) -> int:
        return int(self.index.ntotal)

    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
        """The ``k`` best rows per query: ``[(corpus index, score), ...]``, best first (by score, then
        index; fewer when the cells visited hold fewer rows)."""
        q = np.ascontiguousarray(queries, dtype=np.float32)
        if not len(q):
            return []
        scores, index = self.index.search(q, min(k, max(len(self), 1)))
        rankings = []
        for score_row, index_row in zip(scores.tolist(), index.tolist()):
            pairs = [(i, s) for i, s in zip(index_row, score_row) if i >= 0]
            rankings.append(sorted(pairs, key=lambda p: (-p[1], p[0])))
        return rankings
