"""An encoded corpus folder: its shards and ``manifest.json``, their names and checks.

Layout of an output folder::

    shard-00000.npy   rows [0, shard_size) of the corpus, (rows, dimension) float32, or the manifest's
                      ``vectors`` type (:mod:`protoembed.model.quantize`: int8 / uint8, or binary /
                      ubinary with ceil(dimension / 8) columns)
    shard-00001.npy   the next shard_size rows, ... (the names sort in row order)
    ids.jsonl         with an id field (``--id-field``): each row's id, one JSON value a line, in row order
    manifest.json     :class:`CorpusManifest`: the model's digest and settings, the input (its texts'
                      digest), the shards done

or, with the output format ``parquet``, ``shard-00000.parquet``, ...: one row per text, its ``id`` (the
id field's value, else the row number from 0) and its ``vector`` (a fixed-size list of float32, or of
the ``vectors`` type's bytes), and no ids file (:func:`shard_table`).

Every file is written under a hidden temp name and renamed (:func:`protoembed.outputs.io.write_atomic`), so a shard
on disk is always complete. The manifest is written before the first shard (it pins the model digest of
the folder) and again after every shard; ``complete`` says the last shard is in. Nothing here imports
torch.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from protoembed.core.errors import ProtoembedError
from protoembed.data.download.fetch import sha256_file
from protoembed.model.quantize import FLOAT32, dtype_of, stored_width
from protoembed.outputs.io import write_json_atomic

#: The manifest's file name in an output folder.
MANIFEST = "manifest.json"
#: The version of the folder layout the manifest records: 2 records the input's texts digest
#: (:attr:`InputRecord.texts_sha256`) and the token budget; a version-1 folder is read, never resumed.
FORMAT_VERSION = 2
#: The shards' file formats: numpy arrays (the ids, if any, in :data:`IDS`), or Parquet tables of ids and
#: vectors.
NPY, PARQUET = "npy", "parquet"
OUTPUT_FORMATS = (NPY, PARQUET)
#: The ids file of ``npy`` shards.
IDS = "ids.jsonl"
#: A shard's file name (its index, 5 digits, so names sort in row order).
SHARD_NAME = re.compile(r"^shard-(\d{5,})\.(?:npy|parquet)$")
#: Hidden temp files of the atomic writes (left behind by a killed process).
TEMP_NAME = re.compile(r"^\.(shard-\d{5,}\.(?:npy|parquet)|manifest\.json|ids\.jsonl)\.")

_CONFIG = ConfigDict(extra="forbid")


#: Shards a run may have: their five-digit names sort in row order.
MAX_SHARDS = 100_000


def shard_name(index: int, output_format: str = NPY) -> str:
    """``shard-00012.npy`` (or ``.parquet``) for shard 12 (below :data:`MAX_SHARDS`, names sort in row
    order)."""
    return f"shard-{index:05d}.{output_format}"


def shard_bounds(rows: int, shard_size: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` of the shards of ``rows`` rows, ``shard_size`` each (the last may be
    shorter)."""
    return [(start, min(start + shard_size, rows)) for start in range(0, rows, shard_size)]


class ShardRecord(BaseModel):
    """One finished shard: its file ``name``, the rows ``[start, stop)`` it holds, its file's ``sha256``."""

    model_config = _CONFIG
    name: str
    start: int
    stop: int
    sha256: str


class InputRecord(BaseModel):
    """The corpus file: its ``path`` (absolute), ``format``, the ``field`` or column of the text (``None``
    for text lines), its ``rows``, its ``size`` in bytes and ``texts_sha256``, the digest of its texts in
    row order (:func:`protoembed.corpus.sources.texts_digest`; ``None`` in a version-1 manifest, written
    before it was recorded), and the ``id_field`` (or column) of the rows' ids (``None``: their row
    numbers). A resume needs the same ``texts_sha256`` and ``id_field``; the rest is free to change."""

    model_config = _CONFIG
    path: str
    format: str
    field: str | None
    rows: int
    size: int
    texts_sha256: str | None = None
    id_field: str | None = None

    @field_validator("format")
    @classmethod
    def _canonical(cls, value: str) -> str:
        """A format by its registry name (a manifest written before the formats had one table says
        ``txt``: resumed as ``text``)."""
        from protoembed.corpus.sources import ALIASES

        return ALIASES.get(value, value)


class EncodeSettings(BaseModel):
    """The settings that change the vectors, each as the model ran it: ``head``, ``template``,
    ``max_seq_length``, ``runtime``, ``precision``, ``normalize``, ``truncate_dim`` (the cut; ``None``:
    the full vector, as a manifest written before it had one), the ``prompt_name`` and its ``prompt``
    text; and ``batch_size`` and ``max_tokens_per_batch`` (``None``: no token budget), which decide the
    rows that share a forward pass, whose padding changes the vectors' float rounding.

    Not settings here (they change no vector): ``allow_empty`` (an empty text is encoded or refused, never
    encoded otherwise; a version-1 manifest recorded it and it is dropped when read), the tokenizer
    threads, the processes and the progress display."""

    model_config = _CONFIG
    head: str
    template: str | None
    max_seq_length: int | None
    runtime: str
    precision: str
    normalize: bool
    truncate_dim: int | None = None
    prompt_name: str | None
    prompt: str
    batch_size: int
    max_tokens_per_batch: int | None = None
    vectors: str = FLOAT32

    @model_validator(mode="before")
    @classmethod
    def _version_1(cls, data: Any) -> Any:
        """A version-1 manifest's settings without their ``allow_empty``."""
        if isinstance(data, dict) and "allow_empty" in data:
            return {key: value for key, value in data.items() if key != "allow_empty"}
        return data


class CorpusManifest(BaseModel):
    """``manifest.json`` of an encoded corpus folder.

    Fields: ``format_version``; ``protoembed_version``; ``model`` (what was asked for: a spec, or the
    class of a loaded model); ``model_digest`` (SHA-256 of the model, by its folder's files when given as a spec or its
    weights when given loaded, and :attr:`settings`: :func:`protoembed.corpus.encoding.corpus_digest`; a
    resume with another model or setting is refused); ``runtime``, ``precision``, ``dimension``; ``settings``; ``input``
    (a resume with other texts is refused); ``shard_size`` (a resume with another is refused: the shards' rows);
    ``rows`` (of the whole corpus); ``shards`` (the finished ones, by index); ``complete``; ``ranges``: the
    ``(2, dimension)`` int8 / uint8 ranges every shard was quantised with (``settings.vectors`` names the
    type; ``None`` for the other types); ``output_format``: the shards' (:data:`OUTPUT_FORMATS`);
    ``ids``: the ids file of ``npy`` shards written with an id field (its rows and SHA-256), once the
    last shard is in.
    """

    model_config = _CONFIG
    format_version: int = FORMAT_VERSION
    protoembed_version: str
    model: str
    model_digest: str
    runtime: str
    precision: str
    dimension: int
    settings: EncodeSettings
    input: InputRecord
    shard_size: int
    rows: int
    shards: list[ShardRecord]
    complete: bool = False
    ranges: list[list[float]] | None = None
    output_format: str = NPY
    ids: ShardRecord | None = None

    @property
    def vectors(self) -> str:
        """The shards' vector type (``float32`` in a manifest written before quantised shards)."""
        return self.settings.vectors

    @property
    def width(self) -> int:
        """Columns of a shard (:func:`~protoembed.model.quantize.stored_width`)."""
        return stored_width(self.vectors, self.dimension)

    @property
    def shard_count(self) -> int:
        """How many shards the corpus has in all (finished or not)."""
        return len(shard_bounds(self.rows, self.shard_size))


def read_manifest(folder: str | os.PathLike[str]) -> CorpusManifest | None:
    """The manifest of ``folder``, or ``None`` when it has none.

    Raises:
        ProtoembedError: a manifest that is not valid JSON or not a manifest (the file and the problem).
    """
    path = Path(folder) / MANIFEST
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as err:
        raise ProtoembedError(f"{path}: cannot read ({err.strerror or type(err).__name__})") from None
    try:
        return CorpusManifest.model_validate(json.loads(text))
    except json.JSONDecodeError as err:
        raise ProtoembedError(f"{path}: not valid JSON ({err.msg}, line {err.lineno})") from None
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(map(str, first["loc"]))
        raise ProtoembedError(f"{path}: not a corpus manifest ({where}: {first['msg']})") from None


def write_manifest(folder: str | os.PathLike[str], manifest: CorpusManifest) -> Path:
    """Write ``manifest`` to ``folder / manifest.json`` atomically; the shards sorted by their start."""
    manifest.shards.sort(key=lambda shard: shard.start)
    return write_json_atomic(Path(folder) / MANIFEST, manifest.model_dump(mode="json"))


def vector_column(vectors: np.ndarray) -> Any:
    """``vectors`` (N, D) as an Arrow column of N fixed-size lists of D values of their type."""
    import pyarrow as pa

    flat = pa.array(np.ascontiguousarray(vectors).reshape(-1))
    return pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1])


def shard_table(ids: list[Any], vectors: np.ndarray) -> Any:
    """A Parquet shard's table: ``id`` (integers, or strings when any id is one) and ``vector``
    (:func:`vector_column`), one row per text."""
    import pyarrow as pa

    if any(isinstance(key, str) for key in ids):
        ids = [str(key) for key in ids]
    return pa.table({"id": pa.array(ids), "vector": vector_column(vectors)})


def table_vectors(table: Any) -> np.ndarray:
    """The ``(rows, width)`` array of a Parquet shard's ``vector`` column (:func:`shard_table`)."""
    column = table.column("vector").combine_chunks()
    return column.values.to_numpy(zero_copy_only=False).reshape(len(column), column.type.list_size)


def open_shard(path: str | os.PathLike[str], rows: int, dimension: int, vectors: str = FLOAT32) -> np.ndarray:
    """The shard file ``path`` memory-mapped (a ``.parquet`` shard: read), checked to hold ``rows`` vectors
    of ``dimension`` dimensions of type ``vectors`` (:func:`~protoembed.model.quantize.stored_width`
    columns).

    Raises:
        ProtoembedError: the file cannot be read as an array, or holds another shape or type.
    """
    try:
        if str(path).endswith(f".{PARQUET}"):
            import pyarrow.parquet as pq

            array = table_vectors(pq.read_table(path, columns=["vector"]))
        else:
            array = np.load(path, mmap_mode="r")
    except (OSError, ValueError, KeyError) as err:
        raise ProtoembedError(f"{path}: cannot read the shard ({err})") from None
    width, dtype = stored_width(vectors, dimension), dtype_of(vectors)
    if array.shape != (rows, width) or array.dtype != dtype:
        raise ProtoembedError(
            f"{path}: expected {dtype} ({rows}, {width}), found {array.dtype} {array.shape}"
        )
    return array


def shard_files(folder: str | os.PathLike[str]) -> dict[int, Path]:
    """The shard files in ``folder`` by index (``shard-00003.npy`` -> 3)."""
    folder = Path(folder)
    if not folder.is_dir():
        return {}
    return {int(m.group(1)): entry for entry in folder.iterdir() if (m := SHARD_NAME.match(entry.name))}


def shard_problem(folder: str | os.PathLike[str], shard: ShardRecord) -> str | None:
    """Why the shard file of ``shard`` in ``folder`` is not the one recorded (missing, or another
    SHA-256), or ``None`` when it is."""
    path = Path(folder) / shard.name
    if not path.is_file():
        return f"{path}: missing"
    actual = sha256_file(path)
    if actual != shard.sha256:
        return f"{path}: sha256 {actual[:12]}... differs from the manifest's {shard.sha256[:12]}... (corrupt)"
    return None


def finished_manifest(out_dir: str | os.PathLike[str]) -> CorpusManifest:
    """The manifest of a finished corpus folder (its shards not read).

    Raises:
        ProtoembedError: no manifest, or an unfinished run (how many shards are done, and how to finish).
    """
    folder = Path(out_dir)
    manifest = read_manifest(folder)
    if manifest is None:
        raise ProtoembedError(f"{folder}: no {MANIFEST}; not an encoded corpus folder")
    if not manifest.complete:
        raise ProtoembedError(
            f"{folder}: unfinished ({len(manifest.shards)} of {manifest.shard_count} shards); "
            "finish it with encode --resume"
        )
    return manifest


def verify(out_dir: str | os.PathLike[str]) -> CorpusManifest:
    """Check a finished corpus folder: its manifest is complete (:func:`finished_manifest`) and every
    shard file has the SHA-256 the manifest recorded (every byte is read).

    Returns:
        the manifest.
    Raises:
        ProtoembedError: as :func:`finished_manifest`, or the shards that are missing or corrupt (named,
            on one line).
    """
    folder = Path(out_dir)
    manifest = finished_manifest(folder)
    problems = [p for shard in manifest.shards if (p := shard_problem(folder, shard)) is not None]
    if problems:
        raise ProtoembedError(f"{folder}: {len(problems)} bad shard(s): {'; '.join(problems)}")
    return manifest
