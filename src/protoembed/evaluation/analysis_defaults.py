"""Defaults of the embedding-space analyses that the command line reads without importing torch.

:mod:`protoembed.evaluation.analysis` imports torch at module level; ``protoembed analyze`` (a CLI module,
imported for ``--help``) must not, so the defaults both read live here, once.
"""

from __future__ import annotations

#: Fig. 5's default numbers of removed (most frequent) tokens, ``protoembed analyze frequent-tokens``'s
#: ``--top-k`` when it is not given.
TOP_K = (0, 1, 2, 5, 10, 20, 50, 100)
