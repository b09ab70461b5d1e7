"""Corpus-scale encoding: a file of any size -> a folder of ``.npy`` shards and ``manifest.json``.

- :func:`encode_corpus` (``protoembed encode INPUT -o OUT_DIR``): text lines, JSON lines, CSV or Parquet,
  streamed; resumable; in parallel over processes (``workers``) or machines (Ray: ``ray_engine``), with the same
  shards as one process (:mod:`protoembed.corpus.encoding`);
- :func:`open_corpus` and :class:`CorpusVectors`: a finished folder as one memory-mapped array;
- :func:`verify`: every shard's SHA-256 against the manifest (:mod:`protoembed.corpus.manifest`).

Importing this package does not import torch.
"""

from __future__ import annotations

from protoembed.corpus.encoding import DEFAULT_SHARD_SIZE, encode_corpus
from protoembed.corpus.manifest import CorpusManifest, verify
from protoembed.corpus.sources import FORMATS
from protoembed.corpus.vectors import CorpusVectors, open_corpus

__all__ = [
    "DEFAULT_SHARD_SIZE",
    "FORMATS",
    "CorpusManifest",
    "CorpusVectors",
    "encode_corpus",
    "open_corpus",
    "verify",
]
