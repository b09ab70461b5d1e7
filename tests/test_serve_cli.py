"""``protoembed serve``: its flags, its one-line start-up errors (real processes) and a SIGTERM with
requests in flight."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

import protoembed
from protoembed.cli import build_parser, main
from protoembed.serving.server import bind


def serve_args(*argv: str):
    return build_parser().parse_args(["serve", *argv])


def test_flags_and_defaults_come_from_serve_settings():
    from protoembed.serving import ServeSettings

    args = serve_args()
    assert args.model_arg is None and args.model == "default"
    for name, field in ServeSettings.model_fields.items():
        assert getattr(args, name) == field.default
    assert not hasattr(args, "batch_size")  # serve batches by tokens
    args = serve_args("some/model", "--port", "9000", "--max-wait-ms", "2.5", "--max-batch-tokens", "4096")
    assert (args.model_arg, args.port, args.max_wait_ms, args.max_batch_tokens) == (
        "some/model",
        9000,
        2.5,
        4096,
    )
    for bad in (["--max-batch-tokens", "0"], ["--port", "70000"], ["--max-wait-ms", "soon"]):
        with pytest.raises(SystemExit) as exc:
            serve_args(*bad)
        assert exc.value.code == 2


def test_the_api_key_and_the_served_name_defaults(monkeypatch):
    from protoembed.commands.serve import settings_from_args

    monkeypatch.setenv("PROTOEMBED_API_KEY", "from-env")
    args = serve_args("/models/my-model/")
    args.model = args.model_arg
    settings = settings_from_args(args)
    assert (settings.api_key, settings.served_model_name) == ("from-env", "my-model")
    args = serve_args("--api-key", "flag", "--served-model-name", "x")
    assert (settings_from_args(args).api_key, settings_from_args(args).served_model_name) == ("flag", "x")
    monkeypatch.delenv("PROTOEMBED_API_KEY")
    assert settings_from_args(serve_args()).api_key is None
    assert settings_from_args(serve_args()).served_model_name == "default"


def test_a_missing_serve_package_names_the_pip_command(monkeypatch, capsys, tmp_path):
    import protoembed.serving.settings

    monkeypatch.setattr(protoembed.serving.settings, "SERVE_MODULES", ("fastapi", "no_such_module_here"))
    assert main(["serve", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        "protoembed: error: protoembed serve needs the optional package no_such_module_here (missing): "
        "pip install 'protoembed[serve]'\n"
    )


def test_two_models_are_refused(capsys):
    assert main(["serve", "a-model", "--model", "b-model"]) == 2
    assert "two models given" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--max-batch-tokens", "--max-tokens-per-batch"])
def test_a_budget_below_the_longest_row_is_refused_at_start_as_encode_refuses_it(
    tiny_model_dirs, capsys, flag
):
    """One rule for ``serve`` and ``encode``: a token budget below the longest row the model makes (128
    tokens: the tiny backbone's positions, [CLS] and [SEP] included) is refused in one line, before the
    server listens; the same budget on ``encode`` of a text that long gives the same line but its row."""
    folder = str(tiny_model_dirs["bert"])
    assert main(["serve", folder, "--head", "mean", "--port", "0", flag, "10"]) == 2
    assert capsys.readouterr().err == (
        "protoembed: error: max_tokens_per_batch 10 is below the length of the longest row this model makes "
        "(128 tokens after truncation): a batch must hold one row; pass at least 128\n"
    )
    with pytest.raises(protoembed.ProtoembedError) as err:
        protoembed.load(folder, head="mean").encode(["word " * 500], max_tokens_per_batch=10)
    assert str(err.value).startswith("max_tokens_per_batch 10 is below the length of text 'word word")
    assert str(err.value).endswith(
        "(128 tokens after truncation): a batch must hold one row; pass at least 128"
    )


def run_serve(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "protoembed", "serve", *argv], capture_output=True, text=True, timeout=120
    )


def test_a_port_in_use_is_one_line_and_exit_2_before_the_model_loads(tmp_path):
    held = bind("127.0.0.1", 0)
    port = held.getsockname()[1]
    try:
        proc = run_serve(str(tmp_path), "--port", str(port))  # not a model: the port is checked first
    finally:
        held.close()
    assert proc.returncode == 2
    assert proc.stderr == (
        f"protoembed: error: port {port} on 127.0.0.1 is in use (another server?); stop it or pick another port\n"
    )
    assert proc.stdout == ""


def test_a_folder_that_is_not_a_model_is_one_line_and_exit_2(tmp_path):
    proc = run_serve(str(tmp_path), "--port", "0")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("protoembed: error: model ") and str(tmp_path) in proc.stderr


#: The real command, its forward passes after the warm-up held until the process gets SIGTERM: the
#: requests sent before are then certainly in flight when the signal comes.
CHILD = """
import sys, threading
from protoembed.model.batching import BatchEncoder
from protoembed.serving import server

terminated = threading.Event()
handle_exit = server.Server.handle_exit

def on_signal(self, sig, frame):
    terminated.set()
    handle_exit(self, sig, frame)

server.Server.handle_exit = on_signal
vectors, calls = BatchEncoder.vectors, []

def held(self, *args, **kwargs):
    calls.append(1)
    if len(calls) > 1:
        terminated.wait(60)
    return vectors(self, *args, **kwargs)

BatchEncoder.vectors = held
from protoembed.cli import main
sys.exit(main(sys.argv[1:]))
"""


def in_flight(base: str) -> float:
    text = httpx.get(f"{base}/metrics", timeout=10).text
    family = next(
        f for f in text_string_to_metric_families(text) if f.name == "protoembed_requests_in_flight"
    )
    return family.samples[0].value


def test_sigterm_answers_the_requests_in_flight_and_exits_0(tiny_model_dirs):
    model = str(tiny_model_dirs["bert"])
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, "serve", model, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
    try:
        ready = lines.get(timeout=120)
        assert ready.startswith("serving bert at http://127.0.0.1:"), ready + proc.stderr.read()
        assert "(runtime torch, precision fp32)" in ready
        base = ready.split(" at ", 1)[1].split("/v1", 1)[0]
        groups = [
            ["a man is playing a guitar .", "the cat"],
            ["two dogs are running ."],
            ["a dog", "a cat", "it"],
        ]
        with ThreadPoolExecutor(len(groups)) as pool:
            futures = [
                pool.submit(httpx.post, f"{base}/v1/embeddings", json={"input": texts}, timeout=60)
                for texts in groups
            ]
            for _ in range(1200):  # until the three are in flight (their forward pass is held)
                if in_flight(base) == len(groups):
                    break
                time.sleep(0.05)
            assert in_flight(base) == len(groups)
            proc.send_signal(signal.SIGTERM)
            responses = [f.result(timeout=60) for f in futures]
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    offline = protoembed.load(model)
    for texts, response in zip(groups, responses):
        assert response.status_code == 200, response.text
        got = np.array([item["embedding"] for item in response.json()["data"]], dtype=np.float32)
        np.testing.assert_allclose(got, offline.encode(texts), atol=1e-6, rtol=0)
    assert "Traceback" not in proc.stderr.read()
