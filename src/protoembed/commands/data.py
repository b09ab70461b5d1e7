"""``protoembed data <action>``: manage the benchmark data directory (``download`` for now)."""

from __future__ import annotations

import argparse
import os
import sys

from protoembed.data.paths import DATA_ENV
from protoembed.errors import ProtoembedError


def run_download(args: argparse.Namespace) -> int:
    """``protoembed data download``: fetch SentEval's data archive into ``<dest>/senteval``."""
    from protoembed.data.download import download_senteval

    dest = args.dest or os.environ.get(DATA_ENV)
    if not dest:
        raise ProtoembedError(f"where should the data go? pass --dest DIR or set {DATA_ENV}=DIR")
    result = download_senteval(
        dest,
        url=args.url,
        sha256=args.sha256,
        force=args.force,
        check_manifest=not args.no_manifest,
        progress=not args.quiet and sys.stderr.isatty(),
    )
    print(f"SentEval data installed in {result.path} (archive sha256 {result.sha256})")
    if args.no_manifest:
        print("per-file checksums NOT checked (--no-manifest)")
    else:
        print(f"{result.verified_files} STS files matched the published sha256")
    if os.environ.get(DATA_ENV) != str(result.path.parent):
        print(f"use it with --data-dir {result.path.parent} or: export {DATA_ENV}={result.path.parent}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``data`` and its actions to the top-level sub-parsers."""
    from protoembed.data.download import DEFAULT_URL

    parser = subparsers.add_parser("data", help="fetch or inspect the benchmark data")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    download = actions.add_parser(
        "download",
        help="download the SentEval benchmark data (STS12-16, STS-B, SICK, transfer tasks)",
        description="Download SimCSE's senteval.tar, verify it and unpack it as DEST/senteval.",
    )
    download.add_argument(
        "--dest", default=None, metavar="DIR", help=f"data directory (default: ${DATA_ENV})"
    )
    download.add_argument("--url", default=DEFAULT_URL, help="archive URL or local file (default: SimCSE's)")
    download.add_argument("--sha256", default=None, metavar="HEX", help="expected sha256 of the archive")
    download.add_argument("--force", action="store_true", help="replace an existing DEST/senteval")
    download.add_argument(
        "--no-manifest", action="store_true", help="do not check the STS files against their published sha256"
    )
    download.add_argument("--quiet", action="store_true", help="no progress bar")
    download.set_defaults(func=run_download)
