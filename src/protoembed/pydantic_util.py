"""Strict pydantic models with one-line errors: shared by the training config and the objective options.

Models built on :data:`STRICT` reject unknown keys (``extra="forbid"``) and check values strictly (``1``
is not ``true``, ``1.5`` is not an integer), except that a :data:`Number` accepts a numeric string, since
YAML 1.1 reads ``1e-5`` (written without a dot) as a string.

:func:`problem` turns one pydantic error into the end of a one-line message (``must be at least 1, got
0``) and :func:`first_error` picks the error reported; the callers put the key and the file in front.
Nothing here imports torch.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails


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
