"""truncate_dim: encode's cut against sentence-transformers' own, the saved default, the export's graph, refusals."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

import protoembed
from beir_toy import write_beir
from protoembed.cli import main
from protoembed.core.errors import ProtoembedError
from protoembed.model.batching import Encodes
from protoembed.model.export import export_embedder

SENTENCES = [
    "a man is playing a guitar .",
    "two dogs are running through a field of grass while the cat sat on the mat .",
    "hello",
    "stocks fell sharply after the report on monday .",
]


@pytest.fixture(scope="module")
def saved(tiny_model_dirs, tmp_path_factory):
    """A saved tiny BERT with the mean head, (not normalising, normalising)."""
    root = tmp_path_factory.mktemp("truncate")
    plain = protoembed.load(str(tiny_model_dirs["bert"]), head="mean").save(root / "plain")
    unit = protoembed.load(str(tiny_model_dirs["bert"]), head="mean", normalize=True).save(root / "unit")
    return plain, unit


@pytest.mark.parametrize("dim", [1, 8, 31, 32])
def test_encode_cut_equals_sentence_transformers(saved, dim):
    plain, unit = saved
    st = SentenceTransformer(str(plain), device="cpu", truncate_dim=dim)
    model = protoembed.load(str(plain))
    cut = model.encode(SENTENCES, batch_size=3, truncate_dim=dim)
    assert cut.shape == (len(SENTENCES), dim)
    np.testing.assert_allclose(cut, st.encode(SENTENCES), atol=1e-6)
    np.testing.assert_allclose(
        model.encode(SENTENCES, truncate_dim=dim, normalize=True),
        st.encode(SENTENCES, normalize_embeddings=True),
        atol=1e-6,
    )
    # a normalising model cuts then normalises: sentence-transformers' normalize_embeddings=True
    st_unit = SentenceTransformer(str(unit), device="cpu", truncate_dim=dim)
    unit_cut = protoembed.load(str(unit)).encode(SENTENCES, truncate_dim=dim)
    np.testing.assert_allclose(unit_cut, st_unit.encode(SENTENCES, normalize_embeddings=True), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(unit_cut, axis=1), 1.0, atol=1e-6)


def test_the_cut_is_the_first_dimensions_of_the_full_vector(saved):
    plain, _ = saved
    model = protoembed.load(str(plain))
    full = model.encode(SENTENCES)
    np.testing.assert_array_equal(model.encode(SENTENCES, truncate_dim=5), full[:, :5])
    single = model.encode(SENTENCES[0], truncate_dim=5)
    assert single.shape == (5,)
    assert model.encode([], truncate_dim=5).shape == (0, 5)


def test_saved_truncate_dim_is_the_default_everywhere(saved, tmp_path):
    plain, _ = saved
    model = protoembed.load(str(plain), truncate_dim=12)
    assert (model.truncate_dim, model.dimension, model.pooled_dimension) == (12, 12, 32)
    folder = model.save(tmp_path / "cut")
    config = json.loads((folder / "config_sentence_transformers.json").read_text())
    assert config["truncate_dim"] == 12
    st = SentenceTransformer(str(folder), device="cpu")
    assert st.truncate_dim == 12 and st.get_embedding_dimension() == 12
    reloaded = protoembed.load(str(folder))
    assert reloaded.truncate_dim == 12
    np.testing.assert_allclose(reloaded.encode(SENTENCES), st.encode(SENTENCES), atol=1e-6)
    # a call's truncate_dim (or a load's) replaces the saved one, up to the full width
    np.testing.assert_allclose(
        reloaded.encode(SENTENCES, truncate_dim=20), st.encode(SENTENCES, truncate_dim=20), atol=1e-6
    )
    assert protoembed.load(str(folder), truncate_dim=32).encode(SENTENCES).shape == (len(SENTENCES), 32)
    # a model without one writes none, as sentence-transformers
    assert "truncate_dim" not in json.loads((plain / "config_sentence_transformers.json").read_text())


def test_bad_truncate_dims_are_one_line_errors(saved, tmp_path, capsys):
    plain, _ = saved
    model = protoembed.load(str(plain))
    for bad in (0, 33, -1, True):
        with pytest.raises(
            ProtoembedError, match=rf"truncate_dim must be from 1 to this model's 32 dimensions, got {bad!r}$"
        ):
            model.encode(SENTENCES, truncate_dim=bad)
    with pytest.raises(
        ProtoembedError, match="truncate_dim must be from 1 to this model's 32 dimensions, got 64"
    ):
        protoembed.load(str(plain), truncate_dim=64)
    with pytest.raises(ProtoembedError, match="truncate_dim must be a positive number of dimensions, got 0"):
        protoembed.load(str(plain), truncate_dim=0)
    broken = protoembed.load(str(plain), truncate_dim=4).save(tmp_path / "broken")
    config_file = broken / "config_sentence_transformers.json"
    config_file.write_text(json.dumps({**json.loads(config_file.read_text()), "truncate_dim": 40}))
    with pytest.raises(ProtoembedError) as info:
        protoembed.load(str(broken))
    assert str(info.value) == (
        f"{config_file}: truncate_dim must be from 1 to this model's 32 dimensions, got 40"
    )
    text = tmp_path / "s.txt"
    text.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        main(
            ["encode", str(text), "-o", str(tmp_path / "v.npy"), "--model", str(plain), "--truncate-dim", "0"]
        )
    assert "truncate_dim must be a positive number of dimensions, got 0" in capsys.readouterr().err


@pytest.mark.parametrize("normalize", [False, True])
def test_export_graph_cuts_then_normalises_as_torch(tiny_model_dirs, tmp_path, normalize):
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean", normalize=normalize, truncate_dim=10)
    out = export_embedder(model, tmp_path / "out")
    exported = protoembed.load(str(out), runtime="onnx")
    assert exported.dimension == 10
    vectors = exported.encode(SENTENCES, batch_size=3)
    np.testing.assert_allclose(vectors, model.encode(SENTENCES), atol=1e-5)
    if normalize:
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    # a further cut of the export is the torch model's cut
    np.testing.assert_allclose(
        exported.encode(SENTENCES, truncate_dim=4), model.encode(SENTENCES, truncate_dim=4), atol=1e-5
    )
    # sentence-transformers' ONNX convention pools the graph's token states itself: the folder says the cut
    assert json.loads((out / "config_sentence_transformers.json").read_text())["truncate_dim"] == 10


def test_export_command_takes_truncate_dim(saved, tmp_path):
    plain, _ = saved
    assert main(["export", str(plain), "-o", str(tmp_path / "out"), "--truncate-dim", "6"]) == 0
    exported = protoembed.load(str(tmp_path / "out"))
    np.testing.assert_allclose(
        exported.encode(SENTENCES), protoembed.load(str(plain)).encode(SENTENCES, truncate_dim=6), atol=1e-5
    )


def test_encode_command_cuts_the_array_and_the_shards(saved, tmp_path, capsys):
    plain, _ = saved
    text = tmp_path / "s.txt"
    text.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    expected = protoembed.load(str(plain)).encode(SENTENCES, truncate_dim=8)
    model = ["--model", str(plain), "--no-progress"]
    assert main(["encode", str(text), "-o", str(tmp_path / "v.npy"), *model, "--truncate-dim", "8"]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), expected, atol=1e-6)
    out = tmp_path / "shards"
    assert main(["encode", str(text), "-o", str(out), *model, "--truncate-dim", "8"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dimension"] == 8 and manifest["settings"]["truncate_dim"] == 8
    np.testing.assert_allclose(np.load(out / "shard-00000.npy"), expected, atol=1e-6)
    # the cut is a setting a resume checks
    capsys.readouterr()
    assert main(["encode", str(text), "-o", str(out), *model, "--truncate-dim", "4", "--resume"]) == 2
    assert "; settings.truncate_dim: recorded 8, now 4; resume with the same model" in capsys.readouterr().err


@pytest.mark.parametrize("score_function", ["cosine", "dot"])
def test_eval_dims_rows_equal_separate_truncate_dim_runs(
    saved, tmp_path, capsys, monkeypatch, score_function
):
    """Retrieval on the toy BEIR folder, by a normalising model: each width's result is that of a run
    with --truncate-dim at that width; the texts are encoded once for all the widths."""
    _, unit = saved
    folder = write_beir(tmp_path / "toyset")
    base = ["eval", "retrieval", "--model", str(unit), "--task-dir", str(folder)]
    base += ["--score-function", score_function]
    calls = []
    encode = Encodes.encode
    monkeypatch.setattr(Encodes, "encode", lambda self, *a, **k: calls.append(k) or encode(self, *a, **k))
    assert main([*base, "--dims", "32,16,4", "--output", str(tmp_path / "dims.json")]) == 0
    table = capsys.readouterr().out
    dims_calls, calls[:] = len(calls), []
    assert main([*base, "--output", str(tmp_path / "full.json")]) == 0
    assert dims_calls == len(calls) == 2  # the queries and the corpus, once
    dims = json.loads((tmp_path / "dims.json").read_text())
    assert dims["suite"] == "retrieval" and list(dims["dims"]) == ["32", "16", "4"]
    assert dims["dims"]["32"] == json.loads((tmp_path / "full.json").read_text())
    for dim in (16, 4):
        out = tmp_path / f"t{dim}.json"
        assert main([*base, "--truncate-dim", str(dim), "--output", str(out)]) == 0
        separate = json.loads(out.read_text())
        for key, value in separate["tasks"]["toyset"].items():
            assert dims["dims"][str(dim)]["tasks"]["toyset"][key] == pytest.approx(value, abs=1e-4), key
    assert "nDCG@10 x100 by vector width (papers' layout):" in table and "| Dims | toyset | Avg. |" in table
    for dim in ("32", "16", "4"):
        ndcg = dims["dims"][dim]["tasks"]["toyset"]["ndcg_at_10"]
        assert f"| {dim} | {ndcg:.2f} | {ndcg:.2f} |" in table


def test_eval_sts_dims(saved, data_dir, tmp_path, capsys):
    plain, _ = saved
    base = ["eval", "sts", "--model", str(plain), "--data-dir", str(data_dir), "--tasks", "STSBenchmark"]
    assert main([*base, "--dims", "32,8", "--output", str(tmp_path / "dims.json")]) == 0
    assert "| Dims | STS-B | Avg. |" in capsys.readouterr().out
    assert main([*base, "--truncate-dim", "8", "--output", str(tmp_path / "t8.json")]) == 0
    dims = json.loads((tmp_path / "dims.json").read_text())["dims"]
    separate = json.loads((tmp_path / "t8.json").read_text())
    assert dims["8"]["tasks"]["STSBenchmark"] == pytest.approx(separate["tasks"]["STSBenchmark"], abs=1e-6)
    assert dims["32"]["tasks"] != dims["8"]["tasks"]


@pytest.mark.parametrize("bad", ["0,8", "8,8", "a", ""])
def test_bad_dims_are_refused_when_parsed(bad, capsys):
    with pytest.raises(SystemExit):
        main(["eval", "sts", "--dims", bad])
    assert f"expected distinct positive integers separated by commas (384,256,128), got {bad!r}" in (
        capsys.readouterr().err
    )


def test_the_server_cuts_as_encode_cuts(saved):
    """OpenAI's and TEI's ``dimensions`` per request, and a served model's own ``truncate_dim``: the
    vectors of ``encode(truncate_dim=d)``, cut then normalised where the request asks unit vectors (TEI's
    order), for a plain and a normalising model."""
    import httpx

    from test_serve import running

    plain, unit = saved
    for folder in (plain, unit):
        model = protoembed.load(str(folder))
        with running(model) as (base, _):
            for dim in (1, 8, 32):
                openai = httpx.post(f"{base}/v1/embeddings", json={"input": SENTENCES, "dimensions": dim})
                vectors = [row["embedding"] for row in openai.json()["data"]]
                np.testing.assert_allclose(vectors, model.encode(SENTENCES, truncate_dim=dim), atol=1e-6)
                tei = httpx.post(f"{base}/embed", json={"inputs": SENTENCES, "dimensions": dim})
                expected = model.encode(SENTENCES, truncate_dim=dim, normalize=True)
                np.testing.assert_allclose(tei.json(), expected, atol=1e-6)
                raw = httpx.post(
                    f"{base}/embed", json={"inputs": SENTENCES, "dimensions": dim, "normalize": False}
                )
                full = protoembed.load(str(folder), normalize=False).encode(SENTENCES)  # the pooled vectors
                np.testing.assert_allclose(raw.json(), full[:, :dim], atol=1e-6)
    cut = protoembed.load(str(plain), truncate_dim=4)  # the model's own cut when a request names none
    with running(cut) as (base, _):
        openai = httpx.post(f"{base}/v1/embeddings", json={"input": SENTENCES})
        vectors = [row["embedding"] for row in openai.json()["data"]]
        np.testing.assert_allclose(vectors, cut.encode(SENTENCES), atol=1e-6)
        assert np.asarray(vectors).shape == (len(SENTENCES), 4)
        wider = httpx.post(f"{base}/v1/embeddings", json={"input": SENTENCES, "dimensions": 32})
        np.testing.assert_allclose(
            [row["embedding"] for row in wider.json()["data"]],
            cut.encode(SENTENCES, truncate_dim=32),
            atol=1e-6,
        )


def test_evaluate_dims_is_the_command_s_json(saved, data_dir, tmp_path):
    """``protoembed.evaluate(..., dims=[...])`` gives exactly what ``eval sts --dims`` writes; a bad list is
    one line before the model loads."""
    plain, _ = saved
    argv = ["eval", "sts", "--model", str(plain), "--data-dir", str(data_dir), "--tasks", "STSBenchmark"]
    assert main([*argv, "--dims", "32,8", "--output", str(tmp_path / "dims.json")]) == 0
    by_api = protoembed.evaluate(str(plain), ["STSBenchmark"], data_dir=data_dir, dims=[32, 8])
    assert json.dumps(by_api["sts"]) == json.dumps(json.loads((tmp_path / "dims.json").read_text()))
    for bad, message in (
        ([], "dims []: expected"),
        ([8, 8], "dims [8, 8]: a width is repeated"),
        ([0], "dims [0]"),
    ):
        with pytest.raises(ProtoembedError, match=re.escape(message)):
            protoembed.evaluate(str(plain), ["STSBenchmark"], data_dir=data_dir, dims=bad)
