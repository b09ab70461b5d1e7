"""The objective registry: the one table of objectives, their options models, and what is derived
from it. No torch here: a config is validated (and a run planned) before torch is imported.

:data:`REGISTRY` (a :class:`~protoembed.core.registry.Registry`) maps each registry name to a
:class:`Registered` entry: the objective's class as
``"module:Class"`` (imported on first use, with torch, by :func:`objective_class`) and its options model.
Everything else reads this table: the options of a name (:func:`options_class`), the class's ``Options``
(set from its entry when the class is defined, :class:`protoembed.objectives.base.Objective`), the
objectives with a GradCache step (:func:`grad_cache_objectives`: those whose options are
:class:`ContrastiveOptions`), the "Options:" section of each objective's docstring
(:func:`options_doc`), the config schema and ``configs/README.md`` (:mod:`protoembed.training.schema`)
and the config's descriptions of ``head`` (each objective's default), ``objective`` and
``training.mini_batch_size``.

A new objective is its file (the class) plus one line of :data:`REGISTRY` (its name, its class, its
options model: the class takes its ``name`` and ``Options`` from that line); an options model of its own,
when it has options beyond those of a model here, is declared next to that line.

Each options model declares its fields (type, default, allowed values, the one description that the
docstrings and the configs README show), the objective's default head and columns, and how an option
changes them (ConPVP's ``anchor: manual`` trains head ``mask``; a cross-encoder with an explicit ``task``
needs that task's gold column), so that a run is planned from its options alone
(:func:`protoembed.objectives.plan.plan_objective`). Unknown keys are errors and values are checked
strictly (:data:`protoembed.core.pydantic_util.STRICT`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from protoembed.core.errors import ProtoembedError
from protoembed.core.pydantic_util import STRICT, PositiveNumber, first_error, problem
from protoembed.core.registry import Registry
from protoembed.data.training.examples import ColumnSpec
from protoembed.inputs.templates import Template

#: SimCSE's MLP on the pooled vector: in training only, also at evaluation, or not at all.
MLPMode = Literal["train", "keep", "none"]


class OptionError(ProtoembedError):
    """A bad objective option; ``key`` is the option's name."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


class ObjectiveOptions(BaseModel):
    """Base of an objective's options; :meth:`parse` validates a dict with one-line errors.

    A subclass also sets :attr:`default_head` and :attr:`columns` and overrides :meth:`trained_head` /
    :meth:`needed_columns` where an option changes them.
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
        if MATRYOSHKA in options and MATRYOSHKA not in cls.model_fields:
            raise OptionError(
                f"objective {objective!r}: option {MATRYOSHKA!r}: {objective} compares no embeddings to cut "
                f"(Matryoshka training wraps {', '.join(matryoshka_objectives())})",
                MATRYOSHKA,
            )
        try:
            return cls.model_validate(options)
        except ValidationError as err:
            extra = [e for e in err.errors(include_url=False) if e["type"] == "extra_forbidden"]
            loc, error = first_error(err)
            if extra:  # an unknown key first: the keys it lacks may be the ones misspelt
                loc, error = tuple(p for p in extra[0]["loc"] if isinstance(p, (int, str))), extra[0]
            key = ".".join(map(str, loc)) if loc else "?"
            if error["type"] == "extra_forbidden":
                known = ", ".join(sorted(cls.model_fields)) or "none"
                if len(loc) > 1:  # a key of a section (matryoshka.dimensions)
                    section = cls.model_fields[str(loc[0])].annotation
                    known = ", ".join(_section_model(section).model_fields) if section else known
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


#: The option that wraps an objective in Matryoshka training (:class:`MatryoshkaOptions`).
MATRYOSHKA = "matryoshka"

#: ``training.padding``: how a step's columns meet the backbone (:func:`protoembed.objectives.views.segments`).
PADDINGS = ("auto", "column", "joint")

#: What one more forward of a step costs ``auto``, in padded tokens (a row of ``w`` tokens costs ``w``):
#: the fixed part of a forward (its kernels' calls, smaller matrix products). Measured on a 2-core CPU
#: (AVX512-BF16) with the own-pairs GoogleNews step in bf16 (64 titles, snippets and mined negatives, 32
#: tokens), 12 steps, best of 3: 256 (3 forwards a step) took 15.9 s against 17.7 s a forward per column
#: and 22.2 s joint; 512 and 1024 (2 forwards) 17.6-18.0 s; in a second run 128, 64 and 32 (4-9
#: forwards) 18.6-19.2 s against 17.8 s at 256 (docs/training/scale.md). A GPU's launches would want a
#: larger price: not measured.
FORWARD_TOKENS = 256


class MatryoshkaOptions(BaseModel):
    """``matryoshka:`` of an objective that compares embeddings: the loss is the weighted sum of the
    objective's loss on the embeddings cut to each of ``dims`` (Kusupati et al., 2022; sentence-transformers'
    ``MatryoshkaLoss``: :mod:`protoembed.objectives.matryoshka`).

    ``dims`` are kept largest first, each with its weight (as ``MatryoshkaLoss`` sorts them); a dimension
    twice is an error. Whether each fits the model is checked where its size is known
    (:func:`check_dims`)."""

    model_config = STRICT

    dims: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=1)] = Field(
        description="the sizes d whose first-d cut of the embedding is trained, each at most the model's "
        "embedding size (kept largest first)",
        examples=[[384, 256, 128, 64, 32]],
    )
    weights: Annotated[list[PositiveNumber], Field(min_length=1)] | None = Field(
        None,
        description="the weight of each dimension's loss, in the order of dims as written (default all 1)",
    )
    n_dims_per_step: Annotated[int, Field(ge=1)] | None = Field(
        None,
        description="a random sample of this many dims per step (sentence-transformers' n_dims_per_step); "
        "null = every dim every step",
    )

    @model_validator(mode="after")
    def _sorted(self) -> MatryoshkaOptions:
        """Distinct dims, one weight each, sorted largest first with their weights."""
        seen = [d for i, d in enumerate(self.dims) if d in self.dims[:i]]
        if seen:
            raise ValueError(f"dims must be distinct, got {seen[0]} twice in {self.dims}")
        weights = self.weights if self.weights is not None else [1.0] * len(self.dims)
        if len(weights) != len(self.dims):
            raise ValueError(
                f"weights must have one weight per dim: {len(self.dims)} dims {self.dims}, "
                f"{len(weights)} weights"
            )
        pairs = sorted(zip(self.dims, weights), key=lambda pair: -pair[0])
        object.__setattr__(self, "dims", [d for d, _ in pairs])
        object.__setattr__(self, "weights", [w for _, w in pairs])
        return self

    def check_dims(self, size: int, where: str) -> None:
        """One-line error unless every dim is at most ``size``, the embedding size of the model ``where``
        names (e.g. ``base model default (hidden_size 384 in .../config.json)``)."""
        above = [d for d in self.dims if d > size]
        if above:
            raise ProtoembedError(
                f"objective option matryoshka.dims: {above[0]} is above the embedding size of {where}: "
                f"expected dims of at most {size}, got {self.dims}"
            )


class EmbeddingOptions(ObjectiveOptions):
    """Options of an objective that compares embeddings: it may be trained Matryoshka-style."""

    matryoshka: MatryoshkaOptions | None = Field(
        None,
        description="Matryoshka training: the loss also on the embeddings cut to each of dims, weighted "
        "(null = off)",
    )


class ContrastiveOptions(EmbeddingOptions):
    """Options every contrastive objective here has: the temperature and the training MLP (unsupervised
    SimCSE's own: head ``cls``, a ``text`` column). An objective with these options (or a subclass of
    them) is a :class:`~protoembed.objectives.base.ContrastiveObjective`, with a GradCache step."""

    temperature: PositiveNumber = Field(0.05, description="tau, the softmax temperature of InfoNCE")
    mlp: MLPMode = Field(
        "train",
        description="Linear+Tanh on the pooled vectors: in training only | also at evaluation | never",
    )


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
        0, description="template draws, offset by the process rank (default in training: training.seed)"
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


class CosineRegressionOptions(EmbeddingOptions):
    """Options of :class:`CosineRegression`."""

    default_head: ClassVar[str] = "mean"
    columns: ClassVar[ColumnSpec] = ("sentence1", "sentence2", "score")

    score_scale: PositiveNumber = Field(
        5.0, description="the gold score is divided by this (STS-B and SICK scores lie in [0, 5])"
    )


class NLISoftmaxOptions(EmbeddingOptions):
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
        options: the objective's options model (torch-free); the class's ``Options`` is set to it.
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

    @property
    def grad_cache(self) -> bool:
        """Whether the objective has a GradCache step (``training.mini_batch_size``): its options are
        :class:`ContrastiveOptions`, so its class is a ``ContrastiveObjective``."""
        return issubclass(self.options, ContrastiveOptions)

    def load(self) -> type:
        """The objective class, a :class:`~protoembed.objectives.base.Objective` (imports :attr:`module`:
        torch; not named in the signature, since that module imports this one)."""
        return getattr(importlib.import_module(self.module), self.class_name)


#: registry name -> the objective's class and options model: the one table of objectives (a new one is one
#: line here).
REGISTRY: Registry[Registered] = Registry(
    "objective",
    {
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
        "simcse_sup": Registered(
            "protoembed.objectives.simcse_sup:SupervisedSimCSE", SupervisedSimCSEOptions
        ),
    },
)


def registered(name: str) -> Registered:
    """The registry entry of the objective ``name``.

    Raises:
        ProtoembedError: ``name`` is not registered (one line listing the known ones).
    """
    return REGISTRY.lookup(name)


def options_class(name: str) -> type[ObjectiveOptions]:
    """The options model of the registered objective ``name``; a one-line error lists the known ones."""
    return registered(name).options


def objective_class(name: str) -> type:
    """The registered objective class ``name`` (imports its module: torch); a one-line error lists the
    known ones."""
    return registered(name).load()


def grad_cache_objectives() -> tuple[str, ...]:
    """The registry names of the objectives with a GradCache step, in registry order."""
    return tuple(name for name, entry in REGISTRY.items() if entry.grad_cache)


def matryoshka_objectives() -> tuple[str, ...]:
    """The registry names of the objectives that take a ``matryoshka`` option (those comparing embeddings)."""
    return tuple(name for name, entry in REGISTRY.items() if MATRYOSHKA in entry.options.model_fields)


def _section_model(annotation: Any) -> type[BaseModel]:
    """The model of a section option (``MatryoshkaOptions | None`` -> ``MatryoshkaOptions``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next(
        a for a in getattr(annotation, "__args__", ()) if isinstance(a, type) and issubclass(a, BaseModel)
    )


def options_doc(model: type[ObjectiveOptions]) -> str:
    """The "Options:" section of an objective's docstring, one line per field of ``model``:
    ``name (default): description`` (the descriptions the configs README shows)."""
    lines = ["Options (the ``objective:`` keys of a config):"]
    for name, field in model.model_fields.items():
        default = field.get_default(call_default_factory=True)
        shown = "null" if default is None else str(default).lower() if isinstance(default, bool) else default
        lines.append(f"    {name} ({shown}): {field.description or ''}")
    return "\n".join(lines)
