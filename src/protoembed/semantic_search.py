"""Exact nearest-neighbour search over embeddings, chunk by chunk: the one search the retrieval suite,
``protoembed.search`` and ``protoembed mine`` share.

:func:`top_k` scores the queries against the corpus one block of ``query_chunk_size`` x
``corpus_chunk_size`` at a time and keeps a running top ``k`` per query, so at most one block of scores is
in memory (never the whole queries x corpus matrix). Within what is kept, a ranking is ordered by score
(highest first), then by corpus index (lowest first); when several corpus rows tie at the ``k``-th score,
which of them make the cut is not specified.

Scores (:data:`SCORE_FUNCTIONS`): ``cosine`` (the vectors are L2-normalised first) and ``dot`` (the raw
inner product, for models whose vectors are not normalised).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from protoembed.errors import ProtoembedError

if TYPE_CHECKING:
    import torch

#: The similarity functions by name.
SCORE_FUNCTIONS = ("cosine", "dot")
#: Corpus rows scored per block by default.
CORPUS_CHUNK_SIZE = 50_000
#: Queries scored per block by default.
QUERY_CHUNK_SIZE = 1_000

#: One query's ranking: ``(corpus index, score)`` pairs, best first.
Ranking = list[tuple[int, float]]


def check_score_function(name: str) -> str:
    """``name`` if it is one of :data:`SCORE_FUNCTIONS`.

    Raises:
        ProtoembedError: any other name.
    """
    if name not in SCORE_FUNCTIONS:
        raise ProtoembedError(
            f"unknown score function {name!r}; expected one of {', '.join(SCORE_FUNCTIONS)}"
        )
    return name


def check_top_k(k: int) -> int:
    """``k`` if it is a positive integer.

    Raises:
        ProtoembedError: ``k`` below 1 (or not an integer).
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ProtoembedError(f"top_k must be a positive integer, got {k!r}")
    return int(k)


def _tensor(vectors: np.ndarray | torch.Tensor, score_function: str) -> torch.Tensor:
    import torch

    t = torch.as_tensor(np.asarray(vectors) if not isinstance(vectors, torch.Tensor) else vectors)
    if t.ndim != 2:
        raise ProtoembedError(
            f"expected a 2-d array of vectors (rows, dimension), got shape {tuple(t.shape)}"
        )
    t = t.float()
    return torch.nn.functional.normalize(t, dim=1) if score_function == "cosine" else t


def similarity(
    a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor, score_function: str = "cosine"
) -> np.ndarray:
    """The ``(len(a), len(b))`` matrix of scores between two sets of vectors (float32).

    Raises:
        ProtoembedError: an unknown ``score_function``, arrays that are not 2-d, or different widths.
    """
    check_score_function(score_function)
    x, y = _tensor(a, score_function), _tensor(b, score_function)
    if x.shape[1] != y.shape[1]:
        raise ProtoembedError(f"vectors of different widths: {x.shape[1]} and {y.shape[1]}")
    return (x @ y.T).numpy()


def pairwise(
    a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor, score_function: str = "cosine"
) -> np.ndarray:
    """The ``(len(a),)`` scores of ``a[i]`` with ``b[i]``, row by row (float32; the diagonal of
    :func:`similarity` without the rest of the matrix).

    Raises:
        ProtoembedError: an unknown ``score_function``, arrays that are not 2-d, or of other shapes.
    """
    check_score_function(score_function)
    x, y = _tensor(a, score_function), _tensor(b, score_function)
    if x.shape != y.shape:
        raise ProtoembedError(f"pairs of vectors of different shapes: {tuple(x.shape)} and {tuple(y.shape)}")
    return (x * y).sum(dim=1).numpy()


def top_k(
    queries: np.ndarray | torch.Tensor,
    corpus: np.ndarray | torch.Tensor,
    k: int = 10,
    score_function: str = "cosine",
    exclude: Sequence[Sequence[int]] | None = None,
    corpus_chunk_size: int = CORPUS_CHUNK_SIZE,
    query_chunk_size: int = QUERY_CHUNK_SIZE,
) -> list[Ranking]:
    """The ``k`` best corpus rows of each query (exact search, block by block; see the module docstring).

    Args:
        queries: ``(n_queries, d)`` vectors.
        corpus: ``(n_corpus, d)`` vectors.
        k: rankings' length (shorter when the corpus, less its excluded rows, is smaller).
        score_function: ``cosine`` or ``dot``.
        exclude: for each query, corpus indices it must not retrieve (e.g. the query itself when it is
            also a corpus document).
        corpus_chunk_size, query_chunk_size: the block's size.
    Returns:
        one ranking per query: ``[(corpus index, score), ...]``, best first.
    Raises:
        ProtoembedError: ``k`` below 1, an unknown score function, bad shapes, ``exclude`` of another
            length than the queries.
    """
    import torch

    k = check_top_k(k)
    check_score_function(score_function)
    q_all, c_all = _tensor(queries, score_function), _tensor(corpus, score_function)
    if len(c_all) and len(q_all) and q_all.shape[1] != c_all.shape[1]:
        raise ProtoembedError(
            f"query vectors of width {q_all.shape[1]}, corpus vectors of width {c_all.shape[1]}"
        )
    if exclude is not None and len(exclude) != len(q_all):
        raise ProtoembedError(f"exclude has {len(exclude)} entries for {len(q_all)} queries")
    rankings: list[Ranking] = []
    for q0 in range(0, len(q_all), query_chunk_size):
        q = q_all[q0 : q0 + query_chunk_size]
        best_scores = torch.empty((len(q), 0))
        best_index = torch.empty((len(q), 0), dtype=torch.long)
        for c0 in range(0, len(c_all), corpus_chunk_size):
            scores = q @ c_all[c0 : c0 + corpus_chunk_size].T
            if exclude is not None:
                for row, excluded in enumerate(exclude[q0 : q0 + len(q)]):
                    cols = [i - c0 for i in excluded if c0 <= i < c0 + scores.shape[1]]
                    if cols:
                        scores[row, cols] = -torch.inf
            kept = torch.topk(scores, min(k, scores.shape[1]), dim=1)
            best_scores = torch.cat([best_scores, kept.values], dim=1)
            best_index = torch.cat([best_index, kept.indices + c0], dim=1)
            if best_scores.shape[1] > k:
                kept = torch.topk(best_scores, k, dim=1)
                best_scores, best_index = kept.values, torch.gather(best_index, 1, kept.indices)
        for scores_row, index_row in zip(best_scores.tolist(), best_index.tolist()):
            pairs = [(i, s) for i, s in zip(index_row, scores_row) if s != -float("inf")]
            rankings.append(sorted(pairs, key=lambda p: (-p[1], p[0])))
    return rankings
