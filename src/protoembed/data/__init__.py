"""Readers for the benchmark data formats, the data-directory lookup, and the dataset registry.

Benchmark data lives outside the repository in a *data directory* (``--data-dir``, else
``$PROTOEMBED_DATA``, else the user data directory: :mod:`protoembed.data.paths`) laid out as
``senteval/`` (SentEval's ``data/downstream``), ``sts_raw/`` (the original STS releases), ``nli/``,
``unsup/`` and ``clustering/``: the targets of
:data:`protoembed.data.download.registry.DATASETS`, which ``protoembed data download`` installs.
"""

from __future__ import annotations

from protoembed.data.paths import DATA_ENV, resolve_data_dir

__all__ = ["DATA_ENV", "resolve_data_dir"]
