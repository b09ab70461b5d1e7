"""An objective is planned once: plan_objective(name, options) is what config validation, the head, the
data columns and building read (no torch until the objective is built)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import protoembed
from protoembed.core.errors import ProtoembedError
from protoembed.objectives import plan_objective
from protoembed.objectives.registry import (
    REGISTRY,
    ObjectiveOptions,
    OptionError,
    Registered,
    grad_cache_objectives,
    objective_class,
    options_class,
)
from protoembed.training.config import config_from_dict

SECOND = 'This sentence : "<S>" means [MASK] .'
#: (objective, options, head, columns): the head and columns each objective's paper and data format give,
#: for every registered objective and its ablation options.
OLD_PATH = [
    ("simcse", {}, "cls", ("text",)),
    ("simcse", {"mlp": "keep"}, "cls", ("text",)),
    ("simcse", {"mlp": "none", "temperature": 0.1}, "cls", ("text",)),
    ("promptbert", {}, "mask", ("text",)),
    ("promptbert", {"denoise": False}, "mask", ("text",)),
    ("promptbert", {"second_template": SECOND}, "mask", ("text",)),
    ("conpvp", {}, "soft_prompt", ("text",)),
    ("conpvp", {"anchor": "manual"}, "mask", ("text",)),
    ("conpvp", {"anchor": "soft"}, "soft_prompt", ("text",)),
    ("conpvp", {"prototypes": False}, "soft_prompt", ("text",)),
    ("conpvp", {"negative_prototypes": False}, "soft_prompt", ("text",)),
    ("conpvp", {"denoise": "attention_mask"}, "soft_prompt", ("text",)),
    ("conpvp", {"templates": "official", "anchor": "manual", "seed": 3}, "mask", ("text",)),
    ("cross_encoder", {}, "cls", ("sentence1", "sentence2", ("score", "label"))),
    ("cross_encoder", {"task": "auto"}, "cls", ("sentence1", "sentence2", ("score", "label"))),
    ("cross_encoder", {"task": "regression"}, "cls", ("sentence1", "sentence2", "score")),
    ("cross_encoder", {"task": "classification"}, "cls", ("sentence1", "sentence2", "label")),
    ("cross_encoder", {"task": "regression", "loss": "bce"}, "cls", ("sentence1", "sentence2", "score")),
    ("cosine_regression", {}, "mean", ("sentence1", "sentence2", "score")),
    ("cosine_regression", {"score_scale": 1.0}, "mean", ("sentence1", "sentence2", "score")),
    ("nli_softmax", {}, "mean", ("sentence1", "sentence2", "label")),
    ("nli_softmax", {"multiplication": True}, "mean", ("sentence1", "sentence2", "label")),
    ("simcse_sup", {}, "cls", ("anchor", "positive")),
    ("simcse_sup", {"mlp": "train"}, "cls", ("anchor", "positive")),
]

TEXT = ["a man is playing a guitar .", "a woman is slicing an onion .", "the cat sat on the mat ."]
PAIRS = {"sentence1": TEXT, "sentence2": TEXT[::-1]}
BATCHES = {
    "simcse": TEXT,
    "promptbert": TEXT,
    "conpvp": TEXT,
    "cross_encoder": {**PAIRS, "score": [1.0, 2.5, 4.0]},
    "cosine_regression": {**PAIRS, "score": [1.0, 2.5, 4.0]},
    "nli_softmax": {**PAIRS, "label": [0, 1, 2]},
    "simcse_sup": {"anchor": TEXT, "positive": TEXT[::-1]},
}


def _config(name: str, options: dict, **training) -> dict:
    return {
        "objective": {"name": name, **options},
        "data": {"corpus": "corpus.txt"},
        "max_seq_length": 16,
        "training": training,
    }


def test_a_registered_class_takes_its_options_and_docs_from_its_entry():
    """The class named by an entry is the objective of that name; its ``Options`` is the entry's model and
    its docstring lists every option with its default and description; the objectives with a GradCache
    step are exactly the classes with the cached split (the class hierarchy, not the registry)."""
    from protoembed.objectives.cache import CachedObjective

    for name, entry in REGISTRY.items():
        cls = objective_class(name)
        assert (cls.__module__, cls.__name__, cls.name) == (entry.module, entry.class_name, name)
        assert cls.Options is entry.options
        for option, field in entry.options.model_fields.items():
            assert f"{option} (" in cls.__doc__ and field.description in cls.__doc__, (name, option)
    cached = [n for n in REGISTRY if issubclass(objective_class(n), CachedObjective)]
    assert cached == list(grad_cache_objectives())
    assert "simcse" in cached and "cosine_regression" not in cached  # both sides of the split are tested


def test_a_registered_objective_cannot_declare_its_own_name_or_options():
    from protoembed.objectives.base import Objective

    where = {"__module__": "protoembed.objectives.simcse", "__qualname__": "SimCSE"}
    for own in ({"Options": ObjectiveOptions}, {"name": "other"}):
        with pytest.raises(TypeError, match="takes its name and Options from the registry"):
            type("SimCSE", (Objective,), {**where, **own})


def test_a_registry_entry_names_its_class_as_module_colon_class():
    assert Registered("protoembed.objectives.simcse:SimCSE", ObjectiveOptions).class_name == "SimCSE"
    for target in ("protoembed.objectives.simcse.SimCSE", ":SimCSE", "protoembed.objectives.simcse:"):
        with pytest.raises(ValueError, match="is not 'package.module:ClassName'"):
            Registered(target, ObjectiveOptions)
    for lookup in (objective_class, options_class):
        with pytest.raises(ProtoembedError, match="unknown objective 'nope': expected one of simcse, "):
            lookup("nope")


@pytest.mark.parametrize(("name", "options", "head", "columns"), OLD_PATH)
def test_the_plan_gives_the_head_and_columns_each_objective_declares(name, options, head, columns):
    plan = plan_objective(name, options)
    assert (plan.name, plan.head, plan.columns, plan.registered) == (name, head, columns, True)
    # the given options as given, every other one as in the plan without options
    assert plan.options.model_dump() == {**plan_objective(name).options.model_dump(), **options}
    assert plan.given == frozenset(options)
    assert plan.given_options() == options
    # a validated config holds this plan, and the run's parts read it
    cfg = config_from_dict(_config(name, options))
    assert cfg.objective.plan == plan and cfg.objective.options == plan.given_options()

    from protoembed.training.components import head_for

    assert head_for(cfg) == head


def test_planning_and_config_validation_import_no_torch():
    code = (
        "import sys\n"
        "from protoembed.objectives import plan_objective\n"
        "from protoembed.training.config import config_from_dict\n"
        "plan = plan_objective('conpvp', {'anchor': 'manual'})\n"
        "cfg = config_from_dict({'objective': 'cross_encoder', 'data': {'corpus': 'x.txt'}})\n"
        "from protoembed.objectives.registry import grad_cache_objectives\n"
        "assert grad_cache_objectives()\n"
        "print(plan.head, cfg.objective.plan.columns, 'torch' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.split() == ["mask", "('sentence1',", "'sentence2',", "('score',", "'label'))", "False"]


def test_a_run_parses_its_objective_options_once(monkeypatch, tiny_model_dirs, tmp_path):
    """Config validation plans the objective; the head, the data columns and the built objective read
    that plan: the options are parsed once, the class looked up only to build."""
    from protoembed.objectives import plan as plan_module
    from protoembed.training import components, stages

    parsed: list[str] = []
    classes: list[str] = []
    real_parse = ObjectiveOptions.parse.__func__
    real_class = plan_module.objective_class

    def parse(cls, objective, options):
        parsed.append(objective)
        return real_parse(cls, objective, options)

    def objective_class(name):
        classes.append(name)
        return real_class(name)

    monkeypatch.setattr(ObjectiveOptions, "parse", classmethod(parse))
    monkeypatch.setattr(plan_module, "objective_class", objective_class)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXT * 4) + "\n", encoding="utf-8")
    data = _config("conpvp", {"anchor": "manual"}, batch_size=4, seed=11)
    data["data"]["corpus"] = str(corpus)
    cfg = config_from_dict(data)
    assert parsed == ["conpvp"]
    assert components.head_for(cfg) == "mask"
    [examples] = stages._check_data([("only", cfg)])
    assert examples.names == ("text",)
    embedder = protoembed.load(str(tiny_model_dirs["bert"]), head=components.head_for(cfg), device="cpu")
    objective = components.build_objective_from_config(cfg, embedder)
    assert parsed == ["conpvp"] and classes == ["conpvp"]
    assert objective.options.seed == 11 and objective.options.anchor == "manual"  # training.seed filled in


def test_build_uses_the_run_seed_only_for_an_unset_seed_option(tiny_model_dirs):
    embedder = protoembed.load(str(tiny_model_dirs["bert"]), head="soft_prompt", device="cpu")
    assert plan_objective("conpvp").build(embedder, seed=7).options.seed == 7
    assert plan_objective("conpvp", {"seed": 3}).build(embedder, seed=7).options.seed == 3
    assert plan_objective("conpvp").build(embedder).options.seed == 0
    assert plan_objective("conpvp").options.seed == 0  # the plan itself is not changed
    simcse = plan_objective("simcse").build(embedder, seed=7)
    assert "seed" not in simcse.config()


def test_an_objective_takes_parsed_options(tiny_model_dirs):
    embedder = protoembed.load(str(tiny_model_dirs["bert"]), head="mean", device="cpu")
    cls = objective_class("cosine_regression")
    assert cls(embedder).options == cls.Options()
    assert cls(embedder, cls.Options(score_scale=1.0)).options.score_scale == 1.0
    with pytest.raises(TypeError, match="takes its parsed options"):
        cls(embedder, {"score_scale": 1.0})
    with pytest.raises(TypeError, match="takes its parsed options"):
        cls(embedder, options_class("nli_softmax")())


def test_planning_errors_are_the_one_line_option_errors():
    with pytest.raises(
        OptionError, match=r"objective 'simcse': unknown option 'tau' \(known: matryoshka, mlp, temperature\)"
    ):
        plan_objective("simcse", {"tau": 0.1})
    with pytest.raises(ProtoembedError, match="unknown objective 'nope': expected one of simcse, "):
        plan_objective("nope")


def test_an_objective_outside_the_registry_has_no_head_and_no_class():
    plan = plan_objective("standin", {}, options_model=ObjectiveOptions)
    assert (plan.head, plan.columns, plan.registered) == (None, ("text",), False)
    with pytest.raises(ProtoembedError, match="'standin' is not registered"):
        _ = plan.objective_class
    cfg = config_from_dict(_config("standin", {}), objectives={"standin": ObjectiveOptions})
    from protoembed.training.components import head_for

    assert cfg.objective.plan == plan and head_for(cfg) is None


def test_a_new_objective_is_its_file_plus_one_registry_line(monkeypatch, tmp_path, tiny_model_dirs):
    """An objective written as one module and registered by one REGISTRY entry is planned, validated in a
    config, listed by the schema (its own options) and among the GradCache objectives, documented and
    built, with nothing else edited."""
    from pydantic import Field

    from protoembed.objectives.registry import ContrastiveOptions
    from protoembed.training.schema import schema_yaml

    (tmp_path / "echo_objective.py").write_text(
        "from protoembed.objectives.simcse import SimCSE\n\n\n"
        "class Echo(SimCSE):\n"
        '    """SimCSE scaled by a weight."""\n\n'
        "    def loss(self, states, batch):\n"
        "        return self.options.weight * super().loss(states, batch)\n",
        encoding="utf-8",
    )

    class EchoOptions(ContrastiveOptions):
        weight: float = Field(2.0, description="what the SimCSE loss is multiplied by")

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(REGISTRY, "echo", Registered("echo_objective:Echo", EchoOptions))
    plan = plan_objective("echo", {"weight": 3.0})
    assert (plan.head, plan.columns, plan.options.weight) == ("cls", ("text",), 3.0)
    cfg = config_from_dict(_config("echo", {"weight": 0.5}))
    assert cfg.objective.plan.options.weight == 0.5 and "echo" in grad_cache_objectives()
    assert "  # echo only:\n  weight: 2.0 " in schema_yaml()
    cls = objective_class("echo")
    assert cls.Options is EchoOptions and "weight (2.0): what the SimCSE loss is multiplied by" in cls.__doc__
    embedder = protoembed.load(str(tiny_model_dirs["bert"]), head="cls", device="cpu")
    torch.manual_seed(0)
    echo = plan.build(embedder).eval()
    torch.manual_seed(0)
    simcse = plan_objective("simcse").build(embedder).eval()
    with torch.no_grad():
        assert torch.allclose(echo(TEXT), 3.0 * simcse(TEXT))
