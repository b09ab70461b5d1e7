"""Where the benchmark data lives: ``--data-dir``, else ``$PROTOEMBED_DATA``, else an error."""

from __future__ import annotations

import os
from pathlib import Path

from protoembed.errors import ProtoembedError

DATA_ENV = "PROTOEMBED_DATA"


def resolve_data_dir(data_dir: str | os.PathLike[str] | None, must_exist: bool = True) -> Path:
    """Return the benchmark data directory.

    Args:
        data_dir: as given on the command line (``None`` when absent).
        must_exist: check that the directory is there.
    Returns:
        the directory as an absolute :class:`~pathlib.Path`, taken from ``data_dir``, else from the
        ``PROTOEMBED_DATA`` environment variable.
    Raises:
        ProtoembedError: neither is set, or the directory does not exist or is a file.
    """
    source = "--data-dir"
    if data_dir is None or str(data_dir) == "":
        data_dir = os.environ.get(DATA_ENV) or None
        source = DATA_ENV
    if data_dir is None:
        raise ProtoembedError(
            "no benchmark data directory: pass --data-dir DIR, set PROTOEMBED_DATA=DIR, "
            "or run `protoembed data download --dest DIR` to fetch the data first"
        )
    path = Path(data_dir).expanduser().absolute()
    if must_exist and path.exists() and not path.is_dir():
        raise ProtoembedError(
            f"benchmark data directory {path} (from {source}) is a file, not a directory; "
            "pass the folder that holds senteval/ (and sts_raw/, clustering/)"
        )
    if must_exist and not path.is_dir():
        raise ProtoembedError(
            f"benchmark data directory {path} (from {source}) does not exist; "
            f"run `protoembed data download --dest {path}` to fetch it"
        )
    return path
