"""The objective registry and every registered objective's options, without torch: a config is
validated before torch is imported.

:data:`REGISTRY` is the one table of objectives: registry name -> :class:`Registered`, the objective's
class as ``"module:Class"`` (imported on first use, torch) and its options model. Everything else is
derived from it: :data:`OPTIONS` and :func:`options_class` here, :data:`~protoembed.objectives.plan.CLASSES`
and :func:`~protoembed.objectives.plan.objective_class` in :mod:`protoembed.objectives.plan`. A new objective
is its file (the class, with ``Options`` set to its options model) plus one line of :data:`REGISTRY`; an
options model of its own, when it has options beyond those of a model here, is declared in this module.

Each objective's ``Options`` (:attr:`protoembed.objectives.base.Objective.Options`) is declared here and
imported by the objective's module, so :func:`options_class` finds the options of an objective by its
registry name without importing the objective (and torch, transformers, sentence-transformers): a config
error is reported in a fraction of a second. Each model also declares the objective's default head and
columns, and how an option changes them (ConPVP's ``anchor: manual`` trains head ``mask``; a cross-encoder
with an explicit ``task`` needs that task's gold column), so that a run is planned from its options alone
(:func:`protoembed.objectives.plan.plan_objective`). A test checks that every registered class declares
the options model of its entry.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

from pydantic import Field, field_validator

from protoembed.data.examples import ColumnSpec
from protoembed.errors import ProtoembedError
from protoembed.objectives.options import ContrastiveOptions, MLPMode, ObjectiveOptions
from protoembed.prompts import Template
from protoembed.pydantic_util import PositiveNumber

if TYPE_CHECKING:
    from protoembed.objectives.base import Objective

#: The gold column each cross-encoder task reads.
GOLD_COLUMNS = {"regression": "score", "classification": "label"}


class ConPVPOptions(ContrastiveOptions):
    """ConPVP's options (see :class:`ConPVP`)."""

    default_head: ClassVar[str] = "soft_prompt"

    templates: str = Field("paper", description="T+ / T- template sets: paper | official | a template file")
    denoise: Literal["none", "attention_mask"] = Field(
        "none",
        description="none (the paper) | attention_mask (the authors' code: template-only pass subtracted)",
    )
    anchor: Literal["soft", "manual"] = Field(
        "soft", description="soft prompt anchor | manual: a mask head's discrete template (w/ manual)"
    )
    negative_prototypes: bool = Field(True, description="false = ablation w/o c-")
    prototypes: bool = Field(True, description="false = ablation w/o c+ & c- (SimCSE-style second view)")
    seed: Annotated[int, Field(ge=0)] = Field(
        0, description="template draws (default in training: training.seed)"
    )

    def trained_head(self) -> str:
        """``soft_prompt``; the ``w/ manual`` ablation (``anchor: manual``) reads a discrete template: ``mask``."""
        return "mask" if self.anchor == "manual" else self.default_head


class PromptBERTOptions(ContrastiveOptions):
    """PromptBERT's options (see :class:`PromptBERT`)."""

    default_head: ClassVar[str] = "mask"

    second_template: str | None = Field(
        None,
        description="template of the second view (default: the other template of the PromptBERT authors' "
        "pair for the backbone family)",
    )
    denoise: bool = Field(True, description="template denoising (PromptBERT Eq. 3), in training only")

    @field_validator("second_template")
    @classmethod
    def _template(cls, text: str | None) -> str | None:
        if text is None:
            return None
        try:
            Template(text)
        except ProtoembedError as err:
            raise ValueError(str(err)) from None
        return text


class SupervisedSimCSEOptions(ContrastiveOptions):
    """Options of :class:`SupervisedSimCSE`: those of unsupervised SimCSE, the MLP kept by default."""

    columns: ClassVar[ColumnSpec] = ("anchor", "positive")

    mlp: MLPMode = Field(
        "keep",
        description="Linear+Tanh on the pooled vectors: in training only | also at evaluation (supervised "
        "SimCSE's setting) | never",
    )


class CosineRegressionOptions(ObjectiveOptions):
    """Options of :class:`CosineRegression`."""

    default_head: ClassVar[str] = "mean"
    columns: ClassVar[ColumnSpec] = ("sentence1", "sentence2", "score")

    score_scale: PositiveNumber = Field(
        5.0, description="the gold score is divided by this (STS-B and SICK scores lie in [0, 5])"
    )


class NLISoftmaxOptions(ObjectiveOptions):
    """Options of :class:`NLISoftmax`."""

    default_head: ClassVar[str] = "mean"
    columns: ClassVar[ColumnSpec] = ("sentence1", "sentence2", "label")

    multiplication: bool = Field(
        False,
        description="append u*v to the classifier input [u; v; |u-v|] (off in SBERT; "
        "sentence-transformers' concatenation_sent_multiplication)",
    )


class CrossEncoderOptions(ObjectiveOptions):
    """Options of :class:`CrossEncoderObjective`."""

    columns: ClassVar[ColumnSpec] = ("sentence1", "sentence2", ("score", "label"))

    task: Literal["auto", "regression", "classification"] = Field(
        "auto",
        description="regression on score (GLUE STS-B: MSE) | classification of the NLI label (GLUE MNLI: "
        "cross-entropy) | auto: regression if the data has a score column, else classification",
    )
    loss: Literal["mse", "bce"] = Field(
        "mse",
        description="the regression loss: mse on the raw 0-5 score (GLUE STS-B) | bce: binary "
        "cross-entropy with logits on score/5 (sentence-transformers' STS-B cross-encoder recipe)",
    )

    def needed_columns(self) -> ColumnSpec:
        """An explicit task needs its own gold column (``score`` or ``label``), ``auto`` either."""
        if self.task not in GOLD_COLUMNS:
            return self.columns
        return ("sentence1", "sentence2", GOLD_COLUMNS[self.task])


@dataclass(frozen=True)
class Registered:
    """One registered objective: where its class lives and its options model.

    Attributes:
        target: the objective class as ``"package.module:ClassName"`` (its module imports torch, so it is
            imported only by :meth:`load`).
        options: the objective's options model (torch-free; the class's ``Options`` must be this model).
    """

    target: str
    options: type[ObjectiveOptions]

    def __post_init__(self) -> None:
        """Reject a ``target`` that is not ``module:Class``."""
        module, _, name = self.target.partition(":")
        if not module or not name.isidentifier():
            raise ValueError(f"objective target {self.target!r} is not 'package.module:ClassName'")

    @property
    def module(self) -> str:
        """The dotted module of the objective class."""
        return self.target.partition(":")[0]

    @property
    def class_name(self) -> str:
        """The objective class's name in :attr:`module`."""
        return self.target.partition(":")[2]

    def load(self) -> type[Objective]:
        """The objective class (imports :attr:`module`: torch)."""
        return getattr(importlib.import_module(self.module), self.class_name)


#: registry name -> the objective's class and options model: the one table of objectives (a new one is one
#: line here); :data:`OPTIONS` and :data:`protoembed.objectives.plan.CLASSES` are derived from it, in its order.
REGISTRY: dict[str, Registered] = {
    "simcse": Registered("protoembed.objectives.simcse:SimCSE", ContrastiveOptions),
    "promptbert": Registered("protoembed.objectives.promptbert:PromptBERT", PromptBERTOptions),
    "conpvp": Registered("protoembed.objectives.conpvp:ConPVP", ConPVPOptions),
    "cross_encoder": Registered(
        "protoembed.objectives.cross_encoder:CrossEncoderObjective", CrossEncoderOptions
    ),
    # SBERT on STS-B
    "cosine_regression": Registered(
        "protoembed.objectives.cosine_regression:CosineRegression", CosineRegressionOptions
    ),
    # SBERT, NLI classification
    "nli_softmax": Registered("protoembed.objectives.nli_softmax:NLISoftmax", NLISoftmaxOptions),
    # supervised SimCSE
    "simcse_sup": Registered("protoembed.objectives.simcse_sup:SupervisedSimCSE", SupervisedSimCSEOptions),
}

#: registry name -> options model, for every objective of :data:`REGISTRY` (derived from it)
OPTIONS: dict[str, type[ObjectiveOptions]] = {name: entry.options for name, entry in REGISTRY.items()}


def registered(name: str) -> Registered:
    """The registry entry of the objective ``name``.

    Raises:
        ProtoembedError: ``name`` is not registered (one line listing the known ones).
    """
    try:
        return REGISTRY[name]
    except KeyError:
        raise ProtoembedError(f"unknown objective {name!r}: expected one of {', '.join(REGISTRY)}") from None


def options_class(name: str) -> type[ObjectiveOptions]:
    """The options model of the registered objective ``name``; a one-line error lists the known ones."""
    return registered(name).options
