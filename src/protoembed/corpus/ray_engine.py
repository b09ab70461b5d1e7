"""Corpus encoding on Ray Data (``protoembed encode ... --engine ray``) and :func:`encode_dataset`.

``pip install protoembed[ray]``; nothing else imports this module, so the local path needs no Ray.

The shards, their names, the manifest and the resume are those of :mod:`protoembed.corpus.encoding`; Ray
replaces the processes that encode them:

- the driver checks the folder, scans the input (every row checked, so a bad line is named by its
  file and line before Ray starts, as locally), loads the model once for its digest and settings, and
  writes the manifest (:func:`~protoembed.corpus.encoding.prepare`: a resume on another input or other
  settings is refused in the same line);
- :class:`ShardDatasource`, a Ray Data datasource, reads the pending shards with protoembed's own
  reader (:meth:`~protoembed.corpus.sources.CorpusSource.records`): one block per shard, one row holding
  its texts, their ids and their line numbers, so no block is ever split by Ray and shard ``k`` is
  always rows ``[k * shard_size, (k + 1) * shard_size)``, and none is merged with another
  (:func:`shard_dataset`);
- :class:`Encoder`, the actor class of ``map_batches`` (one actor per worker, ``gpus_per_worker`` GPUs
  each), loads the model once and encodes each shard with one ``model.encode`` call
  (:func:`~protoembed.corpus.encoding.encode_shard`: the same batches as the local path, so the same
  vectors), then writes it under its deterministic name (:func:`~protoembed.corpus.encoding.write_shard`:
  a temp name, then a rename) and returns its record;
- the driver records each shard in the manifest as its record arrives, and finishes as locally.

An actor that dies is restarted by Ray and its shard encoded again (``max_restarts`` /
``max_task_retries``: Ray Data's defaults for actors); the rename makes the second write replace the
first whole, and the driver records the shard once. A driver that dies leaves the manifest naming the
shards written; ``--resume`` encodes the others.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from protoembed.core.errors import EmptySentenceError, ProtoembedError
from protoembed.corpus.encoding import (
    ShardJob,
    check_folder,
    encode_corpus,
    encode_shard,
    finish,
    iter_shards,
    new_manifest,
    prepare,
    with_ranges,
    write_shard,
)
from protoembed.corpus.manifest import ShardRecord, vector_column, write_manifest
from protoembed.corpus.sources import Scan
from protoembed.corpus.vectors import CorpusVectors, open_corpus
from protoembed.model.model_spec import ModelSpec, model_spec

if TYPE_CHECKING:
    import pyarrow as pa
    import ray.data

logger = logging.getLogger(__name__)

#: ``--address`` that starts a local Ray cluster in this process (any other is ``ray.init``'s address:
#: ``auto``, ``ray://HOST:10001``).
LOCAL = "local"
#: The column :func:`encode_dataset` adds.
EMBEDDING = "embedding"


def require_ray() -> Any:
    """The ``ray`` module.

    Raises:
        ProtoembedError: Ray is not installed (``pip install protoembed[ray]``)."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise ProtoembedError(
            "the ray engine needs Ray Data: pip install 'protoembed[ray]' (or pip install 'ray[data]')"
        ) from None
    return ray


def connect(address: str | None) -> None:
    """Join the Ray cluster at ``address`` (``None`` / :data:`LOCAL`: a local one started here), unless
    this process is connected already."""
    ray = require_ray()
    if not ray.is_initialized():
        ray.init(address=None if address in (None, LOCAL) else address, log_to_driver=False)


def shard_datasource(job: ShardJob, pending: list[int]) -> Any:
    """A Ray Data datasource of ``job``'s ``pending`` shards: one read task streaming the input once,
    one block per shard (columns ``index``, ``numbers``, ``ids`` as JSON, ``texts``, one row)."""
    import pyarrow as pa
    from ray.data.block import BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

    class ShardDatasource(Datasource):
        def estimate_inmemory_data_size(self) -> int | None:
            return None

        def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None, **_: Any) -> list:
            def read() -> Iterator[pa.Table]:
                for index, numbers, ids, texts in iter_shards(job.source, job.shard_size, pending):
                    keys = json.dumps(ids, ensure_ascii=False)
                    yield pa.table({"index": [index], "numbers": [numbers], "ids": [keys], "texts": [texts]})

            meta = BlockMetadata(num_rows=len(pending), size_bytes=None, input_files=None, exec_stats=None)
            return [ReadTask(read, meta)] if pending else []

        def get_name(self) -> str:
            return "ProtoembedShards"

    return ShardDatasource()


def shard_dataset(job: ShardJob, pending: list[int]) -> ray.data.Dataset:
    """The Ray Dataset of ``job``'s ``pending`` shards (:func:`shard_datasource`), a block each: its
    ``target_max_block_size`` is one byte, as Ray otherwise merges a read task's small blocks into one
    (up to 128 MiB), and one block is one actor's work: one actor would encode every shard while the
    others idle."""
    ray = require_ray()
    context = ray.data.DataContext.get_current()  # the dataset keeps a copy of it
    coalesce = context.target_max_block_size
    context.target_max_block_size = 1
    try:
        return ray.data.read_datasource(  # the reader takes no CPU from the actors
            shard_datasource(job, pending), override_num_blocks=1, num_cpus=0
        )
    finally:
        context.target_max_block_size = coalesce


class Encoder:
    """The actor class of ``map_batches``: loads the model of ``spec`` once (on its GPU when Ray gave it
    one), then, given a ``job``, encodes and writes each shard of a batch (one row per shard, as
    :func:`shard_datasource` reads them) and returns their records (``name``, ``start``, ``stop``,
    ``sha256``); without one, encodes the ``column`` of any batch and returns it with an
    :data:`EMBEDDING` column (:func:`encode_dataset`). ``encode``: ``model.encode``'s keywords."""

    def __init__(
        self, spec: ModelSpec, job: ShardJob | None = None, column: str = "text", encode: dict | None = None
    ) -> None:
        import torch

        from protoembed.model.loading import load_model

        if spec.device is None and torch.cuda.is_available():
            spec = spec.model_copy(update={"device": "cuda"})  # the GPU Ray gave this actor
        self.model = load_model(spec)
        self.job = job
        self.column = column
        self.encode = dict(encode or {})

    def __call__(self, batch: pa.Table) -> pa.Table:
        import pyarrow as pa

        if self.job is None:
            texts = batch.column(self.column).to_pylist()
            try:
                vectors = self.model.encode(texts, show_progress_bar=False, **self.encode)
            except EmptySentenceError as err:
                raise ProtoembedError(f"column {self.column!r}: {err}") from None
            return batch.append_column(EMBEDDING, vector_column(np.asarray(vectors)))
        records: list[ShardRecord] = []
        for row in batch.to_pylist():
            index, numbers, texts = row["index"], row["numbers"], row["texts"]
            vectors = encode_shard(self.model, self.job, numbers, texts, index=index)
            records.append(write_shard(self.job, index, vectors, json.loads(row["ids"])))
        return pa.Table.from_pylist([record.model_dump() for record in records])


def _compute(workers: int) -> Any:
    """Ray Data's pool of ``workers`` actors."""
    from ray.data import ActorPoolStrategy

    return ActorPoolStrategy(size=workers)


def encode_corpus_on_ray(
    model: ModelSpec | str | os.PathLike[str],
    input: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    address: str | None = None,
    gpus_per_worker: float = 0,
    **options: Any,
) -> CorpusVectors:
    """:func:`~protoembed.corpus.encoding.encode_corpus` (``options``: its keywords; ``workers``: the
    actors) on Ray Data: the same folder, shards, manifest and resume.

    Args:
        model: a spec (a name, folder or :class:`~protoembed.model.model_spec.ModelSpec`), which each
            actor loads.
        address: ``ray.init``'s address (``auto``, ``ray://HOST:10001``; default: the cluster this process
            is connected to, else a local one started here).
        gpus_per_worker: the GPUs of each actor (0: the CPU).
    Raises:
        ProtoembedError: Ray is not installed, a loaded model; as ``encode_corpus``.
    """
    require_ray()

    def runner(spec: ModelSpec, job: ShardJob, scanned: Scan, resume: bool, workers: int) -> CorpusVectors:
        return encode_on_ray(spec, job, scanned, resume, address, workers, gpus_per_worker)

    return encode_corpus(model, input, out_dir, runner=runner, **options)


def encode_on_ray(
    spec: ModelSpec,
    job: ShardJob,
    scanned: Scan,
    resume: bool,
    address: str | None,
    workers: int,
    gpus_per_worker: float,
) -> CorpusVectors:
    """The runner of :func:`encode_corpus_on_ray`, the folder's lock held: ``workers`` actors of
    ``gpus_per_worker`` GPUs each on the cluster at ``address``."""
    from protoembed.model.loading import load_model

    require_ray()
    existing = check_folder(job.folder, resume)
    loaded = load_model(spec.model_copy(update={"device": "cpu"}))  # the digest and settings
    job = with_ranges(loaded, job, existing)
    manifest, pending = prepare(job.folder, existing, new_manifest(loaded, spec, job, scanned))
    del loaded
    if pending:
        connect(address)
        records = shard_dataset(job, pending).map_batches(
            Encoder,
            fn_constructor_kwargs={"spec": spec, "job": job},
            batch_size=1,
            batch_format="pyarrow",
            compute=_compute(workers),
            num_gpus=gpus_per_worker or None,
        )
        for row in records.iter_rows():
            manifest.shards.append(ShardRecord.model_validate(dict(row)))
            write_manifest(job.folder, manifest)
    finish(job, manifest)
    return open_corpus(job.folder)


def encode_dataset(
    ds: ray.data.Dataset,
    model: ModelSpec | str | os.PathLike[str],
    column: str = "text",
    *,
    workers: int = 1,
    gpus_per_worker: float = 0,
    batch_size: int = 64,
    **encode: Any,
) -> ray.data.Dataset:
    """``ds`` with an ``embedding`` column: each row's ``column`` encoded by ``model``.

    Args:
        ds: a Ray Dataset holding the texts (strings) in ``column``.
        model: a model name or folder, or a :class:`~protoembed.model.model_spec.ModelSpec` (its head,
            runtime, precision, prompts, ``truncate_dim``); each actor loads it once.
        column: the column of texts.
        workers: actors (one model each).
        gpus_per_worker: GPUs each actor holds (0: the CPU).
        batch_size: the rows of one ``model.encode`` call (and of its batches).
        encode: more of :meth:`protoembed.Embedder.encode`'s keywords (``normalize``, ``prompt_name``,
            ``vectors``, ``max_tokens_per_batch`` ...).
    Returns:
        a lazy Ray Dataset: ``ds``'s columns and ``embedding``, a fixed-size list of float32 (or of the
        ``vectors`` type) per row.
    Raises:
        ProtoembedError: Ray is not installed; when the dataset runs: a row whose text has no tokens,
            named by ``column``.
    """
    require_ray()
    spec = model if isinstance(model, ModelSpec) else model_spec(model=str(model))
    return ds.map_batches(
        Encoder,
        fn_constructor_kwargs={
            "spec": spec,
            "column": column,
            "encode": {"batch_size": batch_size, **encode},
        },
        batch_size=batch_size,
        batch_format="pyarrow",
        compute=_compute(workers),
        num_gpus=gpus_per_worker or None,
    )
