"""Where the benchmark data lives: ``--data-dir`` (a config's ``data.data_dir``), else ``$PROTOEMBED_DATA``,
else the platform's user data directory (``platformdirs.user_data_dir("protoembed")``: on Linux
``~/.local/share/protoembed``, or ``$XDG_DATA_HOME/protoembed``).

The one rule for every reader of benchmark data and for ``protoembed data``: :func:`choose_data_dir` (which
directory, and why), :func:`resolve_data_dir` (the same, checked).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from protoembed.core.errors import ProtoembedError

DATA_ENV = "PROTOEMBED_DATA"
#: The application name of the default data directory (``platformdirs.user_data_dir(APP_NAME)``).
APP_NAME = "protoembed"
#: The lookup in words, for the ``--data-dir`` help of every command and the config field's description.
DATA_DIR_DEFAULT = f"${DATA_ENV}, else the user data directory, e.g. ~/.local/share/{APP_NAME}"

Source = Literal["flag", "env", "default"]


@dataclass(frozen=True)
class DataDir:
    """The data directory chosen: ``path`` (absolute, ``..`` and links resolved), and ``source``: given
    (``flag``, named ``flag_name``), ``$PROTOEMBED_DATA`` (``env``), or the user data directory (``default``)."""

    path: Path
    source: Source
    flag_name: str = "--data-dir"

    @property
    def why(self) -> str:
        """Where the directory came from, in words: ``from --data-dir``, ``from $PROTOEMBED_DATA`` or
        ``the default: neither --data-dir nor $PROTOEMBED_DATA is set``."""
        if self.source == "flag":
            return f"from {self.flag_name}"
        if self.source == "env":
            return f"from ${DATA_ENV}"
        return f"the default: neither {self.flag_name} nor ${DATA_ENV} is set"


def default_data_dir() -> Path:
    """The platform's user data directory for protoembed (``platformdirs.user_data_dir``)."""
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME))


def choose_data_dir(data_dir: str | os.PathLike[str] | None, flag_name: str = "--data-dir") -> DataDir:
    """The data directory: ``data_dir`` when given (not ``None`` or ``""``), else ``$PROTOEMBED_DATA`` when
    set and not empty, else :func:`default_data_dir`. Nothing is checked on disk.

    Args:
        data_dir: as given on the command line or in a config (``None`` when absent).
        flag_name: how the user gave ``data_dir``, for :attr:`DataDir.why`.
    """
    source: Source
    if data_dir is not None and str(data_dir) != "":
        value, source = os.fspath(data_dir), "flag"
    elif os.environ.get(DATA_ENV):
        value, source = os.environ[DATA_ENV], "env"
    else:
        value, source = os.fspath(default_data_dir()), "default"
    return DataDir(Path(value).expanduser().resolve(), source, flag_name)


def check_data_dir(chosen: DataDir, must_exist: bool = True) -> Path:
    """``chosen.path`` after checking it: a file there is always an error; a missing directory is one
    when ``must_exist``.

    Raises:
        ProtoembedError: one line naming the directory, where it came from and the command that fills it.
    """
    path = chosen.path
    if path.exists() and not path.is_dir():
        raise ProtoembedError(
            f"benchmark data directory {path} ({chosen.why}) is a file, not a directory; "
            "pass the folder that holds senteval/ (and sts_raw/, clustering/)"
        )
    if must_exist and not path.is_dir():
        dest = f" {chosen.flag_name} {shlex.quote(str(path))}" if chosen.source == "flag" else ""
        raise ProtoembedError(
            f"benchmark data directory {path} ({chosen.why}) does not exist; fetch data into it with "
            f"`protoembed data download{dest} NAME...` (`protoembed data list` names the datasets), or "
            f"pass {chosen.flag_name} DIR / set {DATA_ENV}=DIR to use another"
        )
    return path


def resolve_data_dir(data_dir: str | os.PathLike[str] | None, must_exist: bool = True) -> Path:
    """Return the benchmark data directory (:func:`choose_data_dir`, checked by :func:`check_data_dir`).

    Args:
        data_dir: as given on the command line or in a config (``None`` when absent).
        must_exist: check that the directory is there.
    Returns:
        the directory as an absolute, resolved :class:`~pathlib.Path`.
    Raises:
        ProtoembedError: the directory is a file, or (``must_exist``) does not exist.
    """
    return check_data_dir(choose_data_dir(data_dir), must_exist)


def local_path(path: str | os.PathLike[str]) -> Path | None:
    """``path`` (``~`` expanded) as an absolute path when it is absolute or exists from the working
    directory; ``None`` when it is to be read under the data directory. The rule every file a user names
    follows: the working directory first, then the data directory."""
    here = Path(path).expanduser()
    return here.absolute() if here.is_absolute() or here.exists() else None
