"""Strict pydantic models with one-line errors: shared by the training config and the objective options.

Models built on :data:`STRICT` reject unknown keys (``extra="forbid"``) and check values strictly (``1``
is not ``true``, ``1.5`` is not an integer), except that a :data:`Number` accepts a numeric string, since
YAML 1.1 reads ``1e-5`` (written without a dot) as a string.

:func:`problem` turns one pydantic error into the end of a one-line message (``must be at least 1, got
0``) and :func:`first_error` picks the error reported; the callers put the key and the file in front.
A validator whose error is a whole sentence (``unknown head 'x': expected one of ...``) raises
:class:`WholeMessage` (:func:`checked` wraps a check that raises :class:`ProtoembedError`).
:func:`check_options` makes a model from keyword values with those one-line errors; :class:`Flag` says how
a field shows on the command line (``protoembed.commands.common.add_option_flags`` makes the flags).
Nothing here imports torch.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from protoembed.core.errors import ProtoembedError


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


def _text(value: Any) -> Any:
    """A number or a path given where a name is expected (``model: 123``) as text; else unchanged."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


#: A non-empty name; a number or a path is read as its text.
Name = Annotated[str, BeforeValidator(_text), Field(min_length=1)]
#: A non-empty string, or ``None``.
OptionalText = Annotated[str, Field(min_length=1)] | None

#: Model settings shared by the config sections and the objective options.
STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class WholeMessage(ValueError):
    """A validator's error whose text is a whole one-line message naming the value (``unknown head 'x':
    expected one of ...``): reported as it is, without the key in front."""


def checked(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A pydantic validator (for ``AfterValidator``) from ``check(value)``, which raises
    :class:`ProtoembedError`: ``None`` passes, else the value is checked and returned unchanged, and the
    check's message becomes a :class:`WholeMessage`."""

    def validate(value: Any) -> Any:
        if value is not None:
            try:
                check(value)
            except ProtoembedError as err:
                raise WholeMessage(str(err)) from None
        return value

    return validate


@dataclass(frozen=True)
class Flag:
    """How a model's field shows on the command line (put it in the field's ``Annotated``): ``name``
    (default ``--inner-folds`` for ``inner_folds``), ``metavar``, ``choices`` and ``help`` (read when
    the parser is built, so that registry entries added later are included; ``help`` follows the
    field's description), and ``show_default`` (``(default: X)`` after the help)."""

    name: str | None = None
    metavar: str | None = None
    choices: Callable[[], Sequence[str]] | None = None
    help: Callable[[], str] | None = None
    show_default: bool = True


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


def message(err: ValidationError, where: str = "") -> str:
    """The one-line message of the first error of ``err``: ``where``, then the field's dotted name and
    what is wrong (``max_seq_length must be a positive number of tokens, got 0``), or the whole message
    of a :class:`WholeMessage`."""
    loc, error = first_error(err)
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, WholeMessage):
        return f"{where}{cause}"
    return f"{where}{'.'.join(str(part) for part in loc)} {problem(error)}"


Model = TypeVar("Model", bound=BaseModel)


def check_options(model: type[Model], values: Mapping[str, Any], where: str = "") -> Model:
    """``model`` made from ``values``; the first invalid value is a one-line :class:`ProtoembedError`
    (``where`` then ``folds must be at least 2, got 1``: :func:`message`)."""
    try:
        return model(**values)
    except ValidationError as err:
        raise ProtoembedError(message(err, where)) from None
