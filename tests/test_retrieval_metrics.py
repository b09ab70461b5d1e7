"""The retrieval metrics equal ``pytrec_eval`` (trec_eval, the reference BEIR and MTEB use) to 1e-6, averaged
as BEIR averages them: on rankings with ties, graded relevance, queries without a relevant document, a run
shorter than k, and random rankings."""

from __future__ import annotations

import random

import pytest
import pytrec_eval

from protoembed.evaluation.retrieval_metrics import (
    K_VALUES,
    METRICS,
    metric_key,
    metric_keys,
    query_scores,
    retrieval_scores,
    trec_order,
)

#: Our metric -> pytrec_eval's measure (MRR: ``recip_rank`` of the run cut at k, computed separately).
TREC = {"ndcg": "ndcg_cut", "recall": "recall", "map": "map_cut", "precision": "P"}


def _cut(run: dict[str, dict[str, float]], k: int) -> dict[str, dict[str, float]]:
    """Each query's run cut to its k best, in trec_eval's order."""
    return {q: {d: docs[d] for d in trec_order(docs)[:k]} for q, docs in run.items()}


def reference(qrels: dict, run: dict, k_values=K_VALUES) -> dict[str, float]:
    """The metrics as BEIR / MTEB compute them with pytrec_eval: per-query measures, summed, divided by
    the number of queries pytrec_eval returns."""
    ks = ",".join(map(str, k_values))
    measures = {f"{m}.{ks}" for m in TREC.values()}
    scores = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    out = {}
    for metric, measure in TREC.items():
        for k in k_values:
            out[metric_key(metric, k)] = sum(s[f"{measure}_{k}"] for s in scores.values()) / len(scores)
    for k in k_values:
        reciprocal = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(_cut(run, k))
        out[metric_key("mrr", k)] = sum(s["recip_rank"] for s in reciprocal.values()) / len(reciprocal)
    return out


def _assert_close(qrels: dict, run: dict, k_values=K_VALUES) -> None:
    got, want = retrieval_scores(qrels, run, k_values), reference(qrels, run, k_values)
    assert list(got) == list(metric_keys(k_values))
    for key in got:
        assert got[key] == pytest.approx(want[key], abs=1e-6), key


def test_ties_are_broken_by_document_id_descending():
    qrels = {"q": {"a": 1, "c": 1}}
    run = {"q": {"a": 0.5, "b": 0.5, "c": 0.5, "d": 0.9, "e": 0.1}}
    assert trec_order(run["q"]) == ["d", "c", "b", "a", "e"]
    assert query_scores(qrels["q"], run["q"], [1, 2])[metric_key("mrr", 2)] == 0.5
    _assert_close(qrels, run, (1, 2, 3, 4, 5))
    tied = {f"q{i}": {"x": 1, "y": 2} for i in range(3)}
    _assert_close(tied, {f"q{i}": {d: 1.0 for d in "wxyz"} for i in range(3)}, (1, 2, 3, 10))


def test_graded_relevance_uses_linear_gains_and_negative_scores_gain_nothing():
    qrels = {"q1": {"a": 3, "b": 1, "c": 2, "d": 0}, "q2": {"a": -1, "b": 2}}
    run = {"q1": {"a": 0.1, "b": 0.9, "c": 0.5, "d": 0.7}, "q2": {"a": 0.9, "b": 0.1}}
    _assert_close(qrels, run)
    dcg = 1 / 1 + 0 + 2 / 2 + 3 / 2.321928094887362  # b, d, c, a
    ideal = 3 + 2 / 1.584962500721156 + 1 / 2
    assert query_scores(qrels["q1"], run["q1"], [10])["ndcg_at_10"] == pytest.approx(dcg / ideal)


def test_queries_without_a_relevant_document_count_as_zero():
    qrels = {"q1": {"a": 1}, "q2": {"a": 0, "b": 0}, "q3": {"c": 1}, "q4": {"a": 1}}
    run = {"q1": {"a": 1.0, "b": 0.5}, "q2": {"a": 1.0}, "q3": {}, "q5": {"a": 1.0}}
    # q2 (no relevant document) and q3 (empty run) count, as zeros; q4 (no run), q5 (no judgments) do not
    assert retrieval_scores(qrels, run)["ndcg_at_10"] == pytest.approx(1 / 3)
    _assert_close(qrels, run)


def test_a_corpus_smaller_than_k():
    qrels = {"q1": {"a": 1, "b": 2}, "q2": {"c": 1}}
    run = {"q1": {"a": 0.3, "b": 0.2, "c": 0.1}, "q2": {"a": 0.3, "b": 0.2, "c": 0.1}}
    got = retrieval_scores(qrels, run)
    assert got["precision_at_100"] == pytest.approx((2 / 100 + 1 / 100) / 2)
    _assert_close(qrels, run)


@pytest.mark.parametrize("seed", range(6))
def test_random_rankings_with_ties(seed: int):
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(rng.randint(5, 150))]
    qrels, run = {}, {}
    for q in range(20):
        judged = rng.sample(docs, rng.randint(1, min(12, len(docs))))
        qrels[f"q{q}"] = {d: rng.choice([0, 1, 1, 2, 3]) for d in judged}
        retrieved = rng.sample(docs, rng.randint(0, min(120, len(docs))))
        run[f"q{q}"] = {d: float(rng.randint(0, 8)) / 8 for d in retrieved}  # coarse: many ties
    _assert_close(qrels, run)
    assert len(METRICS) * len(K_VALUES) == len(retrieval_scores(qrels, run))
