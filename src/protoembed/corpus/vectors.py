"""A finished corpus folder as one array: :class:`CorpusVectors`, memory-mapped shard by shard."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from protoembed.corpus.manifest import PARQUET, CorpusManifest, finished_manifest, open_shard
from protoembed.corpus.manifest import verify as verify_folder
from protoembed.model.quantize import dtype_of


class CorpusVectors:
    """The vectors of an encoded corpus, (rows, dimension) float32 (or the manifest's ``vectors`` type:
    ``(rows, width)`` of int8 / uint8, the bit types ``ceil(dimension / 8)`` bytes), read from its shards on
    demand.

    Each shard is opened with ``np.load(mmap_mode="r")``, so nothing is read until indexed. Indexing
    returns in-memory arrays: ``v[i]`` a row (width,), ``v[a:b]`` / ``v[a:b:s]`` and ``v[index array]``
    (integers, negative ones counted from the end, or a boolean mask of ``len(v)``) the rows in that
    order, across shards; a further index applies to the columns (``v[:, :8]``). ``len(v)`` is the row
    count; iterating yields the shards in row order (memory maps, one at a time);
    ``np.asarray(v)`` reads everything.

    Attributes:
        folder: the output folder.
        manifest: its :class:`~protoembed.corpus.manifest.CorpusManifest`.
        shards: the memory-mapped shard arrays, in row order.
    """

    def __init__(self, folder: str | os.PathLike[str], manifest: CorpusManifest) -> None:
        self.folder = Path(folder)
        self.manifest = manifest
        self.shards: list[np.ndarray] = []
        for record in manifest.shards:
            rows = record.stop - record.start
            self.shards.append(
                open_shard(self.folder / record.name, rows, manifest.dimension, manifest.vectors)
            )
        self._starts = np.array(
            [record.start for record in manifest.shards] + [manifest.rows], dtype=np.int64
        )

    def __len__(self) -> int:
        return self.manifest.rows

    @property
    def dimension(self) -> int:
        """Dimensions of the vectors (the model's)."""
        return self.manifest.dimension

    @property
    def width(self) -> int:
        """Columns of the stored vectors: :attr:`dimension`, or ``ceil(dimension / 8)`` for the bit types."""
        return self.manifest.width

    @property
    def shape(self) -> tuple[int, int]:
        """``(rows, width)``."""
        return (self.manifest.rows, self.width)

    @property
    def vectors(self) -> str:
        """The stored type: ``float32``, ``int8``, ``uint8``, ``binary`` or ``ubinary``."""
        return self.manifest.vectors

    @property
    def ranges(self) -> np.ndarray | None:
        """The ``(2, dimension)`` float32 ranges of int8 / uint8 vectors (``None`` for the other types)."""
        return None if self.manifest.ranges is None else np.asarray(self.manifest.ranges, dtype=np.float32)

    @property
    def dtype(self) -> np.dtype:
        """The numpy type of the stored vectors."""
        return dtype_of(self.vectors)

    def ids(self) -> np.ndarray:
        """Each row's id, in row order: the input's id field (integers as int64, else strings as an
        object array), read from ``ids.jsonl`` or the Parquet shards' ``id`` column; without an id field,
        the row numbers from 0."""
        if self.manifest.output_format == PARQUET:
            import pyarrow.parquet as pq

            keys: list[Any] = []
            for record in self.manifest.shards:
                keys += pq.read_table(self.folder / record.name, columns=["id"]).column("id").to_pylist()
        elif self.manifest.ids is not None:
            with open(self.folder / self.manifest.ids.name, encoding="utf-8") as lines:
                keys = [json.loads(line) for line in lines]
        else:
            return np.arange(len(self), dtype=np.int64)
        if all(isinstance(key, int) for key in keys):
            return np.array(keys, dtype=np.int64)
        return np.array(keys, dtype=object)

    def __iter__(self) -> Iterator[np.ndarray]:
        """The shards, in row order (memory maps)."""
        return iter(self.shards)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = self[:]
        return out if dtype is None else out.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"CorpusVectors({str(self.folder)!r}, shape={self.shape}, shards={len(self.shards)})"

    def _rows(self, index: np.ndarray) -> np.ndarray:
        """The rows at ``index`` (a 1-D array of in-range non-negative integers), in that order."""
        out = np.empty((len(index), self.width), dtype=self.dtype)
        which = np.searchsorted(self._starts, index, side="right") - 1
        for shard in np.unique(which):
            mask = which == shard
            out[mask] = self.shards[shard][index[mask] - self._starts[shard]]
        return out

    def _span(self, start: int, stop: int) -> np.ndarray:
        """Rows ``[start, stop)`` (in range), copied from the shards that hold them."""
        if stop <= start:
            return np.empty((0, self.width), dtype=self.dtype)
        first = int(np.searchsorted(self._starts, start, side="right")) - 1
        pieces = []
        for shard in range(first, len(self.shards)):
            lo = self._starts[shard]
            if lo >= stop:
                break
            pieces.append(self.shards[shard][max(start - lo, 0) : stop - lo])
        return np.concatenate(pieces) if len(pieces) > 1 else np.array(pieces[0])

    def __getitem__(self, key: Any) -> np.ndarray:
        rest: tuple[Any, ...] = ()
        if isinstance(key, tuple):
            key, rest = (key[0] if key else slice(None)), key[1:]
        n = len(self)
        if isinstance(key, (int, np.integer)):
            i = int(key) + (n if key < 0 else 0)
            if not 0 <= i < n:
                raise IndexError(f"row {int(key)} out of range for {n} rows")
            row = self._rows(np.array([i]))[0]
            return row[rest] if rest else row
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            out = self._span(start, stop) if step == 1 else self._rows(np.arange(start, stop, step))
        else:
            index = np.asarray(key)
            if index.dtype == bool:
                if index.shape != (n,):
                    raise IndexError(f"boolean index of shape {index.shape} for {n} rows")
                index = np.flatnonzero(index)
            elif not np.issubdtype(index.dtype, np.integer) and index.size:
                raise IndexError(f"rows are indexed by integers, slices or a boolean mask, got {index.dtype}")
            shape = index.shape
            flat = index.reshape(-1).astype(np.int64)
            flat = np.where(flat < 0, flat + n, flat)
            if flat.size and (flat.min() < 0 or flat.max() >= n):
                raise IndexError(f"row index out of range for {n} rows")
            out = self._rows(flat).reshape(*shape, self.width)
        return out[(slice(None), *rest)] if rest else out


def open_corpus(out_dir: str | os.PathLike[str], verify: bool = False) -> CorpusVectors:
    """Open a finished corpus folder (written by :func:`~protoembed.corpus.encode_corpus` or ``protoembed
    encode``) as :class:`CorpusVectors`.

    Args:
        out_dir: the folder.
        verify: check every shard's SHA-256 against the manifest first
            (:func:`~protoembed.corpus.manifest.verify`; reads every byte).
    Raises:
        ProtoembedError: no manifest, an unfinished run, a missing or (with ``verify``) corrupt shard, a
            shard of the wrong shape.
    """
    folder = Path(out_dir)
    return CorpusVectors(folder, verify_folder(folder) if verify else finished_manifest(folder))
