"""``protoembed export MODEL -o OUT [--format onnx|openvino] [--quantize int8]``: one graph from token ids
to the vector, for ONNX Runtime or OpenVINO."""

from __future__ import annotations

import argparse
from pathlib import Path

from protoembed.errors import ProtoembedError
from protoembed.export.layout import FORMATS, QUANTIZE


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``export`` sub-command."""
    parser = subparsers.add_parser(
        "export",
        help="export a model to ONNX or OpenVINO (template, soft prompt, pooling and normalisation inside "
        "the graph)",
    )
    parser.add_argument("model", help="default | model dir | hub id")
    parser.add_argument("-o", "--output", required=True, help="output folder (loadable by protoembed.load)")
    parser.add_argument(
        "--format",
        default="onnx",
        help="onnx (default: onnx/model.onnx, run by ONNX Runtime or OpenVINO) or openvino "
        "(openvino/openvino_model.xml + .bin, OpenVINO's IR; needs protoembed[openvino])",
    )
    parser.add_argument(
        "--quantize",
        default=None,
        help=f"{', '.join(QUANTIZE)}: onnx: dynamic quantisation; openvino: NNCF post-training quantisation "
        "calibrated on --calibration (default: fp32)",
    )
    parser.add_argument(
        "--calibration",
        default=None,
        metavar="FILE",
        help="openvino int8: sentences to calibrate on, one per line (default: the first 512 lines of the "
        "staged Wikipedia sample under --data-dir)",
    )
    parser.add_argument(
        "--data-dir", default=None, metavar="D", help="benchmark data (default: $PROTOEMBED_DATA)"
    )
    parser.add_argument("--head", default=None, help="head to put on a bare backbone (default: the model's)")
    parser.add_argument("--max-seq-length", type=int, default=None, help="token budget saved with the export")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load ``args.model`` on the CPU and write its export to ``args.output``."""
    from protoembed import load
    from protoembed.export import export_embedder, is_export_dir

    if args.format not in FORMATS:
        raise ProtoembedError(f"--format {args.format!r}: expected one of {', '.join(FORMATS)}")
    if args.quantize is not None and args.quantize not in QUANTIZE:
        raise ProtoembedError(f"--quantize {args.quantize!r}: expected one of {', '.join(QUANTIZE)}")
    if args.calibration is not None and (args.format != "openvino" or args.quantize is None):
        raise ProtoembedError(
            "--calibration: only an OpenVINO int8 export (--format openvino --quantize int8) reads it"
        )
    calibration = None
    if args.calibration is not None:
        from protoembed.data.lines import read_lines

        calibration = read_lines(args.calibration)
    if Path(args.model).is_dir() and is_export_dir(args.model):
        raise ProtoembedError(f"{args.model}: already an export; export the torch model instead")
    try:
        embedder = load(args.model, head=args.head, max_seq_length=args.max_seq_length, device="cpu")
    except ProtoembedError as err:
        raise ProtoembedError(f"cannot export {args.model}: {err}") from None
    out = export_embedder(
        embedder,
        args.output,
        quantize=args.quantize,
        format=args.format,
        calibration=calibration,
        data_dir=args.data_dir,
    )
    kind = f"{args.format}, {args.quantize or 'fp32'}"
    print(f"wrote {out}: {embedder.head} head, {kind}, dimension {embedder.dimension}")
    return 0
