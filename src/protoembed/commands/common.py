"""Options and argument types shared by the sub-commands.

Every value is checked when the command line is parsed, before any data is read or model loaded:
numbers must be positive, output files writable (:func:`output_file`), task names known (``protoembed eval``'s
``--tasks``: :func:`protoembed.commands.eval.task_name`). This module imports no torch.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from protoembed.errors import ProtoembedError
from protoembed.heads import get_head, heads_help
from protoembed.io import check_writable
from protoembed.precision import PRECISIONS
from protoembed.runtimes import AUTO, runtime_choices, runtimes_help


def positive_int(text: str) -> int:
    """``argparse`` type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def head_name(text: str) -> str:
    """``argparse`` type: a registered head."""
    try:
        return get_head(text).name
    except ProtoembedError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


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
    """``argparse`` type for an output folder (``train --output-dir``): checked writable at parse time.

    The same probe as :func:`output_file` (:func:`protoembed.io.check_writable`) on a file inside the
    folder, so a read-only folder or file system, or a file of that name, is refused before anything is
    read or trained; a missing folder is fine when its nearest existing parent is writable.
    """
    try:
        check_output_folder(text)
    except ProtoembedError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def check_output_folder(folder: str | Path) -> Path:
    """Raise :class:`ProtoembedError` naming ``folder`` unless files can be written in it (see
    :func:`output_folder`); returns it as a :class:`Path`."""
    check_writable(Path(folder).expanduser() / "results.json")
    return Path(folder).expanduser()


output_folder.__name__ = "output folder"


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """``--model``, ``--head``, ``--template``, ``--max-seq-length``, ``--batch-size``, ``--device``,
    ``--precision``, ``--runtime``, ``--verbose``."""
    parser.add_argument("--model", default="default", help="default | model dir | hub id (default: default)")
    parser.add_argument(
        "--head",
        default=None,
        type=head_name,
        metavar="HEAD",
        help=f"default: the saved model's own, mean for a bare backbone. {heads_help()}",
    )
    parser.add_argument(
        "--template", default=None, help="prompt template with <S> and [MASK], e.g. '\"<S>\" means [MASK] .'"
    )
    parser.add_argument(
        "--max-seq-length",
        type=positive_int,
        default=None,
        metavar="N",
        help="token budget (sentence tokens for prompts; default: the backbone's limit)",
    )
    parser.add_argument("--batch-size", type=positive_int, default=64, metavar="N", help="default 64")
    parser.add_argument(
        "--device", default=None, help="cpu, cuda, cuda:1, mps (default: cuda if available, else cpu)"
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=None,
        help="fp32 (default for torch) or bf16: the torch forward under bf16 autocast (fast on CUDA and on "
        "CPUs with AVX512-BF16 or AMX), pooling, normalisation and vectors in fp32; under OpenVINO its "
        "inference precision (default there: bf16 where the CPU has it)",
    )
    parser.add_argument(
        "--runtime",
        choices=runtime_choices(),  # read when the parser is built: registered runtimes included
        default=AUTO,
        help=runtimes_help(),
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="log what runs: the runtime and precision picked, exports made",
    )


def add_allow_empty_option(parser: argparse.ArgumentParser) -> None:
    """``--allow-empty``: encode empty sentences as the bare template instead of refusing them."""
    parser.add_argument(
        "--allow-empty",
        action="store_true",
        help="encode empty or blank sentences as the bare template (default: refuse them)",
    )


def load_from_args(args: argparse.Namespace):
    """Load the :class:`~protoembed.Embedder` that the model options describe."""
    from protoembed import load

    return load(
        args.model,
        head=args.head,
        template=args.template,
        max_seq_length=args.max_seq_length,
        device=args.device,
        precision=getattr(args, "precision", None),
        runtime=getattr(args, "runtime", AUTO),
    )
