"""ONNX export: every head equals its torch model, int8 graphs, the folder layout, bad input."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
import torch

import protoembed
from export_inputs import CALIBRATION, LONG, SENTENCES
from protoembed.cli import main
from protoembed.core.errors import ProtoembedError
from protoembed.model.export import EXPORT_CONFIG, GRAPH_FILE, OnnxEmbedder, export_embedder, load_export
from protoembed.model.heads import HEADS


def assert_same_vectors(torch_model, onnx_model, atol: float = 1e-4) -> None:
    """Mixed lengths in batches of 2 and 5, one sentence alone, and a single string."""
    for batch_size in (2, 5):
        expected = torch_model.encode(SENTENCES, batch_size=batch_size)
        np.testing.assert_allclose(onnx_model.encode(SENTENCES, batch_size=batch_size), expected, atol=atol)
    np.testing.assert_allclose(
        onnx_model.encode([SENTENCES[3]]), torch_model.encode([SENTENCES[3]]), atol=atol
    )
    np.testing.assert_allclose(onnx_model.encode(LONG), torch_model.encode(LONG), atol=atol)


@pytest.fixture(scope="module")
def exported_mean(tiny_model_dirs, tmp_path_factory):
    """(torch model, fp32 export dir) of the tiny BERT with the mean head, normalised."""
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean", max_seq_length=12, normalize=True)
    return model, export_embedder(model, tmp_path_factory.mktemp("export") / "mean")


@pytest.mark.parametrize("head", list(HEADS))
def test_fp32_export_equals_torch_for_every_head(tiny_model_dir, head, tmp_path):
    torch.manual_seed(0)  # soft prompt U[0, 1) and the cnn head's initialisation
    model = protoembed.load(str(tiny_model_dir), head=head, max_seq_length=12)
    ids, _ = model.encoder.tokenize_ids([LONG])
    assert len(ids[0]) < len(model.tokenizer(LONG)["input_ids"])  # the long sentence is really cut
    out = export_embedder(model, tmp_path / "out")
    reloaded = protoembed.load(str(out), runtime="onnx")
    assert isinstance(reloaded, OnnxEmbedder) and reloaded.head == head
    assert reloaded.dimension == model.dimension
    assert reloaded.encoder.tokenize_ids(SENTENCES) == model.encoder.tokenize_ids(SENTENCES)
    assert_same_vectors(model, reloaded)
    config = json.loads((out / EXPORT_CONFIG).read_text())
    assert config["head"] == head and config["quantize"] is None
    assert config["inputs"][:2] == ["input_ids", "attention_mask"]
    assert ("mask_index" in config["inputs"]) == HEADS[head].uses_template
    # batch and length are dynamic axes of the graph
    graph = onnx.load(str(out / GRAPH_FILE))
    dims = [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph.graph.input]
    assert dims[0] == ["batch", "length"] and dims[1] == ["batch", "length"]


def test_soft_prompt_vectors_live_in_the_graph(tiny_model_dirs, tmp_path):
    torch.manual_seed(1)
    model = protoembed.load(str(tiny_model_dirs["roberta"]), head="soft_prompt")
    out = export_embedder(model, tmp_path / "a")
    with torch.no_grad():
        model.encoder.soft_prompt.add_(torch.randn_like(model.encoder.soft_prompt))  # another soft prompt
    changed = export_embedder(model, tmp_path / "b")
    a = protoembed.load(str(out), runtime="onnx").encode(SENTENCES)
    b = protoembed.load(str(changed), runtime="onnx").encode(SENTENCES)
    assert np.abs(a - b).max() > 1e-3
    np.testing.assert_allclose(b, model.encode(SENTENCES), atol=1e-4)


def test_int8_export_quantises_the_matmuls(exported_mean, tmp_path):
    model, _ = exported_mean
    out = export_embedder(model, tmp_path / "int8", quantize="int8", calibration=CALIBRATION)
    graph = onnx.load(str(out / GRAPH_FILE)).graph
    ops = {node.op_type for node in graph.node}
    weights = {init.name for init in graph.initializer}
    # fixed activation scales: no quantisation at run time
    assert {"QuantizeLinear", "MatMulInteger"} <= ops and "DynamicQuantizeLinear" not in ops
    # no matrix multiplication by a constant weight is left in fp32
    assert not [n for n in graph.node if n.op_type == "MatMul" and n.input[1] in weights]
    assert json.loads((out / EXPORT_CONFIG).read_text())["quantize"] == "int8"
    vectors = protoembed.load(str(out), runtime="onnx").encode(SENTENCES)
    expected = model.encode(SENTENCES)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert (vectors * expected).sum(1).min() > 0.9  # close to fp32, not equal


def test_int8_vectors_do_not_depend_on_the_batch(exported_mean, tmp_path):
    """A text alone, among 64 others (longer and shorter: padding) and in another order: one vector."""
    from tiny_models import CORPUS

    model, _ = exported_mean
    int8 = protoembed.load(
        str(export_embedder(model, tmp_path / "int8", quantize="int8", calibration=CALIBRATION)),
        runtime="onnx",
    )
    others = [f"{CORPUS[i % 11]} {CORPUS[(7 * i) % 11]}"[: 10 + 3 * i] for i in range(64)]
    text = SENTENCES[0]
    alone = int8.encode([text])[0]
    np.testing.assert_allclose(int8.encode([*others, text], batch_size=65)[-1], alone, rtol=0, atol=1e-6)
    np.testing.assert_allclose(int8.encode([text, *others[::-1]], batch_size=65)[0], alone, rtol=0, atol=1e-6)
    np.testing.assert_allclose(
        int8.encode([*others[:20], text, *others[20:]], batch_size=8)[20], alone, atol=1e-6
    )


def test_mean_export_follows_the_sentence_transformers_onnx_layout(exported_mean):
    _, out = exported_mean
    modules = json.loads((out / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["Transformer", "Pooling", "Normalize"]
    assert json.loads((out / "1_Pooling" / "config.json").read_text())["pooling_mode"] == "mean"
    assert json.loads((out / "sentence_bert_config.json").read_text())["max_seq_length"] == 12
    assert [o.name for o in onnx.load(str(out / GRAPH_FILE)).graph.output] == [
        "sentence_embedding",
        "last_hidden_state",
    ]


def test_prompt_export_has_no_sentence_transformers_modules(tiny_model_dirs, tmp_path):
    out = export_embedder(protoembed.load(str(tiny_model_dirs["bert"]), head="mask"), tmp_path / "m")
    assert not (out / "modules.json").exists()
    assert json.loads((out / "protoembed_encoder.json").read_text())["template"] is not None


def test_cli_export_then_encode(tiny_model_dirs, tmp_path, capsys):
    model = protoembed.load(str(tiny_model_dirs["albert"]), head="max")
    saved = model.save(tmp_path / "model")
    assert main(["export", str(saved), "-o", str(tmp_path / "out")]) == 0
    text = tmp_path / "s.txt"
    text.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    args = ["encode", str(text), "-o", str(tmp_path / "v.npy"), "--model", str(tmp_path / "out")]
    assert main([*args, "--no-progress", "--runtime", "onnx"]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), model.encode(SENTENCES), atol=1e-4)
    assert "wrote" in capsys.readouterr().out


def test_load_options_that_the_graph_fixes_are_refused(exported_mean):
    _, out = exported_mean
    with pytest.raises(ProtoembedError, match="cannot switch to 'cls'"):
        protoembed.load(str(out), head="cls")
    with pytest.raises(ProtoembedError, match="fixed in its graph"):
        protoembed.load(str(out), template="<S> [MASK]")
    with pytest.raises(ProtoembedError, match="normalises its vectors"):
        protoembed.load(str(out), normalize=False)
    with pytest.raises(ProtoembedError, match="cannot be saved again"):
        protoembed.load(str(out)).save(out.parent / "again")


def _one_line_cli_error(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("protoembed: error:") and "\n" not in err
    return err


def test_bad_export_requests(tmp_path, capsys, tiny_model_dirs):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json", encoding="utf-8")
    err = _one_line_cli_error(["export", str(broken), "-o", str(tmp_path / "o1")], capsys)
    assert str(broken) in err and not (tmp_path / "o1").exists()
    err = _one_line_cli_error(
        ["export", str(tiny_model_dirs["bert"]), "-o", str(tmp_path / "o2"), "--quantize", "int4"], capsys
    )
    assert "'int4'" in err and "int8" in err and not (tmp_path / "o2").exists()
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("mine", encoding="utf-8")
    err = _one_line_cli_error(["export", str(tiny_model_dirs["bert"]), "-o", str(occupied)], capsys)
    assert "not a protoembed export" in err and (occupied / "notes.txt").read_text() == "mine"


def test_export_refuses_before_loading_the_model(tmp_path, capsys, tiny_model_dirs, monkeypatch):
    """An occupied output folder or a missing calibration file is refused before the (slow) load."""

    def loaded(*args, **kwargs):
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr(protoembed, "load", loaded)
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("mine", encoding="utf-8")
    err = _one_line_cli_error(["export", str(tiny_model_dirs["bert"]), "-o", str(occupied)], capsys)
    assert "not a protoembed export" in err
    missing = tmp_path / "missing.txt"
    argv = ["export", str(tiny_model_dirs["bert"]), "-o", str(tmp_path / "ov"), "--format", "openvino"]
    err = _one_line_cli_error([*argv, "--quantize", "int8", "--calibration", str(missing)], capsys)
    assert str(missing) in err and not (tmp_path / "ov").exists()


def test_broken_exports_are_named(exported_mean, tmp_path):
    import shutil

    _, out = exported_mean
    for case in ("missing", "truncated", "newer"):
        copy = shutil.copytree(out, tmp_path / case)
        graph = copy / GRAPH_FILE
        if case == "missing":
            graph.unlink()
            message = "graph file missing"
        elif case == "truncated":
            graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 2])
            message = "cannot load the ONNX graph"
        else:
            config = json.loads((copy / EXPORT_CONFIG).read_text())
            (copy / EXPORT_CONFIG).write_text(json.dumps({**config, "format_version": 99}))
            message = "format version 99 was written by a newer protoembed"
        with pytest.raises(ProtoembedError, match=message) as info:
            load_export(copy, runtime="onnx")
        assert str(copy) in str(info.value) and "\n" not in str(info.value)


def test_interrupted_export_leaves_nothing(exported_mean, tmp_path, monkeypatch):
    import protoembed.model.export.onnx as onnx_module

    model, _ = exported_mean

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(onnx_module, "_quantize_int8", interrupted)
    with pytest.raises(KeyboardInterrupt):
        export_embedder(model, tmp_path / "out", quantize="int8", calibration=CALIBRATION)
    assert list(tmp_path.iterdir()) == []


def test_default_model_export_equals_torch(tmp_path):
    model = protoembed.load("default", device="cpu")
    long = " ".join(["the quick brown fox jumps over the lazy dog ."] * 40)  # > 256 tokens: cut
    assert len(model.tokenizer(long)["input_ids"]) > model.encoder.max_seq_length
    reloaded = protoembed.load(str(export_embedder(model, tmp_path / "default")), runtime="onnx")
    sentences = [*SENTENCES, long]
    np.testing.assert_allclose(reloaded.encode(sentences, batch_size=4), model.encode(sentences), atol=1e-4)
    np.testing.assert_allclose(reloaded.encode([long]), model.encode([long]), atol=1e-4)
    np.testing.assert_allclose(reloaded.encode("hello"), model.encode("hello"), atol=1e-4)
