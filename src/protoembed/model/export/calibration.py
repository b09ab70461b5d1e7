"""The sentences an int8 export calibrates its fixed activation scales on, and their feeds: the first
distinct lines of the caller's texts, else of the staged Wikipedia sample, in padded batches tokenised as
encode tokenises them. Both int8 writers read them (ONNX Runtime's static scales:
:mod:`protoembed.model.export.onnx`; NNCF: :mod:`protoembed.model.export.openvino`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from protoembed.core.errors import ProtoembedError

logger = logging.getLogger(__name__)

#: Calibration batches an int8 export reads (of :data:`CALIBRATION_BATCH` sentences each).
CALIBRATION_BATCHES = 32
CALIBRATION_BATCH = 16
#: The staged corpus the int8 calibration reads when the caller gives no texts.
CALIBRATION_CORPUS = "unsup/wiki1m_sample/wiki1m_for_simcse.head-1280000B.txt"


def _distinct(lines: Iterable[str], wanted: int) -> tuple[list[str], int]:
    """The first ``wanted`` distinct non-blank ``lines`` (compared without their surrounding spaces; the
    first spelling kept) and how many lines were read to find them (all of them when fewer)."""
    kept: dict[str, str] = {}
    read = 0
    for line in lines:
        read += 1
        key = line.strip()
        if key and key not in kept:
            kept[key] = line
            if len(kept) == wanted:
                break
    return list(kept.values()), read


def calibration_source(
    texts: Sequence[str] | str | os.PathLike | None, data_dir: str | os.PathLike | None = None
) -> Sequence[str] | str | os.PathLike:
    """``texts``, else the staged Wikipedia sample under the data dir (``data_dir``, ``$PROTOEMBED_DATA``
    or the default). A file is opened and its first line read, so a missing or unreadable one is refused
    here (cheap: ``protoembed export`` runs it before loading the model).

    Raises:
        ProtoembedError: no texts given and the sample is not under the data dir (with the command that
            fetches it), a file that cannot be read (named).
    """
    if texts is None:
        from protoembed.data.paths import resolve_data_dir

        corpus = resolve_data_dir(data_dir) / CALIBRATION_CORPUS
        if not corpus.is_file():
            raise ProtoembedError(
                f"{corpus}: int8 calibration text not found; fetch it with `protoembed data download "
                "wiki1m-sample` or pass your own sentences (--calibration FILE)"
            )
        texts = corpus
    if isinstance(texts, (str, os.PathLike)):
        next(_file_lines(texts), None)
    return texts


def _file_lines(path: str | os.PathLike) -> Iterator[str]:
    """The lines of the calibration file ``path`` (errors name it and what it should hold)."""
    from protoembed.data.lines import iter_lines

    return iter_lines(path, missing_hint="expected the int8 calibration sentences, one per line")


def calibration_sentences(
    texts: Sequence[str] | str | os.PathLike | None, data_dir: str | os.PathLike | None = None
) -> list[str]:
    """The int8 calibration sentences: the first ``CALIBRATION_BATCHES * CALIBRATION_BATCH`` distinct
    non-blank lines of ``texts`` (a list of sentences, or a file of one sentence per line), else of the
    staged Wikipedia sample under the data dir. Repeated sentences count once: they add no new activation
    statistics. Fewer than that many calibrate on fewer batches, with a WARNING naming the source, its
    distinct sentences and the batches used.

    Raises:
        ProtoembedError: no texts given and the sample is not under the data dir (with the command that
            fetches it), a file that cannot be read, or fewer than one batch (:data:`CALIBRATION_BATCH`)
            of distinct non-blank sentences (the source named).
    """
    wanted = CALIBRATION_BATCHES * CALIBRATION_BATCH
    texts = calibration_source(texts, data_dir)
    if isinstance(texts, (str, os.PathLike)):
        source = str(texts)
        sentences, read = _distinct(_file_lines(texts), wanted)
    else:
        source = "calibration texts"
        sentences, read = _distinct(texts, wanted)
    found = f"{len(sentences)} distinct non-blank sentences in {read} lines"
    if len(sentences) < CALIBRATION_BATCH:
        raise ProtoembedError(
            f"{source}: int8 calibration needs at least {CALIBRATION_BATCH} distinct non-blank sentences "
            f"(one batch); found {found}"
        )
    if len(sentences) < wanted:
        batches = -(-len(sentences) // CALIBRATION_BATCH)
        logger.warning(
            "%s: %s: int8 calibration on %d batch%s instead of %d (%d distinct sentences wanted); "
            "the int8 scales may be off",
            source,
            found,
            batches,
            "" if batches == 1 else "es",
            CALIBRATION_BATCHES,
            wanted,
        )
    return sentences


def calibration_feeds(encoder: Any, sentences: list[str], inputs: list[str]) -> list[dict[str, np.ndarray]]:
    """Padded batches of ``sentences`` as the graph's feeds (tokenised as encode tokenises them)."""
    feeds = []
    for start in range(0, len(sentences), CALIBRATION_BATCH):
        batch = encoder.collate(*encoder.tokenize_ids(sentences[start : start + CALIBRATION_BATCH], True))
        feeds.append({name: batch[name].numpy().astype(np.int64) for name in inputs})
    return feeds
