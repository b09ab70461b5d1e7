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


#: Retrieval texts for the one-prompt checks (queries, documents).
QUERIES = ["what do cats do", "where do fish live"]
DOCS = ["cats are animals", "fish swim in the sea", "birds sing in the morning"]


@pytest.fixture(scope="module")
def defaulted(tiny_model_dirs, tmp_path_factory):
    """prompts -> (model with those prompts and ``default_prompt_name`` ``query``, its saved folder): one
    with both role prompts, one without a ``document`` prompt (that role: no prompt, not the default)."""
    out = {}
    for name, prompts in (
        ("both", {"query": "query: ", "document": "passage: "}),
        ("query", {"query": "q: "}),
    ):
        model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean", prompts=prompts)
        model.default_prompt_name = "query"
        out[name] = (model, model.save(tmp_path_factory.mktemp("defaulted") / name))
    return out


@pytest.mark.parametrize("which", ["both", "query"])
def test_a_default_prompt_is_applied_once_by_search_mine_and_eval_retrieval(
    defaulted, which, tmp_path, monkeypatch, one_thread
):
    """A model with role prompts and a default prompt: ``search``, ``mine`` and ``eval retrieval`` (the
    Evaluator, with and without the embedding cache) encode queries and documents as
    sentence-transformers' ``encode(prompt_name=...)`` of the saved folder does (1e-6), and the tokenizer
    sees each text with one prompt: the role's, none for a role the model lacks."""
    import protoembed.evaluation.retrieval as suite_module
    import protoembed.retrieval.mining as mining_module
    from beir_toy import write_beir
    from protoembed.data.benchmarks.beir import read_beir
    from protoembed.evaluation.encoders import LazyEncoder
    from protoembed.evaluation.evaluator import Evaluator
    from protoembed.evaluation.tasks import beir_task
    from protoembed.retrieval.mining import mine_hard_negatives
    from protoembed.retrieval.semantic_search import similarity

    monkeypatch.setenv("PROTOEMBED_CACHE", str(tmp_path / "cache"))
    model, folder = defaulted[which]
    st = SentenceTransformer(str(folder), device="cpu")
    assert st.default_prompt_name == "query"
    prompt = {role: model.prompts.get(role, "") for role in ("query", "document")}

    def theirs(queries, documents):
        return st.encode(queries, prompt_name="query"), st.encode(documents, prompt_name="document")

    seen: list[str] = []
    raw_ids = model.encoder.raw_ids
    monkeypatch.setattr(model.encoder, "raw_ids", lambda texts: seen.extend(texts) or raw_ids(texts))

    # protoembed.search: the scores are those of sentence-transformers' vectors
    q, d = theirs(QUERIES, DOCS)
    rankings = protoembed.search(model, QUERIES, DOCS, top_k=len(DOCS))
    expected = similarity(q, d)
    for row, ranking in enumerate(rankings):
        np.testing.assert_allclose([s for _, s in ranking], [expected[row, i] for i, _ in ranking], atol=1e-6)
    assert sorted(seen) == sorted(
        [prompt["query"] + t for t in QUERIES] + [prompt["document"] + t for t in DOCS]
    )

    # mine: the vectors it ranks with
    ranked = []
    top_k = mining_module.top_k
    monkeypatch.setattr(
        mining_module, "top_k", lambda a, p, *rest: ranked.append((a, p)) or top_k(a, p, *rest)
    )
    seen.clear()
    mine_hard_negatives(model, QUERIES, DOCS[:2], DOCS[2:], num_negatives=1)
    ((anchors, pool),) = ranked
    q, d = theirs(QUERIES, [*DOCS[2:], *DOCS[:2]])  # the pool: the corpus, then the positives
    assert np.abs(anchors - q).max() <= 1e-6 and np.abs(pool - d).max() <= 1e-6
    assert sorted(seen) == sorted(
        [prompt["query"] + t for t in QUERIES] + [prompt["document"] + t for t in DOCS]
    )

    # eval retrieval through the Evaluator (a loaded model), and a LazyEncoder with the embedding cache
    write_beir(tmp_path / "toy")
    data = read_beir(tmp_path / "toy", "test", "Toy")
    q, d = theirs(data.query_texts, data.corpus_texts)
    scored = []
    top_k = suite_module.top_k
    monkeypatch.setattr(suite_module, "top_k", lambda a, p, **kw: scored.append((a, p)) or top_k(a, p, **kw))
    evaluator = Evaluator([beir_task("Toy", None, str(tmp_path / "toy"))])
    seen.clear()
    result = evaluator.run(model)["retrieval"]
    assert result["protocol"]["prompts"] == prompt
    cached = LazyEncoder(lambda: model, cache_embeddings=True)
    for _ in range(2):  # encoded, then looked up
        assert evaluator.run(cached)["retrieval"]["tasks"] == result["tasks"]
    for queries, documents in scored:
        assert np.abs(queries - q).max() <= 1e-6 and np.abs(documents - d).max() <= 1e-6
    assert len(scored) == 3 and set(cached.stores) == set(prompt.values())  # one store per prompt text
    expected_seen = [prompt["query"] + t for t in data.query_texts] + [
        prompt["document"] + t for t in data.corpus_texts
    ]
    assert sorted(seen) == sorted(expected_seen * 2)  # the Evaluator's run and the cache's first


def test_corpus_encode_names_the_prompt_and_records_the_one_applied(defaulted, tmp_path, one_thread):
    """``encode_corpus`` with ``prompt_name`` and without: sentence-transformers' vectors of the saved
    folder (its default prompt when none is named; none for a role the model lacks), and the manifest
    records the prompt text that was put in front."""
    from protoembed.corpus.encoding import encode_corpus

    model, folder = defaulted["query"]
    st = SentenceTransformer(str(folder), device="cpu")
    lines = tmp_path / "docs.txt"
    lines.write_text("\n".join(DOCS) + "\n", encoding="utf-8")
    for name, expected in ((None, "q: "), ("query", "q: "), ("document", "")):
        vectors = encode_corpus(model, lines, tmp_path / f"out-{name}", prompt_name=name)
        assert vectors.manifest.settings.prompt == expected
        theirs = st.encode(DOCS) if name is None else st.encode(DOCS, prompt_name=name)
        assert np.abs(np.asarray(vectors) - theirs).max() <= 1e-6
