"""Declared options: pydantic models for objective options (and the training config), one-line errors.

Every objective declares its options as a subclass of :class:`ObjectiveOptions` next to its class
(``SimCSE.Options``, ...): field types, defaults, allowed values and a description, which the config
schema in ``configs/README.md`` is generated from. Unknown keys are errors (``extra="forbid"``); values are
checked strictly (``1`` is not ``true``, ``1.5`` is not an integer), except that a float field accepts a
numeric string, since YAML 1.1 reads ``1e-5`` (written without a dot) as a string.

:func:`problem` turns one pydantic error into the end of a one-line message (``must be at least 1, got
0``); the config and the objectives put the key and the file in front of it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from protoembed.errors import ProtoembedError


def _number_from_text(value: Any) -> Any:
    """A numeric string as a float (YAML 1.1 reads ``1e-5`` as a string); anything else unchanged."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


#: A finite float; ints and numeric strings are accepted.
Number = Annotated[float, BeforeValidator(_number_from_text)]
#: A finite float > 0.
PositiveNumber = Annotated[float, BeforeValidator(_number_from_text), Field(gt=0)]
#: SimCSE's MLP on the pooled vector: in training only, also at evaluation, or not at all.
MLPMode = Literal["train", "keep", "none"]

#: Model settings shared by the config sections and the objective options.
STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def problem(error: ErrorDetails) -> str:
    """What is wrong with one value, e.g. ``expected a number, got 'fast'`` (no key, no file)."""
    kind, ctx = error["type"], error.get("ctx") or {}
    got = f", got {error.get('input')!r}"
    if kind == "missing":
        return "is required"
    if kind == "bool_type":
        return "expected true or false" + got
    if kind.startswith("int_"):
        return "expected an integer" + got
    if kind == "finite_number":
        return "expected a finite number" + got
    if kind in ("float_type", "float_parsing"):
        return "expected a number" + got
    if kind.startswith("string_"):
        return "expected a non-empty string" + got
    if kind == "literal_error":
        return f"expected {str(ctx.get('expected', '')).replace(chr(39), '')}" + got
    if kind == "greater_than_equal":
        return f"must be at least {ctx['ge']}" + got
    if kind == "greater_than":
        return ("must be a positive number" if ctx["gt"] == 0 else f"must be greater than {ctx['gt']}") + got
    if kind == "less_than_equal":
        return f"must be at most {ctx['le']}" + got
    if kind == "too_short":
        return "must not be empty" + got
    if kind in ("list_type", "model_type", "dict_type", "model_attributes_type"):
        return "expected a " + ("list" if kind == "list_type" else "mapping (section)") + got
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    return error["msg"] + got


def first_error(err: ValidationError) -> tuple[tuple[str | int, ...], ErrorDetails]:
    """The location (field names and list indexes) and details of the first error of ``err``."""
    error = err.errors(include_url=False)[0]
    return tuple(part for part in error["loc"] if isinstance(part, int) or part.isidentifier()), error


class OptionError(ProtoembedError):
    """A bad objective option; ``key`` is the option's name."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


class ObjectiveOptions(BaseModel):
    """Base of an objective's options; :meth:`parse` validates a dict with one-line errors."""

    model_config = STRICT

    @classmethod
    def parse(cls, objective: str, options: dict[str, Any]) -> ObjectiveOptions:
        """Validate ``options`` of objective ``objective``.

        Raises:
            OptionError: ``objective 'conpvp': unknown option 'temprature' (known: ...)`` or
                ``objective 'conpvp': option 'denoise': expected none or attention_mask, got 'x'``.
        """
        try:
            return cls.model_validate(options)
        except ValidationError as err:
            loc, error = first_error(err)
            key = str(loc[0]) if loc else "?"
            if error["type"] == "extra_forbidden":
                known = ", ".join(sorted(cls.model_fields)) or "none"
                raise OptionError(
                    f"objective {objective!r}: unknown option {key!r} (known: {known})", key
                ) from None
            raise OptionError(f"objective {objective!r}: option {key!r}: {problem(error)}", key) from None


class ContrastiveOptions(ObjectiveOptions):
    """Options every contrastive objective here has: the temperature and the training MLP."""

    temperature: PositiveNumber = Field(0.05, description="tau, the softmax temperature of InfoNCE")
    mlp: MLPMode = Field(
        "train",
        description="Linear+Tanh on the pooled vectors: in training only | also at evaluation | never",
    )
