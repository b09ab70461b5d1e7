"""The README's Python example runs as written, and what it says of saved models holds."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import protoembed

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_the_readme_example_runs_and_sentence_transformers_loads_its_model(data_dir, tmp_path, monkeypatch):
    """The first Python block, as written (default model, staged data): good vectors, and the folder it
    saves gives the same vectors through ``SentenceTransformer("my-model")``."""
    from sentence_transformers import SentenceTransformer

    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))
    monkeypatch.chdir(tmp_path)
    names: dict = {}
    exec(compile(_python_blocks()[0], str(README), "exec"), names)
    assert names["vectors"].shape == (2, 384)
    assert names["results"]["sts"]["tasks"]["STSBenchmark"]["spearman"] > 80  # a head whose vectors are good
    st = SentenceTransformer("my-model")
    sentences = ["A man is playing a guitar.", "A woman slices an onion."]
    np.testing.assert_allclose(st.encode(sentences), names["vectors"], atol=1e-5)


def test_a_saved_prompt_head_loads_in_sentence_transformers_with_remote_code(tiny_model_dirs, tmp_path):
    """What the README says of prompt heads: ``SentenceTransformer(path, trust_remote_code=True)``."""
    from sentence_transformers import SentenceTransformer

    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mask")
    saved = model.save(tmp_path / "mask-model")
    assert "SentenceTransformer(path, trust_remote_code=True)" in README.read_text(encoding="utf-8")
    with pytest.raises(Exception, match="trust_remote_code"):
        SentenceTransformer(str(saved))
    st = SentenceTransformer(str(saved), trust_remote_code=True)
    sentences = ["a man is playing a guitar .", "the cat sat on the mat ."]
    np.testing.assert_allclose(st.encode(sentences), model.encode(sentences), atol=1e-5)
