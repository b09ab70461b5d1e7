"""Training examples as named columns: the container, its column names and column requirements.

An example is one row of named columns, as sentence-transformers' losses name their inputs and as
SimCSE's one/two/three-column files lay them out. The column names used across protoembed:

========================  ===============================================================
columns                   data
========================  ===============================================================
``text``                  unlabeled sentences (one per line; SimCSE's unsupervised corpus)
``sentence1, sentence2,   sentence pairs with a gold similarity in [0, 5] (STS Benchmark,
score``                   SICK relatedness)
``sentence1, sentence2,   premise / hypothesis with an NLI label: an index into
label``                   :data:`NLI_LABELS` (SNLI, MultiNLI, SICK entailment)
``anchor, positive,       SimCSE's supervised triplets (premise, entailment hypothesis,
negative``                contradiction hypothesis)
========================  ===============================================================

An objective declares the columns it needs as a :data:`ColumnSpec`. The readers that yield
:class:`Examples` (one module per family of files) and the registry of formats and conversions between
column layouts are in :mod:`protoembed.data.training.formats`, above the readers; this module imports none of them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from protoembed.core.errors import ProtoembedError

logger = logging.getLogger(__name__)

#: NLI label names; the ``label`` column holds their index (sentence-transformers' SoftmaxLoss order).
NLI_LABELS = ("contradiction", "entailment", "neutral")

#: Every column name protoembed's examples use, in the order examples read from a table keep them.
COLUMN_NAMES = ("text", "sentence1", "sentence2", "score", "label", "anchor", "positive", "negative")

#: The columns that hold sentences (the others hold gold scores or labels).
SENTENCE_COLUMNS = frozenset(COLUMN_NAMES) - {"score", "label"}

#: A column requirement: a name, or a tuple of alternatives of which one must be present.
ColumnSpec = Sequence[str | tuple[str, ...]]


@dataclass
class Examples:
    """Rows of named columns read from one or more files.

    ``columns[name][i]`` is column ``name`` of example ``i`` (``str`` for text columns, ``float`` for
    ``score``, ``int`` for ``label``); every column has the same length. ``sources`` has one entry per
    file read: ``{"path", "format", "examples", "skipped": {reason: count}, ...}`` (what the training
    log records).
    """

    columns: dict[str, list[Any]]
    sources: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        lengths = {name: len(values) for name, values in self.columns.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"columns of different lengths: {lengths}")

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    @property
    def names(self) -> tuple[str, ...]:
        """The column names, in order."""
        return tuple(self.columns)

    def select(self, indices: Sequence[int]) -> dict[str, list[Any]]:
        """The examples at ``indices`` as a batch: ``{column: [value, ...]}`` (a dict of lists)."""
        return {name: [values[i] for i in indices] for name, values in self.columns.items()}

    def head(self, n: int) -> Examples:
        """The first ``n`` examples (all of them if there are fewer)."""
        return Examples({name: values[:n] for name, values in self.columns.items()}, self.sources)

    def where(self) -> str:
        """The files the examples came from, for messages."""
        return ", ".join(str(s["path"]) for s in self.sources) or "<in memory>"

    def summary(self) -> dict[str, Any]:
        """What ``training_log.jsonl`` records: the example count, the columns and each file's counts."""
        return {"examples": len(self), "columns": list(self.names), "files": self.sources}

    @staticmethod
    def concat(parts: Sequence[Examples]) -> Examples:
        """The examples of ``parts`` one after the other, with the columns all parts share.

        Parts with other column sets keep only the common columns (in the first part's order): SNLI
        pairs (``sentence1, sentence2, label``) and SICK (``sentence1, sentence2, score, label``)
        concatenate to ``sentence1, sentence2, label``. What each part loses is logged and recorded in
        its sources as ``dropped_columns``.

        Raises:
            ValueError: no parts.
            ProtoembedError: the common columns hold no sentence column (e.g. ``text`` files with
                sentence pairs); the message names each file's columns.
        """
        if not parts:
            raise ValueError("no examples to concatenate")
        common = [name for name in parts[0].names if all(name in part.columns for part in parts[1:])]
        if not set(common) & SENTENCE_COLUMNS:
            described = "; ".join(f"{part.where()} has {', '.join(part.names)}" for part in parts)
            raise ProtoembedError(
                f"the files of one training corpus share no sentence column ({described}); "
                "combine files with the same kind of examples"
            )
        sources: list[dict[str, Any]] = []
        for part in parts:
            dropped = [name for name in part.names if name not in common]
            if dropped:
                logger.warning(
                    "%s: column(s) %s dropped (not in every file)", part.where(), ", ".join(dropped)
                )
                sources.extend({**s, "dropped_columns": dropped} for s in part.sources)
            else:
                sources.extend(part.sources)
        columns = {name: [v for part in parts for v in part.columns[name]] for name in common}
        return Examples(columns, sources)


def satisfies(names: set[str], needed: ColumnSpec) -> bool:
    """True if the column ``names`` meet ``needed`` (each name present, each tuple by one of its names)."""
    return all((set(n) & names) if isinstance(n, tuple) else n in names for n in needed)


def describe_columns(needed: ColumnSpec) -> str:
    """``"sentence1, sentence2, score or label"`` for messages."""
    return ", ".join(" or ".join(n) if isinstance(n, tuple) else n for n in needed)
