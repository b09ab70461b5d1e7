"""One home for the model settings: :class:`protoembed.model.model_spec.ModelSpec`.

Each setting's default, choices, help and check come from its field, and the command line's flags, the
training config (and its schema in configs/README.md), ``protoembed.load``, ``load_export`` and
``protoembed.evaluate`` all read them there: these tests compare the code paths with each other and with
one concrete value each, changing nothing in the library.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

import protoembed
from protoembed.cli import main
from protoembed.commands.common import MODEL_FLAGS, add_model_options
from protoembed.core.errors import ProtoembedError
from protoembed.model.export.runtime import load_export
from protoembed.model.heads import HEADS, heads_help
from protoembed.model.model_spec import ModelSettings, ModelSpec, model_settings, model_spec
from protoembed.model.precision import PRECISIONS
from protoembed.model.runtimes import AUTO, runtime_choices
from protoembed.training.config import load_config
from protoembed.training.config_models import TrainConfig
from protoembed.training.schema import schema_yaml

#: What ModelSpec says of max_seq_length=0 (the one concrete message every code path must give).
BAD_LENGTH = "max_seq_length must be a positive number of tokens, got 0"


def _model_flags() -> dict[str, argparse.Action]:
    """dest -> the action of each model flag, as the sub-commands add them."""
    parser = argparse.ArgumentParser()
    add_model_options(parser)
    return {action.dest: action for action in parser._actions if action.dest in MODEL_FLAGS}


def test_the_flags_are_the_fields():
    flags = _model_flags()
    assert list(flags) == list(MODEL_FLAGS) and set(MODEL_FLAGS) <= set(ModelSpec.model_fields)
    for name, action in flags.items():
        field = ModelSpec.model_fields[name]
        assert action.default == field.default
        assert action.option_strings == ["--" + name.replace("_", "-")]
        assert action.help.startswith(field.description)
    assert flags["runtime"].choices == runtime_choices() == ("auto", "torch", "onnx", "openvino")
    assert flags["runtime"].default == AUTO == "auto"
    assert flags["precision"].choices == PRECISIONS == ("fp32", "bf16", "fp16")
    assert heads_help() in flags["head"].help and flags["head"].metavar == "HEAD"
    assert flags["max_seq_length"].metavar == "N" and flags["max_seq_length"].default is None
    assert flags["model"].default == "default"
    # the flag refuses what the field refuses, with the field's message
    with pytest.raises(argparse.ArgumentTypeError, match=f"^{BAD_LENGTH}$"):
        flags["max_seq_length"].type("0")
    with pytest.raises(argparse.ArgumentTypeError, match="^unknown head 'pooler': expected one of cls, mean"):
        flags["head"].type("pooler")


def test_the_training_config_shares_the_fields():
    shared = ("model", "template", "n_soft_prompt", "soft_prompt_init")
    assert list(TrainConfig.model_fields)[: len(ModelSettings.model_fields)] == list(
        ModelSettings.model_fields
    )
    for name in shared:
        mine, spec = TrainConfig.model_fields[name], ModelSpec.model_fields[name]
        assert (mine.default, mine.description, mine.annotation) == (
            spec.default,
            spec.description,
            spec.annotation,
        )
        assert f"# {spec.description}" in schema_yaml()  # the README's schema block shows the same help
    # head and max_seq_length: the same type and check, the training run's own default and help
    for name in ("head", "max_seq_length"):
        assert TrainConfig.model_fields[name].annotation == ModelSpec.model_fields[name].annotation
    assert TrainConfig.model_fields["max_seq_length"].default == 32
    assert TrainConfig.model_fields["head"].description.startswith(" | ".join(HEADS))
    assert model_settings() == tuple(n for n in ModelSpec.model_fields if n != "model")


def test_a_bad_value_is_one_message_everywhere(tiny_model_dirs, tmp_path, capsys):
    model = str(tiny_model_dirs["bert"])
    with pytest.raises(ProtoembedError) as spec_error:
        model_spec(max_seq_length=0)
    assert str(spec_error.value) == BAD_LENGTH
    for call in (
        lambda: protoembed.load(model, max_seq_length=0),
        lambda: load_export(tmp_path / "no-export", max_seq_length=0),
        lambda: protoembed.evaluate(model, tasks=["STS-B"], max_seq_length=0),
    ):
        with pytest.raises(ProtoembedError) as err:
            call()
        assert str(err.value) == BAD_LENGTH
    # the command line: argparse's usage, then the same message on one line
    text = tmp_path / "in.txt"
    text.write_text("hello\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        main(["encode", str(text), "-o", str(tmp_path / "v.npy"), "--model", model, "--max-seq-length", "0"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(f"--max-seq-length: {BAD_LENGTH}")
    # a training config: the file and the key, then what the field says
    config = tmp_path / "bad.yaml"
    config.write_text(
        "objective: {name: simcse}\ndata: {corpus: c.txt}\nmax_seq_length: 0\n", encoding="utf-8"
    )
    with pytest.raises(ProtoembedError) as err:
        load_config(config)
    assert (
        str(err.value)
        == f"{config}: config key 'max_seq_length': {BAD_LENGTH.removeprefix('max_seq_length ')}"
    )


def test_unknown_settings_and_values_are_refused_by_name(tiny_model_dirs):
    model = str(tiny_model_dirs["bert"])
    with pytest.raises(
        ProtoembedError, match="^unknown model setting 'max_len': expected one of model, head"
    ):
        protoembed.load(model, max_len=8)
    with pytest.raises(ProtoembedError, match="^unknown runtime 'tf': expected one of auto, torch"):
        protoembed.load(model, runtime="tf")
    with pytest.raises(ProtoembedError, match="^unknown precision 'fp8'"):
        protoembed.evaluate(model, tasks=["STS-B"], precision="fp8")
    with pytest.raises(ProtoembedError, match="^soft_prompt_init expected uniform or template, got 'zeros'"):
        protoembed.load(model, head="soft_prompt", soft_prompt_init="zeros")
    spec = model_spec(model=Path(model), head="mean", max_seq_length=8)
    assert spec.model == model and spec.settings()["max_seq_length"] == 8
