"""Declared options: the pydantic base model of objective options, with one-line errors.

Every objective declares its options as a subclass of :class:`ObjectiveOptions`
(:mod:`protoembed.objectives.option_models`, torch-free; ``SimCSE.Options``, ...): field types, defaults,
allowed values and a description, which the config schema in ``configs/README.md`` is generated from.
The model also says what a run plans from the options before the objective exists: the head it trains
when the config names none (:meth:`ObjectiveOptions.trained_head`) and the columns a batch must have
(:meth:`ObjectiveOptions.needed_columns`); see :mod:`protoembed.objectives.plan`.

Unknown keys are errors and values are checked strictly (:data:`protoembed.pydantic_util.STRICT`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, ValidationError

from protoembed.data.examples import ColumnSpec
from protoembed.errors import ProtoembedError
from protoembed.pydantic_util import STRICT, PositiveNumber, first_error, problem

#: SimCSE's MLP on the pooled vector: in training only, also at evaluation, or not at all.
MLPMode = Literal["train", "keep", "none"]


class OptionError(ProtoembedError):
    """A bad objective option; ``key`` is the option's name."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


class ObjectiveOptions(BaseModel):
    """Base of an objective's options; :meth:`parse` validates a dict with one-line errors.

    A subclass also sets :attr:`default_head` and :attr:`columns` (the objective class reads them from
    here) and overrides :meth:`trained_head` / :meth:`needed_columns` where an option changes them.
    """

    model_config = STRICT

    #: The embedder head the objective trains when the config names none.
    default_head: ClassVar[str] = "cls"
    #: The columns a batch must have; a tuple inside means one of those alternatives.
    columns: ClassVar[ColumnSpec] = ("text",)

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

    def trained_head(self) -> str:
        """The head a run with these options trains when the config names none (:attr:`default_head`)."""
        return self.default_head

    def needed_columns(self) -> ColumnSpec:
        """The columns a run with these options reads (:attr:`columns`)."""
        return self.columns


class ContrastiveOptions(ObjectiveOptions):
    """Options every contrastive objective here has: the temperature and the training MLP (unsupervised
    SimCSE's own: head ``cls``, a ``text`` column)."""

    temperature: PositiveNumber = Field(0.05, description="tau, the softmax temperature of InfoNCE")
    mlp: MLPMode = Field(
        "train",
        description="Linear+Tanh on the pooled vectors: in training only | also at evaluation | never",
    )
