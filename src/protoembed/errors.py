"""User-facing errors.

A :class:`ProtoembedError` is a mistake the user can fix (a missing file, a malformed line, an
unknown head). The CLI prints its message on one line and exits with status 2, no traceback.
"""

from __future__ import annotations


class ProtoembedError(Exception):
    """An error caused by user input; ``str(err)`` is a complete one-line explanation."""
