"""Nearest-neighbour search over embeddings: the one search the retrieval suite, ``protoembed.search``
(:func:`search`: a model, queries and a corpus of texts -> rankings) and ``protoembed mine`` share.

:func:`top_k` scores the queries against the corpus one block of ``query_chunk_size`` x
``corpus_chunk_size`` at a time and keeps a running top ``k`` per query, so at most one block of scores is
in memory (never the whole queries x corpus matrix). Within what is kept, a ranking is ordered by score
(highest first), then by corpus index (lowest first); when several corpus rows tie at the ``k``-th score,
which of them make the cut is not specified.

Scores (:data:`~protoembed.model.protocol.SCORE_FUNCTIONS`): ``cosine`` (the vectors are L2-normalised
first) and ``dot`` (the raw inner product, for models whose vectors are not normalised). A model's own is
its ``similarity_fn_name`` (``config_sentence_transformers.json``;
:func:`~protoembed.model.protocol.score_function_of`).

Indexes (:data:`INDEXES`): ``exact`` (:func:`top_k`) or ``faiss`` (:class:`protoembed.retrieval.faiss_index.FaissIndex`:
exact below a size threshold, an inverted-file index above it; ``pip install 'protoembed[faiss]'``),
both through :func:`rank`.

Quantised vectors (``vectors``: ``int8``, ``uint8``, ``binary``, ``ubinary``; :mod:`protoembed.model.quantize`):
the corpus is searched in that type and the best ``top_k x rescore_multiplier`` rescored with the float
query (:mod:`protoembed.retrieval.quantized_search`), as sentence-transformers' ``semantic_search_faiss``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from protoembed.core.errors import ProtoembedError
from protoembed.inputs.prompts import DOCUMENT, QUERY, encode_with_role
from protoembed.model.protocol import DEFAULT_SCORE_FUNCTION, check_score_function, score_function_of
from protoembed.model.quantize import (
    FLOAT32,
    calibration_ranges,
    calibration_rows,
    check_vectors,
    dtype_of,
    needs_ranges,
    quantize,
    stored_width,
)
from protoembed.retrieval.quantized_search import (
    RESCORE_MULTIPLIER,
    check_rescore_multiplier,
    search_stored,
)

if TYPE_CHECKING:
    import torch

#: The search indexes by name: exact block-wise search, or FAISS.
INDEXES = ("exact", "faiss")
#: Sentences per forward pass when :func:`search` encodes.
BATCH_SIZE = 64
#: Corpus rows scored per block by default.
CORPUS_CHUNK_SIZE = 50_000
#: Queries scored per block by default.
QUERY_CHUNK_SIZE = 1_000

#: One query's ranking: ``(corpus index, score)`` pairs, best first.
Ranking = list[tuple[int, float]]


def check_index(name: str, nprobe: int | None = None) -> str:
    """``name`` if it is one of :data:`INDEXES` (and ``nprobe``, when given, is for ``faiss``).

    Raises:
        ProtoembedError: any other name, or ``nprobe`` for the exact search.
    """
    if name not in INDEXES:
        raise ProtoembedError(f"unknown index {name!r}; expected one of {', '.join(INDEXES)}")
    if nprobe is not None and name != "faiss":
        raise ProtoembedError("nprobe is an option of the faiss index; the exact search visits every row")
    return name


def check_top_k(k: int, name: str = "top_k") -> int:
    """``k`` if it is a positive integer (``name``: how the message names it, e.g. ``--top-k``).

    Raises:
        ProtoembedError: ``k`` below 1 (or not an integer).
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ProtoembedError(f"{name} must be a positive integer, got {k!r}")
    return int(k)


def scoring_vectors(
    vectors: np.ndarray | torch.Tensor, score_function: str, one_row: bool = False
) -> torch.Tensor:
    """``(rows, d)`` vectors as float32, L2-normalised for ``cosine``: what the inner product scores
    (``one_row``: a 1-d vector is taken as one row).

    Raises:
        ProtoembedError: an array that is not 2-d (nor 1-d with ``one_row``).
    """
    import torch

    t = torch.as_tensor(np.asarray(vectors) if not isinstance(vectors, torch.Tensor) else vectors)
    if one_row and t.ndim == 1:
        t = t.unsqueeze(0)
    if t.ndim != 2:
        raise ProtoembedError(
            f"expected a 2-d array of vectors (rows, dimension), got shape {tuple(t.shape)}"
        )
    t = t.float()
    return torch.nn.functional.normalize(t, dim=1) if score_function == "cosine" else t


def query_corpus_vectors(
    queries: np.ndarray | torch.Tensor, corpus: np.ndarray | torch.Tensor, score_function: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """The :func:`scoring_vectors` of the queries and of the corpus, checked to have one width (when
    neither is empty).

    Raises:
        ProtoembedError: as :func:`scoring_vectors`, or vectors of two widths.
    """
    q, c = scoring_vectors(queries, score_function), scoring_vectors(corpus, score_function)
    if len(q) and len(c) and q.shape[1] != c.shape[1]:
        raise ProtoembedError(f"query vectors of width {q.shape[1]}, corpus vectors of width {c.shape[1]}")
    return q, c


def similarity(
    a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor, score_function: str | None = None
) -> np.ndarray:
    """The ``(len(a), len(b))`` matrix of scores between two sets of vectors (float32); a single vector
    (1-d) counts as one row.

    Args:
        a: ``(rows, d)`` or ``(d,)`` vectors (numpy or torch).
        b: the other set, the same way.
        score_function: ``cosine`` (default: :data:`DEFAULT_SCORE_FUNCTION`) or ``dot`` (for a model
            whose vectors are not normalised; :func:`score_function_of` gives a model's own).
    Raises:
        ProtoembedError: an unknown ``score_function``, arrays of more than 2 dimensions, or different
            widths.
    """
    score_function = check_score_function(score_function or DEFAULT_SCORE_FUNCTION)
    x, y = scoring_vectors(a, score_function, one_row=True), scoring_vectors(b, score_function, one_row=True)
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
    x, y = scoring_vectors(a, score_function), scoring_vectors(b, score_function)
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
    q_all, c_all = query_corpus_vectors(queries, corpus, score_function)
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


def rank(
    queries: np.ndarray | torch.Tensor,
    corpus: np.ndarray | torch.Tensor,
    k: int = 10,
    score_function: str = DEFAULT_SCORE_FUNCTION,
    index: str = "exact",
    nprobe: int | None = None,
    vectors: str = FLOAT32,
    rescore_multiplier: int = RESCORE_MULTIPLIER,
    ranges: np.ndarray | None = None,
) -> list[Ranking]:
    """The ``k`` best corpus rows of each query by ``index``: ``exact`` (:func:`top_k`) or ``faiss``
    (:class:`~protoembed.retrieval.faiss_index.FaissIndex` over the same scoring vectors; ``nprobe``: the inverted
    lists it visits per query, default its own). Rankings as :func:`top_k`'s.

    With ``vectors`` other than ``float32``, the corpus's scoring vectors are quantised to that type
    (:func:`~protoembed.model.quantize.quantize`; the scalar types with ``ranges``, default
    :func:`~protoembed.model.quantize.calibration_ranges` of the corpus's
    :func:`~protoembed.model.quantize.calibration_rows`) and searched with the float queries, the top
    ``k x rescore_multiplier`` rescored (:func:`~protoembed.retrieval.quantized_search.search_stored`;
    ``faiss``: FAISS's exact flat indexes, ``nprobe`` refused).

    Raises:
        ProtoembedError: as :func:`top_k`, an unknown index or vector type, ``nprobe`` without ``faiss`` (or
            with quantised vectors), or faiss missing (with the pip command).
    """
    k, index = check_top_k(k), check_index(index, nprobe)
    check_score_function(score_function)
    if check_vectors(vectors) != FLOAT32:
        if nprobe is not None:
            raise ProtoembedError(
                "nprobe is an option of the float32 faiss index; quantised vectors use a flat one"
            )
        return rank_quantized(queries, corpus, k, score_function, vectors, rescore_multiplier, ranges, index)
    if index == "exact":
        return top_k(queries, corpus, k, score_function)
    from protoembed.retrieval.faiss_index import FaissIndex

    q, c = query_corpus_vectors(queries, corpus, score_function)
    if not len(c):
        return [[] for _ in range(len(q))]
    return FaissIndex(c.numpy(), nprobe=nprobe).search(q.numpy(), k)


def rank_quantized(
    queries: np.ndarray | torch.Tensor,
    corpus: np.ndarray | torch.Tensor,
    k: int,
    score_function: str,
    vectors: str,
    rescore_multiplier: int = RESCORE_MULTIPLIER,
    ranges: np.ndarray | None = None,
    index: str = "exact",
    exclude: Sequence[Sequence[int]] | None = None,
) -> list[Ranking]:
    """The ``k`` best corpus rows of each float query with the corpus stored as ``vectors``: the corpus's
    :func:`scoring_vectors` quantised (the scalar types with ``ranges``, default
    :func:`~protoembed.model.quantize.calibration_ranges` of its
    :func:`~protoembed.model.quantize.calibration_rows`), searched and the best ``k x rescore_multiplier``
    rescored (:func:`~protoembed.retrieval.quantized_search.search_stored`; ``exclude`` as :func:`top_k`'s).

    Raises:
        ProtoembedError: as :func:`query_corpus_vectors` and :func:`~protoembed.retrieval.quantized_search.search_stored`.
    """
    q, c = query_corpus_vectors(queries, corpus, score_function)
    floats = c.numpy()
    if needs_ranges(vectors) and ranges is None and len(floats):
        ranges = calibration_ranges(floats[calibration_rows(len(floats))])
    stored = (
        quantize(floats, vectors, ranges)
        if len(floats)
        else np.zeros((0, stored_width(vectors, q.shape[1])), dtype_of(vectors))
    )
    return search_stored(q.numpy(), stored, vectors, k, rescore_multiplier, ranges, index, exclude)


def encode_as(model: Any, texts: Sequence[str], role: str, batch_size: int | None = BATCH_SIZE) -> np.ndarray:
    """``texts`` encoded by ``model`` with its prompt of ``role`` (:data:`~protoembed.inputs.prompts.QUERY`
    or :data:`~protoembed.inputs.prompts.DOCUMENT`; none when it has none), named to its ``encode``
    (:func:`~protoembed.inputs.prompts.encode_with_role`: applied once, by the model): any object with an
    ``encode(sentences, batch_size=...)``, of any runtime (``batch_size`` ``None``: the model's own
    default). Returns float32 ``(len(texts), d)``, also from a model that returns a torch tensor."""
    texts = list(texts)
    vectors = encode_with_role(
        model.encode, texts, role, **({} if batch_size is None else {"batch_size": batch_size})
    )
    if hasattr(vectors, "detach"):
        vectors = vectors.detach().cpu().numpy()
    return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)


def search(
    model: Any,
    queries: Sequence[str],
    corpus: Sequence[str],
    top_k: int = 10,
    corpus_ids: Sequence[Hashable] | None = None,
    score_function: str | None = None,
    index: str = "exact",
    batch_size: int = BATCH_SIZE,
    nprobe: int | None = None,
    vectors: str = FLOAT32,
    rescore_multiplier: int = RESCORE_MULTIPLIER,
    ranges: np.ndarray | None = None,
) -> list[list[tuple[Any, float]]]:
    """The ``top_k`` corpus documents of each query, best first.

    The queries are encoded with the model's ``query`` prompt and the documents with its ``document``
    prompt, each named to the model's ``encode`` (:func:`encode_as`; none when it has none, not its
    default prompt), then ranked by :func:`rank`.

    Args:
        model: a loaded model of any runtime (:func:`protoembed.load`), a sentence-transformers model, or
            any object with ``encode(sentences, batch_size=...)`` (without a ``prompt_name`` parameter:
            the role's prompt of its ``prompts``, if any, put in front of the texts it gets).
        queries: the query texts.
        corpus: the document texts.
        top_k: hits per query (fewer when the corpus is smaller).
        corpus_ids: an id per document, returned instead of its index (e.g. the BEIR ``_id`` of each).
        score_function: ``cosine`` or ``dot`` (default: the model's own, :func:`score_function_of`).
        index: ``exact`` (block-wise exact search) or ``faiss`` (``pip install 'protoembed[faiss]'``).
        batch_size: sentences per forward pass.
        nprobe: ``faiss`` only: inverted lists visited per query (default: the index's own).
        vectors: the corpus's vectors as searched: ``float32``, or ``int8``, ``uint8``, ``binary``,
            ``ubinary`` (quantised, then rescored with the float queries: :func:`rank`).
        rescore_multiplier: quantised vectors: candidates per hit rescored with the float query (0:
            none; the scores are then minus the Hamming distance, or the integer inner product).
        ranges: ``int8`` / ``uint8``: the ``(2, d)`` ranges (default: calibrated on the corpus).
    Returns:
        per query, ``[(corpus index or id, score), ...]`` best first (ties: lower index first).
    Raises:
        ProtoembedError: ``top_k`` below 1, an unknown score function or index, ``corpus_ids`` of another
            length than the corpus, or as the model's ``encode``.
    """
    k, index = check_top_k(top_k), check_index(index, nprobe)
    check_vectors(vectors)
    check_rescore_multiplier(rescore_multiplier)
    score_function = check_score_function(score_function or score_function_of(model))
    if isinstance(queries, str) or isinstance(corpus, str):
        raise ProtoembedError("queries and corpus must be lists of texts, not a single string")
    if corpus_ids is not None and len(corpus_ids) != len(corpus):
        raise ProtoembedError(f"corpus_ids has {len(corpus_ids)} entries for {len(corpus)} documents")
    if index == "faiss":  # before the encoding
        from protoembed.retrieval.faiss_index import require_faiss

        require_faiss()
    if not len(queries):
        return []
    q = encode_as(model, queries, QUERY, batch_size)
    c = (
        encode_as(model, corpus, DOCUMENT, batch_size)
        if len(corpus)
        else np.zeros((0, q.shape[1]), np.float32)
    )
    rankings = rank(q, c, k, score_function, index, nprobe, vectors, rescore_multiplier, ranges)
    if corpus_ids is None:
        return [list(r) for r in rankings]
    ids = list(corpus_ids)
    return [[(ids[i], score) for i, score in r] for r in rankings]
