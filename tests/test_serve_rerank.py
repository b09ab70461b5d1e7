"""``protoembed serve`` of a cross-encoder: text-embeddings-inference's reranker API (``/rerank``, its
aliases ``POST /`` and ``/invocations``, ``/info``, the embedding routes' 424), on a real server of
127.0.0.1. The scores against sentence-transformers' ``CrossEncoder.predict`` of the same folders (the
raw logit of a regression model's folder, the sigmoid of a ``loss: bce`` model's), every answer against
TEI's OpenAPI document."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

from protoembed.model.cross_encoder import Reranker, load_reranker
from test_serve import running
from test_serve_tei import assert_schema, post

QUERY = "a man is playing a guitar ."
TEXTS = [
    "a man plays the guitar .",
    "the cat sat on the mat",
    "two dogs are running through a field .",
    "a woman is slicing an onion .",
    "someone plays music on a guitar",
]
MAX_LENGTH = 32


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (see conftest)."""


@pytest.fixture(scope="module")
def folders(tiny_model_dirs, tmp_path_factory) -> dict[str, Path]:
    """One tiny BERT cross-encoder saved by the repo's writer twice: as a regression run saves it (the
    identity as its activation) and as a ``loss: bce`` run does (the sigmoid). The classifier is scaled and
    shifted so that the pairs' logits lie apart (a random tiny model's lie within 0.01), around 0."""
    from transformers import AutoModel, AutoTokenizer

    from protoembed.objectives.cross_encoder import save_cross_encoder, sequence_classifier

    torch.manual_seed(0)
    backbone = AutoModel.from_pretrained(str(tiny_model_dirs["bert"]))
    model = sequence_classifier(backbone, 1, "regression").eval()
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dirs["bert"]))
    with torch.no_grad():
        model.classifier.weight.mul_(1e3)
        features = tokenizer([QUERY] * len(TEXTS), TEXTS, padding=True, return_tensors="pt")
        model.classifier.bias.sub_(model(**features).logits.mean())
    root = tmp_path_factory.mktemp("rerank")
    return {
        kind: save_cross_encoder(
            model, tokenizer, root / kind / "best" / "cross_encoder", MAX_LENGTH, sigmoid
        )
        for kind, sigmoid in (("regression", False), ("bce", True))
    }


@pytest.fixture(scope="module")
def server(folders):
    with running(load_reranker(folders["regression"], "cpu"), max_inputs_per_request=len(TEXTS)) as (
        base,
        app,
    ):
        yield base, app


def predict(folder: Path, pairs: list[tuple[str, str]]) -> np.ndarray:
    from sentence_transformers import CrossEncoder

    return CrossEncoder(str(folder), device="cpu").predict(pairs, batch_size=2)


def test_scores_are_cross_encoder_predict_s_and_ranked_as_tei_ranks(server, folders):
    """``raw_scores: true``: the regression folder's ``predict`` (the identity); the default: the bce
    folder's ``predict`` (the sigmoid of the same logits); highest first; ``POST /`` and ``/invocations``
    are ``/rerank``."""
    base, _ = server
    pairs = [(QUERY, text) for text in TEXTS]
    expected = {True: predict(folders["regression"], pairs), False: predict(folders["bce"], pairs)}
    assert np.ptp(expected[True]) > 1e-2 and 0 < expected[False].min() < expected[False].max() < 1
    for raw, scores in expected.items():
        for path in ("/rerank", "/", "/invocations"):
            response = post(base, path, {"query": QUERY, "texts": TEXTS, "raw_scores": raw})
            assert response.status_code == 200, response.text
            ranks = response.json()
            assert_schema(ranks, "RerankResponse")
            got = [r["score"] for r in ranks]
            assert sorted(r["index"] for r in ranks) == list(range(len(TEXTS)))
            assert got == sorted(got, reverse=True)
            np.testing.assert_allclose(got, scores[[r["index"] for r in ranks]], atol=1e-5, rtol=0)
            assert all("text" not in r for r in ranks)
    ranks = post(base, "/rerank", {"query": QUERY, "texts": TEXTS, "return_text": True}).json()
    assert [r["text"] for r in ranks] == [TEXTS[r["index"]] for r in ranks]


def test_equal_scores_rank_the_later_text_first_as_tei_s_reversed_stable_sort(server, monkeypatch):
    """TEI sorts the ranks by score, ascending and stable, then reverses them: of two equal scores the
    later text comes first. Identical pairs need not score alike on CPU (a row's place in the batch changes
    the float rounding), so the model's scores are replaced by ties here."""
    base, app = server

    async def tied(query, texts, truncate, raw_scores, left=False):
        return np.asarray([0.5, 0.25, 0.5, 0.75, 0.25], dtype=np.float32)

    monkeypatch.setattr(app.state.infer, "rerank", tied)
    ranks = post(base, "/rerank", {"query": QUERY, "texts": TEXTS}).json()
    assert [r["index"] for r in ranks] == [3, 2, 0, 4, 1]


def test_a_long_pair_is_cut_as_predict_cuts_it_or_refused_without_truncate(server, folders):
    base, _ = server
    long_text = "the guitar is loud " * 40
    response = post(base, "/rerank", {"query": QUERY, "texts": [TEXTS[0], long_text]})
    assert response.status_code == 422
    assert_schema(response.json(), "ErrorResponse")
    assert response.json()["error_type"] == "Validation"
    assert f"at most {MAX_LENGTH} per input" in response.json()["error"]
    response = post(
        base,
        "/rerank",
        {"query": QUERY, "texts": [TEXTS[0], long_text], "truncate": True, "raw_scores": True},
    )
    expected = predict(folders["regression"], [(QUERY, TEXTS[0]), (QUERY, long_text)])
    got = {r["index"]: r["score"] for r in response.json()}
    np.testing.assert_allclose([got[0], got[1]], expected, atol=1e-5, rtol=0)


def test_info_is_tei_s_reranker_info(server):
    base, _ = server
    info = httpx.get(f"{base}/info", timeout=10).json()
    assert_schema(info, "Info")
    assert info["model_type"] == {"reranker": {"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}}
    assert (info["max_input_length"], info["model_dtype"]) == (MAX_LENGTH, "float32")
    tokens = post(base, "/tokenize", {"inputs": "a man"}).json()
    assert [t["text"] for t in tokens[0]] == ["[CLS]", "a", "man", "[SEP]"]
    assert httpx.get(f"{base}/health", timeout=10).status_code == 200
    assert "protoembed" in httpx.get(f"{base}/metrics", timeout=10).text


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/embed", {"inputs": "a"}),
        ("/embed_all", {"inputs": "a"}),
        ("/similarity", {"inputs": {"source_sentence": "a", "sentences": ["b"]}}),
    ],
)
def test_an_embedding_route_on_a_reranker_is_tei_s_424(server, path, body):
    base, _ = server
    response = post(base, path, body)
    assert response.status_code == 424
    assert_schema(response.json(), "ErrorResponse")
    assert response.json() == {"error": "Model is not an embedding model", "error_type": "Backend"}


def test_openai_s_route_on_a_reranker_is_a_client_error(server):
    base, _ = server
    response = post(base, "/v1/embeddings", {"input": "a"})
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "Model is not an embedding model"


@pytest.mark.parametrize(
    ("texts", "status", "error_type", "message"),
    [
        ([], 400, "Empty", "`texts` cannot be empty"),
        (TEXTS + ["one too many"], 422, "Validation", f"{len(TEXTS) + 1} inputs in one request"),
    ],
)
def test_bad_requests_get_tei_s_error_type_and_status(server, texts, status, error_type, message):
    base, _ = server
    response = post(base, "/rerank", {"query": QUERY, "texts": texts})
    assert response.status_code == status
    assert_schema(response.json(), "ErrorResponse")
    assert response.json()["error_type"] == error_type and message in response.json()["error"]
    response = post(base, "/rerank", {"texts": ["a"]})
    assert (response.status_code, response.json()["error_type"]) == (422, "Validation")


def test_huggingface_hub_s_client_has_no_rerank_method():
    """``InferenceClient`` has no reranking call (its ``text_classification`` is TEI's ``/predict`` of a
    classifier): the docs' recipe is a plain HTTP POST to ``/rerank``."""
    from huggingface_hub import InferenceClient

    assert not [name for name in dir(InferenceClient) if "rerank" in name]


def test_the_command_serves_a_run_s_best_folder_as_a_reranker(folders, capsys):
    from protoembed.cli import build_parser, main
    from protoembed.commands.serve import load_model

    best = folders["regression"].parent
    args = build_parser().parse_args(["serve", str(best), "--device", "cpu"])
    args.model = args.model_arg
    model = load_model(args)
    assert isinstance(model, Reranker) and model.folder == folders["regression"]
    assert main(["serve", str(best), "--head", "mean", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a cross-encoder" in err and "--head does not apply" in err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    assert "cross-encoder folder is served as a reranker" in capsys.readouterr().out


def test_a_classifier_with_several_outputs_is_refused_as_a_reranker(tiny_model_dirs, tmp_path):
    """An NLI cross-encoder (3 outputs) scores no pair with one number: refused in one line at load."""
    from transformers import AutoModel, AutoTokenizer

    from protoembed.core.errors import ProtoembedError
    from protoembed.objectives.cross_encoder import save_cross_encoder, sequence_classifier

    backbone = AutoModel.from_pretrained(str(tiny_model_dirs["bert"]))
    model = sequence_classifier(backbone, 3, "single_label_classification")
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dirs["bert"]))
    folder = save_cross_encoder(model, tokenizer, tmp_path / "nli", MAX_LENGTH)
    with pytest.raises(
        ProtoembedError, match="has 3 outputs; a reranker needs a model with one score"
    ) as err:
        load_reranker(folder, "cpu")
    assert "\n" not in str(err.value)


def test_a_pair_empty_on_both_sides_is_tei_s_empty_error_and_one_empty_side_is_scored(server, folders):
    """TEI's tokenizer refuses a (query, text) pair only when both are empty (``EncodingInput::Dual``'s
    ``is_empty``): its Empty error, 400, and no ranks; an empty query or an empty text alone is a pair
    like any other, scored as ``CrossEncoder.predict`` scores it."""
    base, _ = server
    response = post(base, "/rerank", {"query": "", "texts": [TEXTS[0], ""]})
    assert response.status_code == 400
    assert_schema(response.json(), "ErrorResponse")
    assert response.json() == {
        "error": "`inputs` cannot be empty: the query and texts[1] are both empty",
        "error_type": "Empty",
    }
    for query, texts in (("", [TEXTS[0], TEXTS[1]]), (QUERY, ["", TEXTS[1]])):
        response = post(base, "/rerank", {"query": query, "texts": texts, "raw_scores": True})
        assert response.status_code == 200, response.text
        got = {r["index"]: r["score"] for r in response.json()}
        expected = predict(folders["regression"], [(query, t) for t in texts])
        np.testing.assert_allclose([got[0], got[1]], expected, atol=1e-5, rtol=0)


def test_truncation_direction_left_cuts_a_long_pair_as_a_left_truncating_cross_encoder(server, folders):
    """``truncate: true`` with ``truncation_direction: Left``: the scores of ``CrossEncoder.predict`` whose
    tokenizer truncates on the left (the longest side's start cut), not those of the default right side."""
    from sentence_transformers import CrossEncoder

    base, _ = server
    long_text = " ".join(TEXTS[i % 5][: 4 + i % 13] for i in range(40))  # no period a cut could hide
    pairs = [(QUERY, TEXTS[0]), (QUERY, long_text)]
    reference = CrossEncoder(str(folders["regression"]), device="cpu")
    expected = {}
    for side in ("left", "right"):
        reference.tokenizer.truncation_side = side
        expected[side] = reference.predict(pairs, batch_size=2)
    assert abs(expected["left"][1] - expected["right"][1]) > 1e-4  # the sides differ
    for direction, side in (("Left", "left"), ("Right", "right")):
        body = {"query": QUERY, "texts": [TEXTS[0], long_text], "truncate": True, "raw_scores": True}
        response = post(base, "/rerank", {**body, "truncation_direction": direction})
        assert response.status_code == 200, response.text
        got = {r["index"]: r["score"] for r in response.json()}
        np.testing.assert_allclose([got[0], got[1]], expected[side], atol=1e-5, rtol=0)
