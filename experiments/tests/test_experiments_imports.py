"""The studies in experiments/ use protoembed through its public API only: ``protoembed`` itself, the names
of ``protoembed.__all__`` and, for the few scripts of :data:`INTERNAL_IMPORTS`, the internal modules named
there with the reason. Checked on the source (``ast``): nothing is imported to check it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import protoembed

EXPERIMENTS = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(EXPERIMENTS.glob("*.py"))
PUBLIC = frozenset(protoembed.__all__)

#: The only internal imports of experiments/: script -> (the protoembed modules it may import, why).
#: Each is a diagnostic of the trainer's inner parts, which the public API deliberately does not expose
#: (the documentation cites them by these paths).
INTERNAL_IMPORTS: dict[str, tuple[frozenset[str], str]] = {
    "cross_encoder_curve.py": (
        frozenset(
            {
                "protoembed.training.checkpoint",
                "protoembed.training.components",
                "protoembed.training.trainer",
            }
        ),
        "trains in its own process with an evaluator of its own (the cross-encoder's dev score and its "
        "encoder's [CLS] dev score at every evaluation), which the trainer takes but the CLI does not; "
        "reads the step of an interrupted run's checkpoint to keep the curve's points up to it",
    ),
    "duplicates.py": (
        frozenset({"protoembed.training.components", "protoembed.training.samplers"}),
        "counts the repeated texts of the examples the trainer reads and the batches its samplers make",
    ),
    "own_pairs_st.py": (
        frozenset(
            {
                "protoembed.model.backbones",
                "protoembed.data.benchmarks.beir",
                "protoembed.data.paths",
                "protoembed.data.training.examples",
                "protoembed.core.threads",
                "protoembed.training.config",
                "protoembed.training.samplers",
            }
        ),
        "trains protoembed's run with sentence-transformers (the study's anchor): it must read the config as "
        "`protoembed train` reads it (base files, --set), the model folder it resolves, a config's paths as it "
        "finds them, the dev folder as its retrieval suite reads it, count the batches its sampler makes, and set the process up as its command "
        "line does",
    ),
    "own_pairs_story.py": (
        frozenset({"protoembed.data.benchmarks.beir"}),
        "reads a retrieval folder's split as protoembed's retrieval suite reads it",
    ),
    "records.py": (
        frozenset({"protoembed.model.precision"}),
        "names the CPU in each record's environment as the benchmarks do (its model and the features that "
        "decide its speed), the studies' records being made across sessions on different CPUs",
    ),
    "smaller_vectors_report.py": (
        frozenset({"protoembed.model.quantize"}),
        "states each vector type's bytes per vector as protoembed stores them (bytes_per_vector)",
    ),
    "step_rerun.py": (
        frozenset({"protoembed.training.config_models"}),
        "names the training step's current defaults (the training config's fields) beside the settings a "
        "study's old records were made with",
    ),
    "precision_check.py": (
        frozenset({"protoembed.training.components"}),
        "runs one batch through an objective built as the trainer builds it, in fp32 and under bf16",
    ),
}


def private_imports(source: str, filename: str = "<source>") -> list[tuple[int, str, str]]:
    """``(line, module, name)`` of every protoembed name ``source`` reaches that is not public: an
    ``import protoembed.<module>``, a ``from protoembed.<module> import ...``, a ``from protoembed import
    X`` of an ``X`` outside ``__all__``, or an attribute ``protoembed.X`` (of any name ``import
    protoembed`` bound) outside it. ``name`` is ``"*"`` for a whole module."""
    tree = ast.parse(source, filename)
    aliases = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == "protoembed"
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, "*") for a in node.names if a.name.startswith("protoembed.")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith("protoembed."):
                found += [(node.lineno, node.module, a.name) for a in node.names]
            elif node.module == "protoembed":
                found += [(node.lineno, "protoembed", a.name) for a in node.names if a.name not in PUBLIC]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr not in PUBLIC
        ):
            found.append((node.lineno, "protoembed", node.attr))
    return sorted(found)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_a_study_imports_only_the_public_api(script: Path) -> None:
    allowed, _ = INTERNAL_IMPORTS.get(script.name, (frozenset(), ""))
    found = private_imports(script.read_text(encoding="utf-8"), str(script))
    outside = [
        f"{script.name}:{line}: {module}.{name}" for line, module, name in found if module not in allowed
    ]
    assert not outside, (
        "internal protoembed names (use protoembed.__all__, or say why in INTERNAL_IMPORTS):\n"
        + "\n".join(outside)
    )


def test_every_allowed_internal_import_is_still_used() -> None:
    """An entry of :data:`INTERNAL_IMPORTS` that its script no longer needs is to go."""
    for script, (allowed, reason) in INTERNAL_IMPORTS.items():
        used = {
            module for _, module, _ in private_imports((EXPERIMENTS / script).read_text(encoding="utf-8"))
        }
        assert used == allowed and reason, script


def test_the_check_finds_each_way_to_reach_an_internal_name() -> None:
    source = (
        "import protoembed\n"
        "import protoembed as pe\n"
        "import protoembed.training\n"
        "from protoembed.outputs.io import write_atomic\n"
        "from protoembed import load, run_layout, cli\n"
        "from . import records\n"
        "protoembed.load('default')\n"
        "pe.evaluation.sts\n"
        "protoembed.report.load_results\n"
    )
    assert private_imports(source) == [
        (3, "protoembed.training", "*"),
        (4, "protoembed.outputs.io", "write_atomic"),
        (5, "protoembed", "cli"),
        (8, "protoembed", "evaluation"),
        (9, "protoembed", "report"),
    ]


def test_every_public_name_resolves() -> None:
    """``protoembed.__all__`` names what ``protoembed`` gives (each imported on first use)."""
    for name in protoembed.__all__:
        assert getattr(protoembed, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'io'"):
        protoembed.__getattr__("io")
