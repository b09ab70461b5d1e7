"""The model settings a user gives, each once: :class:`ModelSpec` (its fields' types, defaults, checks and
help texts).

:func:`protoembed.load`, :func:`~protoembed.model.export.runtime.load_export` and :func:`protoembed.evaluate`
check their keyword arguments by :func:`model_spec`; the command line's model flags (``--model``,
``--head``, ``--template``, ``--max-seq-length``, ``--truncate-dim``, ``--device``, ``--precision``,
``--runtime``) are made
from its fields (:func:`protoembed.commands.common.add_model_options`); the training config's model keys
are the fields of :class:`ModelSettings`, the part of a spec a config sets (``prompts``, a mapping, is
set by a config or a keyword argument, not by a flag). A bad value is a one-line
:class:`~protoembed.core.errors.ProtoembedError` (``max_seq_length must be a positive number of tokens, got
0``). Nothing here imports torch: devices are checked when a model is loaded
(:func:`protoembed.inputs.checks.resolve_device`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field

from protoembed.core.errors import ProtoembedError
from protoembed.core.pydantic_util import STRICT, Flag, Name, OptionalText, check_options, checked
from protoembed.model.heads import HEADS, get_head, heads_help
from protoembed.model.precision import PRECISIONS, check_precision
from protoembed.model.runtimes import AUTO, check_runtime, runtime_choices, runtimes_help


def _positive_tokens(value: Any) -> Any:
    """``max_seq_length``'s rule: ``None`` (the backbone's limit) or an integer of at least 1."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value
    raise ValueError(f"must be a positive number of tokens, got {value!r}")


def _positive_dims(value: Any) -> Any:
    """``truncate_dim``'s rule: ``None`` (the full vector) or an integer of at least 1 (the model's width
    bounds it when the model loads: :func:`protoembed.model.batching.check_truncate_dim`)."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value
    raise ValueError(f"must be a positive number of dimensions, got {value!r}")


def _device_text(value: Any) -> Any:
    """A ``torch.device`` as its name (``cuda:1``); anything else unchanged (torch is not imported)."""
    return str(value) if type(value).__module__ == "torch" else value


#: A registered head (:data:`protoembed.model.heads.HEADS`), or ``None`` (the model's own).
HeadName = Annotated[OptionalText, AfterValidator(checked(get_head))]
#: A token budget: ``None`` or an integer of at least 1.
MaxSeqLength = Annotated[int | None, BeforeValidator(_positive_tokens)]
#: How the soft-prompt vectors start (the first: the default).
SoftPromptInit = Literal["uniform", "template"]
#: The values of :data:`SoftPromptInit`, the default first.
SOFT_PROMPT_INITS: tuple[str, ...] = get_args(SoftPromptInit)


class ModelSettings(BaseModel):
    """The settings that make a model, shared by :class:`ModelSpec` and the training config (whose
    ``head`` and ``max_seq_length`` say their own defaults)."""

    model_config = STRICT

    model: Annotated[Name, Flag(metavar="MODEL")] = Field(
        "default", description="default (packaged all-MiniLM-L6-v2) | model dir | hub id"
    )
    head: Annotated[HeadName, Flag(metavar="HEAD", help=heads_help)] = Field(
        None, description="a registered head (default: the saved model's own, mean for a bare backbone)"
    )
    template: Annotated[OptionalText, Flag(metavar="TEMPLATE")] = Field(
        None,
        description="prompt heads: template with <S> and [MASK], e.g. '\"<S>\" means [MASK] .' (default: the "
        "head's)",
    )
    max_seq_length: Annotated[MaxSeqLength, Flag(metavar="N")] = Field(
        None, description="token budget (sentence tokens for prompt heads; default: the backbone's limit)"
    )
    n_soft_prompt: Annotated[int, Field(ge=1)] | None = Field(
        None,
        description=f"soft_prompt head: number of vectors (default {HEADS['soft_prompt'].n_soft_prompt})",
    )
    soft_prompt_init: SoftPromptInit | None = Field(
        None,
        description=f"{' | '.join(SOFT_PROMPT_INITS)}: the soft prompt's start ({SOFT_PROMPT_INITS[0]}: the "
        f"authors' code; default {SOFT_PROMPT_INITS[0]})",
    )
    prompts: dict[str, str] | None = Field(
        None,
        description="input prompts, name -> text put before each input (query, document: search and retrieval "
        "use them), saved with the model (default: the saved model's; none for a bare backbone)",
    )


class ModelSpec(ModelSettings):
    """Every setting of a model to load: :class:`ModelSettings` and how it runs (normalisation, device,
    precision, runtime). Each field's description is its help (``--help``, the docs)."""

    normalize: bool | None = Field(
        None, description="L2-normalise the vectors (default: as saved; false for a bare backbone)"
    )
    truncate_dim: Annotated[int | None, BeforeValidator(_positive_dims), Flag(metavar="D")] = Field(
        None,
        description="keep the first D dimensions of every vector, L2-normalised after the cut when the "
        "vectors are normalised (Matryoshka models; default: the saved model's truncate_dim, else the full "
        "vector)",
    )
    device: Annotated[str | None, BeforeValidator(_device_text), Flag(metavar="DEVICE")] = Field(
        None,
        description="cpu, cuda, cuda:1, mps (default: cuda if available, else cpu; exports run on the cpu)",
    )
    precision: Annotated[
        str | None, AfterValidator(checked(check_precision)), Flag(choices=lambda: PRECISIONS)
    ] = Field(
        None,
        description="fp32 (default for torch), bf16 or fp16: the torch forward under bf16 autocast (fast on "
        "CUDA and on CPUs with AVX512-BF16 or AMX) or fp16 autocast (CUDA only), pooling, normalisation and "
        "vectors in fp32; under OpenVINO "
        "its inference precision (default there: bf16 where the CPU has it); an int8 export runs in int8 "
        "only",
    )
    runtime: Annotated[
        str,
        AfterValidator(checked(check_runtime)),
        Flag(choices=runtime_choices, help=runtimes_help, show_default=False),
    ] = Field(AUTO, description="what runs the model")

    def settings(self) -> dict[str, Any]:
        """The fields but ``model``: the keyword arguments of :func:`protoembed.load` after the spec."""
        return {name: value for name, value in self if name != "model"}


def model_spec(**values: Any) -> ModelSpec:
    """A :class:`ModelSpec` from keyword values (the fields' names).

    Raises:
        ProtoembedError: one line for an unknown setting (the settings listed) or a bad value
            (``max_seq_length must be a positive number of tokens, got 0``; ``unknown head 'x': ...``).
    """
    unknown = [name for name in values if name not in ModelSpec.model_fields]
    if unknown:
        raise ProtoembedError(
            f"unknown model setting {unknown[0]!r}: expected one of {', '.join(ModelSpec.model_fields)}"
        )
    return check_options(ModelSpec, values)


def model_settings() -> tuple[str, ...]:
    """The keyword arguments that :func:`protoembed.load` takes after the spec: every field but ``model``."""
    return tuple(name for name in ModelSpec.model_fields if name != "model")
