"""``protoembed encode INPUT -o OUT_DIR``: a corpus of any size (text lines, JSON lines, CSV, Parquet) ->
a folder of ``.npy`` shards and ``manifest.json`` (:func:`protoembed.corpus.encode_corpus`: streamed,
resumable with ``--resume``, in parallel with ``--workers`` on one machine or ``--engine ray`` past it).

``-o OUT.npy`` writes one (N, D) array instead, the corpus held in memory (small inputs).
``--prompt NAME``: the model's prompt of that name (e.g. ``query``) put before each text.
``--vectors int8|uint8|binary|ubinary``: the vectors stored quantised (:mod:`protoembed.model.quantize`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from protoembed.commands.common import (
    add_allow_empty_option,
    add_model_options,
    add_pipeline_options,
    load_from_args,
    output_file,
    output_folder,
    pipeline_options,
    positive_int,
    spec_from_args,
)
from protoembed.core.errors import EmptySentenceError, ProtoembedError, WriteError, resume_with
from protoembed.core.progress import LINE_EVERY
from protoembed.corpus.encoding import DEFAULT_SHARD_SIZE, ENGINES, LOCAL_ENGINE, RAY_ENGINE
from protoembed.corpus.manifest import NPY, OUTPUT_FORMATS, PARQUET
from protoembed.corpus.sources import (
    ALIASES,
    AUTO,
    CORPUS_FILES,
    FORMATS,
    blank_error,
    corpus_source,
    no_rows_error,
)
from protoembed.model.quantize import CALIBRATION_ROWS, FLOAT32, VECTOR_TYPES

#: The ending of an ``-o`` that names one array file rather than a folder of shards.
ARRAY_SUFFIX = ".npy"


def output_target(text: str) -> str:
    """``argparse`` type of ``-o``: a writable ``.npy`` file in an existing folder, or a writable folder."""
    if text.endswith(ARRAY_SUFFIX):
        return output_file(ARRAY_SUFFIX, create_parents=False)(text)
    return output_folder(text)


output_target.__name__ = "output"


def device_list(text: str) -> list[str]:
    """``argparse`` type of ``--devices``: comma-separated device names (``cuda:0,cuda:1``)."""
    devices = [item.strip() for item in text.split(",") if item.strip()]
    if not devices:
        raise argparse.ArgumentTypeError(f"expected devices such as cuda:0,cuda:1, got {text!r}")
    return devices


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``encode`` sub-command."""
    parser = subparsers.add_parser(
        "encode",
        help="encode a corpus (text lines, JSONL, CSV, Parquet) to .npy shards (or one .npy array)",
        description="Encode a corpus file of any size into OUT_DIR: shard-00000.npy, shard-00001.npy, ... "
        "(float32 or --vectors, --shard-size rows each, in row order) and manifest.json (the model's digest and settings, "
        "the input, each shard's rows and sha256). Interrupted runs continue with --resume.",
    )
    parser.add_argument("input", help=f"the corpus file: {CORPUS_FILES}")
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        type=output_target,
        metavar="OUT_DIR|FILE.npy",
        help="output folder of shards and manifest.json; a name ending in .npy: one float32 (or --vectors) array (one row "
        "per text) in an existing folder, the corpus held in memory",
    )
    parser.add_argument(
        "--format",
        choices=(AUTO, *FORMATS, *ALIASES),
        default=AUTO,
        help=f"input format (default auto: by the file name: {CORPUS_FILES}; "
        + ", ".join(f"{alias}: {name}" for alias, name in ALIASES.items())
        + ")",
    )
    parser.add_argument("--field", metavar="F", help="jsonl: the field holding the text")
    parser.add_argument(
        "--column",
        metavar="C",
        help=f"{', '.join(f for f in FORMATS[1:] if f != 'jsonl')}: the column holding the text",
    )
    parser.add_argument(
        "--id-field",
        metavar="F",
        help="jsonl: the field holding each row's id (a string or an integer; e.g. _id): written to ids.jsonl "
        "beside the shards, or the Parquet shards' id column (default: the row number, from 0)",
    )
    parser.add_argument(
        "--id-column",
        metavar="C",
        help="csv, tsv, parquet: the column holding each row's id (as --id-field)",
    )
    parser.add_argument(
        "--output-format",
        choices=OUTPUT_FORMATS,
        help="the shards: npy arrays (default of --engine local), or parquet (default of --engine ray): one "
        "row per text, its id and its vector (a fixed-size list of float32, or of the --vectors type)",
    )
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default=LOCAL_ENGINE,
        help="local: this machine's processes (--workers, --devices); ray: Ray Data actors on a cluster "
        "(--address, --workers actors, --gpus-per-worker; pip install 'protoembed[ray]') (default: local)",
    )
    parser.add_argument(
        "--address",
        metavar="ADDR",
        help="--engine ray: the cluster (auto, ray://HOST:10001; default: a local one started here)",
    )
    parser.add_argument(
        "--gpus-per-worker",
        type=float,
        default=0,
        metavar="G",
        help="--engine ray: the GPUs of each actor (default 0: the CPU)",
    )
    add_model_options(parser)
    add_pipeline_options(parser)
    parser.add_argument("--normalize", action="store_true", help="L2-normalise the vectors")
    parser.add_argument(
        "--vectors",
        choices=VECTOR_TYPES,
        default=FLOAT32,
        help="the stored type: float32, or quantised as sentence-transformers' quantize_embeddings: int8 / "
        "uint8 (256 steps per dimension between calibrated ranges), binary / ubinary (1 bit per dimension) "
        "(default: float32)",
    )
    parser.add_argument(
        "--calibration",
        metavar="FILE.npy",
        help="int8 / uint8: float embeddings (N, D) whose per-dimension minimum and maximum are the ranges "
        f"(default: the corpus itself: at most {CALIBRATION_ROWS} rows, evenly spaced); recorded in the "
        "manifest (-o FILE.npy: written to FILE.ranges.npy)",
    )
    parser.add_argument(
        "--prompt",
        metavar="NAME",
        help="put the model's prompt NAME before each text (query, document: none when the model has none)",
    )
    add_allow_empty_option(parser)
    parser.add_argument(
        "--shard-size",
        type=positive_int,
        metavar="N",
        help=f"rows per shard file (default {DEFAULT_SHARD_SIZE})",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the interrupted run in OUT_DIR (same model, settings and input; finished shards kept)",
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        help="encoding processes on this machine (default 1; with --devices, one per device); the CPU cores "
        "are split between them; with --engine ray, Ray actors (across machines)",
    )
    parser.add_argument(
        "--devices",
        type=device_list,
        metavar="LIST",
        help="the workers' devices, comma-separated (cuda:0,cuda:1)",
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help=f"no progress on stderr (default: a bar on a terminal, a line every {LINE_EVERY:.0f} s elsewhere)",
    )
    parser.set_defaults(func=run)


def ranges_path(output: str) -> str:
    """Where ``-o FILE.npy`` puts the int8 / uint8 ranges: ``FILE.ranges.npy``."""
    return output[: -len(ARRAY_SUFFIX)] + ".ranges" + ARRAY_SUFFIX


def calibration(args: argparse.Namespace) -> Any:
    """The ``(2, D)`` ranges of ``--calibration`` (``None`` without it).

    Raises:
        ProtoembedError: ``--calibration`` with a type other than int8 / uint8, or a file that is not
            a 2-d float array of at least 2 rows."""
    import numpy as np

    from protoembed.model.quantize import calibration_ranges, needs_ranges

    if args.calibration is None:
        return None
    if not needs_ranges(args.vectors):
        raise ProtoembedError(f"--calibration is for --vectors int8 / uint8, not {args.vectors}")
    try:
        embeddings = np.load(args.calibration, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise ProtoembedError(f"--calibration {args.calibration}: cannot read a .npy array ({err})") from None
    try:
        return calibration_ranges(embeddings)
    except ProtoembedError as err:
        raise ProtoembedError(f"--calibration {args.calibration}: {err}") from None


def run(args: argparse.Namespace) -> int:
    """Encode ``args.input`` into ``args.output`` (a folder of shards, or one ``.npy`` file)."""
    ranges = calibration(args)
    if args.output.endswith(ARRAY_SUFFIX):
        return _encode_to_array(args, ranges)
    from protoembed.corpus.encoding import encode_corpus

    options = pipeline_options(args)
    if args.engine == RAY_ENGINE:
        from protoembed.corpus.ray_engine import encode_corpus_on_ray

        options.update(address=args.address, gpus_per_worker=args.gpus_per_worker)
    encode = encode_corpus_on_ray if args.engine == RAY_ENGINE else encode_corpus
    try:
        vectors = encode(
            spec_from_args(args),
            args.input,
            args.output,
            format=args.format,
            field=args.field,
            column=args.column,
            id_field=args.id_field,
            id_column=args.id_column,
            output_format=args.output_format or (PARQUET if args.engine == RAY_ENGINE else NPY),
            shard_size=args.shard_size or DEFAULT_SHARD_SIZE,
            batch_size=args.batch_size,
            normalize=True if args.normalize else None,
            prompt_name=args.prompt,
            resume=args.resume,
            workers=args.workers or 1,
            devices=args.devices,
            show_progress=False if args.no_progress else None,
            allow_empty=args.allow_empty,
            vectors=args.vectors,
            ranges=ranges,
            **options,
        )
    except KeyboardInterrupt:
        print(
            f"protoembed: interrupted; the finished shards are kept in {args.output}: rerun the same command "
            "with --resume to continue",
            file=sys.stderr,
        )
        return 130
    except WriteError as err:  # a full disk: the message says why and what was kept; the finished shards stay
        print(f"protoembed: error: {resume_with(str(err), _resume_command(args))}", file=sys.stderr)
        return 2
    print(
        f"wrote {args.output}: {vectors.shape[0]} x {vectors.shape[1]} {vectors.vectors} in "
        f"{len(vectors.shards)} shard(s) and manifest.json"
    )
    return 0


def _resume_command(args: argparse.Namespace) -> str:
    """The command line that continues this run: the same one, with ``--resume``."""
    words = list(getattr(args, "command_line", None) or ["encode", args.input, "-o", args.output])
    return shlex.join(["protoembed", *words, *([] if "--resume" in words else ["--resume"])])


def _encode_to_array(args: argparse.Namespace, ranges: Any) -> int:
    """``-o FILE.npy``: the whole input encoded in memory and written as one array (``--vectors`` int8 /
    uint8: its ranges, ``ranges`` or calibrated as a corpus folder's, in ``FILE.ranges.npy``)."""
    import numpy as np

    from protoembed.model.quantize import calibration_ranges, calibration_rows, needs_ranges, quantize
    from protoembed.outputs.io import write_atomic

    for flag, given in (
        ("--resume", args.resume),
        ("--shard-size", args.shard_size),
        ("--workers", args.workers),
        ("--devices", args.devices),
        ("--id-field", args.id_field),
        ("--id-column", args.id_column),
        ("--output-format", args.output_format),
        ("--engine", args.engine != LOCAL_ENGINE),
        ("--address", args.address),
    ):
        if given:
            raise ProtoembedError(
                f"{flag} needs an output folder (-o OUT_DIR), not the single file {args.output}"
            )
    source = corpus_source(args.input, args.format, args.field, args.column)
    numbers: list[int] = []
    sentences: list[str] = []
    for number, text in source.rows():
        numbers.append(number)
        sentences.append(text)
    if not sentences:
        raise no_rows_error(source)
    options = pipeline_options(args)
    embedder = load_from_args(args)
    try:
        vectors = embedder.encode(
            sentences,
            batch_size=args.batch_size,
            normalize=True if args.normalize else None,
            show_progress_bar=not args.no_progress,  # a bar on a terminal, a line every 10 s elsewhere
            allow_empty=args.allow_empty,
            prompt_name=args.prompt,
            **options,
        )
    except EmptySentenceError as err:
        raise blank_error(source, [numbers[i] for i in err.indexes], len(err.indexes)) from None
    if needs_ranges(args.vectors):
        ranges = calibration_ranges(vectors[calibration_rows(len(vectors))]) if ranges is None else ranges
        write_atomic(ranges_path(args.output), lambda tmp: np.save(tmp, ranges), suffix=ARRAY_SUFFIX)
    vectors = quantize(vectors, args.vectors, ranges)
    write_atomic(args.output, lambda tmp: np.save(tmp, vectors), suffix=ARRAY_SUFFIX)
    also = f" and its ranges in {ranges_path(args.output)}" if needs_ranges(args.vectors) else ""
    print(f"wrote {args.output}: {vectors.shape[0]} x {vectors.shape[1]} {args.vectors}{also}")
    return 0
