"""Readers for the short-text clustering sets (the SCCL lineage staged under ``clustering/``).

Each reader takes the data directory and returns a :class:`ClusteringData` (texts and integer labels).

Every file is ``label<TAB>text`` with integer labels from 1. Quirks handled: CRLF line ends
(SearchSnippets, StackOverflow, Biomedical, Tweet), a trailing empty third column on StackOverflow
lines and tabs inside some of its texts (whitespace is normalised to single spaces), no final newline
(Biomedical); an empty text is skipped and counted.

:func:`read_clustering_texts` is the ``clustering`` training format: the same files read as unlabeled
in-domain text (the ``text`` column only; the labels are parsed to check the line, then dropped), as the
short-text clustering literature trains on the texts it clusters without their labels.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from protoembed.core.errors import ProtoembedError
from protoembed.data.benchmarks.sts import read_lines
from protoembed.data.training.examples import Examples


@dataclass
class ClusteringData:
    """Texts, their labels (0-based, in order of the file's sorted label values), and the count of classes."""

    name: str
    texts: list[str]
    labels: np.ndarray
    n_classes: int
    skipped_empty: int = 0


def _parse(path: Path) -> tuple[list[int], list[str], int]:
    """``(raw integer labels, texts, skipped empty texts)`` of a ``label<TAB>text`` file."""
    raw_labels: list[int] = []
    texts: list[str] = []
    skipped = 0
    lines = read_lines(path)
    for lineno, line in enumerate(lines, 1):
        label, tab, rest = line.partition("\t")
        if not tab or not label.strip().isdigit():
            raise ProtoembedError(f"{path}:{lineno}: expected 'label<TAB>text' with an integer label")
        text = " ".join(rest.split())  # tabs inside a text (StackOverflow) become spaces
        if not text:
            skipped += 1
            continue
        raw_labels.append(int(label))
        texts.append(text)
    return raw_labels, texts, skipped


def read_clustering_file(path: Path, name: str) -> ClusteringData:
    """A clustering set (``label<TAB>text`` lines, integer labels), named ``name``; labels are renumbered
    0.. in order of their sorted values. A malformed line is an error naming file and line."""
    raw_labels, texts, skipped = _parse(path)
    values = sorted(set(raw_labels))
    index = {v: i for i, v in enumerate(values)}
    labels = np.array([index[v] for v in raw_labels])
    return ClusteringData(name, texts, labels, len(values), skipped)


def read_clustering_texts(path: str | os.PathLike[str], **_: Any) -> Examples:
    """The ``clustering`` training format: a ``label<TAB>text`` file as unlabeled examples.

    Args:
        path: one clustering file (e.g. ``clustering/stackoverflow/stackoverflow_true_text``).
    Returns:
        :class:`~protoembed.data.training.examples.Examples` with the single column ``text`` (every non-empty
        text in file order, white space normalised as :func:`read_clustering` does); the label field is
        checked to be an integer, then dropped: it is never part of the examples.
    Raises:
        ProtoembedError: missing file or a line that is not ``label<TAB>text`` (named as ``file:line``).
    """
    path = Path(path)
    _, texts, skipped = _parse(path)
    source = {
        "path": str(path),
        "format": "clustering",
        "examples": len(texts),
        "skipped": {"empty_text": skipped},
        "dropped_columns": ["label"],
    }
    return Examples({"text": texts}, [source])
