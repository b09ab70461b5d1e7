"""``protoembed export MODEL -o OUT [--quantize int8]``: an ONNX graph from token ids to the vector."""

from __future__ import annotations

import argparse
from pathlib import Path

from protoembed.errors import ProtoembedError
from protoembed.export.layout import QUANTIZE


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``export`` sub-command."""
    parser = subparsers.add_parser(
        "export",
        help="export a model to ONNX (template, soft prompt, pooling and normalisation inside the graph)",
    )
    parser.add_argument("model", help="default | model dir | hub id")
    parser.add_argument("-o", "--output", required=True, help="output folder (loadable by protoembed.load)")
    parser.add_argument(
        "--quantize", default=None, help=f"{', '.join(QUANTIZE)}: dynamic quantisation (default: fp32)"
    )
    parser.add_argument("--head", default=None, help="head to put on a bare backbone (default: the model's)")
    parser.add_argument("--max-seq-length", type=int, default=None, help="token budget saved with the export")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load ``args.model`` on the CPU and write its export to ``args.output``."""
    from protoembed import load
    from protoembed.export import export_embedder, is_export_dir

    if args.quantize is not None and args.quantize not in QUANTIZE:
        raise ProtoembedError(f"--quantize {args.quantize!r}: expected one of {', '.join(QUANTIZE)}")
    if Path(args.model).is_dir() and is_export_dir(args.model):
        raise ProtoembedError(f"{args.model}: already an ONNX export; export the torch model instead")
    try:
        embedder = load(args.model, head=args.head, max_seq_length=args.max_seq_length, device="cpu")
    except ProtoembedError as err:
        raise ProtoembedError(f"cannot export {args.model}: {err}") from None
    out = export_embedder(embedder, args.output, quantize=args.quantize)
    print(f"wrote {out}: {embedder.head} head, {args.quantize or 'fp32'}, dimension {embedder.dimension}")
    return 0
