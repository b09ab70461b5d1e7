"""langchain-huggingface's ``HuggingFaceEndpointEmbeddings`` against the running server, as
docs/serving.md's recipe writes it.

Every release of langchain-huggingface requires huggingface-hub < 2 while the main environment's
transformers requires >= 2.4, so the client runs in a child interpreter over a side install of the two
(``make test`` makes it: the Makefile's ``hub1-clients`` target), seeing the main site-packages less the
distributions that depend on huggingface-hub (benchmarks/side_install.py). Its vectors are checked against
``model.encode`` of the served model object."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from benchmarks.side_install import build_view, child_command, child_env

import protoembed
from test_serve import running

#: The side install of langchain-huggingface and huggingface-hub 1.x (the Makefile's target).
SIDE = Path(sys.prefix) / "hub1-clients"
TEXTS = ["a man is playing a guitar .", "the cat", "two dogs are running through a field ."]

#: docs/serving.md's recipe, then the two calls a LangChain vector store makes.
CLIENT = """
import json, sys
from huggingface_hub import AsyncInferenceClient, InferenceClient
from langchain_huggingface import HuggingFaceEndpointEmbeddings

root = sys.argv[1]
embeddings = HuggingFaceEndpointEmbeddings(model="protoembed")  # a name: a URL is refused
embeddings.client = InferenceClient(base_url=root)  # replaces the hub client its validator made
embeddings.async_client = AsyncInferenceClient(base_url=root)
try:
    HuggingFaceEndpointEmbeddings(model=root)
    refused = ""
except ValueError as err:
    refused = str(err)
import huggingface_hub
print(json.dumps({
    "documents": embeddings.embed_documents(json.loads(sys.argv[2])),
    "query": embeddings.embed_query(json.loads(sys.argv[2])[0]),
    "refused": refused,
    "hub": huggingface_hub.__version__,
}))
"""


def test_langchain_huggingface_endpoint_embeddings(tiny_model_dirs, tmp_path):
    assert (SIDE / ".installed").is_file(), f"no side install at {SIDE}: run make test (it makes it)"
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean")
    build_view(SIDE, tmp_path / "view")
    script = tmp_path / "client.py"
    script.write_text(CLIENT, encoding="utf-8")
    env = {**child_env(SIDE, tmp_path / "view"), "HF_HUB_OFFLINE": "0"}  # the server is on 127.0.0.1
    with running(model) as (base, _):
        done = subprocess.run(
            child_command(script, base, json.dumps(TEXTS)),
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["hub"].startswith("1.")
    expected = model.encode(TEXTS, normalize=True)  # /embed normalises by default, as TEI does
    np.testing.assert_allclose(got["documents"], expected, atol=1e-6, rtol=0)
    np.testing.assert_allclose(got["query"], expected[0], atol=1e-6, rtol=0)
    assert "must be a HuggingFace repo ID, not a URL" in got["refused"]
