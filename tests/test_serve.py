"""The embeddings server (:mod:`protoembed.serving`): real uvicorn servers on 127.0.0.1 in a thread, real
clients (OpenAI's, httpx), every vector checked against ``model.encode`` of the same model object."""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

import protoembed
from protoembed.serving import ServeSettings, create_app
from protoembed.serving.batcher import DynamicBatcher
from protoembed.serving.server import bind, make_server

NAME = "tiny"
#: Mixed lengths, one far beyond the tiny backbones' 128 positions (truncated as encode truncates it).
SENTENCES = [
    "a man is playing a guitar .",
    "the cat",
    "two dogs are running through a field of grass while a child is riding a horse .",
    "stocks fell sharply after the report on monday . " * 30,
    "a woman is slicing an onion .",
    "dog",
    "the quick brown fox jumps over the lazy dog . this sentence : means something .",
]


@contextmanager
def running(model, tokenizer_workers: int | None = None, **settings) -> Iterator[tuple[str, object]]:
    """A uvicorn server of ``create_app(model, ...)`` on a free port of 127.0.0.1 in a thread: yields
    (base URL, app) once it serves (after the warm-up batch); stops it gracefully after."""
    app = create_app(model, ServeSettings(served_model_name=NAME, **settings), tokenizer_workers)
    sock = bind("127.0.0.1", 0)
    started = threading.Event()
    server = make_server(app, on_started=started.set)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    app.state.loop_thread = thread  # the event loop's
    thread.start()
    try:
        for _ in range(600):  # 60 s at most
            if started.wait(0.1) or not thread.is_alive():
                break
        assert started.is_set(), "the server did not start"
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", app
    finally:
        server.should_exit = True
        thread.join(60)
        sock.close()
    assert not thread.is_alive()


@contextmanager
def held_until_submitted(app, requests: int) -> Iterator[None]:
    """Hold the server's forward passes until ``requests`` requests have been queued on its batcher, so
    that the rows of several requests are queued together (no timing involved)."""
    batcher = app.state.batcher
    submit, forward = batcher.submit, batcher.encoder.forward
    lock, all_in, count = threading.Lock(), threading.Event(), [0]

    def counting_submit(ids, masks=None, **limits):
        future = submit(ids, masks, **limits)
        with lock:
            count[0] += 1
            if count[0] == requests:
                all_in.set()
        return future

    def held_forward(features):
        assert all_in.wait(60), "the requests did not all arrive"
        return forward(features)

    batcher.submit, batcher.encoder.forward = counting_submit, held_forward
    try:
        yield
    finally:
        all_in.set()
        batcher.submit, batcher.encoder.forward = submit, forward


def embeddings(base: str, texts, **body) -> np.ndarray:
    """POST /v1/embeddings (float) and return the vectors in index order, checking the response's shape."""
    response = httpx.post(f"{base}/v1/embeddings", json={"input": texts, "model": NAME, **body}, timeout=60)
    assert response.status_code == 200, response.text
    payload = response.json()
    assert payload["object"] == "list" and payload["model"] == NAME
    assert [item["index"] for item in payload["data"]] == list(range(len(texts)))
    return np.array([item["embedding"] for item in payload["data"]], dtype=np.float32)


def batch_requests(base: str) -> tuple[float, float]:
    """From /metrics: (forward passes, of which held rows of one request only)."""
    text = httpx.get(f"{base}/metrics", timeout=10).text
    family = next(f for f in text_string_to_metric_families(text) if f.name == "protoembed_batch_requests")
    samples = {(s.name, s.labels.get("le")): s.value for s in family.samples}
    return samples[("protoembed_batch_requests_count", None)], samples[
        ("protoembed_batch_requests_bucket", "1.0")
    ]


@pytest.fixture(scope="module")
def mean_model(tiny_model_dirs):
    return protoembed.load(str(tiny_model_dirs["bert"]), head="mean")


@pytest.fixture(scope="module")
def mean_server(mean_model):
    """A server with a key and small limits, for the client, error and auth tests."""
    settings = dict(api_key="secret", max_inputs_per_request=8, max_input_chars=2000)
    with running(mean_model, **settings) as (base, app):
        yield base, app


# ----------------------------------------------------------------------------------- the official client


def test_openai_client_gets_the_offline_vectors_float_and_base64(mean_model, mean_server, tiny_model_dirs):
    import openai

    base, _ = mean_server
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="secret", max_retries=0, timeout=60)
    expected = mean_model.encode(SENTENCES)
    as_base64 = client.embeddings.create(model=NAME, input=SENTENCES)  # the client asks for base64
    as_float = client.embeddings.create(model=NAME, input=SENTENCES, encoding_format="float")
    for response in (as_base64, as_float):
        got = np.array([item.embedding for item in response.data], dtype=np.float32)
        np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
        assert [item.index for item in response.data] == list(range(len(SENTENCES)))
    single = client.embeddings.create(model=NAME, input=SENTENCES[0], encoding_format="float")
    np.testing.assert_allclose(single.data[0].embedding, expected[0], atol=1e-6, rtol=0)
    # tokens after truncation: the tokenizer's own count with its special tokens, cut at 128 positions
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dirs["bert"]))
    tokens = sum(min(len(tokenizer(s.strip())["input_ids"]), 128) for s in SENTENCES)
    assert as_float.usage.prompt_tokens == as_float.usage.total_tokens == tokens
    assert max(len(tokenizer(s)["input_ids"]) for s in SENTENCES) > 128  # one input was truncated
    assert [m.id for m in client.models.list().data] == [NAME]
    assert client.models.retrieve(NAME).id == NAME


def test_base64_is_little_endian_float32(mean_model, mean_server):
    base, _ = mean_server
    response = httpx.post(
        f"{base}/v1/embeddings",
        json={"input": ["the cat"], "encoding_format": "base64"},
        headers={"Authorization": "Bearer secret"},
        timeout=60,
    )
    vector = np.frombuffer(base64.b64decode(response.json()["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_allclose(vector, mean_model.encode(["the cat"])[0], atol=1e-6, rtol=0)


# ------------------------------------------------------------------------------------- dynamic batching


def test_concurrent_requests_share_batches_and_get_their_own_vectors(mean_model):
    rng = np.random.default_rng(0)
    requests = [
        [SENTENCES[j] for j in rng.integers(0, len(SENTENCES), size=int(rng.integers(1, 6)))]
        for _ in range(100)
    ]
    expected = mean_model.encode(SENTENCES)
    index = {s: i for i, s in enumerate(SENTENCES)}

    async def send_all(base: str) -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=100)
        async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
            return await asyncio.gather(
                *(client.post("/v1/embeddings", json={"input": texts, "model": NAME}) for texts in requests)
            )

    with running(mean_model) as (base, app), held_until_submitted(app, len(requests)):
        responses = asyncio.run(send_all(base))
        batches, single = batch_requests(base)
    for texts, response in zip(requests, responses):
        assert response.status_code == 200, response.text
        data = response.json()["data"]
        assert [item["index"] for item in data] == list(range(len(texts)))
        got = np.array([item["embedding"] for item in data], dtype=np.float32)
        np.testing.assert_allclose(got, expected[[index[t] for t in texts]], atol=1e-6, rtol=0)
    assert single < batches  # some forward pass held rows of more than one request


def test_batches_keep_the_token_budget_and_close_drains_the_queue(mean_model):
    encoder = mean_model.batch_encoder()
    stats = []
    batcher = DynamicBatcher(encoder, max_batch_tokens=64, max_wait_ms=0, observe=stats.append)
    rows = [encoder.tokenize([s]) for s in SENTENCES]
    futures = [batcher.submit(*row) for row in rows]  # queued before the thread runs
    batcher.start()
    batcher.close()  # runs what is queued, then ends
    assert all(f.done() for f in futures)
    got = np.concatenate([f.result() for f in futures])
    np.testing.assert_allclose(got, mean_model.encode(SENTENCES), atol=1e-6, rtol=0)
    assert sum(s.rows for s in stats) == len(SENTENCES)
    assert all(s.padded_tokens <= 64 or s.rows == 1 for s in stats)
    assert any(s.rows > 1 for s in stats)
    with pytest.raises(RuntimeError):
        batcher.submit(*rows[0])


# ------------------------------------------------------------------------------ heads, runtimes, precision

HEADS = ("mean", "cls", "mask", "soft_prompt", "cnn")


def test_requests_are_tokenized_on_the_pool_not_the_model_thread_nor_the_event_loop(tiny_model_dirs):
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean")
    tokenized: list[threading.Thread] = []
    forwarded: list[threading.Thread] = []
    tokenize_ids, forward = model.encoder.tokenize_ids, model.inference_forward

    def recording_tokenize_ids(texts, allow_empty=False):
        tokenized.append(threading.current_thread())
        return tokenize_ids(texts, allow_empty)

    def recording_forward(features):
        forwarded.append(threading.current_thread())
        return forward(features)

    model.encoder.tokenize_ids, model.inference_forward = recording_tokenize_ids, recording_forward
    with running(model, tokenizer_workers=2) as (base, app), ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda text: embeddings(base, [text, "dog"]), SENTENCES))
    del model.encoder.tokenize_ids, model.inference_forward
    for text, vectors in zip(SENTENCES, answers):
        np.testing.assert_allclose(vectors, model.encode([text, "dog"]), atol=1e-5)
    assert len(tokenized) == len(SENTENCES) + 1  # the warm-up too
    assert {t.name.rsplit("_", 1)[0] for t in tokenized} == {"protoembed-tokenize"}
    assert len(set(tokenized)) <= 2
    assert {t.name for t in forwarded} == {"protoembed-batcher"}
    assert not set(tokenized) & {*forwarded, app.state.loop_thread}


def assert_served_like_encode(model, atol: float) -> None:
    """Four concurrent requests, batched together, against ``model.encode`` of the same inputs."""
    groups = [SENTENCES[:3], SENTENCES[3:5], SENTENCES[5:], SENTENCES[1:4]]
    with running(model) as (base, app), held_until_submitted(app, len(groups)), ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda texts: embeddings(base, texts), groups))
    for texts, vectors in zip(groups, got):
        np.testing.assert_allclose(vectors, model.encode(texts), atol=atol, rtol=0)


@pytest.mark.parametrize("head", HEADS)
def test_every_head_serves_the_offline_vectors(tiny_model_dirs, head, one_thread):
    assert_served_like_encode(protoembed.load(str(tiny_model_dirs["bert"]), head=head), atol=1e-6)


@pytest.mark.parametrize("runtime", ("onnx", "openvino"))
def test_export_runtimes_serve_their_offline_vectors(tiny_model_dirs, runtime, tmp_path, monkeypatch):
    monkeypatch.setenv("PROTOEMBED_CACHE", str(tmp_path))
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mask", runtime=runtime, precision="fp32")
    assert model.runtime == runtime
    assert_served_like_encode(model, atol=1e-6)


def test_bf16_serves_the_offline_bf16_vectors(tiny_model_dirs, one_thread):
    """In bf16 a row's vector depends on the batch it runs in (its padded length changes the matmul shapes,
    so the bf16 rounding of the sums): the served and the offline vectors are two bf16 computations, each
    within bf16's own error e of the fp32 vector, so within 2e of each other; the tolerance is 4e, e
    measured here on the same inputs (about 1e-4 on this CPU, whose bf16 is emulated; the batching
    difference measured 2e-5). The fp32 tests hold the exact equality."""
    folder = str(tiny_model_dirs["bert"])
    model = protoembed.load(folder, head="mean", precision="bf16")
    assert model.precision == "bf16"
    error = np.abs(model.encode(SENTENCES) - protoembed.load(folder, head="mean").encode(SENTENCES)).max()
    assert 0 < error < 0.05  # bf16 ran, and stayed near fp32
    assert_served_like_encode(model, atol=4 * error)


# ---------------------------------------------------------------------------------------- bad requests

BAD_REQUESTS = [
    (b'{"input": ', 400, None, "could not parse the JSON body"),
    (b"[1]", 400, None, "must be a JSON object"),
    ({"input": 5}, 400, "input", "input must be a string, a list of strings, a token array"),
    ({"input": [[1, 2, "x"]]}, 400, "input", "input[0][2] is a string; a token array holds integers"),
    ({"input": [1, 2.5]}, 400, "input", "input[1] is a number"),
    ({"input": ["a", [1, 2]]}, 400, "input", "input[1] is an array"),
    ({"input": [[1, 2], []]}, 400, "input", "input[1] is an empty token array"),
    (
        {"input": [[1, 10**9]]},
        400,
        "input",
        "input[0][1] is token 1000000000, outside the model's vocabulary",
    ),
    ({"input": ["a", None]}, 400, "input", "input[1] is null"),
    ({"input": []}, 400, "input", "empty list"),
    ({"input": ["a", "  "]}, 400, "input", "input[1] is empty"),
    ({"input": ""}, 400, "input", "input is empty"),
    ({}, 400, "input", "input is required"),
    ({"input": "a", "model": "gpt-4"}, 404, "model", "The model `gpt-4` does not exist"),
    ({"input": ["a"] * 9}, 413, "input", "9 inputs"),
    ({"input": ["a", "x" * 2001]}, 413, "input", "input[1] has 2001 characters"),
    ({"input": "a", "dimensions": 33}, 400, "dimensions", "32 dimensions; pass 1 to 32"),
    ({"input": "a", "dimensions": 0}, 400, "dimensions", "32 dimensions; pass 1 to 32"),
    ({"input": "a", "dimensions": "x"}, 400, "dimensions", "dimensions expected an integer"),
    ({"input": "a", "encoding_format": "hex"}, 400, "encoding_format", "expected float or base64"),
]


@pytest.mark.parametrize(("body", "status", "param", "message"), BAD_REQUESTS)
def test_a_bad_request_is_answered_in_openai_error_shape(mean_server, body, status, param, message):
    base, _ = mean_server
    headers = {"Authorization": "Bearer secret"}
    if isinstance(body, bytes):
        response = httpx.post(f"{base}/v1/embeddings", content=body, headers=headers, timeout=30)
    else:
        response = httpx.post(f"{base}/v1/embeddings", json=body, headers=headers, timeout=30)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert message in error["message"]
    if status == 404:
        assert error["code"] == "model_not_found"


def test_unknown_paths_and_methods_and_the_api_key(mean_server):
    base, _ = mean_server
    assert httpx.get(f"{base}/nowhere").json()["error"]["code"] == "not_found"
    wrong_method = httpx.post(f"{base}/health")
    assert wrong_method.status_code == 405 and "message" in wrong_method.json()["error"]
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "secret"}):
        for response in (
            httpx.post(f"{base}/v1/embeddings", json={"input": "a"}, headers=headers),
            httpx.get(f"{base}/v1/models", headers=headers),
        ):
            assert response.status_code == 401
            assert response.json()["error"]["code"] == "invalid_api_key"
    assert httpx.get(f"{base}/health").status_code == 200  # no key needed outside /v1
    assert httpx.get(f"{base}/metrics").status_code == 200


def test_health_is_503_until_the_warm_up_ran(mean_model):
    from fastapi.testclient import TestClient

    app = create_app(mean_model, ServeSettings(served_model_name=NAME))
    client = TestClient(app)  # no lifespan: the model has not run its warm-up batch
    assert client.get("/health").status_code == 503
    response = client.post("/v1/embeddings", json={"input": "a"})
    assert response.status_code == 503 and response.json()["error"]["code"] == "not_ready"
    with TestClient(app) as started:  # the lifespan runs the warm-up batch
        assert started.get("/health").status_code == 200
        assert started.post("/v1/embeddings", json={"input": "a"}).status_code == 200
    assert client.get("/health").status_code == 503  # and after shutdown


def second_while_first_runs(app, first, second):
    """Call ``first()`` on a thread and hold its forward pass; call ``second()`` meanwhile; release the
    forward. Returns (first's result, second's)."""
    entered, release = threading.Event(), threading.Event()
    encoder = app.state.batcher.encoder
    forward = encoder.forward

    def held(features):
        entered.set()
        assert release.wait(60)
        return forward(features)

    encoder.forward = held
    try:
        with ThreadPoolExecutor(1) as pool:
            running_first = pool.submit(first)
            assert entered.wait(60)  # the first request is in its forward pass
            answer = second()
            release.set()
            return running_first.result(60), answer
    finally:
        release.set()
        encoder.forward = forward


def test_a_request_beyond_max_concurrent_requests_gets_429(mean_model):
    with running(mean_model, max_concurrent_requests=1) as (base, app):
        vectors, second = second_while_first_runs(
            app,
            lambda: embeddings(base, ["the cat"]),
            lambda: httpx.post(f"{base}/v1/embeddings", json={"input": "a dog"}, timeout=30),
        )
        assert second.status_code == 429 and second.headers["Retry-After"] == "1"
        assert second.json()["error"]["code"] == "rate_limit_exceeded"
        np.testing.assert_allclose(vectors, mean_model.encode(["the cat"]), atol=1e-6, rtol=0)
        assert embeddings(base, ["a dog"]).shape == (1, 32)  # free again


def test_connections_of_the_bound_socket_send_at_once():
    """Every connection the server accepts has TCP_NODELAY, as asyncio gives its own listeners' (without,
    a response's body waits for the client's delayed ACK of its headers: about 40 ms a request)."""
    import socket

    async def accepted_nodelay() -> int:
        sock = bind("127.0.0.1", 0)
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                conn = transport.get_extra_info("socket")
                seen.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
        _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        try:
            return await asyncio.wait_for(seen, 10)
        finally:
            writer.close()
            server.close()

    assert asyncio.run(accepted_nodelay()) != 0
