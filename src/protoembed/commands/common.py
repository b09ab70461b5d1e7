"""Options shared by the sub-commands that load a model."""

from __future__ import annotations

import argparse

from protoembed.errors import ProtoembedError
from protoembed.heads import HEADS


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """``--model``, ``--head``, ``--template``, ``--max-seq-length``, ``--batch-size``, ``--device``."""
    parser.add_argument("--model", default="default", help="default | model dir | hub id (default: default)")
    parser.add_argument("--head", default=None, help=f"{', '.join(HEADS)} (default: the model's own)")
    parser.add_argument(
        "--template", default=None, help="prompt template with <S> and [MASK], e.g. '\"<S>\" means [MASK] .'"
    )
    parser.add_argument(
        "--max-seq-length", type=int, default=None, help="token budget (sentence tokens for prompts)"
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cuda if available)")


def load_from_args(args: argparse.Namespace):
    """Load the :class:`~protoembed.Embedder` that the model options describe (``--batch-size`` checked)."""
    from protoembed import load

    if args.batch_size < 1:
        raise ProtoembedError(f"--batch-size must be at least 1, got {args.batch_size}")

    return load(
        args.model,
        head=args.head,
        template=args.template,
        max_seq_length=args.max_seq_length,
        device=args.device,
    )
