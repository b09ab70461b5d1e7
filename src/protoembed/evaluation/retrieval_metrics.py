"""Ranking metrics at a cutoff k, as trec_eval defines them (the measures BEIR and MTEB read from
``pytrec_eval``): nDCG@k, MRR@k, Recall@k, MAP@k and Precision@k.

Definitions (trec_eval's; ``rel(d)``: the judged score of document ``d``, 0 when unjudged; a document is
relevant when ``rel(d) >= 1``; ``R``: the number of relevant documents of the query in the qrels):

- the ranking: a query's run (document -> score) ordered by score, highest first, ties broken by document
  id in *descending* byte order (trec_eval's order, whatever order the run was given in); ranks from 1;
- ``ndcg_at_k`` (trec_eval ``ndcg_cut.k``): DCG@k / ideal DCG@k with linear gains, DCG@k = sum over ranks
  i <= k of ``max(rel, 0) / log2(i + 1)``; the ideal DCG ranks the query's judged scores (the positive
  ones) highest first; 0 when the ideal DCG is 0;
- ``map_at_k`` (``map_cut.k``): the sum of precision@i over the ranks i <= k holding a relevant document,
  divided by R (not by min(R, k)); 0 when R = 0;
- ``recall_at_k`` (``recall.k``): relevant documents in the top k / R; 0 when R = 0;
- ``precision_at_k`` (``P.k``): relevant documents in the top k / k (k even when fewer were retrieved);
- ``mrr_at_k``: trec_eval's ``recip_rank`` of the run cut at k: 1 / the rank of the first relevant
  document among the top k, else 0.

Averaging (as BEIR and MTEB average ``pytrec_eval``'s per-query values): the plain mean over the queries
that have both judgments (an entry in the qrels, even with only score-0 lines) and a run (possibly
empty); a query with judgments but no relevant document, or with an empty ranking, counts with 0 for every
metric; a judged query without a run and a run without judgments are left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

#: The cutoffs reported (BEIR's and MTEB's).
K_VALUES: tuple[int, ...] = (1, 3, 5, 10, 100)
#: The metrics, by the prefix of their keys (``ndcg_at_10``).
METRICS: tuple[str, ...] = ("ndcg", "mrr", "recall", "map", "precision")
#: The main score of a retrieval task (BEIR's and MTEB's).
MAIN_SCORE = "ndcg_at_10"

#: query id -> document id -> judged score (integer; >= 1 is relevant).
Qrels = Mapping[str, Mapping[str, int]]
#: query id -> document id -> retrieval score.
Run = Mapping[str, Mapping[str, float]]


def metric_key(metric: str, k: int) -> str:
    """The result key of ``metric`` at cutoff ``k``: ``ndcg_at_10``."""
    return f"{metric}_at_{k}"


def metric_keys(k_values: Sequence[int] = K_VALUES) -> tuple[str, ...]:
    """Every key :func:`retrieval_scores` returns, metric by metric, then by cutoff."""
    return tuple(metric_key(m, k) for m in METRICS for k in k_values)


def trec_order(run: Mapping[str, float]) -> list[str]:
    """The document ids of one query's run in trec_eval's order: score descending, then id descending."""
    return sorted(run, key=lambda doc: (run[doc], doc), reverse=True)


def _dcg(gains: Sequence[float]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def query_scores(
    judged: Mapping[str, int], run: Mapping[str, float], k_values: Sequence[int]
) -> dict[str, float]:
    """One query's metrics (module docstring) at each cutoff, in 0..1, keyed by :func:`metric_key`.

    In: the query's judgments (document -> score) and its run (document -> retrieval score).
    """
    ranked = trec_order(run)
    gains = [float(max(judged.get(doc, 0), 0)) for doc in ranked]
    n_relevant = sum(1 for score in judged.values() if score >= 1)
    ideal = sorted((float(s) for s in judged.values() if s > 0), reverse=True)
    hits_at: list[int] = []  # relevant documents among the first i + 1
    precision_sum_at: list[float] = []  # sum of precision@rank over the relevant ranks up to i + 1
    first = None
    for i, doc in enumerate(ranked):
        relevant = judged.get(doc, 0) >= 1
        hits_at.append((hits_at[-1] if hits_at else 0) + relevant)
        gained = hits_at[-1] / (i + 1) if relevant else 0.0
        precision_sum_at.append((precision_sum_at[-1] if precision_sum_at else 0.0) + gained)
        first = i + 1 if relevant and first is None else first
    out: dict[str, float] = {}
    for k in k_values:
        cut = min(k, len(ranked))
        hits = hits_at[cut - 1] if cut else 0
        ideal_dcg = _dcg(ideal[:k])
        out[metric_key("ndcg", k)] = _dcg(gains[:k]) / ideal_dcg if ideal_dcg > 0 else 0.0
        out[metric_key("mrr", k)] = 1.0 / first if first is not None and first <= k else 0.0
        out[metric_key("recall", k)] = hits / n_relevant if n_relevant else 0.0
        out[metric_key("map", k)] = (
            (precision_sum_at[cut - 1] if cut else 0.0) / n_relevant if n_relevant else 0.0
        )
        out[metric_key("precision", k)] = hits / k
    return out


def retrieval_scores(qrels: Qrels, run: Run, k_values: Sequence[int] = K_VALUES) -> dict[str, float]:
    """The mean of :func:`query_scores` over the queries with both judgments and a run (module
    docstring), in 0..1, keyed by :func:`metric_key` in :func:`metric_keys`' order; every metric 0 when
    no query qualifies."""
    queries = [q for q in run if q in qrels]
    totals = dict.fromkeys(metric_keys(k_values), 0.0)
    for query in queries:
        for key, value in query_scores(qrels[query], run[query], k_values).items():
            totals[key] += value
    return {key: total / len(queries) if queries else 0.0 for key, total in totals.items()}
