"""The training config schema as commented YAML, generated from the pydantic models (configs/README.md).

``python -c "from protoembed.training.schema import schema_yaml; print(schema_yaml(), end='')"`` prints
it; a test checks that the README shows it verbatim.
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import BaseModel

from protoembed.training.config_models import ObjectiveConfig, StageConfig, StagedConfig, TrainConfig

_COMMENT_AT = 30


def _yaml_value(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=1000).strip().removesuffix("...").strip()


def _line(indent: int, text: str, comment: str) -> str:
    text = " " * indent + text
    return f"{text.ljust(_COMMENT_AT - 1)} # {comment}" if comment else text


def _fields(model: type[BaseModel], indent: int, skip: tuple[str, ...] = ()) -> list[str]:
    lines = []
    for name, field in model.model_fields.items():
        if name in skip:
            continue
        annotation = field.annotation
        if annotation is ObjectiveConfig:
            lines.append("objective:")  # schema_yaml writes this section
            continue
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            lines.append(_line(indent, f"{name}:", field.description or ""))
            lines += _fields(annotation, indent + 2)
            continue
        # required keys, and keys best shown with a typical value, show their example
        value = field.examples[0] if field.examples else field.get_default(call_default_factory=True)
        lines.append(_line(indent, f"{name}: {_yaml_value(value)}", field.description or ""))
    return lines


def schema_yaml() -> str:
    """The config schema as commented YAML (every key, its default and meaning); configs/README.md shows it."""
    from protoembed.objectives.registry import (
        MATRYOSHKA,
        REGISTRY,
        ContrastiveOptions,
        EmbeddingOptions,
        MatryoshkaOptions,
        matryoshka_objectives,
    )

    lines = [_line(0, "base: other.yaml", "or a list; merged first, in order, paths relative to this file")]
    for line in _fields(TrainConfig, 0):
        if not line.startswith("objective:"):
            lines.append(line)
            continue
        lines.append(_line(0, "objective:", "the objective; every other key is one of its options"))
        lines.append(_line(2, "name: conpvp", ObjectiveConfig.model_fields["name"].description or ""))
        lines.append(f"  # {', '.join(matryoshka_objectives())}:")
        lines.append(_line(2, f"{MATRYOSHKA}:", EmbeddingOptions.model_fields[MATRYOSHKA].description or ""))
        lines += _fields(MatryoshkaOptions, 4)
        contrastive = [n for n, entry in REGISTRY.items() if entry.grad_cache]
        lines.append(f"  # {', '.join(contrastive)}:")
        lines += _fields(ContrastiveOptions, 2, skip=(MATRYOSHKA,))
        shared = tuple(ContrastiveOptions.model_fields)
        for name, entry in REGISTRY.items():
            model = entry.options
            base = ContrastiveOptions.model_fields
            own = model.model_fields  # a shared option with another default is listed as its own
            skip = (
                tuple(f for f in shared if own[f].default == base[f].default)
                if name in contrastive
                else (MATRYOSHKA,)
            )
            if set(model.model_fields) - set(skip):
                lines.append(f"  # {name} only:")
                lines += _fields(model, 2, skip=skip)
    stages = StagedConfig.model_fields["stages"].description or ""
    lines.append(_line(0, "stages:", f"{stages}; the keys above are shared, a stage sets its own on top"))
    name = StageConfig.model_fields["name"]
    lines.append(_line(2, f"- name: {_yaml_value(name.examples[0])}", name.description or ""))
    return "\n".join(lines) + "\n"
