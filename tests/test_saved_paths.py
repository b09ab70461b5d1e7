"""Model folders saved before the package was layered still load: their ``modules.json`` (and a kept MLP's
``pooler_type``) name ``protoembed.encoder.PromptEncoder`` and ``protoembed.heads.<module>.<Class>``, which
``protoembed.load`` and ``sentence_transformers.SentenceTransformer`` import by those paths.

The folders here are saved by the current code, then their ``modules.json`` is written by hand as the old
code wrote it, so the test does not depend on what a save names today."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest

import protoembed
from protoembed.objectives import build_objective
from protoembed.outputs.st_layout import MODULES_FILE, TRANSFORMER

#: Old path -> the class's home now (the one-line modules that keep the old paths name it).
OLD_PATHS = {
    "protoembed.encoder.PromptEncoder": "protoembed.model.encoder.PromptEncoder",
    "protoembed.heads.mask.MaskTokenPooling": "protoembed.model.heads.mask.MaskTokenPooling",
    "protoembed.heads.cnn.CNNHead": "protoembed.model.heads.cnn.CNNHead",
    "protoembed.heads.mlp.MLPPooling": "protoembed.model.heads.mlp.MLPPooling",
}

#: The ``modules.json`` of each folder as the code before the layers wrote it.
OLD_MODULES = {
    "mask+mlp": [
        {"idx": 0, "name": "0", "path": "", "type": "protoembed.encoder.PromptEncoder"},
        {"idx": 1, "name": "1", "path": "1_MLPPooling", "type": "protoembed.heads.mlp.MLPPooling"},
    ],
    "cnn": [
        {"idx": 0, "name": "0", "path": "", "type": TRANSFORMER},
        {"idx": 1, "name": "1", "path": "1_CNNHead", "type": "protoembed.heads.cnn.CNNHead"},
    ],
}
#: The kept MLP's inner pooling module, as the old code named it in ``1_MLPPooling/config.json``.
OLD_POOLER_TYPE = {"pooler_type": "protoembed.heads.mask.MaskTokenPooling"}

SENTENCES = ["a man is playing a guitar .", "stocks fell sharply ."]


def _class(path: str) -> type:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_every_old_path_names_the_class_of_its_new_home():
    for old, new in OLD_PATHS.items():
        assert _class(old) is _class(new), old


def _save(tiny_model_dirs, folder: Path, kind: str) -> Path:
    """A model of ``kind`` saved by the current code into ``folder``."""
    if kind == "cnn":
        return protoembed.load(str(tiny_model_dirs["bert"]), head="cnn", device="cpu").save(folder)
    embedder = protoembed.load(str(tiny_model_dirs["bert"]), head="mask", device="cpu")
    build_objective("promptbert", embedder, mlp="keep").eval_embedder().save(str(folder))
    return folder


@pytest.mark.parametrize("kind", list(OLD_MODULES))
def test_a_folder_naming_the_old_module_paths_loads_in_protoembed_and_sentence_transformers(
    tiny_model_dirs, tmp_path, kind
):
    from sentence_transformers import SentenceTransformer

    folder = _save(tiny_model_dirs, tmp_path / kind, kind)
    modules_file = folder / MODULES_FILE
    today = json.loads(modules_file.read_text(encoding="utf-8"))
    old = OLD_MODULES[kind]
    # the hand-written file is today's with the old paths: same entries, each type at its old path
    assert today == [{**entry, "type": OLD_PATHS.get(entry["type"], entry["type"])} for entry in old]
    expected = protoembed.load(str(folder), device="cpu").encode(SENTENCES)

    modules_file.write_text(json.dumps(old, indent=2), encoding="utf-8")
    if kind == "mask+mlp":
        (folder / "1_MLPPooling" / "config.json").write_text(json.dumps(OLD_POOLER_TYPE), encoding="utf-8")
    loaded = protoembed.load(str(folder), device="cpu")
    st = SentenceTransformer(str(folder), device="cpu", trust_remote_code=True)
    np.testing.assert_allclose(loaded.encode(SENTENCES), expected, rtol=0, atol=1e-6)
    np.testing.assert_allclose(st.encode(SENTENCES), expected, rtol=0, atol=1e-5)
    assert [type(module).__name__ for module in st] == [entry["type"].rsplit(".", 1)[-1] for entry in old]
