"""A model's input prompts (query / document): applied by ``encode(prompt_name=...)`` as
sentence-transformers applies them, saved in ``config_sentence_transformers.json`` and kept by the
export, settable by ``protoembed.load(prompts=...)`` and by a training config."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

import protoembed
from protoembed.core.errors import ProtoembedError
from protoembed.model.export.graph import export_embedder
from protoembed.outputs.st_layout import ST_CONFIG_FILE

TEXTS = ["a man is playing a guitar .", "two dogs are running through a field .", "the cat sat on the mat ."]
PROMPTS = {"query": "search query : ", "document": "passage : "}


@pytest.fixture(scope="module")
def saved(tiny_model_dirs, tmp_path_factory):
    """head -> (model with :data:`PROMPTS`, its saved folder), for a plain and a template head."""
    out = {}
    for head in ("mean", "mask"):
        model = protoembed.load(str(tiny_model_dirs["bert"]), head=head, prompts=PROMPTS)
        out[head] = (model, model.save(tmp_path_factory.mktemp("prompts") / head))
    return out


@pytest.mark.parametrize("head", ["mean", "mask"])
def test_sentence_transformers_applies_the_saved_prompts_as_we_do(saved, head, one_thread):
    model, folder = saved[head]
    config = json.loads((folder / ST_CONFIG_FILE).read_text(encoding="utf-8"))
    assert config["prompts"] == PROMPTS and config["similarity_fn_name"] == "cosine"
    st = SentenceTransformer(str(folder), device="cpu", trust_remote_code=head != "mean")
    ours = model.encode(TEXTS, prompt_name="query")
    assert np.abs(st.encode(TEXTS, prompt_name="query") - ours).max() <= 1e-6
    assert (
        np.abs(st.encode(TEXTS, prompt_name="document") - model.encode(TEXTS, prompt_name="document")).max()
        <= 1e-6
    )
    # the prompt is the text put in front, inside the template's sentence slot for the mask head
    np.testing.assert_array_equal(ours, model.encode([PROMPTS["query"] + t for t in TEXTS]))
    np.testing.assert_array_equal(
        model.encode(TEXTS, prompt="passage : "), model.encode(TEXTS, prompt_name="document")
    )
    assert np.abs(ours - model.encode(TEXTS)).max() > 1e-3  # the prompt changes the vectors
    single = model.encode(TEXTS[0], prompt_name="query")
    assert single.shape == (model.dimension,) and np.allclose(single, ours[0], atol=1e-6)


def test_prompts_survive_save_load_and_can_be_replaced(saved, tmp_path):
    model, folder = saved["mask"]
    reloaded = protoembed.load(str(folder))
    assert reloaded.prompts == PROMPTS and reloaded.head == "mask"
    np.testing.assert_array_equal(
        reloaded.encode(TEXTS, prompt_name="query"), model.encode(TEXTS, prompt_name="query")
    )
    other = protoembed.load(str(folder), prompts={"query": "q : "})
    assert other.prompts == {"query": "q : "}
    np.testing.assert_array_equal(
        other.encode(TEXTS, prompt_name="query"), model.encode(TEXTS, prompt="q : ")
    )
    # a re-headed saved model keeps the saved prompts
    assert protoembed.load(str(folder), head="mean").prompts == PROMPTS
    config = json.loads((other.save(tmp_path / "q") / ST_CONFIG_FILE).read_text(encoding="utf-8"))
    assert config["prompts"] == {"query": "q : "}


def test_prompts_survive_the_onnx_export(saved, tmp_path, monkeypatch, one_thread):
    monkeypatch.setenv("PROTOEMBED_CACHE", str(tmp_path / "cache"))
    for head, score_function in (("mean", "dot"), ("mask", "cosine")):
        model, _ = saved[head]
        model.similarity_fn_name = score_function
        try:
            folder = export_embedder(model, tmp_path / head)
        finally:
            model.similarity_fn_name = "cosine"
        exported = protoembed.load(str(folder))
        assert exported.runtime == "onnx" and exported.prompts == PROMPTS
        assert exported.similarity_fn_name == score_function  # the score function travels too
        assert (
            np.abs(
                exported.encode(TEXTS, prompt_name="query") - model.encode(TEXTS, prompt_name="query")
            ).max()
            <= 1e-5
        )
        replaced = protoembed.load(str(folder), prompts={"document": "doc : "})
        assert replaced.prompts == {"document": "doc : "}
        assert (
            np.abs(
                replaced.encode(TEXTS, prompt_name="document") - model.encode(TEXTS, prompt="doc : ")
            ).max()
            <= 1e-5
        )
    # the cached export behind --runtime onnx keeps the torch model's prompts
    on_onnx = protoembed.load(str(saved["mean"][1]), runtime="onnx", prompts={"query": "find : "})
    assert on_onnx.runtime == "onnx" and on_onnx.prompts == {"query": "find : "}


def test_an_unknown_prompt_name_is_one_line(saved):
    model, _ = saved["mean"]
    with pytest.raises(ProtoembedError) as err:
        model.encode(TEXTS, prompt_name="passage")
    assert str(err.value) == "unknown prompt name 'passage'; the model's prompts: document, query"
    with pytest.raises(ProtoembedError, match="^give either a prompt text or a prompt name, not both$"):
        model.encode(TEXTS, prompt_name="query", prompt="x ")
    # a role the model lacks is no prompt at all
    bare = protoembed.load(str(saved["mean"][1]), prompts={})
    np.testing.assert_array_equal(bare.encode(TEXTS, prompt_name="query"), bare.encode(TEXTS))


def test_a_training_config_and_the_settings_take_prompts(saved):
    from protoembed.model.model_spec import model_spec
    from protoembed.training.config import config_from_dict

    cfg = config_from_dict({"objective": "simcse", "data": {"corpus": "x.txt"}, "prompts": PROMPTS})
    assert cfg.model_spec().prompts == PROMPTS
    with pytest.raises(ProtoembedError) as err:
        model_spec(prompts={"query": 1})
    assert "prompts" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("head", ["mean", "mask"])
def test_the_default_prompt_is_saved_and_applied_as_sentence_transformers_applies_it(
    tiny_model_dirs, tmp_path, head, one_thread, monkeypatch
):
    """``default_prompt_name`` goes before every input when no prompt is named, in ``encode``, in
    sentence-transformers' ``encode`` of the saved folder, in an export and in the server; a named prompt
    or an explicit one replaces it; new prompts without that name drop it; a config naming a default
    that is not one of its prompts is refused."""
    import httpx

    from test_serve import running

    monkeypatch.setenv("PROTOEMBED_CACHE", str(tmp_path / "cache"))
    model = protoembed.load(str(tiny_model_dirs["bert"]), head=head, prompts=PROMPTS)
    model.default_prompt_name = "query"
    prompted = model.encode(TEXTS, prompt_name="query")
    np.testing.assert_array_equal(model.encode(TEXTS), prompted)
    assert np.abs(model.encode(TEXTS, prompt="") - prompted).max() > 1e-3
    np.testing.assert_array_equal(
        model.encode(TEXTS, prompt_name="document"),
        model.encode([PROMPTS["document"] + t for t in TEXTS], prompt=""),
    )
    folder = model.save(tmp_path / "saved")
    config = json.loads((folder / ST_CONFIG_FILE).read_text(encoding="utf-8"))
    assert config["default_prompt_name"] == "query"
    st = SentenceTransformer(str(folder), device="cpu", trust_remote_code=head != "mean")
    assert st.default_prompt_name == "query"
    assert np.abs(st.encode(TEXTS) - prompted).max() <= 1e-6
    reloaded = protoembed.load(str(folder))
    assert reloaded.default_prompt_name == "query"
    assert np.abs(reloaded.encode(TEXTS) - prompted).max() <= 1e-6
    assert protoembed.load(str(folder), prompts={"document": "d : "}).default_prompt_name is None
    exported = protoembed.load(str(export_embedder(reloaded, tmp_path / "export")))
    assert exported.default_prompt_name == "query"
    assert np.abs(exported.encode(TEXTS) - prompted).max() <= 1e-5
    with running(reloaded) as (base, _):
        body = {"input": TEXTS, "encoding_format": "float"}
        served = httpx.post(f"{base}/v1/embeddings", json=body, timeout=60).json()["data"]
        assert np.abs(np.array([d["embedding"] for d in served]) - prompted).max() <= 1e-6
    config["default_prompt_name"] = "title"
    (folder / ST_CONFIG_FILE).write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ProtoembedError, match="default_prompt_name 'title' is not one of its prompts"):
        protoembed.load(str(folder))
