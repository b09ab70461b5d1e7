"""Quantised vectors: ``quantize`` and ``encode(vectors=...)`` byte for byte against sentence-transformers'
``quantize_embeddings``; the search over them with rescoring against its ``semantic_search_faiss`` and
against a brute-force numpy ranking."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sentence_transformers.util.quantization import quantize_embeddings, semantic_search_faiss

import protoembed
from protoembed.core.errors import ProtoembedError
from protoembed.model.quantize import (
    VECTOR_TYPES,
    bytes_per_vector,
    calibration_ranges,
    calibration_rows,
    quantize,
    rescoring_vectors,
)
from protoembed.retrieval.quantized_search import search_stored
from protoembed.retrieval.semantic_search import rank
from test_search import DOCS, QUERIES

#: sentence-transformers' FAISS search reads the bit types as ubinary and the scalar types as uint8.
ST_TYPE = {"binary": "ubinary", "ubinary": "ubinary", "uint8": "uint8"}


@pytest.fixture(scope="module")
def floats():
    rng = np.random.default_rng(0)
    return rng.normal(size=(12, 37)).astype(np.float32), rng.normal(size=(400, 37)).astype(np.float32)


def as_pairs(st_hits):
    return [[(h["corpus_id"], h["score"]) for h in hits] for hits in st_hits]


@pytest.mark.parametrize("vectors", VECTOR_TYPES)
def test_quantize_equals_sentence_transformers(floats, vectors):
    queries, corpus = floats
    ours = quantize(corpus, vectors)
    theirs = quantize_embeddings(corpus, vectors)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape and ours.tobytes() == theirs.tobytes()
    assert ours.nbytes == len(corpus) * bytes_per_vector(vectors, 37)
    if vectors.endswith("int8"):  # ranges from calibration embeddings; the queries fall partly outside
        ranges = calibration_ranges(corpus[:50])
        expected = quantize_embeddings(queries, vectors, calibration_embeddings=corpus[:50])
        assert quantize(queries, vectors, ranges).tobytes() == expected.tobytes()


def test_calibration_rows_and_errors(floats):
    assert calibration_rows(5, limit=10).tolist() == [0, 1, 2, 3, 4]
    assert calibration_rows(10, limit=4).tolist() == [0, 2, 5, 7]
    with pytest.raises(ProtoembedError, match=r"^unknown vector type 'int4'; expected one of float32, int8"):
        quantize(floats[0], "int4")
    with pytest.raises(ProtoembedError, match=r"^int8 ranges need at least 2 calibration embeddings, got 1$"):
        quantize(floats[0][:1], "int8")
    with pytest.raises(
        ProtoembedError, match=r"^ranges must have shape \(2, 37\) \(minimums, maximums\), got \(2, 3\)$"
    ):
        quantize(floats[0], "int8", np.zeros((2, 3)))
    with pytest.raises(ProtoembedError, match=r"^only float vectors can be quantised, got int8$"):
        quantize(quantize(floats[0], "int8"), "binary")


@pytest.mark.parametrize("vectors", ["ubinary", "binary", "uint8"])
def test_faiss_search_equals_semantic_search_faiss(floats, vectors):
    """Candidates by FAISS (Hamming or the levels' inner product), the top 40 rescored with the float
    query: the same hits and scores as sentence-transformers'."""
    queries, corpus = floats
    ranges = calibration_ranges(corpus)
    theirs, _ = semantic_search_faiss(
        queries,
        corpus_embeddings=quantize_embeddings(corpus, ST_TYPE[vectors], ranges=ranges),
        corpus_precision=ST_TYPE[vectors],
        top_k=10,
        ranges=ranges,
        rescore_multiplier=4,
    )
    ours = search_stored(queries, quantize(corpus, vectors, ranges), vectors, 10, 4, ranges, "faiss")
    assert ours == as_pairs(theirs)


def brute_force(queries, stored, vectors, k, multiplier, ranges, dimension):
    """The reference: every candidate score in numpy (Hamming over unpacked bits, or the integer inner
    product), the best k x multiplier by (score, index), rescored in float64, sorted."""
    if vectors.endswith("binary"):
        q = np.unpackbits(quantize(queries, "ubinary"), axis=1)[:, :dimension].astype(int)
        c = rescoring_vectors(stored, vectors, dimension).astype(int)
        candidate = -(q[:, None, :] != c[None, :, :]).sum(axis=2)
    else:
        candidate = quantize(queries, vectors, ranges).astype(np.int64) @ stored.astype(np.int64).T
    rows = np.lexsort((np.arange(len(stored))[None, :].repeat(len(queries), 0), -candidate))[
        :, : k * multiplier
    ]
    rescore = rescoring_vectors(stored, vectors, dimension, ranges)
    out = []
    for r, row in enumerate(rows):
        scores = [(int(i), float(np.dot(queries[r].astype(np.float64), rescore[i]))) for i in row]
        out.append(sorted(scores, key=lambda p: (-p[1], p[0]))[:k])
    return out


@pytest.mark.parametrize("vectors", ["int8", "uint8", "binary", "ubinary"])
def test_exact_search_equals_brute_force(floats, vectors):
    """Every row a candidate (no cut, so no tie at it): numpy and FAISS search give the brute force's
    ranking; with a cut, numpy's candidates have the brute force's candidate scores."""
    queries, corpus = floats
    ranges = calibration_ranges(corpus)
    stored = quantize(corpus, vectors, ranges)
    expected = brute_force(queries, stored, vectors, 10, 40, ranges, 37)
    for index in ("exact", "faiss"):
        got = search_stored(queries, stored, vectors, 10, 40, ranges, index)
        assert [[i for i, _ in r] for r in got] == [[i for i, _ in r] for r in expected]
        np.testing.assert_allclose(
            [[s for _, s in r] for r in got], [[s for _, s in r] for r in expected], rtol=1e-6
        )
    # no rescoring: the candidates' own scores (minus the Hamming distance, the integer inner product)
    plain = search_stored(queries, stored, vectors, 30, 0, ranges, "exact")
    faiss = search_stored(queries, stored, vectors, 30, 0, ranges, "faiss")
    assert [[s for _, s in r] for r in plain] == [[s for _, s in r] for r in faiss]
    assert all(float(s).is_integer() for r in plain for _, s in r)


def test_exclude_and_errors(floats):
    queries, corpus = floats
    stored = quantize(corpus, "ubinary")
    full = search_stored(queries, stored, "ubinary", 5, 2)
    kept_out = [[r[0][0]] for r in full]
    excluded = search_stored(queries, stored, "ubinary", 5, 2, exclude=kept_out)
    assert all(r[0][0] not in [i for i, _ in e] for r, e in zip(full, excluded))
    with pytest.raises(
        ProtoembedError, match=r"^int8 vectors are searched with the ranges they were quantised with$"
    ):
        search_stored(queries, quantize(corpus, "int8"), "int8", 5)
    with pytest.raises(
        ProtoembedError,
        match=r"^ubinary vectors of 37 dimensions are uint8 \(rows, 5\), got uint8 \(400, 37\)$",
    ):
        search_stored(queries, quantize(corpus, "uint8"), "ubinary", 5)
    with pytest.raises(ProtoembedError, match=r"^rescore_multiplier must be an integer of at least 0"):
        search_stored(queries, stored, "ubinary", 5, -1)


@pytest.mark.parametrize("vectors", ["int8", "ubinary", "binary", "uint8"])
def test_encode_vectors_equals_quantize_embeddings(tiny_model_dirs, vectors):
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean")
    floats = model.encode(DOCS)
    ours = model.encode(DOCS, vectors=vectors)
    assert (
        ours.tobytes() == quantize_embeddings(floats, vectors).tobytes()
        and ours.dtype == quantize_embeddings(floats, vectors).dtype
    )
    ranges = calibration_ranges(floats[:4])
    one = model.encode(DOCS[0], vectors=vectors, ranges=ranges)  # one sentence: ranges given
    alone = model.encode(DOCS[0])  # its float vector alone (not in a batch: float noise apart from floats[0])
    assert one.tobytes() == quantize_embeddings(alone, vectors, ranges=ranges).tobytes()


@pytest.mark.parametrize("vectors", ["ubinary", "uint8"])
def test_search_api_equals_semantic_search_faiss(tiny_model_dirs, vectors):
    """protoembed.search over quantised vectors: the model's normalised vectors, the corpus quantised (uint8:
    ranges calibrated on the corpus), FAISS candidates rescored x2: sentence-transformers' hits."""
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean")
    q = model.encode(QUERIES, normalize=True)
    c = model.encode(DOCS, normalize=True)
    theirs, _ = semantic_search_faiss(
        q,
        corpus_embeddings=quantize_embeddings(c, vectors),
        corpus_precision=vectors,
        top_k=3,
        ranges=calibration_ranges(c),
    )
    for index in ("exact", "faiss"):
        ours = protoembed.search(
            model, QUERIES, DOCS, top_k=3, vectors=vectors, rescore_multiplier=2, index=index
        )
        assert [[i for i, _ in r] for r in ours] == [[i for i, _ in r] for r in as_pairs(theirs)]
        np.testing.assert_allclose(
            [[s for _, s in r] for r in ours], [[s for _, s in r] for r in as_pairs(theirs)], rtol=1e-5
        )
    with pytest.raises(ProtoembedError, match=r"^nprobe is an option of the float32 faiss index"):
        rank(q, c, 3, index="faiss", nprobe=2, vectors=vectors)


def test_eval_retrieval_binary_rescored_equals_semantic_search_faiss_and_pytrec_eval(
    tmp_path, tiny_model_dirs, capsys
):
    """eval retrieval --vectors binary --rescore-multiplier 4: the metrics of sentence-transformers'
    semantic_search_faiss run (ubinary, rescored x4) on the model's normalised vectors, by pytrec_eval; a
    query's own id left out of its run as the suite does."""
    from beir_toy import write_beir
    from protoembed.cli import main
    from protoembed.data.benchmarks.beir import read_beir
    from protoembed.evaluation.retrieval_metrics import metric_keys
    from test_retrieval_metrics import reference

    folder = write_beir(tmp_path / "toyset")
    model = protoembed.load(str(tiny_model_dirs["bert"]))
    data = read_beir(folder, "test", "toyset")
    q = model.encode(data.query_texts, normalize=True, prompt_name="query")
    c = model.encode(data.corpus_texts, normalize=True, prompt_name="document")
    hits, _ = semantic_search_faiss(
        q,
        corpus_embeddings=quantize_embeddings(c, "ubinary"),
        corpus_precision="ubinary",
        top_k=101,
        rescore_multiplier=4,
    )
    run = {
        qid: {
            data.corpus_ids[h["corpus_id"]]: h["score"] for h in hs if data.corpus_ids[h["corpus_id"]] != qid
        }
        for qid, hs in zip(data.query_ids, hits)
    }
    want = reference(data.qrels, run)
    out = tmp_path / "r.json"
    argv = [
        "eval",
        "retrieval",
        "--model",
        str(tiny_model_dirs["bert"]),
        "--task-dir",
        str(folder),
        "--output",
        str(out),
    ]
    assert main([*argv, "--vectors", "binary", "--rescore-multiplier", "4"]) == 0
    saved = json.loads(out.read_text(encoding="utf-8"))
    got = saved["tasks"]["toyset"]
    for key in metric_keys():
        assert got[key] == pytest.approx(want[key] * 100, abs=1e-4), key
    assert (saved["protocol"]["vectors"], saved["protocol"]["rescore_multiplier"]) == ("binary", 4)
    capsys.readouterr()
    assert main([*argv, "--rescore-multiplier", "-1"]) == 2
    assert capsys.readouterr().err.strip() == (
        "protoembed: error: retrieval: rescore_multiplier must be at least 0, got -1"
    )


CORPUS_LINES = [f"{DOCS[i % len(DOCS)]} number {i}" if i % 3 else f"short {i}" for i in range(23)]


def test_corpus_shards_of_quantised_vectors_equal_quantize_embeddings(
    tmp_path, tiny_model_dirs, one_thread, capsys
):
    """encode_corpus --vectors: each type's shards (5 rows each) are quantize_embeddings of the float32
    shards' vectors; int8 with one range for every shard: the calibration file's, recorded in the
    manifest; without one, the corpus's own (23 rows: all of them), as calibrated by hand; a resume with
    another calibration is refused; search over the int8 folder equals search over the floats quantised."""
    from protoembed.cli import main
    from protoembed.corpus import encode_corpus, open_corpus

    model_dir = str(tiny_model_dirs["bert"])
    model = protoembed.load(model_dir, device="cpu")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(t + "\n" for t in CORPUS_LINES), encoding="utf-8")
    floats = np.asarray(encode_corpus(model, corpus, tmp_path / "f32", shard_size=5, show_progress=False))
    calibration = tmp_path / "calibration.npy"
    np.save(calibration, floats[:9])
    for vectors in ("ubinary", "binary", "uint8", "int8"):
        out = tmp_path / vectors
        argv = [
            "encode",
            str(corpus),
            "-o",
            str(out),
            "--model",
            model_dir,
            "--shard-size",
            "5",
            "--no-progress",
        ]
        assert (
            main(
                [
                    *argv,
                    "--vectors",
                    vectors,
                    *(["--calibration", str(calibration)] if "int8" in vectors else []),
                ]
            )
            == 0
        )
        stored = open_corpus(out, verify=True)
        expected = quantize_embeddings(
            floats, vectors, calibration_embeddings=floats[:9] if "int8" in vectors else None
        )
        assert stored.vectors == vectors and stored.shape == expected.shape and len(stored.shards) == 5
        assert np.asarray(stored).tobytes() == expected.tobytes() and stored.dtype == expected.dtype
        if "int8" in vectors:
            np.testing.assert_array_equal(stored.ranges, calibration_ranges(floats[:9]))
            other = tmp_path / "other.npy"
            np.save(other, floats * 2)  # other ranges
            capsys.readouterr()
            assert main([*argv, "--vectors", vectors, "--calibration", str(other), "--resume"]) == 2
            assert capsys.readouterr().err.strip() == (
                f"protoembed: error: {out}: cannot resume: the int8 / uint8 ranges differ (another calibration); "
                "resume with the same model, settings and input, or choose another output folder"
            )
    own = encode_corpus(model, corpus, tmp_path / "own", shard_size=5, vectors="int8", show_progress=False)
    np.testing.assert_allclose(own.ranges, calibration_ranges(floats), atol=1e-6)
    assert np.abs(np.asarray(own).astype(int) - quantize(floats, "int8", own.ranges).astype(int)).max() == 0
    q = model.encode(QUERIES)
    assert search_stored(q, np.asarray(own), "int8", 4, 2, own.ranges) == search_stored(
        q, quantize(floats, "int8", own.ranges), "int8", 4, 2, own.ranges
    )


def test_encode_to_one_array_with_ranges_beside_it(tmp_path, tiny_model_dirs, capsys):
    from protoembed.cli import main

    model_dir = str(tiny_model_dirs["bert"])
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(t + "\n" for t in CORPUS_LINES), encoding="utf-8")
    floats = protoembed.load(model_dir).encode(CORPUS_LINES)
    argv = ["encode", str(corpus), "--model", model_dir, "--no-progress"]
    assert main([*argv, "-o", str(tmp_path / "v.npy"), "--vectors", "int8"]) == 0
    assert capsys.readouterr().out.strip() == (
        f"wrote {tmp_path / 'v.npy'}: 23 x 32 int8 and its ranges in {tmp_path / 'v.ranges.npy'}"
    )
    assert np.load(tmp_path / "v.npy").tobytes() == quantize_embeddings(floats, "int8").tobytes()
    np.testing.assert_array_equal(np.load(tmp_path / "v.ranges.npy"), calibration_ranges(floats))
    assert main([*argv, "-o", str(tmp_path / "b.npy"), "--vectors", "ubinary"]) == 0
    assert np.load(tmp_path / "b.npy").tobytes() == quantize_embeddings(floats, "ubinary").tobytes()
    capsys.readouterr()
    assert main([*argv, "-o", str(tmp_path / "c.npy"), "--vectors", "binary", "--calibration", "x.npy"]) == 2
    assert capsys.readouterr().err.strip() == (
        "protoembed: error: --calibration is for --vectors int8 / uint8, not binary"
    )


def test_search_command_over_binary_vectors(tmp_path, tiny_model_dirs, capsys):
    """protoembed search --vectors ubinary --rescore-multiplier 2 writes protoembed.search's rankings (the
    API is checked against sentence-transformers above); a negative multiplier is one line."""
    from protoembed.cli import main

    model_dir = str(tiny_model_dirs["bert"])
    corpus = tmp_path / "docs.txt"
    corpus.write_text("".join(t + "\n" for t in DOCS), encoding="utf-8")
    out = tmp_path / "hits.jsonl"
    argv = ["search", "--model", model_dir, "--corpus", str(corpus), "--top-k", "3"]
    assert (
        main(
            [*argv, *sum((["--query", q] for q in QUERIES), []), "--vectors", "ubinary", "--output", str(out)]
        )
        == 0
    )
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    expected = protoembed.search(
        protoembed.load(model_dir),
        QUERIES,
        DOCS,
        top_k=3,
        vectors="ubinary",
        corpus_ids=range(1, len(DOCS) + 1),
    )
    assert [[(h["id"], h["score"]) for h in row["hits"]] for row in rows] == [list(r) for r in expected]
    capsys.readouterr()
    assert main([*argv, "--query", "x", "--vectors", "int8", "--rescore-multiplier", "-2"]) == 2
    assert capsys.readouterr().err.strip() == (
        "protoembed: error: --rescore-multiplier must be an integer of at least 0 (0: no rescoring), got -2"
    )
