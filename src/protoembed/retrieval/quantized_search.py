"""Search over stored ``binary`` / ``ubinary`` / ``int8`` / ``uint8`` vectors, then rescoring with the float
query: sentence-transformers' ``semantic_search_faiss`` (``sentence_transformers/util/quantization.py``).

:func:`search_stored` finds each query's ``k x rescore_multiplier`` candidates in the stored vectors
(:mod:`protoembed.model.quantize`):

- the bit types by Hamming distance between the query's bits (``x > 0``) and each row's: ``faiss``:
  FAISS's exact ``IndexBinaryFlat``; ``exact``: numpy, block by block, as ``|q| + |c| - 2 q.c`` over the
  unpacked bits;
- the scalar types by the inner product of the query quantised with the corpus's ranges and each row's
  levels (``faiss``: ``IndexFlatIP`` over the levels as float32, as sentence-transformers builds it;
  ``exact``: numpy in float64, exact integers);

then multiplies the float query with each candidate's :func:`~protoembed.model.quantize.rescoring_vectors`
(its bits as 0 / 1, or its levels at the lower edge of their step) and keeps the ``k`` best by that
score. With ``rescore_multiplier=0`` the candidates' own scores are returned instead: minus the Hamming
distance, or the integer inner product. Rankings are ordered by score, then by corpus index; where rows
tie at the candidates' cut, which of them make it is not specified (FAISS's choice under ``faiss``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from protoembed.core.errors import ProtoembedError
from protoembed.model.quantize import (
    BINARY_TYPES,
    FLOAT32,
    check_ranges,
    check_vectors,
    dtype_of,
    needs_ranges,
    quantize,
    rescoring_vectors,
    stored_width,
    unsigned_bits,
)

#: Candidates per hit rescored with the float query by default (sentence-transformers' default).
RESCORE_MULTIPLIER = 2
#: Corpus rows compared per block by the numpy search.
CORPUS_BLOCK = 16_384
#: Floats of candidates' rescoring vectors held at once (query blocks are sized to it).
RESCORE_FLOATS = 1 << 24


def check_rescore_multiplier(value: int, name: str = "rescore_multiplier") -> int:
    """``value`` if it is an integer of at least 0 (0: no rescoring).

    Raises:
        ProtoembedError: a negative number or not an integer (``name`` as the message names it)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ProtoembedError(f"{name} must be an integer of at least 0 (0: no rescoring), got {value!r}")
    return int(value)


def check_stored(stored: np.ndarray, vectors: str, dimension: int) -> np.ndarray:
    """``stored`` if it is ``(n, stored_width)`` vectors of ``vectors``' numpy type.

    Raises:
        ProtoembedError: another type or width."""
    s = np.asarray(stored)
    width = stored_width(vectors, dimension)
    if s.ndim != 2 or s.shape[1] != width or s.dtype != dtype_of(vectors):
        raise ProtoembedError(
            f"{vectors} vectors of {dimension} dimensions are {dtype_of(vectors)} (rows, {width}), "
            f"got {s.dtype} {s.shape}"
        )
    return s


def _candidate_scores(q: np.ndarray, block: np.ndarray, binary: bool) -> np.ndarray:
    """Higher is better: minus the Hamming distance (``binary``: both unpacked bits as float32), else the
    inner product in float64."""
    if binary:
        common = q @ block.T
        return 2 * common - q.sum(axis=1)[:, None] - block.sum(axis=1)[None, :]
    return q @ block.T


def _keep(scores: np.ndarray, index: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of each row of ``scores`` (with their corpus ``index``), unordered."""
    if scores.shape[1] <= k:
        return scores, index
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    return np.take_along_axis(scores, part, 1), np.take_along_axis(index, part, 1)


def _numpy_candidates(
    q: np.ndarray,
    stored: np.ndarray,
    vectors: str,
    k: int,
    exclude: Sequence[Sequence[int]] | None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(scores, index)`` of each query's ``k`` best rows (unordered; index -1: none), block by block."""
    binary = vectors in BINARY_TYPES
    best = np.full((len(q), 0), -np.inf), np.zeros((len(q), 0), dtype=np.int64)
    for c0 in range(0, len(stored), CORPUS_BLOCK):
        chunk = stored[c0 : c0 + CORPUS_BLOCK]
        block = (
            np.unpackbits(unsigned_bits(chunk, vectors), axis=1)[:, : q.shape[1]].astype(np.float32)
            if binary
            else np.asarray(chunk, dtype=np.float64)
        )
        scores = _candidate_scores(q, block, binary).astype(np.float64)
        if exclude is not None:
            for row, excluded in enumerate(exclude):
                cols = [i - c0 for i in excluded if c0 <= i < c0 + len(block)]
                scores[row, cols] = -np.inf
        index = np.broadcast_to(np.arange(c0, c0 + len(block), dtype=np.int64), scores.shape)
        best = _keep(np.concatenate([best[0], scores], 1), np.concatenate([best[1], index], 1), k)
    scores, index = best
    return scores, np.where(np.isneginf(scores), -1, index)


def _faiss_candidates(
    q: np.ndarray, stored: np.ndarray, vectors: str, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(scores, index)`` of each query's ``k`` best rows by FAISS's exact flat indexes (index -1: none)."""
    from protoembed.retrieval.faiss_index import require_faiss

    faiss = require_faiss()
    if vectors in BINARY_TYPES:
        bits = unsigned_bits(stored, vectors)
        index = faiss.IndexBinaryFlat(bits.shape[1] * 8)
        index.add(bits)
        distances, rows = index.search(np.ascontiguousarray(q), k)  # the query's bits: ubinary
        return -distances.astype(np.float64), rows
    index = faiss.IndexFlatIP(stored.shape[1])
    index.add(np.ascontiguousarray(stored, dtype=np.float32))
    scores, rows = index.search(np.ascontiguousarray(q, dtype=np.float32), k)
    return scores.astype(np.float64), rows


def search_stored(
    queries: np.ndarray,
    stored: np.ndarray,
    vectors: str,
    k: int,
    rescore_multiplier: int = RESCORE_MULTIPLIER,
    ranges: np.ndarray | None = None,
    index: str = "exact",
    exclude: Sequence[Sequence[int]] | None = None,
) -> list[list[tuple[int, float]]]:
    """The ``k`` best stored rows of each float query (module docstring).

    Args:
        queries: ``(n_queries, d)`` float vectors (L2-normalised by the caller for cosine).
        stored: ``(n, stored width)`` vectors of type ``vectors`` (:func:`~protoembed.model.quantize.quantize`).
        vectors: ``binary``, ``ubinary``, ``int8`` or ``uint8``.
        k: hits per query (fewer when the corpus, less its excluded rows, is smaller).
        rescore_multiplier: candidates per hit rescored with the float query (0: none).
        ranges: the scalar types' ``(2, d)`` ranges the corpus was quantised with.
        index: ``exact`` (numpy) or ``faiss`` (FAISS's flat indexes).
        exclude: per query, corpus rows it must not retrieve (``exact`` only).
    Returns:
        per query, ``[(corpus index, score), ...]``, best first.
    Raises:
        ProtoembedError: a float32 or unknown type, stored vectors of another type or width, a scalar type
            without ranges, ``exclude`` with ``faiss`` or of another length than the queries.
    """
    if check_vectors(vectors) == FLOAT32:
        raise ProtoembedError("search_stored searches quantised vectors; float32 ones are searched by rank")
    rescore_multiplier = check_rescore_multiplier(rescore_multiplier)
    q = np.asarray(queries, dtype=np.float32)
    dimension = q.shape[1]
    stored = check_stored(stored, vectors, dimension)
    if needs_ranges(vectors):
        if ranges is None:
            raise ProtoembedError(f"{vectors} vectors are searched with the ranges they were quantised with")
        ranges = check_ranges(ranges, dimension)
    if exclude is not None and (index != "exact" or len(exclude) != len(q)):
        raise ProtoembedError(
            "exclude is an option of the exact search"
            if index != "exact"
            else f"exclude has {len(exclude)} entries for {len(q)} queries"
        )
    if not len(q):
        return []
    if not len(stored):
        return [[] for _ in range(len(q))]
    wanted = min(k * max(rescore_multiplier, 1), len(stored))
    quantised = quantize(q, "ubinary" if vectors in BINARY_TYPES else vectors, ranges)
    if index == "faiss":
        scores, rows = _faiss_candidates(quantised, stored, vectors, wanted)
    else:
        qv = (
            np.unpackbits(quantised, axis=1)[:, :dimension].astype(np.float32)
            if vectors in BINARY_TYPES
            else (quantised.astype(np.float64))
        )
        scores, rows = _numpy_candidates(qv, stored, vectors, wanted, exclude)
    if rescore_multiplier:
        scores = np.full(rows.shape, -np.inf)
        step = max(1, RESCORE_FLOATS // max(1, wanted * dimension))
        for q0 in range(0, len(q), step):
            block = rows[q0 : q0 + step]
            candidates = rescoring_vectors(stored[np.maximum(block, 0)], vectors, dimension, ranges)
            rescored = np.einsum("ij,ikj->ik", q[q0 : q0 + step], candidates).astype(np.float64, copy=False)
            scores[q0 : q0 + step] = np.where(block >= 0, rescored, -np.inf)
    rankings = []
    for score_row, index_row in zip(scores.tolist(), rows.tolist()):
        pairs = [(i, s) for i, s in zip(index_row, score_row) if i >= 0 and s != -np.inf]
        rankings.append(sorted(pairs, key=lambda p: (-p[1], p[0]))[:k])
    return rankings
