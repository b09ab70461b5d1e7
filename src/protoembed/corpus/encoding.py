"""Corpus-scale encoding: :func:`encode_corpus` (a file of any size -> a folder of ``.npy`` shards).

The corpus is read twice, streamed (:mod:`protoembed.corpus.sources`): once to check every row and count
them, then shard by shard while encoding, so memory holds one shard's texts and vectors per process,
never the corpus. Shard ``k`` holds rows ``[k * shard_size, (k + 1) * shard_size)``; it is encoded on
its own, by one call of the model's ``encode`` (:mod:`protoembed.model.batching`), so its vectors depend
only on its rows, the model and the settings: not on which process encodes it, nor on whether the run
was interrupted. Every shard is written atomically (temp name, then rename) and recorded in
``manifest.json`` (:mod:`protoembed.corpus.manifest`) as it finishes.

Resuming (``resume=True``) after Ctrl-C or ``kill -9`` keeps the finished shards and encodes the rest:

- the manifest's ``model_digest`` (the model's weights digest and the settings that change vectors:
  :class:`~protoembed.corpus.manifest.EncodeSettings`) must equal this run's, and the digest of the
  input's texts (:func:`~protoembed.corpus.sources.texts_digest`, taken as the input is first read) and
  ``shard_size`` too, else the resume is refused with one line naming each value, recorded and now; a
  version-1 manifest, which records no texts digest, is refused too;
- a recorded shard whose file is missing or has another SHA-256 (corrupt) is logged as a warning and
  encoded again (the result is the same bytes as the lost shard's);
- a shard file the manifest does not record (a kill between its rename and the manifest's update, or a
  file copied in by hand) is never trusted, whatever its shape: it is encoded again (logged);
- a shard is made durable (the file, then its folder, fsynced: :func:`protoembed.outputs.io.write_atomic`)
  before the manifest names it, so after a power cut the manifest names no shard that was never written;
- hidden temp files of interrupted writes are removed.

Without ``resume``, a folder that holds a manifest or shard files is refused (a finished run too), so
another run's vectors are never mixed in or overwritten. The run's main process holds the folder's lock (:mod:`protoembed.outputs.folder_lock`) from the check of the folder to the final
manifest, so a second run into a folder in use is refused at once.

Parallel runs produce the same shards as one process: ``workers`` spawned processes on one machine (one
reader feeds them shards; the cores split between them (:func:`worker_cores`), or one device each); past
one machine, Ray's actors (:mod:`protoembed.corpus.ray_engine`, through ``runner``). Under ``torchrun``
(``WORLD_SIZE`` above 1) encode refuses to start: one way within a machine, one past it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import queue
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from protoembed.core.errors import EmptySentenceError, ProtoembedError
from protoembed.core.progress import Progress
from protoembed.core.version import __version__
from protoembed.corpus.manifest import (
    IDS,
    MANIFEST,
    MAX_SHARDS,
    NPY,
    OUTPUT_FORMATS,
    PARQUET,
    TEMP_NAME,
    CorpusManifest,
    EncodeSettings,
    InputRecord,
    ShardRecord,
    read_manifest,
    shard_files,
    shard_name,
    shard_problem,
    shard_table,
    write_manifest,
)
from protoembed.corpus.sources import CorpusSource, Id, Scan, blank_error, corpus_source, scan
from protoembed.corpus.vectors import CorpusVectors, open_corpus
from protoembed.data.download.fetch import sha256_file
from protoembed.model.model_spec import ModelSpec, model_spec
from protoembed.model.quantize import (
    FLOAT32,
    calibration_ranges,
    calibration_rows,
    check_ranges,
    check_vectors,
    needs_ranges,
)
from protoembed.outputs.folder_lock import hold_output_dir
from protoembed.outputs.io import check_writable_folder, write_atomic

if TYPE_CHECKING:
    from protoembed.model.protocol import SentenceEmbedder

logger = logging.getLogger(__name__)

#: Rows per shard unless told otherwise.
DEFAULT_SHARD_SIZE = 100_000
#: Who runs the encoding: this machine's processes, or Ray Data's actors (:mod:`protoembed.corpus.ray_engine`).
LOCAL_ENGINE, RAY_ENGINE = "local", "ray"
ENGINES = (LOCAL_ENGINE, RAY_ENGINE)


@dataclass(frozen=True)
class ShardJob:
    """What a process needs to encode and write shards (picklable, for spawned workers): the
    ``source``, the output ``folder``, ``shard_size``, the corpus's ``rows``, and ``encode``'s
    ``batch_size``, ``normalize``, ``prompt_name``, ``allow_empty``, ``tokenizer_workers`` and
    ``max_tokens_per_batch`` (:class:`~protoembed.corpus.manifest.EncodeSettings` says which change the
    vectors), the stored ``vectors`` type with its int8 / uint8 ``ranges``, and the shards'
    ``output_format`` (:data:`~protoembed.corpus.manifest.OUTPUT_FORMATS`)."""

    source: CorpusSource
    folder: Path
    shard_size: int
    rows: int
    batch_size: int
    normalize: bool | None
    prompt_name: str | None
    allow_empty: bool
    tokenizer_workers: int | None = None
    max_tokens_per_batch: int | None = None
    vectors: str = FLOAT32
    ranges: np.ndarray | None = None
    output_format: str = NPY

    def start(self, index: int) -> int:
        """The first row of shard ``index``."""
        return index * self.shard_size

    @property
    def pipeline(self) -> dict[str, int]:
        """``tokenizer_workers`` and ``max_tokens_per_batch`` as ``encode``'s keywords, those given."""
        given = (
            ("tokenizer_workers", self.tokenizer_workers),
            ("max_tokens_per_batch", self.max_tokens_per_batch),
        )
        return {name: value for name, value in given if value is not None}

    def shard_label(self, index: int) -> str:
        """``shard-00003.npy (rows 300000 to 399999)``: how messages name shard ``index``."""
        start = self.start(index)
        return f"{shard_name(index, self.output_format)} (rows {start} to {min(self.rows, start + self.shard_size) - 1})"


# --------------------------------------------------------------------------- one shard


#: One shard's rows: its index, each text's line or row number in the file (for messages), id and text.
ShardRows = tuple[int, list[int], list[Id], list[str]]


def iter_shards(source: CorpusSource, shard_size: int, wanted: Collection[int]) -> Iterator[ShardRows]:
    """``(shard index, positions, ids, texts)`` of the shards in ``wanted``, in row order, read as they
    come (the rows of other shards are skipped; reading stops after the last wanted shard).

    ``positions``: each text's line or row number in the file (for messages); ``ids``: as
    :meth:`~protoembed.corpus.sources.CorpusSource.records` gives them."""
    wanted = set(wanted)
    if not wanted:
        return
    last = max(wanted)
    current = -1
    numbers: list[int] = []
    ids: list[Id] = []
    texts: list[str] = []
    for row, (number, key, text) in enumerate(source.records()):
        index = row // shard_size
        if index != current:
            if texts:
                yield current, numbers, ids, texts
                numbers, ids, texts = [], [], []
            if index > last:
                return
            current = index
        if index in wanted:
            numbers.append(number)
            ids.append(key)
            texts.append(text)
    if texts:
        yield current, numbers, ids, texts


def encode_shard(
    model: SentenceEmbedder,
    job: ShardJob,
    numbers: Sequence[int],
    texts: list[str],
    progress: Callable[[int], Any] | None = None,
    index: int | None = None,
) -> np.ndarray:
    """The vectors (len(texts), D) float32 (or ``job.vectors``) of one shard's ``texts``: one ``model.encode`` (its pipeline
    tokenises the next batches while the forward runs), ``progress(rows)`` called after each batch.

    Raises:
        ProtoembedError: texts without tokens and no ``allow_empty`` (their lines or rows named, from
            ``numbers``); any other one-line error of ``encode`` (a failed tokenizer worker...) with the
            shard (``index``) named first.
    """
    try:
        vectors = model.encode(
            texts,
            batch_size=job.batch_size,
            normalize=job.normalize,
            show_progress_bar=False,
            allow_empty=job.allow_empty,
            prompt_name=job.prompt_name,
            progress=progress,
            vectors=job.vectors,
            ranges=job.ranges,
            **job.pipeline,
        )
    except EmptySentenceError as err:
        raise blank_error(job.source, [numbers[i] for i in err.indexes], len(err.indexes)) from None
    except ProtoembedError as err:
        if index is None:
            raise
        raise ProtoembedError(f"{job.shard_label(index)}: {err}") from None
    return np.asarray(vectors)


def write_shard(job: ShardJob, index: int, vectors: np.ndarray, ids: list[Id]) -> ShardRecord:
    """Write shard ``index`` atomically into ``job.folder`` and return its record (with its SHA-256): its
    ``vectors`` (``npy``), or its ``ids`` and ``vectors`` (``parquet``: :func:`shard_table`).

    Raises:
        ProtoembedError: the write failed (a full disk: one line; no partial file is left)."""
    path = job.folder / shard_name(index, job.output_format)
    if job.output_format == PARQUET:
        import pyarrow.parquet as pq

        table = shard_table(ids, vectors)
        write_atomic(path, lambda tmp: pq.write_table(table, tmp), suffix=".parquet")
    else:
        write_atomic(path, lambda tmp: np.save(tmp, vectors), suffix=".npy")
    start = job.start(index)
    return ShardRecord(name=path.name, start=start, stop=start + len(vectors), sha256=sha256_file(path))


# --------------------------------------------------------------------------- the folder


def check_folder(folder: Path, resume: bool) -> CorpusManifest | None:
    """The manifest already in ``folder`` (``None``: none), after refusing what may not be written into.

    Raises:
        ProtoembedError: ``folder`` is a file or cannot be written in
            (:func:`~protoembed.outputs.io.check_writable_folder`); without ``resume``: it holds a finished
            run, or another run's manifest or shards; with ``resume``: shards without a manifest.
    """
    check_writable_folder(folder)
    manifest = read_manifest(folder)
    shards = shard_files(folder)
    if not resume:
        if manifest is not None and manifest.complete:
            raise ProtoembedError(
                f"{folder} already holds a finished encoded corpus ({manifest.rows} rows); pass --resume to "
                "check it and keep it, or choose another output folder"
            )
        if manifest is not None or shards:
            held = MANIFEST if manifest is not None else shards[min(shards)].name
            raise ProtoembedError(
                f"{folder} holds another run's output ({held}); pass --resume to continue that run, or "
                "choose another output folder"
            )
    elif manifest is None and shards:
        raise ProtoembedError(
            f"{folder} holds shard files ({shards[min(shards)].name}) but no {MANIFEST}; they are not of "
            "a run that can be resumed: choose another output folder"
        )
    return manifest


def _shown(name: str, value: Any) -> str:
    """``value`` as a refusal names it: a SHA-256 by its first 12 digits, anything else as its repr."""
    return f"{value[:12]}..." if name.endswith("sha256") and isinstance(value, str) else repr(value)


def _changes(pairs: Iterable[tuple[str, Any, Any]]) -> list[str]:
    """``name: recorded X, now Y`` for each ``(name, recorded, now)`` whose values differ."""
    return [f"{name}: recorded {_shown(name, a)}, now {_shown(name, b)}" for name, a, b in pairs if a != b]


def resume_refusal(existing: CorpusManifest, fresh: CorpusManifest) -> str | None:
    """Why a run whose manifest would be ``fresh`` may not continue the run of ``existing`` and what to do
    (one line), or ``None`` when it may: it needs the same model digest (the weights and
    :class:`~protoembed.corpus.manifest.EncodeSettings`), ``shard_size`` and input texts
    (``input.texts_sha256``), and a manifest that records them (not version 1). The input's path,
    format, field and size are free: the same texts give the same vectors."""
    if existing.input.texts_sha256 is None:
        return (
            f"{MANIFEST} was written by protoembed {existing.protoembed_version} (format version "
            f"{existing.format_version}), which records no digest of the input's texts, so this run's input cannot "
            "be checked against it; encode into another output folder"
        )
    settings = _changes((f"settings.{k}", v, getattr(fresh.settings, k)) for k, v in existing.settings)
    parts = []
    if existing.model_digest != fresh.model_digest:
        parts.append(
            f"digest mismatch: the folder was encoded by {existing.model} ({existing.model_digest[:12]}), this "
            f"run gives {fresh.model_digest[:12]}" + ("" if settings else " (other weights)")
        )
    parts += settings
    parts += _changes(
        [
            ("shard_size", existing.shard_size, fresh.shard_size),
            ("output_format", existing.output_format, fresh.output_format),
            ("input.id_field", existing.input.id_field, fresh.input.id_field),
        ]
    )
    if existing.ranges != fresh.ranges:
        parts.append("the int8 / uint8 ranges differ (another calibration)")
    if existing.input.texts_sha256 != fresh.input.texts_sha256:
        old, new = existing.input, fresh.input
        names = ("texts_sha256", "rows", "format", "field")
        parts.append("the input's texts differ")
        parts += _changes((f"input.{k}", getattr(old, k), getattr(new, k)) for k in names)
    if not parts:
        return None
    return (
        f"{'; '.join(parts)}; resume with the same model, settings and input, or choose another output folder"
    )


def prepare(
    folder: Path, existing: CorpusManifest | None, fresh: CorpusManifest
) -> tuple[CorpusManifest, list[int]]:
    """The manifest to continue and the shard indexes still to encode; the manifest is written.

    ``existing``: the folder's manifest (a resume) or ``None`` (``fresh`` is written as it is). See the
    module docstring for what a resume checks, keeps and redoes.

    Raises:
        ProtoembedError: a resume :func:`resume_refusal` refuses (why, each value recorded and now).
    """
    folder.mkdir(parents=True, exist_ok=True)
    for entry in folder.iterdir():  # temp files of writes a kill interrupted
        if TEMP_NAME.match(entry.name) and entry.is_file():
            entry.unlink(missing_ok=True)
    count = fresh.shard_count
    if existing is None:
        manifest = fresh
    else:
        refusal = resume_refusal(existing, fresh)
        if refusal is not None:
            raise ProtoembedError(f"{folder}: cannot resume: {refusal}")
        manifest = existing
        kept, bad = [], set()
        for record in existing.shards:
            problem = shard_problem(folder, record)
            if problem is None:
                kept.append(record)
            else:
                logger.warning("%s; encoding it again", problem)
                bad.add(record.start // fresh.shard_size)
        recorded = {record.start // fresh.shard_size for record in kept} | bad
        for index, path in sorted(shard_files(folder).items()):
            if index not in recorded and index < count:
                logger.warning("%s: not recorded in %s; encoding it again", path, MANIFEST)
        manifest.shards = kept
    done = {record.start // fresh.shard_size for record in manifest.shards}
    manifest.complete = len(done) == count
    write_manifest(folder, manifest)
    return manifest, [index for index in range(count) if index not in done]


# --------------------------------------------------------------------------- the model


def _spec_of(model: Any) -> ModelSpec | None:
    """The spec of a model given as a spec (``None`` for a loaded model)."""
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, (str, os.PathLike)):
        return model_spec(model=str(model))
    return None


def encode_settings(model: SentenceEmbedder, job: ShardJob) -> EncodeSettings:
    """The settings of ``model`` and ``job`` that change the vectors (:class:`EncodeSettings`).

    Raises:
        ProtoembedError: an unknown ``prompt_name``.
    """
    from protoembed.inputs.prompts import resolved_prompt

    return EncodeSettings(
        head=model.head,
        template=model.encoder.template,
        max_seq_length=model.max_seq_length,
        runtime=model.runtime,
        precision=model.precision,
        normalize=bool(job.normalize) or bool(model.normalize),
        truncate_dim=model.truncate_dim,
        prompt_name=job.prompt_name,
        prompt=resolved_prompt(model, job.prompt_name),
        batch_size=job.batch_size,
        max_tokens_per_batch=job.max_tokens_per_batch,
        vectors=job.vectors,
    )


def with_ranges(model: SentenceEmbedder, job: ShardJob, existing: CorpusManifest | None) -> ShardJob:
    """``job`` with the int8 / uint8 ranges every shard is quantised with, one for the whole corpus: the
    job's own (a calibration given), else those a resumed run recorded, else
    :func:`~protoembed.model.quantize.calibration_ranges` of the float vectors of the corpus's
    :func:`~protoembed.model.quantize.calibration_rows` (at most
    :data:`~protoembed.model.quantize.CALIBRATION_ROWS`, evenly spaced), encoded first. Other types:
    ``job`` as it is."""
    if not needs_ranges(job.vectors):
        return job
    if job.ranges is not None:
        return replace(job, ranges=check_ranges(job.ranges, model.dimension))
    if existing is not None and existing.ranges is not None:
        return replace(job, ranges=np.asarray(existing.ranges, dtype=np.float32))
    wanted = set(calibration_rows(job.rows).tolist())
    numbers, texts = [], []
    for row, (number, text) in enumerate(job.source.rows()):
        if row in wanted:
            numbers.append(number)
            texts.append(text)
    floats = encode_shard(model, replace(job, vectors=FLOAT32), numbers, texts)
    logger.info("%s ranges calibrated on %d rows of the corpus", job.vectors, len(texts))
    return replace(job, ranges=calibration_ranges(floats))


def corpus_digest(model: SentenceEmbedder, settings: EncodeSettings, spec: ModelSpec | None = None) -> str:
    """SHA-256 (hex) of the model and ``settings``: two runs with the same digest write the same shards.

    The model is hashed by its folder's files when given as a ``spec`` (every file's name and bytes:
    :func:`protoembed.model.export.cache.export_digest`, which hashes any folder so), so that every process
    and every load agrees even where loading draws unused weights at random (a bare backbone's pooler);
    a loaded model by its weights and tokenisation (:func:`protoembed.model.export.cache.model_digest`)."""
    if spec is not None:
        from protoembed.model.backbones import resolve_model_dir
        from protoembed.model.export.cache import export_digest

        weights = export_digest(resolve_model_dir(spec.model))
    else:
        from protoembed.model.export.cache import model_digest

        weights = model_digest(model)
    payload = {"model": weights, "settings": settings.model_dump()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def new_manifest(model: SentenceEmbedder, asked: Any, job: ShardJob, scanned: Scan) -> CorpusManifest:
    """The manifest of a run that has done nothing yet (``scanned``: the input's first read)."""
    settings = encode_settings(model, job)
    source = job.source
    return CorpusManifest(
        protoembed_version=__version__,
        model=asked.model if isinstance(asked, ModelSpec) else type(asked).__name__,
        model_digest=corpus_digest(model, settings, asked if isinstance(asked, ModelSpec) else None),
        runtime=settings.runtime,
        precision=settings.precision,
        dimension=model.dimension,
        settings=settings,
        input=InputRecord(
            path=str(source.path.resolve()),
            format=source.format,
            field=source.field,
            rows=job.rows,
            size=scanned.size,
            texts_sha256=scanned.texts_sha256,
            id_field=source.id_field,
        ),
        shard_size=job.shard_size,
        rows=job.rows,
        shards=[],
        ranges=None if job.ranges is None else job.ranges.tolist(),
        output_format=job.output_format,
    )


def _progress(total: int, initial: int, show: bool | None) -> Progress:
    """The progress on stderr (:class:`~protoembed.core.progress.Progress`: sentences, their rate and the time
    left; a bar on a terminal, a line every 10 s elsewhere); ``show=False``: none."""
    return Progress(total, initial=initial, show=show is not False)


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ProtoembedError(f"{name} must be a positive integer, got {value!r}")
    return value


def world_size() -> int:
    """The processes of a ``torchrun`` launch (``WORLD_SIZE``; 1 outside one): encode refuses more than one,
    its multi-process path being ``workers`` and its multi-machine one Ray (:mod:`protoembed.corpus.ray_engine`)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


# --------------------------------------------------------------------------- the entry point


def encode_corpus(
    model: SentenceEmbedder | ModelSpec | str | os.PathLike[str],
    input: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    format: str | None = None,
    field: str | None = None,
    column: str | None = None,
    shard_size: int = DEFAULT_SHARD_SIZE,
    batch_size: int = 64,
    normalize: bool | None = None,
    prompt_name: str | None = None,
    resume: bool = False,
    workers: int = 1,
    devices: Sequence[str] | None = None,
    show_progress: bool | None = None,
    allow_empty: bool = False,
    tokenizer_workers: int | None = None,
    max_tokens_per_batch: int | None = None,
    vectors: str = FLOAT32,
    ranges: np.ndarray | None = None,
    id_field: str | None = None,
    id_column: str | None = None,
    output_format: str = NPY,
    runner: Callable[..., CorpusVectors] | None = None,
) -> CorpusVectors:
    """Encode a corpus file of any size into a folder of ``.npy`` (or Parquet) shards and ``manifest.json``.

    Args:
        model: a loaded model (:func:`protoembed.load`), or its spec: a name, folder or hub id, or a
            :class:`~protoembed.model.model_spec.ModelSpec` (with ``workers > 1``: a spec, which each worker
            loads).
        input: the corpus file (:mod:`protoembed.corpus.sources`).
        out_dir: the output folder (created; see the module docstring for an existing one).
        format: ``txt``, ``jsonl``, ``csv``, ``parquet``, or ``auto`` / ``None`` (by the file name).
        field: the JSONL field holding the text.
        column: the CSV / Parquet column holding the text.
        id_field, id_column: the JSONL field / table column holding each row's id (a string or an
            integer): ``npy`` shards get an ``ids.jsonl`` beside them, Parquet shards an ``id`` column
            (without one: the row number, from 0); recorded in the manifest (a resume needs the same).
        output_format: ``npy`` (arrays, the default) or ``parquet`` (a table of ``id`` and ``vector``
            per shard: :func:`~protoembed.corpus.manifest.shard_table`).
        shard_size: rows per shard file.
        batch_size: as :meth:`protoembed.Embedder.encode`'s.
        normalize: as :meth:`protoembed.Embedder.encode`'s.
        prompt_name: as :meth:`protoembed.Embedder.encode`'s.
        allow_empty: as :meth:`protoembed.Embedder.encode`'s.
        tokenizer_workers: as :meth:`protoembed.Embedder.encode`'s (in each worker process).
        max_tokens_per_batch: as :meth:`protoembed.Embedder.encode`'s.
        vectors: the shards' type: ``float32``, or ``int8``, ``uint8``, ``binary``, ``ubinary``
            (:mod:`protoembed.model.quantize`: sentence-transformers' ``quantize_embeddings`` bytes).
        ranges: ``int8`` / ``uint8``: the ``(2, D)`` ranges of every shard (default: calibrated on the
            corpus itself, :func:`with_ranges`); recorded in the manifest.
        resume: continue the run in ``out_dir`` (see the module docstring).
        runner: who encodes, given ``(spec, job, scanned, resume, workers)`` with the folder locked
            (default: this machine's processes);
            :func:`protoembed.corpus.ray_engine.encode_corpus_on_ray` passes Ray Data's actors.
        workers: processes on this machine (spawned; each loads the model), or the runner's workers.
        devices: the workers' devices, in turn (``["cuda:0", "cuda:1"]``; default: the spec's device, or
            without one, worker k on GPU k modulo the GPUs when there are any); given without ``workers``,
            one worker per device.
        show_progress: ``False``: no progress on stderr (default: a bar with sentences/s on a terminal,
            a line every 10 s elsewhere; :class:`~protoembed.core.progress.Progress`).
    A run given a spec is resumable by any process that loads the same spec (its digest hashes the
    model folder's files); a loaded model is known by its weights, so a bare backbone loaded again (whose
    unused pooler is drawn at random) is refused as another model.

    Returns:
        the vectors, memory-mapped (:class:`~protoembed.corpus.vectors.CorpusVectors`).
    Raises:
        ProtoembedError: bad input (the file and line or row named), an output folder that may not be
            written into, a refused resume, a failed write (nothing partial is left).
    """
    _positive("shard_size", shard_size)
    _positive("batch_size", batch_size)
    _positive("workers", workers)
    from protoembed.model.batching import check_pipeline_options

    check_pipeline_options(tokenizer_workers, max_tokens_per_batch)
    check_vectors(vectors)
    if output_format not in OUTPUT_FORMATS:
        raise ProtoembedError(
            f"unknown output format {output_format!r}: expected {' or '.join(OUTPUT_FORMATS)}"
        )
    if ranges is not None:
        if not needs_ranges(vectors):
            raise ProtoembedError(f"ranges are for int8 / uint8 vectors, not {vectors}")
        ranges = np.asarray(ranges, dtype=np.float32)
    devices = [str(device) for device in devices] if devices else None
    if devices and workers == 1:
        workers = len(devices)
    source = corpus_source(input, format, field, column, id_field, id_column)
    scanned = scan(source)
    if scanned.blank_count and not allow_empty:
        raise blank_error(source, scanned.blank, scanned.blank_count)
    if -(-scanned.rows // shard_size) > MAX_SHARDS:
        raise ProtoembedError(
            f"{source.path}: {scanned.rows} rows in shards of {shard_size} make more than {MAX_SHARDS} shards "
            f"(their names would no longer sort in row order); use a shard size of at least "
            f"{-(-scanned.rows // MAX_SHARDS)}"
        )
    folder = Path(out_dir).expanduser()
    job = ShardJob(
        source,
        folder,
        shard_size,
        scanned.rows,
        batch_size,
        normalize,
        prompt_name,
        allow_empty,
        tokenizer_workers,
        max_tokens_per_batch,
        vectors,
        ranges,
        output_format,
    )
    spec = _spec_of(model)
    if runner is not None:
        if spec is None:
            raise ProtoembedError(
                "the ray engine loads the model in each actor: pass it as a spec (a name or folder)"
            )
        check_folder(folder, resume)
        with _locked(folder):
            return runner(spec, job, scanned, resume, workers)
    if world_size() > 1:
        raise ProtoembedError(
            f"encode runs as one process per run, not under torchrun (WORLD_SIZE {world_size()}): "
            "--workers / --devices within one machine, --engine ray past one machine"
        )
    check_folder(folder, resume)  # refused before the folder is made (and locked)
    if workers > 1 and spec is None:
        raise ProtoembedError(
            "workers > 1 loads the model in each worker: pass the model as a spec (a name or folder), "
            "not a loaded model"
        )
    with _locked(folder):
        return _encode_here(model, spec, job, scanned, resume, workers, devices, show_progress)


def _locked(folder: Path) -> contextlib.AbstractContextManager[Path]:
    """The lock of the output ``folder`` (:func:`~protoembed.outputs.folder_lock.hold_output_dir`)."""
    return hold_output_dir(folder, run="encode run", option="output folder (-o)")


def _encode_here(
    model: Any,
    spec: ModelSpec | None,
    job: ShardJob,
    scanned: Scan,
    resume: bool,
    workers: int,
    devices: list[str] | None,
    show_progress: bool | None,
) -> CorpusVectors:
    """:func:`encode_corpus` in this process and its ``workers``, the folder's lock held."""
    folder, source, shard_size = job.folder, job.source, job.shard_size
    existing = check_folder(folder, resume)  # again: another run may have finished meanwhile
    if spec is None:
        loaded = model
    else:
        from protoembed.model.loading import load_model

        loaded = load_model(spec.model_copy(update={"device": "cpu"}) if workers > 1 else spec)
    job = with_ranges(loaded, job, existing)
    manifest, pending = prepare(folder, existing, new_manifest(loaded, spec or model, job, scanned))
    done_rows = sum(record.stop - record.start for record in manifest.shards)
    with _progress(job.rows, done_rows, show_progress) as bar:
        if workers > 1:
            del loaded  # the workers load their own
            _run_workers(job, spec, pending, manifest, workers, devices, bar)
        else:
            for index, numbers, ids, texts in iter_shards(source, shard_size, pending):
                vectors = encode_shard(loaded, job, numbers, texts, bar.update, index)
                manifest.shards.append(write_shard(job, index, vectors, ids))
                write_manifest(folder, manifest)
    finish(job, manifest)
    return open_corpus(folder)


def write_ids(job: ShardJob) -> ShardRecord:
    """Write :data:`~protoembed.corpus.manifest.IDS` into ``job.folder`` atomically: each row's id, one
    JSON value a line, in row order (the input read once more, streamed); return its record.

    Raises:
        ProtoembedError: the write failed (nothing partial is left)."""
    path = job.folder / IDS

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as out:
            for _, key, _ in job.source.records():
                out.write(json.dumps(key, ensure_ascii=False) + "\n")

    write_atomic(path, write, suffix=".jsonl")
    return ShardRecord(name=IDS, start=0, stop=job.rows, sha256=sha256_file(path))


def finish(job: ShardJob, manifest: CorpusManifest) -> None:
    """Mark ``manifest`` complete and write it, every shard being in; ``npy`` shards of an input with an
    id field get their ids file first (:func:`write_ids`; kept from an earlier run when it is whole)."""
    wanted = job.output_format == NPY and job.source.id_field is not None
    if wanted and (manifest.ids is None or shard_problem(job.folder, manifest.ids) is not None):
        manifest.ids = write_ids(job)
    manifest.complete = True
    write_manifest(job.folder, manifest)


# --------------------------------------------------------------------------- workers on one machine


def worker_cores(workers: int) -> list[list[int]]:
    """The CPU cores of each of ``workers`` workers: this process's cores split into contiguous runs
    (every worker at least one; with fewer cores than workers, they share them all)."""
    from protoembed.core.threads import usable_cores

    cores = usable_cores()
    if len(cores) < workers:
        return [cores] * workers
    return [cores[k * len(cores) // workers : (k + 1) * len(cores) // workers] for k in range(workers)]


def _worker(job: ShardJob, spec: ModelSpec, number: int, cores: list[int], tasks: Any, results: Any) -> None:
    """Spawned worker ``number`` on ``cores``: pinned to them (so torch, ONNX Runtime and OpenVINO each
    run one thread per core of its own, none oversubscribed), load the model (without a device named:
    on GPU ``number`` modulo the GPUs when there are any), then encode and write each shard it is handed
    (``None``: stop); report progress, finished shards and errors on ``results``."""
    try:
        import torch

        from protoembed.model.loading import load_model

        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, cores)
        torch.set_num_threads(len(cores))
        if spec.device is None and torch.cuda.is_available():
            spec = spec.model_copy(update={"device": f"cuda:{number % torch.cuda.device_count()}"})
        model = load_model(spec)
        while (task := tasks.get()) is not None:
            index, numbers, ids, texts = task
            results.put(("start", number, index))
            vectors = encode_shard(model, job, numbers, texts, lambda n: results.put(("progress", n)), index)
            results.put(("done", write_shard(job, index, vectors, ids)))
    except ProtoembedError as err:
        results.put(("error", str(err), True))
    except KeyboardInterrupt:
        pass
    except BaseException as err:  # reported to the parent, which raises it
        results.put(("error", f"worker failed: {type(err).__name__}: {err}", False))


def _feed(
    job: ShardJob, pending: list[int], tasks: Any, results: Any, workers: int, stop: threading.Event
) -> None:
    """The reader: put each pending shard's rows on ``tasks`` (bounded: memory holds a few shards), then
    one ``None`` per worker."""
    try:
        for task in iter_shards(job.source, job.shard_size, pending):
            while not stop.is_set():
                try:
                    tasks.put(task, timeout=0.5)
                    break
                except queue.Full:
                    continue
            if stop.is_set():
                return
    except ProtoembedError as err:
        results.put(("error", str(err), True))
        return
    except Exception as err:  # reported to the parent, which raises it
        results.put(("error", f"reading {job.source.path} failed: {type(err).__name__}: {err}", False))
        return
    for _ in range(workers):
        tasks.put(None)


def _run_workers(
    job: ShardJob,
    spec: ModelSpec,
    pending: list[int],
    manifest: CorpusManifest,
    workers: int,
    devices: list[str] | None,
    bar: Any,
) -> None:
    """Encode the ``pending`` shards in ``workers`` spawned processes; record each in the manifest as it
    is reported finished."""
    import multiprocessing

    if not pending:
        return
    context = multiprocessing.get_context("spawn")
    tasks = context.Queue(maxsize=workers)
    results = context.Queue()
    cores = worker_cores(workers)
    processes = []
    for k in range(workers):
        worker_spec = spec.model_copy(update={"device": devices[k % len(devices)]}) if devices else spec
        process = context.Process(
            target=_worker, args=(job, worker_spec, k, cores[k], tasks, results), daemon=True
        )
        process.start()
        processes.append(process)
    stop = threading.Event()
    feeder = threading.Thread(target=_feed, args=(job, pending, tasks, results, workers, stop), daemon=True)
    feeder.start()
    remaining = set(pending)
    working: dict[int, int] = {}  # worker number -> the shard it is encoding
    try:
        while remaining:
            try:
                message = results.get(timeout=1.0)
            except queue.Empty:
                message = None
            dead = [k for k, p in enumerate(processes) if p.exitcode not in (None, 0)]
            if dead and message is None:  # a worker killed (out of memory, a signal) says nothing
                number = dead[0]
                shard = working.get(number)
                doing = "" if shard is None else f" while encoding {job.shard_label(shard)}"
                raise ProtoembedError(
                    f"worker {number} died (exit code {processes[number].exitcode}){doing}; the finished "
                    "shards are kept: rerun with --resume"
                )
            if message is None:
                continue
            if message[0] == "start":
                working[message[1]] = message[2]
            elif message[0] == "progress":
                bar.update(message[1])
            elif message[0] == "done":
                record: ShardRecord = message[1]
                remaining.discard(record.start // job.shard_size)
                manifest.shards.append(record)
                write_manifest(job.folder, manifest)
            else:
                raise (ProtoembedError if message[2] else RuntimeError)(message[1])
    finally:
        stop.set()
        for process in processes:
            if remaining:
                process.terminate()
            process.join(timeout=30)
        feeder.join(timeout=5)
