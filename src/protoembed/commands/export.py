"""``protoembed export MODEL -o OUT [--format FORMAT] [--quantize int8]``: one graph from token ids to the
vector, in an export format of the runtime registry (:mod:`protoembed.model.runtimes`: onnx, openvino)."""

from __future__ import annotations

import argparse

from protoembed.commands.common import add_data_dir_option, add_option_flags
from protoembed.core.errors import ProtoembedError
from protoembed.model.export.layout import QUANTIZE, check_export_target, is_export_dir
from protoembed.model.model_spec import ModelSpec
from protoembed.model.runtimes import (
    DEFAULT_FORMAT,
    calibrated_formats,
    export_formats,
    format_writer,
    formats_help,
    quantize_help,
    runs_on,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``export`` sub-command."""
    parser = subparsers.add_parser(
        "export",
        help=f"export a model to {' or '.join(s.format_label for s in export_formats().values())} (template, "
        "soft prompt, pooling and normalisation inside the graph)",
    )
    parser.add_argument("model", help=ModelSpec.model_fields["model"].description)
    parser.add_argument("-o", "--output", required=True, help="output folder (loadable by protoembed.load)")
    parser.add_argument(
        "--format",
        default=DEFAULT_FORMAT,
        help=formats_help(),
    )
    parser.add_argument(
        "--quantize",
        default=None,
        help=f"{', '.join(QUANTIZE)}: {quantize_help()} (default: fp32)",
    )
    parser.add_argument(
        "--calibration",
        default=None,
        metavar="FILE",
        help=f"{' / '.join(calibrated_formats())} int8: sentences to calibrate on, one per line, repeats counted once "
        "(default: the first 512 distinct lines of the staged Wikipedia sample under --data-dir)",
    )
    add_data_dir_option(parser)
    # saved with the export (the cut: in the graph)
    add_option_flags(parser, ModelSpec, ("head", "max_seq_length", "truncate_dim"), check=True)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load ``args.model`` on the CPU and write its export to ``args.output``."""
    writer = format_writer(args.format, "--format")
    if args.quantize is not None and args.quantize not in QUANTIZE:
        raise ProtoembedError(f"--quantize {args.quantize!r}: expected one of {', '.join(QUANTIZE)}")
    if args.calibration is not None and (writer.calibration is None or args.quantize is None):
        formats = " or ".join(calibrated_formats())
        raise ProtoembedError(
            f"--calibration: only an int8 export (--format {formats} --quantize int8) reads it"
        )
    if is_export_dir(args.model):
        raise ProtoembedError(f"{args.model}: already an export; export the torch model instead")
    check_export_target(args.output, args.quantize, args.format)  # before the model loads (seconds)
    if writer.calibration is not None and args.quantize is not None:
        from protoembed.model.export.calibration import calibration_source

        calibration_source(args.calibration, args.data_dir)  # the file (or the staged sample) is readable
    from protoembed import load
    from protoembed.model.export import export_embedder
    from protoembed.model.export.runtime import read_export_config

    try:
        embedder = load(
            args.model,
            head=args.head,
            max_seq_length=args.max_seq_length,
            truncate_dim=args.truncate_dim,
            device="cpu",
        )
    except ProtoembedError as err:
        raise ProtoembedError(f"cannot export {args.model}: {err}") from None
    out = export_embedder(
        embedder,
        args.output,
        quantize=args.quantize,
        format=args.format,
        calibration=args.calibration,  # the file: read (and named) by the format's calibration
        data_dir=args.data_dir,
    )
    kind = f"{args.format}, {args.quantize or 'fp32'}"
    runs = runs_on(read_export_config(out))
    print(f"wrote {out}: {embedder.head} head, {kind}, dimension {embedder.dimension}; runs on {runs}")
    return 0
