"""The sentence-transformers layout files: one writer (``protoembed.outputs.st_layout``) behind ``Embedder.save``,
``PromptEncoder.save`` and the ONNX export, so a saved model and its export describe it alike."""

from __future__ import annotations

import json

import pytest

import protoembed
from protoembed.model.export import export_embedder
from protoembed.outputs.st_layout import (
    MODULES_FILE,
    NORMALIZE,
    POOLING,
    SENTENCE_BERT_CONFIG_FILE,
    ST_CONFIG_FILE,
    TRANSFORMER,
    LayoutModule,
    module_folder,
    read_modules,
    read_sentence_bert_config,
    write_modules,
    write_sentence_bert_config,
)


def _json(path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_module_folders_and_entries_round_trip(tmp_path):
    saved = []

    class Probe:
        def save(self, folder: str) -> None:
            saved.append(folder)

    entries = write_modules(tmp_path, [LayoutModule(TRANSFORMER), LayoutModule(POOLING, Probe())])
    assert entries == [
        {"idx": 0, "name": "0", "path": "", "type": TRANSFORMER},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": POOLING},
    ]
    assert saved == [str(tmp_path / "1_Pooling")] and (tmp_path / "1_Pooling").is_dir()
    assert read_modules(tmp_path) == entries
    assert module_folder(2, NORMALIZE) == "2_Normalize"
    assert module_folder(1, "protoembed.model.heads.cnn.CNNPooling") == "1_CNNPooling"


def test_sentence_bert_config_round_trip(tmp_path):
    assert read_sentence_bert_config(tmp_path) is None
    write_sentence_bert_config(tmp_path, 12, True)
    assert read_sentence_bert_config(tmp_path) == {"max_seq_length": 12, "do_lower_case": True}
    assert (tmp_path / SENTENCE_BERT_CONFIG_FILE).read_text(encoding="utf-8").endswith("}\n")


@pytest.mark.parametrize("normalize", [True, False])
def test_save_and_export_write_the_same_layout(tiny_model_dirs, tmp_path, normalize):
    pytest.importorskip("onnx")
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean", max_seq_length=12, normalize=normalize)
    saved = model.save(tmp_path / "saved")
    exported = export_embedder(model, tmp_path / "exported")

    modules = _json(saved / MODULES_FILE)
    assert modules == _json(exported / MODULES_FILE)
    assert [m["type"] for m in modules] == [TRANSFORMER, POOLING, *([NORMALIZE] if normalize else [])]
    for name in (SENTENCE_BERT_CONFIG_FILE, "1_Pooling/config.json"):
        assert (saved / name).read_bytes() == (exported / name).read_bytes(), name
    assert _json(saved / SENTENCE_BERT_CONFIG_FILE) == {"max_seq_length": 12, "do_lower_case": False}
    assert (saved / "2_Normalize").is_dir() == (exported / "2_Normalize").is_dir() == normalize

    saved_config, exported_config = _json(saved / ST_CONFIG_FILE), _json(exported / ST_CONFIG_FILE)
    saved_versions, exported_versions = saved_config.pop("__version__"), exported_config.pop("__version__")
    assert saved_config == exported_config
    assert list(saved_versions) == ["sentence_transformers", "transformers", "pytorch"]
    assert exported_versions == {"sentence_transformers": saved_versions["sentence_transformers"]}


def test_prompt_head_names_our_input_module(tiny_model_dirs, tmp_path):
    saved = protoembed.load(str(tiny_model_dirs["bert"]), head="mask").save(tmp_path / "m")
    assert [m["type"] for m in read_modules(saved)] == [
        "protoembed.model.encoder.PromptEncoder",
        "protoembed.model.heads.mask.MaskTokenPooling",
    ]
    assert [m["path"] for m in read_modules(saved)] == ["", "1_MaskTokenPooling"]
