"""Search: ``protoembed.search`` / ``semantic_search.rank`` (exact and FAISS) against a brute-force numpy
ranking, ``protoembed.similarity`` against numpy, the model's score function, the corpus reader and
``protoembed search`` / ``protoembed encode --prompt`` on the command line."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

import protoembed
from protoembed.cli import main
from protoembed.core.errors import ProtoembedError
from protoembed.data.documents import read_documents
from protoembed.retrieval.faiss_index import PIP_FAISS, FaissIndex, require_faiss
from protoembed.retrieval.semantic_search import rank, scoring_vectors, top_k

DOCS = [
    "a man is playing a guitar .",
    "two dogs are running through a field of grass .",
    "the cat sat on the mat and looked out of the window .",
    "stocks fell sharply after the report on monday .",
    "a woman is slicing an onion .",
    "a child is riding a horse while people watch the game .",
]
QUERIES = ["a dog runs on the grass", "the market fell", "someone plays music"]
PROMPTS = {"query": "search query : ", "document": "passage : "}


def brute_force(q: np.ndarray, c: np.ndarray, k: int, score_function: str) -> list[list[tuple[int, float]]]:
    """The reference: every score in float64 numpy, sorted."""
    q, c = q.astype(np.float64), c.astype(np.float64)
    if score_function == "cosine":
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
        c = c / np.linalg.norm(c, axis=1, keepdims=True)
    scores = q @ c.T
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return [[(int(i), float(scores[r, i])) for i in row] for r, row in enumerate(order)]


def assert_same(rankings, expected, atol=1e-5):
    assert [[i for i, _ in r] for r in rankings] == [[i for i, _ in r] for r in expected]
    np.testing.assert_allclose(
        [[s for _, s in r] for r in rankings], [[s for _, s in r] for r in expected], atol=atol
    )


@pytest.fixture(scope="module")
def vectors():
    rng = np.random.default_rng(0)
    return rng.normal(size=(40, 24)).astype(np.float32), rng.normal(size=(3000, 24)).astype(np.float32)


@pytest.mark.parametrize("score_function", ["cosine", "dot"])
def test_exact_and_faiss_flat_equal_brute_force(vectors, score_function):
    q, c = vectors
    expected = brute_force(q, c, 10, score_function)
    assert_same(rank(q, c, 10, score_function), expected)
    assert_same(top_k(q, c, 10, score_function, corpus_chunk_size=257, query_chunk_size=7), expected)
    assert_same(rank(q, c, 10, score_function, index="faiss"), expected)  # below EXACT_BELOW: IndexFlatIP
    assert len(rank(q, c[:4], 10, score_function)[0]) == 4  # a smaller corpus: shorter rankings


def test_ivf_visiting_every_cell_equals_exact_and_fewer_cells_approximate(vectors):
    import faiss

    q, c = vectors
    qq, cc = scoring_vectors(q, "cosine").numpy(), scoring_vectors(c, "cosine").numpy()
    full = FaissIndex(cc, nlist=16, nprobe=16, exact_below=0)
    assert isinstance(full.index, faiss.IndexIVFFlat) and (full.nlist, full.nprobe) == (16, 16)
    assert_same(full.search(qq, 10), brute_force(q, c, 10, "cosine"))
    one = FaissIndex(cc, nlist=16, nprobe=1, exact_below=0).search(qq, 10)
    exact = brute_force(q, c, 10, "cosine")
    recall = np.mean([len({i for i, _ in a} & {i for i, _ in b}) / 10 for a, b in zip(one, exact)])
    assert 0 < recall < 1  # one cell of 16 misses neighbours in other cells (random vectors)
    with pytest.raises(ProtoembedError, match="^nprobe must be a positive integer, got 0$"):
        FaissIndex(cc, nprobe=0)


def test_missing_faiss_is_one_line_with_the_pip_command(monkeypatch, vectors):
    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss -> ImportError
    message = f"the faiss index needs the optional package faiss (missing): {PIP_FAISS}"
    with pytest.raises(ProtoembedError) as err:
        require_faiss()
    assert str(err.value) == message and PIP_FAISS == "pip install 'protoembed[faiss]'"
    with pytest.raises(ProtoembedError, match="pip install 'protoembed\\[faiss\\]'"):
        rank(*vectors, index="faiss")


def test_similarity_equals_numpy_cosine_and_dot(vectors):
    q, c = vectors
    a, b = q[:5], c[:7]
    an = a / np.linalg.norm(a, axis=1, keepdims=True)
    bn = b / np.linalg.norm(b, axis=1, keepdims=True)
    np.testing.assert_allclose(protoembed.similarity(a, b), an @ bn.T, atol=1e-6)
    np.testing.assert_allclose(protoembed.similarity(a, b, "dot"), a @ b.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        protoembed.similarity(a[0], b), an[:1] @ bn.T, atol=1e-6
    )  # one vector: one row
    with pytest.raises(ProtoembedError, match="^unknown score function 'l2'; expected one of cosine, dot$"):
        protoembed.similarity(a, b, "l2")
    with pytest.raises(ProtoembedError, match="^vectors of different widths: 24 and 3$"):
        protoembed.similarity(a, b[:, :3])


class TableModel:
    """An ``encode``-only model: a fixed random vector per text, recording what it was given."""

    def __init__(self, prompts: dict[str, str]) -> None:
        self.prompts = prompts
        self.seen: list[str] = []

    def encode(self, sentences, batch_size=64):
        self.seen += list(sentences)
        return np.stack([np.random.default_rng(abs(hash(s)) % 2**32).normal(size=8) for s in sentences])


def test_search_encodes_with_the_role_prompts_and_maps_ids():
    model = TableModel(PROMPTS)
    ids = [f"d{i}" for i in range(len(DOCS))]
    rankings = protoembed.search(model, QUERIES, DOCS, top_k=4, corpus_ids=ids)
    assert model.seen == [PROMPTS["query"] + q for q in QUERIES] + [PROMPTS["document"] + d for d in DOCS]
    q = model.encode([PROMPTS["query"] + x for x in QUERIES])
    c = model.encode([PROMPTS["document"] + x for x in DOCS])
    expected = brute_force(q, c, 4, "cosine")
    assert [[doc for doc, _ in r] for r in rankings] == [[ids[i] for i, _ in r] for r in expected]
    np.testing.assert_allclose(
        [[s for _, s in r] for r in rankings], [[s for _, s in r] for r in expected], atol=1e-5
    )
    by_index = protoembed.search(model, QUERIES, DOCS, top_k=4, index="faiss")
    assert [[i for i, _ in r] for r in by_index] == [[i for i, _ in r] for r in expected]
    with pytest.raises(ProtoembedError, match="^corpus_ids has 2 entries for 6 documents$"):
        protoembed.search(model, QUERIES, DOCS, corpus_ids=["a", "b"])
    with pytest.raises(ProtoembedError, match="^top_k must be a positive integer, got 0$"):
        protoembed.search(model, QUERIES, DOCS, top_k=0)
    with pytest.raises(ProtoembedError, match="^nprobe is an option of the faiss index"):
        protoembed.search(model, QUERIES, DOCS, nprobe=4)


@pytest.fixture(scope="module")
def prompted(tiny_model_dirs, tmp_path_factory):
    """A tiny mean-head model with :data:`PROMPTS`, saved with the dot product as its score function."""
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean", prompts=PROMPTS)
    model.similarity_fn_name = "dot"
    return model.save(tmp_path_factory.mktemp("search") / "model")


def test_search_with_a_model_uses_its_score_function_and_equals_sentence_transformers(prompted, one_thread):
    model = protoembed.load(str(prompted))
    assert model.similarity_fn_name == "dot" and model.prompts == PROMPTS
    q = model.encode(QUERIES, prompt_name="query")
    c = model.encode(DOCS, prompt_name="document")
    ours = protoembed.search(model, QUERIES, DOCS, top_k=3)
    assert_same(ours, brute_force(q, c, 3, "dot"), atol=1e-4)  # the saved score function: dot
    assert_same(
        protoembed.search(model, QUERIES, DOCS, top_k=3, score_function="cosine"),
        brute_force(q, c, 3, "cosine"),
    )
    st = SentenceTransformer(str(prompted), device="cpu")
    assert st.similarity_fn_name == "dot"
    assert_same(protoembed.search(st, QUERIES, DOCS, top_k=3), ours, atol=1e-4)  # any encode-only model


def _parse_printed(out: str) -> list[list[tuple[int, float]]]:
    rankings: list[list[tuple[int, float]]] = []
    for line in out.splitlines():
        if line.startswith("query "):
            rankings.append([])
        else:
            _, doc, score = line.split()[:3]
            rankings[-1].append((int(doc), float(score)))
    return rankings


def test_search_command_prints_and_writes_the_ranking(prompted, tmp_path, capsys, one_thread):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(DOCS) + "\n", encoding="utf-8")
    queries = tmp_path / "queries.txt"
    queries.write_text("\n".join(QUERIES) + "\n", encoding="utf-8")
    model = protoembed.load(str(prompted))
    expected = protoembed.search(model, QUERIES, DOCS, top_k=3, corpus_ids=range(1, len(DOCS) + 1))
    argv = ["search", "--model", str(prompted), "--corpus", str(corpus), "--top-k", "3"]
    assert main([*argv, *(x for q in QUERIES for x in ("--query", q))]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"query 1: {QUERIES[0]}"
    printed = _parse_printed(out)
    assert [[d for d, _ in r] for r in printed] == [[d for d, _ in r] for r in expected]
    np.testing.assert_allclose(
        [[s for _, s in r] for r in printed], [[s for _, s in r] for r in expected], atol=1e-4
    )
    # --queries FILE and --output: one JSON object per query
    output = tmp_path / "results.jsonl"
    assert main([*argv, "--queries", str(queries), "--output", str(output)]) == 0
    rows = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [r["query_id"] for r in rows] == [1, 2, 3] and [r["query"] for r in rows] == QUERIES
    assert [[(h["id"], h["score"]) for h in r["hits"]] for r in rows] == expected
    assert [h["rank"] for h in rows[0]["hits"]] == [1, 2, 3]
    # a BEIR-layout corpus: ids are the _ids, the title goes before the text
    beir = tmp_path / "corpus.jsonl"
    beir.write_text(
        "".join(json.dumps({"_id": f"doc{i}", "title": "", "text": d}) + "\n" for i, d in enumerate(DOCS)),
        encoding="utf-8",
    )
    beir_argv = ["search", "--model", str(prompted), "--corpus", str(beir), "--top-k", "3"]
    assert main([*beir_argv, "--query", QUERIES[1], "--output", str(output)]) == 0
    hits = json.loads(output.read_text(encoding="utf-8"))["hits"]
    assert [h["id"] for h in hits] == [f"doc{d - 1}" for d, _ in expected[1]]


def test_search_command_refuses_top_k_0_on_one_line(prompted, tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(DOCS) + "\n", encoding="utf-8")
    argv = ["search", "--model", str(prompted), "--corpus", str(corpus), "--query", "x"]
    assert main([*argv, "--top-k", "0"]) == 2
    assert capsys.readouterr().err == "protoembed: error: --top-k must be a positive integer, got 0\n"
    assert main([*argv, "--nprobe", "3"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_encode_prompt_equals_encoding_the_prefixed_lines(prompted, tmp_path, capsys, one_thread):
    lines = tmp_path / "in.txt"
    lines.write_text("\n".join(QUERIES) + "\n", encoding="utf-8")
    out = tmp_path / "v.npy"
    assert main(["encode", str(lines), "-o", str(out), "--model", str(prompted), "--prompt", "query"]) == 0
    model = protoembed.load(str(prompted))
    np.testing.assert_allclose(np.load(out), model.encode([PROMPTS["query"] + q for q in QUERIES]), atol=1e-6)
    assert main(["encode", str(lines), "-o", str(out), "--model", str(prompted), "--prompt", "passage"]) == 2
    assert capsys.readouterr().err == (
        "protoembed: error: unknown prompt name 'passage'; the model's prompts: document, query\n"
    )


def test_read_documents_reads_lines_and_the_beir_layout(tmp_path):
    text = tmp_path / "c.txt"
    text.write_text("first\nsecond\n", encoding="utf-8")
    assert read_documents(text) == ([1, 2], ["first", "second"])
    beir = tmp_path / "c.jsonl"
    rows = [
        {"_id": "a", "title": "Title", "text": "body"},
        {"_id": "b", "text": "no title"},
        {"_id": 7, "text": "int id"},
    ]
    beir.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    assert read_documents(beir) == (["a", "b", "7"], ["Title body", "no title", "int id"])
    for content, message in [
        ("first\n\nthird\n", "c.txt:2: empty line; expected one document per line"),
        ('{"_id": "a", "text": "x"}\n{oops\n', "c.jsonl:2: expected a JSON object (Expecting"),
        ('{"text": "x"}\n', 'c.jsonl:1: no "_id" key (the line has "text"); a line of c.jsonl is an object'),
        ('{"_id": "a", "title": "t"}\n', 'c.jsonl:1: no "text" key (the line has "_id", "title"); a line of'),
        (
            '{"_id": "a", "text": "x"}\n{"_id": "a", "text": "y"}\n',
            "c.jsonl:2: duplicate _id 'a' (first on line 1)",
        ),
        ("\n", "c.jsonl: no documents"),
    ]:
        target = text if "c.txt" in message else beir
        target.write_text(content, encoding="utf-8")
        with pytest.raises(ProtoembedError) as err:
            read_documents(target)
        assert str(err.value).startswith(f"{tmp_path}/{message}") and "\n" not in str(err.value)
