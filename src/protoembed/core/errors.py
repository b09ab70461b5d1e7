"""User-facing errors.

A :class:`ProtoembedError` is a mistake the user can fix (a missing file, a malformed line, an
unknown head). The CLI prints its message on one line and exits with status 2, no traceback.
"""

from __future__ import annotations


class ProtoembedError(Exception):
    """An error caused by user input; ``str(err)`` is a complete one-line explanation."""


class EmptySentenceError(ProtoembedError):
    """Sentences with no token (empty or blank) given without ``allow_empty``.

    Attributes:
        indexes: 0-based positions of the empty sentences in the input, so a caller can name them in
            its own terms (the CLI says 1-based line numbers and ``--allow-empty``).
    """

    def __init__(self, indexes: list[int]) -> None:
        self.indexes = list(indexes)
        shown = ", ".join(map(str, self.indexes[:10])) + (" ..." if len(self.indexes) > 10 else "")
        super().__init__(
            f"{len(self.indexes)} sentence(s) have no tokens after stripping (index {shown}); "
            "remove them or pass allow_empty=True to encode them as the template alone"
        )


class WriteError(ProtoembedError):
    """A write that failed on the file system (full disk, I/O error, read-only, permissions).

    ``str(err)`` names the path, the reason and what was kept (the previous file or folder, or that
    nothing was left behind). Attributes: ``path`` (the target), ``reason`` (e.g. ``No space left on
    device``).
    """

    def __init__(self, message: str, path: object = None, reason: str = "") -> None:
        super().__init__(message)
        self.path, self.reason = path, reason


def resume_with(message: str, command: str) -> str:
    """A stopped run's last line: what happened (``message``), then the ``command`` that continues it."""
    return f"{message}; resume with: {command}"


def pip_extra(extra: str) -> str:
    """The pip command that installs protoembed's optional ``extra`` (``pip install 'protoembed[onnx]'``)."""
    return f"pip install 'protoembed[{extra}]'"


def missing_package(what: str, module: str, extra: str) -> ProtoembedError:
    """The one-line error of ``what`` (``ONNX Runtime``, ``protoembed serve``) finding the optional
    package ``module`` missing, with the pip command of the ``extra`` that installs it."""
    return ProtoembedError(f"{what} needs the optional package {module} (missing): {pip_extra(extra)}")
