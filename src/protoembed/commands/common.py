"""Options and argument types shared by the sub-commands.

Every value is checked when the command line is parsed, before any data is read or model loaded:
numbers must be positive, output files writable (:func:`output_file`), task names known (``protoembed eval``'s
``--tasks``: :func:`protoembed.commands.eval.task_name`), a model setting as
:class:`~protoembed.model.model_spec.ModelSpec` checks it: the model flags, like a suite's options, are made from
the fields of a pydantic model (:func:`add_option_flags`). This module imports no torch.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from protoembed.core.errors import ProtoembedError
from protoembed.core.pydantic_util import Flag, check_options
from protoembed.model.model_spec import ModelSpec, model_spec
from protoembed.outputs.io import check_writable, check_writable_folder


def positive_int(text: str) -> int:
    """``argparse`` type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def output_file(suffix: str | None = None, create_parents: bool = True) -> Callable[[str], str]:
    """``argparse`` type for an output path: checks at parse time that the file can be written.

    Args:
        suffix: required file-name ending (``".npy"``, ``".json"``, ``".png"``) or ``None``.
        create_parents: the writer creates missing folders (else the folder must exist).
    Returns:
        a converter that returns the path unchanged or raises ``argparse.ArgumentTypeError`` naming
        the path and the problem (a folder, a read-only or missing directory, a wrong suffix).
    """

    def convert(text: str) -> str:
        try:
            check_writable(text, suffix, create_parents)
        except ProtoembedError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        return text

    convert.__name__ = "output file"
    return convert


def output_folder(text: str) -> str:
    """``argparse`` type for an output folder (``train --output-dir``, ``encode -o``): checked writable at
    parse time (:func:`protoembed.outputs.io.check_writable_folder`), so a read-only folder or file
    system, or a file of that name, is refused before anything is read or trained; a missing folder is
    fine when its nearest existing parent is writable.
    """
    try:
        check_output_folder(text)
    except ProtoembedError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def check_output_folder(folder: str | Path) -> Path:
    """Raise :class:`ProtoembedError` naming ``folder`` unless files can be written in it (see
    :func:`output_folder`); returns it as a :class:`Path`."""
    return check_writable_folder(folder)


output_folder.__name__ = "output folder"


#: The fields of :class:`~protoembed.model.model_spec.ModelSpec` that are command-line flags, in ``--help``'s order.
MODEL_FLAGS = (
    "model",
    "head",
    "template",
    "max_seq_length",
    "truncate_dim",
    "device",
    "precision",
    "runtime",
)


def _flag_of(field: FieldInfo) -> Flag:
    """The field's :class:`~protoembed.core.pydantic_util.Flag` (in its ``Annotated``), or the plain one."""
    return next((item for item in field.metadata if isinstance(item, Flag)), Flag())


def _parse_as(annotation: Any) -> Callable[[str], Any]:
    """The converter of a flag's text for a field of type ``annotation`` (``int | None``: ``int``)."""
    if get_origin(annotation) in (Union, UnionType):
        annotation = next(arg for arg in get_args(annotation) if arg is not type(None))
    return annotation if annotation in (int, float) else str


def field_value(model: type[BaseModel], name: str) -> Callable[[str], Any]:
    """``argparse`` type for field ``name`` of ``model``: the text read as the field's type (a number
    that is not one stays text) and checked by the model, so that the flag refuses what the model
    refuses, with its one-line message (``max_seq_length must be a positive number of tokens, got 0``)."""
    parse = _parse_as(model.model_fields[name].annotation)

    def convert(text: str) -> Any:
        try:
            value = parse(text)
        except ValueError:
            value = text
        try:
            check_options(model, {name: value})
        except ProtoembedError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        return value

    convert.__name__ = name
    return convert


def add_option_flags(
    parser: argparse.ArgumentParser,
    model: type[BaseModel],
    names: Sequence[str] | None = None,
    check: bool = False,
) -> None:
    """One flag per field of ``model`` (``names``: of those fields only, in that order): ``--inner-folds``
    for ``inner_folds`` (or its :class:`~protoembed.core.pydantic_util.Flag`'s ``name``), its default, its
    description (then the flag's ``help`` and ``(default: X)`` for a default other than ``None``) as the
    help; a bool is a switch, a ``Literal`` or the flag's ``choices`` give the choices, any other value is
    read as the field's type, and with ``check`` also checked by the model when parsed
    (:func:`field_value`; without, the caller checks the values, as a suite's options are checked with
    the suite's name in front)."""
    for name in names or tuple(model.model_fields):
        field = model.model_fields[name]
        flag = _flag_of(field)
        option = flag.name or "--" + name.replace("_", "-")
        help_text = field.description or ""
        if flag.help is not None:
            help_text = f"{help_text}. {flag.help()}"
        if field.annotation is bool:
            parser.add_argument(option, dest=name, action="store_true", help=help_text)
            continue
        if field.default is not None and flag.show_default:
            help_text = f"{help_text} (default: {field.default})"
        options: dict[str, Any] = {"dest": name, "default": field.default, "metavar": flag.metavar}
        if get_origin(field.annotation) is Literal:
            options["choices"] = get_args(field.annotation)
        elif flag.choices is not None:
            options["choices"] = tuple(flag.choices())  # read when the parser is built: registered ones too
        else:
            options["type"] = field_value(model, name) if check else _parse_as(field.annotation)
        parser.add_argument(option, help=help_text, **options)


def add_model_options(parser: argparse.ArgumentParser, batch_size: bool = True) -> None:
    """The model's flags, made from :class:`~protoembed.model.model_spec.ModelSpec` (:data:`MODEL_FLAGS`:
    ``--model``, ``--head``, ``--template``, ``--max-seq-length``, ``--truncate-dim``, ``--device``,
    ``--precision``, ``--runtime``), then ``--batch-size`` (unless ``batch_size`` is False: ``serve`` batches by tokens)
    and ``--verbose``."""
    add_option_flags(parser, ModelSpec, MODEL_FLAGS, check=True)
    if batch_size:
        parser.add_argument("--batch-size", type=positive_int, default=64, metavar="N", help="default 64")
    parser.add_argument(
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="log what runs: the runtime and precision picked, exports made",
    )


def add_data_dir_option(parser: argparse.ArgumentParser, *aliases: str) -> None:
    """``--data-dir DIR`` (and ``aliases``): the data directory, by the rule of every reader
    (:func:`protoembed.data.paths.resolve_data_dir`; its default in the help)."""
    from protoembed.data.paths import DATA_DIR_DEFAULT

    parser.add_argument(
        "--data-dir",
        *aliases,
        dest="data_dir",
        default=None,
        metavar="DIR",
        help=f"the data directory (default: {DATA_DIR_DEFAULT})",
    )


#: The encode pipeline's flags (:func:`add_pipeline_options`) -> the keyword of ``encode`` each sets.
PIPELINE_FLAGS = {
    "tokenizer_workers": "--tokenizer-workers",
    "max_tokens_per_batch": "--max-tokens-per-batch",
}


def add_pipeline_options(parser: argparse.ArgumentParser, budget_dest: str = "max_tokens_per_batch") -> None:
    """The encode pipeline's flags (:mod:`protoembed.model.batching`): ``--tokenizer-workers N`` (threads that
    tokenise while the forward runs) and ``--max-tokens-per-batch N`` (padded tokens per forward pass);
    ``budget_dest``: the setting the budget goes to (``serve``: its ``max_batch_tokens``, text-embeddings-
    inference's name, whose flag is serve's one flag of the budget; ``--max-tokens-per-batch`` is then an
    unlisted alias of it, for command lines written for ``encode``)."""
    parser.add_argument(
        PIPELINE_FLAGS["tokenizer_workers"],
        dest="tokenizer_workers",
        type=positive_int,
        default=None,
        metavar="N",
        help="threads that tokenise while the model runs, at most the usable cores (a larger N is capped "
        "to them, with a warning; default: the cores the forward does not need: 1 on a CPU of up to 31 "
        "cores, on CUDA the cores but one, at most 8)",
    )
    if budget_dest == "max_tokens_per_batch":
        budget: dict[str, Any] = {
            "default": None,
            "help": "padded tokens (rows x longest row) per forward "
            "pass, at most, besides --batch-size (default: no token budget)",
        }
    else:
        budget = {"default": argparse.SUPPRESS, "help": argparse.SUPPRESS}
    parser.add_argument(
        PIPELINE_FLAGS["max_tokens_per_batch"], dest=budget_dest, type=positive_int, metavar="N", **budget
    )


def pipeline_options(args: argparse.Namespace) -> dict[str, int | None]:
    """``encode``'s keywords of the pipeline flags in ``args`` (:func:`add_pipeline_options`), the token
    budget checked against the model's longest row first (:func:`check_token_budget`)."""
    options = {name: getattr(args, name, None) for name in PIPELINE_FLAGS}
    check_token_budget(options["max_tokens_per_batch"], args)
    return options


def check_token_budget(budget: int | None, args: argparse.Namespace) -> None:
    """Refuse, before the model loads, a ``--max-tokens-per-batch`` below the longest row the model can
    make: ``--max-seq-length``, else the model folder's saved ``max_seq_length`` (a row holds that many
    tokens at most without a template, more with one). Nothing is said when neither is known (the
    encode checks the real rows).

    Raises:
        ProtoembedError: one line naming the budget and the row length."""
    if budget is None:
        return
    longest = getattr(args, "max_seq_length", None)
    if longest is None:
        from protoembed.model.backbones import resolve_model_dir
        from protoembed.outputs.st_layout import read_sentence_bert_config

        model = getattr(args, "model", "default")
        if model != "default" and not Path(model).expanduser().is_dir():
            return  # a hub id is not fetched for this
        try:
            longest = (read_sentence_bert_config(resolve_model_dir(model)) or {}).get("max_seq_length")
        except (ProtoembedError, OSError, ValueError):
            return  # a folder that cannot be read is named when it is loaded
    if isinstance(longest, int) and budget < longest:
        from protoembed.model.batching import LONGEST_ROW, budget_error

        raise budget_error(budget, longest, LONGEST_ROW)


def add_allow_empty_option(parser: argparse.ArgumentParser) -> None:
    """``--allow-empty``: encode empty sentences as the bare template instead of refusing them."""
    parser.add_argument(
        "--allow-empty",
        action="store_true",
        help="encode empty or blank sentences as the bare template (default: refuse them)",
    )


def spec_from_args(args: argparse.Namespace) -> ModelSpec:
    """The :class:`~protoembed.model.model_spec.ModelSpec` of the model flags in ``args`` (one it lacks keeps
    its default)."""
    return model_spec(**{name: getattr(args, name) for name in MODEL_FLAGS if hasattr(args, name)})


def load_from_args(args: argparse.Namespace):
    """Load the model that the model flags in ``args`` describe: ``protoembed.load`` of
    :func:`spec_from_args`."""
    import protoembed

    spec = spec_from_args(args)
    return protoembed.load(spec.model, **spec.settings())
