"""The retrieval suite end to end: on a BEIR folder written here, with an encode callable whose vectors the
test controls, its rankings equal a brute-force numpy search and its metrics equal pytrec_eval's on that
ranking; the model's query / document prompts are applied; a query never retrieves its own id; the command
(``--task-dir``) writes what ``protoembed.evaluate`` returns; the report prints the retrieval table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import protoembed
from beir_toy import write_beir
from protoembed.cli import main
from protoembed.core.errors import ProtoembedError
from protoembed.data.benchmarks.beir import read_beir
from protoembed.evaluation.embedding_cache import EmbeddingStore
from protoembed.evaluation.encoders import LazyEncoder
from protoembed.evaluation.retrieval import evaluate_retrieval, format_retrieval_table, search
from protoembed.evaluation.retrieval_metrics import K_VALUES, metric_keys
from protoembed.evaluation.tasks import beir_folder_task, beir_task
from protoembed.report import build_report, load_results
from test_retrieval_metrics import reference

PROMPTS = {"query": "query: ", "document": "passage: "}
DIM = 6


class Vectors:
    """``encode(texts, prompt_name=None)``: each text's fixed vector, its prompt of ``prompt_name`` put in
    front as a model does; a text without its role's prompt is an error. Its ``prompts`` are
    :data:`PROMPTS`; ``calls`` records what it was asked (``(prompt_name, texts)``)."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table
        self.prompts = dict(PROMPTS)
        self.calls: list[tuple[str | None, list[str]]] = []

    def __call__(self, texts: list[str], prompt_name: str | None = None) -> np.ndarray:
        self.calls.append((prompt_name, list(texts)))
        prompt = self.prompts[prompt_name] if prompt_name else ""
        return np.stack([self.table[prompt + t] for t in texts])


def _toy(folder: Path, seed: int = 0, n_docs: int = 130, n_queries: int = 25):
    """A BEIR folder of ``n_docs`` documents (more than 100: the cut at k = 100 matters) and its vectors:
    random, except that query ``d007`` (an id the corpus has too) has the vector of document ``d007``,
    ``d010`` and ``d011`` share one vector (a tie), and query ``q3`` has only score-0 judgments."""
    rng = np.random.default_rng(seed)
    doc_ids = [f"d{i:03d}" for i in range(n_docs)]
    query_ids = [f"q{i}" for i in range(n_queries - 1)] + ["d007"]
    corpus = {d: (f"title {d}" if i % 3 else "", f"text of {d}") for i, d in enumerate(doc_ids)}
    queries = {q: f"question {q}" for q in query_ids}
    qrels = []
    for q in query_ids:
        for d in rng.choice(doc_ids, size=rng.integers(1, 6), replace=False):
            qrels.append((q, str(d), 0 if q == "q3" else int(rng.integers(0, 4))))
    write_beir(folder, corpus, queries, qrels)
    table = {}
    doc = {d: PROMPTS["document"] + (title + " " + text).strip() for d, (title, text) in corpus.items()}
    for d in doc:
        table[doc[d]] = rng.normal(size=DIM)
    table[doc["d011"]] = table[doc["d010"]]
    for text in queries.values():
        table[PROMPTS["query"] + text] = rng.normal(size=DIM)
    table[PROMPTS["query"] + "question d007"] = table[doc["d007"]]
    return Vectors(table), corpus, queries, qrels


def brute_force(encode: Vectors, folder: Path, score_function: str) -> dict[str, dict[str, float]]:
    """Every judged query's best 100 documents by numpy (float64, a full score matrix), its own id left
    out: the independent ranking."""
    data = read_beir(folder, "test", "toy")
    docs = np.stack([encode.table[PROMPTS["document"] + t] for t in data.corpus_texts])
    queries = np.stack([encode.table[PROMPTS["query"] + t] for t in data.query_texts])
    if score_function == "cosine":
        docs = docs / np.linalg.norm(docs, axis=1, keepdims=True)
        queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    scores = queries @ docs.T
    run = {}
    for qi, q in enumerate(data.query_ids):
        order = [j for j in np.argsort(-scores[qi], kind="stable") if data.corpus_ids[j] != q][
            : max(K_VALUES)
        ]
        run[q] = {data.corpus_ids[j]: float(scores[qi, j]) for j in order}
    return run


@pytest.mark.parametrize("score_function", ["cosine", "dot"])
def test_rankings_and_metrics_equal_brute_force_and_pytrec_eval(tmp_path: Path, score_function: str):
    encode, _, _, qrels = _toy(tmp_path / "toy")
    data = read_beir(tmp_path / "toy", "test", "toy")
    run, identical = search(encode, data, score_function, corpus_chunk_size=17)
    expected = brute_force(encode, tmp_path / "toy", score_function)
    assert identical == 1 and "d007" not in run["d007"]
    assert list(run) == list(expected)
    for q in run:  # the same documents, the same scores (float32 search), ranked alike outside exact ties
        assert set(run[q]) == set(expected[q]), q
        np.testing.assert_allclose([run[q][d] for d in expected[q]], list(expected[q].values()), atol=1e-5)
    assert run["q0"] and list(run["q0"])[:1] == list(expected["q0"])[:1]
    assert set(run["d007"]) == set(expected["d007"])  # the query's own document (its exact vector) left out

    judged = {q: {d: s for q2, d, s in qrels if q2 == q} for q in dict.fromkeys(q for q, _, _ in qrels)}
    want = reference(judged, expected)
    encode.calls.clear()
    result = evaluate_retrieval(
        encode, None, [beir_task("Toy", None, str(tmp_path / "toy"))], score_function=score_function
    )
    got = result["tasks"]["Toy"]
    for key in metric_keys():
        assert got[key] == pytest.approx(want[key] * 100, abs=1e-4), key  # 1e-6 on the 0..1 scale
    assert (got["queries"], got["corpus"], got["identical_ids"]) == (25, 130, 1)
    assert result["avg"] == got["ndcg_at_10"]
    # one call per role, each distinct text once, the prompt named (never put in front by the suite)
    (query_role, queries), (document_role, documents) = encode.calls
    assert (query_role, document_role) == ("query", "document")
    assert len(queries) == len(set(queries)) == 25 and len(documents) == len(set(documents)) == 130
    assert not any(t.startswith(tuple(PROMPTS.values())) for t in queries + documents)
    assert result["protocol"] == {
        "split": "test",
        "score_function": score_function,
        "k_values": [1, 3, 5, 10, 100],
        "exclude_identical_ids": True,
        "title_join": "title + ' ' + text, stripped",
        "prompts": PROMPTS,
    }


def test_the_corpus_is_scored_in_chunks_with_the_same_results(tmp_path: Path):
    encode, *_ = _toy(tmp_path / "toy", seed=1)
    task = beir_task("Toy", None, str(tmp_path / "toy"))
    whole = evaluate_retrieval(encode, None, [task])
    chunked = evaluate_retrieval(encode, None, [task], corpus_chunk_size=3)
    assert chunked == whole
    with pytest.raises(ProtoembedError, match="corpus_chunk_size must be at least 1, got 0"):
        evaluate_retrieval(encode, None, [task], corpus_chunk_size=0)
    with pytest.raises(ProtoembedError, match="unknown score function 'l2'"):
        evaluate_retrieval(encode, None, [task], score_function="l2")


def test_without_prompts_texts_are_encoded_as_they_are(tmp_path: Path):
    folder = write_beir(tmp_path / "toy")
    seen: list[str] = []

    def encode(texts: list[str]) -> np.ndarray:  # no ``prompts`` attribute
        seen.extend(texts)
        return np.stack([np.eye(4)[len(t) % 4] + 0.01 * len(t) for t in texts])

    result = evaluate_retrieval(encode, None, [beir_task("Toy", None, str(folder))])
    assert result["protocol"]["prompts"] == {"query": "", "document": ""}
    assert "Cats cats purr and sleep" in seen and "what do cats do" in seen
    # a plain ``encode(texts)`` with ``prompts`` cannot be told a prompt's name: it gets the prompted texts
    first, prompted = list(seen), []

    class Plain:
        prompts = PROMPTS

        def __call__(self, texts: list[str]) -> np.ndarray:
            prompted.extend(texts)
            return encode([t.split(": ", 1)[1] for t in texts])

    assert (
        evaluate_retrieval(Plain(), None, [beir_task("Toy", None, str(folder))])["tasks"] == result["tasks"]
    )
    queries = ["what do cats do", "where do fish live", "which animal sings"]  # the judged ones
    assert first[:3] == queries and len(first) == 3 + 5
    assert prompted == [PROMPTS["query"] + t for t in queries] + [PROMPTS["document"] + t for t in first[3:]]
    table = format_retrieval_table({**result, "model": "toy"})
    assert "| Task | nDCG@1 | nDCG@10 | MRR@10 | MAP@10 | R@10 | R@100 | P@10 | queries | corpus |" in table
    assert "| Toy | " in table and " | 3 | 5 |" in table


def test_lazy_encoder_prompts_load_the_model_once(tiny_model_dirs):
    loads = []
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean", device="cpu")

    def load():
        loads.append(1)
        return model

    encode = LazyEncoder(load)
    assert encode.prompts == {} and encode.model is model
    model.prompts = dict(PROMPTS)  # what a model with prompts carries
    assert encode.prompts == PROMPTS and len(loads) == 1


@pytest.fixture(scope="module")
def tiny(tiny_model_dirs: dict[str, Path]) -> str:
    return str(tiny_model_dirs["bert"])


def test_the_command_writes_what_evaluate_returns(tiny: str, tmp_path: Path, capsys, register_tasks):
    folder = write_beir(tmp_path / "toyset")
    out = tmp_path / "r.json"
    argv = ["eval", "retrieval", "--model", tiny, "--task-dir", str(folder), "--output", str(out)]
    assert main([*argv, "--score-function", "dot"]) == 0
    printed = capsys.readouterr()
    assert "| toyset | " in printed.out and "retrieval: toyset: nDCG@10 " in printed.err
    assert "Retrieval (test split, dot, a query's own id excluded; x100, model " in printed.out
    saved = json.loads(out.read_text(encoding="utf-8"))
    assert "toyset" not in protoembed.evaluation.tasks.TASKS  # registered for that run only
    assert main([*argv, "--corpus-chunk-size", "0"]) == 2
    assert capsys.readouterr().err.strip() == (
        "protoembed: error: retrieval: corpus_chunk_size must be at least 1, got 0"
    )
    # a Task object is evaluated as it is, registered for the call only
    assert protoembed.evaluate(tiny, tasks=[beir_folder_task(folder)], score_function="dot") == {
        "retrieval": saved
    }
    assert "toyset" not in protoembed.evaluation.tasks.TASKS
    with pytest.raises(ProtoembedError) as info:
        protoembed.evaluate(tiny, tasks=["toyset"], suite="retrieval")
    assert str(info.value) == (
        "unknown task 'toyset' of suite retrieval: expected one of SciFact, NFCorpus, FiQA2018, ArguAna, SCIDOCS, "
        "QuoraRetrieval, TRECCOVID"
    )
    register_tasks(beir_task("toyset", None, str(folder)))
    got = protoembed.evaluate(tiny, tasks=["toyset"], score_function="dot")
    assert got == {"retrieval": saved}
    assert saved["suite"] == "retrieval" and saved["tasks"]["toyset"]["identical_ids"] == 1

    # the report: the retrieval section, its protocol line and its tables, from the results files
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**saved, "model": "other-model"}), encoding="utf-8")
    page = build_report(load_results([str(out), str(other)]), tmp_path / "report.md")
    section = page[page.index("## Retrieval (BEIR layout)") :]
    assert "Protocol: exact search by dot on the test split" in section
    assert "nDCG@10:" in section and "Recall@100:" in section
    ndcg = f"{saved['tasks']['toyset']['ndcg_at_10']:.2f}"
    assert f"| other-model | {ndcg} | {ndcg} |" in section


def test_cache_embeddings_keeps_the_corpus_for_the_next_run(
    tiny: str, tmp_path: Path, monkeypatch, register_tasks
):
    monkeypatch.setenv("PROTOEMBED_CACHE", str(tmp_path / "cache"))
    folder = write_beir(tmp_path / "toyset")
    register_tasks(beir_task("Cached", None, str(folder)))
    model = protoembed.load(tiny, device="cpu")
    first = protoembed.evaluate(model, ["Cached"], cache_embeddings=True, name="tiny")
    (store,) = (tmp_path / "cache" / "embeddings").iterdir()
    kept = EmbeddingStore(lambda texts: np.zeros((len(texts), 1)), store).texts
    assert set(read_beir(folder, "test", "Cached").corpus_texts) <= set(kept)

    def refuse(*args, **kwargs):
        raise AssertionError("a stored text was encoded again")

    monkeypatch.setattr(model, "encode", refuse)
    assert protoembed.evaluate(model, ["Cached"], cache_embeddings=True, name="tiny") == first
