"""The server as text-embeddings-inference's router answers: every TEI route it serves, validated against
TEI's own OpenAPI document (``tests/fixtures/tei_openapi.json``, see ``tests/fixtures/README.md``), its
error types and statuses, token arrays as ``tokenizer(text)`` returns them on the WordPiece, BPE and
SentencePiece tiny models, ``normalize: false`` on a normalising model, and ``huggingface_hub``'s
``InferenceClient`` on the server's root. Real servers on 127.0.0.1; every vector against an independent
computation (another model object's ``encode``, sentence-transformers, the tokenizer itself)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import numpy as np
import pytest

import protoembed
from protoembed.serving import ServeSettings, create_app
from test_serve import NAME, SENTENCES, running, second_while_first_runs

OPENAPI = Path(__file__).parent / "fixtures" / "tei_openapi.json"
TEXTS = ["a man is playing a guitar .", "the cat sat on the mat", "two dogs are running through a field ."]
PROMPTS = {"query": "query: ", "document": "passage: "}


def _nullable(node: Any) -> Any:
    """OpenAPI 3.0's ``nullable: true`` as JSON Schema's ``null`` type, throughout."""
    if isinstance(node, list):
        return [_nullable(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _nullable(value) for key, value in node.items() if key != "nullable"}
    if node.get("nullable") is True:
        out = {"anyOf": [out, {"type": "null"}]}
    return out


COMPONENTS = _nullable(json.loads(OPENAPI.read_text())["components"])


def assert_schema(payload: Any, name: str) -> None:
    """``payload`` is valid against TEI's schema ``name`` (``#/components/schemas/NAME``)."""
    schema = {"$ref": f"#/components/schemas/{name}", "components": COMPONENTS}
    jsonschema.Draft7Validator(schema).validate(payload)


def test_the_schema_check_fails_on_a_wrong_answer():
    """The check itself can fail: TEI's required fields and its ``error_type`` names."""
    with pytest.raises(jsonschema.ValidationError):
        assert_schema({"error": "x", "error_type": "validation"}, "ErrorResponse")
    with pytest.raises(jsonschema.ValidationError):
        assert_schema({"model_id": "x"}, "Info")
    assert_schema({"error": "x", "error_type": "Validation"}, "ErrorResponse")


@pytest.fixture(scope="module")
def normalizing(tiny_model_dirs):
    """A mean-pooling model whose modules end in Normalize, with prompts and a default prompt."""
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean", normalize=True)
    model.prompts = dict(PROMPTS)
    model.default_prompt_name = "document"
    return model


@pytest.fixture(scope="module")
def server(normalizing):
    with running(normalizing, max_inputs_per_request=8) as (base, app):
        yield base, app


def post(base: str, path: str, body: Any) -> httpx.Response:
    return httpx.post(f"{base}{path}", json=body, timeout=60)


# ------------------------------------------------------------------------------------------ the routes


def test_info_has_every_field_and_counts_special_tokens(server, normalizing):
    base, _ = server
    info = httpx.get(f"{base}/info", timeout=10).json()
    assert_schema(info, "Info")
    tokenizer = normalizing.tokenizer
    positions = normalizing.encoder.auto_model.config.max_position_embeddings
    longest = len(tokenizer("word " * 1000, truncation=True, max_length=positions)["input_ids"])
    assert info["max_input_length"] == longest == 128  # [CLS] and [SEP] counted
    assert (info["served_model_name"], info["auto_truncate"], info["max_client_batch_size"]) == (
        NAME,
        False,
        8,
    )
    assert info["model_type"] == {"embedding": {"pooling": "mean"}}


def test_a_template_model_s_max_input_length_is_its_longest_row(tiny_model_dirs):
    """A ``mask`` head's rows hold its template around the sentence: ``max_input_length`` is the longest
    row the model runs, measured on a long text's row."""
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mask", max_seq_length=32)
    with running(model) as (base, _):
        info = httpx.get(f"{base}/info", timeout=10).json()
        tokens = post(base, "/tokenize", {"inputs": "x"}).json()
    rows, _ = model.encoder.tokenize_ids(["word " * 1000])
    assert info["max_input_length"] == len(rows[0]) > 32
    assert len(tokens[0]) == 3  # /tokenize is the tokenizer's: [CLS] x [SEP], no template


def test_embed_and_its_aliases_normalize_as_asked(server, normalizing, tiny_model_dirs):
    """``normalize: false`` is the pooled vector before the model's Normalize (the same backbone loaded
    without it); ``true`` (TEI's default) the model's own vectors; ``/``, ``/invocations`` are ``/embed``."""
    base, _ = server
    pooled = protoembed.load(str(tiny_model_dirs["bert"]), head="mean")
    raw = post(base, "/embed", {"inputs": TEXTS, "normalize": False, "prompt_name": "query"})
    assert raw.status_code == 200, raw.text
    assert_schema(raw.json(), "EmbedResponse")
    np.testing.assert_allclose(raw.json(), pooled.encode(TEXTS, prompt="query: "), atol=1e-6, rtol=0)
    assert not np.allclose(np.linalg.norm(raw.json(), axis=1), 1)
    expected = normalizing.encode(TEXTS)  # the default prompt, normalised
    for path in ("/embed", "/", "/invocations"):
        got = post(base, path, {"inputs": TEXTS})
        np.testing.assert_allclose(got.json(), expected, atol=1e-6, rtol=0)
    openai = post(base, "/embeddings", {"input": TEXTS})
    assert_schema(openai.json(), "OpenAICompatResponse")
    np.testing.assert_allclose([d["embedding"] for d in openai.json()["data"]], expected, atol=1e-6, rtol=0)


def test_embed_all_gives_sentence_transformers_token_embeddings(tiny_model_dirs):
    from sentence_transformers import SentenceTransformer

    folder = str(tiny_model_dirs["bert"])
    reference = SentenceTransformer(folder, device="cpu").encode(TEXTS, output_value="token_embeddings")
    with running(protoembed.load(folder, head="mean")) as (base, _):
        response = post(base, "/embed_all", {"inputs": TEXTS})
    assert response.status_code == 200, response.text
    assert_schema(response.json(), "EmbedAllResponse")
    for got, expected in zip(response.json(), reference):
        np.testing.assert_allclose(got, expected.numpy(), atol=1e-5, rtol=0)


def test_truncation_direction_left_cuts_the_start_as_a_left_truncating_tokenizer(tiny_model_dirs):
    """``truncate: true`` with ``truncation_direction: Left`` (or ``left``): each route gives the vectors of
    sentence-transformers' model whose tokenizer truncates on the left (the prompted text's start cut,
    the prompt first, as TEI's tokenizer cuts it); a token array as its text; ``Right`` the end; without
    ``truncate`` the long input is still refused."""
    from sentence_transformers import SentenceTransformer
    from transformers import AutoConfig

    folder = str(tiny_model_dirs["bert"])
    model = protoembed.load(folder, head="mean")
    model.prompts = dict(PROMPTS)
    reference = SentenceTransformer(folder, device="cpu")
    assert model.max_seq_length is None  # the position embeddings' limit, as sentence-transformers' below
    reference.max_seq_length = AutoConfig.from_pretrained(folder).max_position_embeddings
    long_text = " ".join(TEXTS[i % 3][: 5 + i % 17] for i in range(120))  # no period a cut could hide
    texts = [long_text, TEXTS[0]]
    ends = {}
    for side in ("right", "left"):
        reference.tokenizer.truncation_side = side
        ends[side] = {
            "plain": reference.encode(texts),
            "query": reference.encode(["query: " + t for t in texts]),
            "tokens": reference.encode([long_text], output_value="token_embeddings")[0].numpy(),
        }
    assert np.abs(ends["left"]["plain"][0] - ends["right"]["plain"][0]).max() > 1e-3  # the sides differ
    long_ids = model.tokenizer(long_text)["input_ids"]
    with running(model) as (base, _):
        for direction, side in (("Left", "left"), ("left", "left"), ("Right", "right")):
            cut = {"truncate": True, "truncation_direction": direction}
            embed = post(base, "/embed", {"inputs": texts, "normalize": False, **cut})
            assert embed.status_code == 200, embed.text
            np.testing.assert_allclose(embed.json(), ends[side]["plain"], atol=1e-5, rtol=0)
            query = post(base, "/embed", {"inputs": texts, "normalize": False, "prompt_name": "query", **cut})
            np.testing.assert_allclose(query.json(), ends[side]["query"], atol=1e-5, rtol=0)
            array = post(base, "/embed", {"inputs": [long_ids], "normalize": False, **cut})
            np.testing.assert_allclose(array.json(), ends[side]["plain"][:1], atol=1e-5, rtol=0)
            states = post(base, "/embed_all", {"inputs": long_text, **cut})
            np.testing.assert_allclose(states.json()[0], ends[side]["tokens"], atol=1e-5, rtol=0)
            pair = {"source_sentence": TEXTS[0], "sentences": [long_text]}
            similarity = post(
                base,
                "/similarity",
                {"inputs": pair, "parameters": {"truncate": True, "truncation_direction": direction}},
            )
            a, b = ends[side]["plain"][1], ends[side]["plain"][0]
            expected = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
            np.testing.assert_allclose(similarity.json(), [expected], atol=1e-5, rtol=0)
        refused = post(base, "/embed", {"inputs": long_text, "truncation_direction": "Left"})
        assert refused.status_code == 422 and "send truncate: true" in refused.json()["error"]


def test_similarity_is_the_cosine_of_the_pooled_vectors(server, normalizing):
    from sklearn.metrics.pairwise import cosine_similarity

    base, _ = server
    body = {
        "inputs": {"source_sentence": TEXTS[0], "sentences": TEXTS[1:]},
        "parameters": {"prompt_name": "query"},
    }
    response = post(base, "/similarity", body)
    assert_schema(response.json(), "SimilarityResponse")
    vectors = normalizing.encode(TEXTS, prompt_name="query")
    np.testing.assert_allclose(response.json(), cosine_similarity(vectors[:1], vectors[1:])[0], atol=1e-6)
    np.testing.assert_allclose(post(base, "/", body).json(), response.json(), atol=1e-7)  # by its body


def test_tokenize_and_decode_are_the_tokenizer_s(server, normalizing):
    base, _ = server
    tokenizer = normalizing.tokenizer
    response = post(base, "/tokenize", {"inputs": TEXTS[:2], "prompt_name": "query"})
    assert_schema(response.json(), "TokenizeResponse")
    for text, tokens in zip(TEXTS, response.json()):
        prompted = "query: " + text
        assert [t["id"] for t in tokens] == tokenizer(prompted)["input_ids"]
        assert [t["special"] for t in tokens] == [True] + [False] * (len(tokens) - 2) + [True]
        assert all(prompted[t["start"] : t["stop"]] == t["text"] for t in tokens if not t["special"])
    bare = post(base, "/tokenize", {"inputs": TEXTS[0], "add_special_tokens": False, "prompt_name": "query"})
    assert [t["id"] for t in bare.json()[0]] == tokenizer("query: " + TEXTS[0], add_special_tokens=False)[
        "input_ids"
    ]
    ids = [tokenizer(text)["input_ids"] for text in TEXTS]
    decoded = post(base, "/decode", {"ids": ids})
    assert_schema(decoded.json(), "DecodeResponse")
    assert decoded.json() == [tokenizer.decode(i, skip_special_tokens=True) for i in ids]
    kept = post(base, "/decode", {"ids": ids[0], "skip_special_tokens": False}).json()
    assert kept == [tokenizer.decode(ids[0])] and kept[0].startswith("[CLS]")


def test_health_routes_and_the_api_key(normalizing):
    with running(normalizing, api_key="secret") as (base, _):
        for path in ("/health", "/ping", "/"):
            assert httpx.get(f"{base}{path}", timeout=10).status_code == 200  # open without the key
        for path in ("/embed", "/embed_all", "/tokenize", "/similarity", "/", "/embeddings"):
            refused = post(base, path, {"inputs": "a"})
            assert refused.status_code == 401, path
        assert_schema(
            refused.json()["error"] and post(base, "/embed", {"inputs": "a"}).json(), "ErrorResponse"
        )
        assert httpx.get(f"{base}/info", timeout=10).status_code == 401
        keyed = httpx.post(
            f"{base}/embed", json={"inputs": "a"}, headers={"Authorization": "Bearer secret"}, timeout=60
        )
        assert keyed.status_code == 200


# ------------------------------------------------------------------------------------------ the errors

ERRORS = [
    ("/embed", {"inputs": []}, 400, "Empty", "must not be an empty list"),
    ("/embed", {"inputs": ""}, 400, "Empty", "inputs is empty"),
    ("/embed", {"inputs": 5}, 422, "Validation", "inputs must be a string"),
    ("/embed", {"inputs": [[1, 2, "x"]]}, 422, "Validation", "inputs[0][2] is a string"),
    ("/embed", {"inputs": "a", "normalize": "x"}, 422, "Validation", "normalize"),
    ("/embed", {"inputs": "a", "truncation_direction": "Up"}, 422, "Validation", "truncation_direction"),
    ("/embed", b"{", 422, "Validation", "could not parse the JSON body"),
    ("/embed", {"inputs": "a", "prompt_name": "nope"}, 422, "Validation", "unknown prompt name 'nope'"),
    ("/embed", {"inputs": "a", "dimensions": 33}, 422, "Validation", "32 dimensions; pass 1 to 32"),
    ("/embed", {"inputs": "a", "dimensions": 0}, 422, "Validation", "32 dimensions; pass 1 to 32"),
    ("/embed", {"inputs": ["a"] * 9}, 422, "Validation", "9 inputs"),
    (
        "/embed",
        {"inputs": [SENTENCES[3]]},
        422,
        "Validation",
        "inputs[0] has 278 tokens; this model takes at most 128",
    ),
    ("/embed", {"inputs": [[1, 10**9]]}, 422, "Tokenizer", "inputs[0][1] is token 1000000000, outside"),
    ("/embed_all", {"inputs": []}, 400, "Empty", "must not be an empty list"),
    ("/similarity", {"inputs": {"source_sentence": "a", "sentences": []}}, 400, "Empty", "cannot be empty"),
    ("/similarity", {"inputs": {"source_sentence": "a"}}, 422, "Validation", "inputs.sentences"),
    ("/tokenize", {"inputs": 3}, 422, "Validation", "inputs"),
    ("/tokenize", {"inputs": []}, 400, "Empty", "cannot be empty"),
    ("/decode", {"ids": []}, 400, "Empty", "cannot be empty"),
    ("/decode", {"ids": [[5], [-1]]}, 422, "Tokenizer", "ids[1][0] is token -1"),
    ("/rerank", {"query": "a", "texts": ["b"]}, 424, "Backend", "not a re-ranker"),
]


@pytest.mark.parametrize(("path", "body", "status", "error_type", "message"), ERRORS)
def test_errors_are_tei_s_types_at_its_router_s_statuses(server, path, body, status, error_type, message):
    """Each refusal's ``error_type`` and status as TEI's router gives them (its batch-size error is
    Validation at 422, where its OpenAPI document lists 413); the long input's 278 tokens are the
    tokenizer's count of the prompted text (the default prompt) with [CLS] and [SEP]."""
    base, app = server
    assert len(app.state.infer.model.tokenizer("passage: " + SENTENCES[3])["input_ids"]) == 278
    if isinstance(body, bytes):
        response = httpx.post(f"{base}{path}", content=body, timeout=30)
    else:
        response = post(base, path, body)
    assert response.status_code == status, response.text
    assert_schema(response.json(), "ErrorResponse")
    assert response.json()["error_type"] == error_type
    assert message in response.json()["error"]


def test_unhealthy_before_the_warm_up_and_overloaded_in_flight(normalizing):
    from fastapi.testclient import TestClient

    client = TestClient(create_app(normalizing, ServeSettings(served_model_name=NAME)))  # no warm-up
    for response in (client.get("/health"), client.post("/embed", json={"inputs": "a"})):
        assert response.status_code == 503 and response.json()["error_type"] == "Unhealthy"
        assert_schema(response.json(), "ErrorResponse")
    with running(normalizing, max_concurrent_requests=1) as (base, app):
        first, second = second_while_first_runs(
            app,
            lambda: post(base, "/embed", {"inputs": "the cat"}),
            lambda: post(base, "/embed", {"inputs": "a dog"}),
        )
        assert first.status_code == 200
        assert second.status_code == 429 and second.json()["error_type"] == "Overloaded"
        assert_schema(second.json(), "ErrorResponse")


# ------------------------------------------------------------------------------------------ token arrays


@pytest.mark.parametrize("kind", ["bert", "roberta", "albert"])
def test_token_arrays_give_the_text_s_vector_with_or_without_special_tokens_and_a_prompt(
    tiny_model_dirs, kind
):
    """The ids of ``tokenizer(text)`` (special tokens included) and those without give ``encode(text)``'s
    vector; with a prompt, the prompted text's (its tokens joined to the array's would be another row on
    the BPE tokenizer, which the last assertion shows); a long array is cut with ``truncate: true`` as
    its text is, refused without."""
    model = protoembed.load(str(tiny_model_dirs[kind]), head="mean")
    model.prompts = dict(PROMPTS)
    tokenizer = model.tokenizer
    with_special = [tokenizer(text)["input_ids"] for text in TEXTS]
    without = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in TEXTS]
    long_text = " ".join(TEXTS * 30)
    long_ids = tokenizer(long_text)["input_ids"]
    with running(model) as (base, _):
        for ids in (with_special, without):
            plain = post(base, "/embed", {"inputs": ids, "normalize": False})
            np.testing.assert_allclose(plain.json(), model.encode(TEXTS), atol=1e-6, rtol=0)
            openai = post(base, "/v1/embeddings", {"input": ids})
            np.testing.assert_allclose(
                [d["embedding"] for d in openai.json()["data"]], model.encode(TEXTS), atol=1e-6, rtol=0
            )
            query = post(base, "/embed", {"inputs": ids, "normalize": False, "prompt_name": "query"})
            np.testing.assert_allclose(
                query.json(), model.encode(TEXTS, prompt_name="query"), atol=1e-6, rtol=0
            )
        cut = post(base, "/embed", {"inputs": [long_ids], "normalize": False, "truncate": True})
        np.testing.assert_allclose(cut.json(), model.encode([long_text]), atol=1e-6, rtol=0)
        refused = post(base, "/embed", {"inputs": [long_ids]})
        assert refused.status_code == 422 and "send truncate: true" in refused.json()["error"]
        bare = post(base, "/embed", {"inputs": [tokenizer("")["input_ids"]]})
        assert bare.status_code == 400 and "inputs[0] holds only special tokens" in bare.json()["error"]
    if kind == "roberta":
        joined = tokenizer("query: ", add_special_tokens=False)["input_ids"] + without[0]
        assert joined != tokenizer("query: " + TEXTS[0], add_special_tokens=False)["input_ids"]


# ------------------------------------------------------------------------------------------ the clients


def test_huggingface_hub_inference_client_on_the_root(server, normalizing, monkeypatch):
    from huggingface_hub import InferenceClient, constants

    base, _ = server
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # the suite's offline switch; this is 127.0.0.1
    client = InferenceClient(base_url=base)
    got = np.asarray(client.feature_extraction(TEXTS[0])).reshape(1, -1)
    np.testing.assert_allclose(got, normalizing.encode(TEXTS[:1]), atol=1e-6, rtol=0)
    scores = client.sentence_similarity(TEXTS[0], TEXTS[1:])
    vectors = normalizing.encode(TEXTS)
    np.testing.assert_allclose(scores, vectors[1:] @ vectors[0], atol=1e-6)
