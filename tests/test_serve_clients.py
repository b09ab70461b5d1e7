"""The server as OpenAI's and text-embeddings-inference's clients use it: token-id inputs (the served
model's own ids) through the official ``openai`` client, langchain-openai's ``OpenAIEmbeddings``,
llama-index's ``OpenAIEmbedding``,
``huggingface_hub``'s ``InferenceClient`` on ``/embed``, TEI's ``/embed`` options and ``/info``, a
prompted model's prompts, and the byte and queued-token limits under 100 concurrent clients (never a 500).
Every vector is checked against ``model.encode`` of the same model object."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

import protoembed
from test_serve import NAME, SENTENCES, running

#: Lower-case (the tiny tokenizer lower-cases text; token ids are taken as they are) and short.
TEXTS = ["a man is playing a guitar .", "the cat", "two dogs are running through a field ."]
PROMPTS = {"query": "query : ", "document": "passage : "}


@pytest.fixture(scope="module")
def model(tiny_model_dirs):
    loaded = protoembed.load(str(tiny_model_dirs["bert"]), head="mean")
    loaded.prompts = dict(PROMPTS)
    return loaded


@pytest.fixture(scope="module")
def server(model):
    with running(model, max_inputs_per_request=16, max_request_bytes=50_000) as (base, app):
        yield base, app


def ids_of(model, texts: list[str]) -> list[list[int]]:
    """The served model's token ids of each text, as ``tokenizer(text)`` returns them (special tokens
    included), as TEI and vLLM read them."""
    return [model.tokenizer(text)["input_ids"] for text in texts]


def test_token_ids_through_the_openai_client_equal_the_texts_vectors(model, server):
    import openai

    base, _ = server
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0, timeout=60)
    expected = model.encode(TEXTS)
    many = client.embeddings.create(model=NAME, input=ids_of(model, TEXTS), encoding_format="float")
    np.testing.assert_allclose([d.embedding for d in many.data], expected, atol=1e-6, rtol=0)
    assert many.usage.prompt_tokens == sum(len(ids) for ids in ids_of(model, TEXTS))  # [CLS] ... [SEP]
    one = client.embeddings.create(model=NAME, input=ids_of(model, TEXTS[:1])[0])  # base64, one array
    np.testing.assert_allclose(one.data[0].embedding, expected[0], atol=1e-6, rtol=0)
    # ids beyond what a row keeps are cut as a text is (to 126 between [CLS] and [SEP]); one outside the
    # vocabulary is refused
    long = client.embeddings.create(model=NAME, input=[7] * 200, encoding_format="float")
    short = client.embeddings.create(model=NAME, input=[7] * 126, encoding_format="float")
    np.testing.assert_allclose(long.data[0].embedding, short.data[0].embedding, atol=1e-6, rtol=0)
    assert long.usage.prompt_tokens == 128
    with pytest.raises(openai.BadRequestError, match="input\\[1\\] is token 100000, outside"):
        client.embeddings.create(model=NAME, input=[7, 100000])


def test_langchain_openai_embeddings_get_the_offline_vectors(model, server):
    from langchain_openai import OpenAIEmbeddings

    base, _ = server
    # check_embedding_ctx_length=False: send the text, not tiktoken's ids (OpenAI's own vocabulary)
    client = OpenAIEmbeddings(
        model=NAME, base_url=f"{base}/v1", api_key="none", check_embedding_ctx_length=False, max_retries=0
    )
    np.testing.assert_allclose(client.embed_documents(SENTENCES), model.encode(SENTENCES), atol=1e-6, rtol=0)
    np.testing.assert_allclose(client.embed_query(TEXTS[1]), model.encode(TEXTS[1]), atol=1e-6, rtol=0)


def test_llama_index_openai_embedding_by_model_name_gets_the_offline_vectors(model, server):
    from llama_index.embeddings.openai import OpenAIEmbedding

    base, _ = server
    # model_name=: model= takes OpenAI's own model names only (a ValueError for any other)
    with pytest.raises(ValueError, match="is not a valid OpenAIEmbeddingModelType"):
        OpenAIEmbedding(model=NAME, api_base=f"{base}/v1", api_key="none")
    client = OpenAIEmbedding(model_name=NAME, api_base=f"{base}/v1", api_key="none", max_retries=0)
    documents = client.get_text_embedding_batch(SENTENCES)
    np.testing.assert_allclose(documents, model.encode(SENTENCES), atol=1e-6, rtol=0)
    np.testing.assert_allclose(
        client.get_query_embedding(TEXTS[1]), model.encode(TEXTS[1]), atol=1e-6, rtol=0
    )


def test_huggingface_hub_feature_extraction_on_embed(model, server, monkeypatch):
    from huggingface_hub import InferenceClient, constants

    base, _ = server
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # the suite's offline switch; this is 127.0.0.1
    client = InferenceClient(base_url=f"{base}/embed")
    got = client.feature_extraction(TEXTS[0])
    expected = model.encode(TEXTS[:1], normalize=True)
    np.testing.assert_allclose(np.asarray(got).reshape(1, -1), expected, atol=1e-6, rtol=0)


def test_tei_embed_options_and_info(model, server):
    base, _ = server
    post = lambda **body: httpx.post(f"{base}/embed", json=body, timeout=60)  # noqa: E731
    plain = post(inputs=TEXTS, normalize=False)
    assert plain.status_code == 200, plain.text
    np.testing.assert_allclose(plain.json(), model.encode(TEXTS), atol=1e-6, rtol=0)
    normalized = post(inputs=TEXTS[0])  # TEI normalises by default
    np.testing.assert_allclose(normalized.json(), model.encode(TEXTS[:1], normalize=True), atol=1e-6, rtol=0)
    ids = post(inputs=ids_of(model, TEXTS), normalize=False)
    np.testing.assert_allclose(ids.json(), model.encode(TEXTS), atol=1e-6, rtol=0)
    # a prompt by name: the model's own text before each input, as encode(prompt_name=...) puts it
    query = post(inputs=TEXTS, normalize=False, prompt_name="query")
    np.testing.assert_allclose(query.json(), model.encode(TEXTS, prompt_name="query"), atol=1e-6, rtol=0)
    prompted_ids = post(inputs=ids_of(model, TEXTS[:1]), normalize=False, prompt_name="document")
    np.testing.assert_allclose(
        prompted_ids.json(), model.encode(TEXTS[:1], prompt_name="document"), atol=1e-6, rtol=0
    )
    # truncate: false (TEI's default) refuses what would be cut; true cuts it as encode does
    long = post(inputs=[SENTENCES[3]])
    assert long.status_code == 422 and long.json()["error_type"] == "Validation"
    assert "inputs[0] has" in long.json()["error"] and "send truncate: true" in long.json()["error"]
    cut = post(inputs=[SENTENCES[3]], truncate=True, normalize=False)
    np.testing.assert_allclose(cut.json(), model.encode(SENTENCES[3:4]), atol=1e-6, rtol=0)
    unknown = post(inputs=TEXTS[0], prompt_name="nope")
    assert unknown.status_code == 422 and "unknown prompt name 'nope'" in unknown.json()["error"]
    info = httpx.get(f"{base}/info", timeout=10).json()
    assert info["model_id"] == NAME and info["model_dtype"] == "float32"
    assert info["max_client_batch_size"] == 16 and info["max_input_length"] == 128


def test_the_openai_route_applies_no_prompt_and_search_equals_it(model, server):
    """A prompted model serves ``encode``'s vectors without a prompt on /v1/embeddings (the model defines
    no default prompt); ``/embed``'s prompt_name gives ``protoembed.search``'s query vectors."""
    base, _ = server
    response = httpx.post(
        f"{base}/v1/embeddings", json={"input": TEXTS, "encoding_format": "float"}, timeout=60
    )
    np.testing.assert_allclose(
        [d["embedding"] for d in response.json()["data"]], model.encode(TEXTS), atol=1e-6, rtol=0
    )
    hits = protoembed.search(model, TEXTS[:1], TEXTS, top_k=3)
    served = np.array(httpx.post(f"{base}/embed", json={"inputs": TEXTS[:1], "prompt_name": "query"}).json())
    documents = np.array(
        httpx.post(f"{base}/embed", json={"inputs": TEXTS, "prompt_name": "document"}, timeout=60).json()
    )
    scores = (served @ documents.T)[0]
    assert [index for index, _ in hits[0]] == list(np.argsort(-scores, kind="stable"))
    np.testing.assert_allclose([score for _, score in hits[0]], np.sort(scores)[::-1], atol=1e-5)


def test_the_byte_and_queued_token_limits_under_100_clients(model):
    """A body over --max-request-bytes is a 413 before it is parsed (declared or streamed without a length);
    rows beyond --max-queued-tokens are a 429 with Retry-After while the forward is held; 100 concurrent
    clients mixing them with valid requests get 200, 413 or 429, never a 500, and every 200 holds the
    offline vectors."""
    with running(model, max_request_bytes=2_000, max_queued_tokens=60) as (base, app):
        big = {"input": ["word " * 500]}
        declared = httpx.post(f"{base}/v1/embeddings", json=big, timeout=30)
        assert declared.status_code == 413 and declared.json()["error"]["code"] == "request_too_large"

        def chunks():
            yield b'{"input": ["'
            for _ in range(100):
                yield b"word " * 10
            yield b'"]}'

        streamed = httpx.post(f"{base}/v1/embeddings", content=chunks(), timeout=30)
        assert streamed.status_code == 413 and "over 2000 bytes" in streamed.json()["error"]["message"]

        batcher = app.state.batcher
        forward, release = batcher.encoder.forward, threading.Event()

        def held(features):
            release.wait(60)
            return forward(features)

        batcher.encoder.forward = held
        try:
            bodies = [big if i % 4 == 0 else {"input": TEXTS, "encoding_format": "float"} for i in range(100)]
            with httpx.Client(timeout=60) as client, ThreadPoolExecutor(100) as pool:
                futures = [pool.submit(client.post, f"{base}/v1/embeddings", json=b) for b in bodies]
                # the held forward keeps rows queued: later requests find the queue full
                for _ in range(600):
                    if sum(f.done() for f in futures) >= 75:
                        break
                    threading.Event().wait(0.1)
                release.set()
                responses = [f.result() for f in futures]
        finally:
            release.set()
            batcher.encoder.forward = forward
        statuses = [r.status_code for r in responses]
        assert set(statuses) <= {200, 413, 429}, statuses
        assert statuses.count(413) == 25 and statuses.count(429) > 0 and statuses.count(200) > 0
        limited = next(r for r in responses if r.status_code == 429)
        assert (
            limited.headers["retry-after"] == "1"
            and "queues at most 60" in limited.json()["error"]["message"]
        )
        expected = model.encode(TEXTS)
        for response in responses:
            if response.status_code == 200:
                got = [d["embedding"] for d in response.json()["data"]]
                np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
