"""Vectors stored small: float vectors -> ``int8`` / ``uint8`` / ``binary`` / ``ubinary`` (numpy only).

The types and their bytes are sentence-transformers' ``quantize_embeddings``
(``sentence_transformers/util/quantization.py``), byte for byte on the same float vectors:

- ``int8`` / ``uint8``: each dimension cut into 255 steps between its ``ranges`` (a ``(2, d)`` array, the
  minimum then the maximum per dimension), ``floor((x - min) / step)`` clipped to 0..255 (``int8``: minus
  128). The ranges are calibrated on embeddings (:func:`calibration_ranges`: the minimum and maximum of
  each dimension); a value outside them is clipped.
- ``binary`` / ``ubinary``: one bit per dimension, ``x > 0``, packed 8 to a byte (``np.packbits``, the
  first dimension in the highest bit; ``binary``: the byte minus 128 as int8). ``ceil(d / 8)`` bytes.
- ``float32``: the vectors as they are.

:func:`rescoring_vectors` turns stored vectors back into the float values that sentence-transformers'
rescoring multiplies with a float query (the bits as 0 / 1; the int8 steps at their lower edge).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from protoembed.core.errors import ProtoembedError

#: The default vector type: float32, as the model returns them.
FLOAT32 = "float32"
#: The scalar types: 256 steps per dimension between calibrated ranges.
SCALAR_TYPES = ("int8", "uint8")
#: The bit types: one bit per dimension.
BINARY_TYPES = ("binary", "ubinary")
#: Every vector type, by name.
VECTOR_TYPES = (FLOAT32, *SCALAR_TYPES, *BINARY_TYPES)
#: The rows that calibrate a scalar type's ranges when no calibration is given: at most this many, evenly
#: spaced over the corpus (:func:`calibration_rows`).
CALIBRATION_ROWS = 10_000

_DTYPES = {"float32": np.float32, "int8": np.int8, "uint8": np.uint8, "binary": np.int8, "ubinary": np.uint8}


def check_vectors(name: str) -> str:
    """``name`` if it is one of :data:`VECTOR_TYPES`.

    Raises:
        ProtoembedError: any other name (the types listed)."""
    if name not in VECTOR_TYPES:
        raise ProtoembedError(f"unknown vector type {name!r}; expected one of {', '.join(VECTOR_TYPES)}")
    return name


def dtype_of(vectors: str) -> np.dtype:
    """The numpy type of stored ``vectors`` (``binary``: int8, ``ubinary``: uint8)."""
    return np.dtype(_DTYPES[check_vectors(vectors)])


def stored_width(vectors: str, dimension: int) -> int:
    """Columns of a stored vector of ``dimension`` dimensions: ``ceil(dimension / 8)`` for the bit types,
    ``dimension`` otherwise."""
    return -(-dimension // 8) if check_vectors(vectors) in BINARY_TYPES else dimension


def bytes_per_vector(vectors: str, dimension: int) -> int:
    """Bytes of one stored vector of ``dimension`` dimensions."""
    return stored_width(vectors, dimension) * dtype_of(vectors).itemsize


def needs_ranges(vectors: str) -> bool:
    """Whether ``vectors`` is a scalar type (calibrated ranges)."""
    return check_vectors(vectors) in SCALAR_TYPES


def calibration_rows(rows: int, limit: int = CALIBRATION_ROWS) -> np.ndarray:
    """The row indexes that calibrate ranges on a corpus of ``rows`` rows: all of them up to ``limit``,
    else ``limit`` rows evenly spaced from the first (``floor(i * rows / limit)``)."""
    if rows <= limit:
        return np.arange(rows, dtype=np.int64)
    return (np.arange(limit, dtype=np.int64) * rows) // limit


def calibration_ranges(embeddings: np.ndarray) -> np.ndarray:
    """The ``(2, d)`` float32 ranges of ``embeddings`` ``(n, d)``: each dimension's minimum, then maximum.

    Raises:
        ProtoembedError: fewer than 2 rows, or not a 2-d float array."""
    x = np.asarray(embeddings)
    if x.ndim != 2 or not np.issubdtype(x.dtype, np.floating):
        raise ProtoembedError(f"calibration embeddings must be a 2-d float array, got {x.dtype} {x.shape}")
    if len(x) < 2:
        raise ProtoembedError(f"int8 ranges need at least 2 calibration embeddings, got {len(x)}")
    return np.vstack((x.min(axis=0), x.max(axis=0))).astype(np.float32)


def check_ranges(ranges: np.ndarray | Sequence[Sequence[float]], dimension: int) -> np.ndarray:
    """``ranges`` as a ``(2, dimension)`` float32 array, each minimum at most its maximum.

    Raises:
        ProtoembedError: another shape, a value that is not finite, or a minimum above its maximum."""
    r = np.asarray(ranges, dtype=np.float32)
    if r.shape != (2, dimension):
        raise ProtoembedError(f"ranges must have shape (2, {dimension}) (minimums, maximums), got {r.shape}")
    if not np.isfinite(r).all():
        raise ProtoembedError("ranges must be finite numbers")
    bad = np.flatnonzero(r[0] > r[1])
    if len(bad):
        i = int(bad[0])
        raise ProtoembedError(f"ranges: dimension {i} has minimum {r[0, i]} above its maximum {r[1, i]}")
    return r


def _steps(ranges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, steps)`` of float32 ``ranges``: 255 steps per dimension (a zero-width one: step 1)."""
    starts = ranges[0, :]
    steps = (ranges[1, :] - starts) / 255
    return starts, np.where(steps == 0, 1, steps)


def quantize(embeddings: np.ndarray, vectors: str, ranges: np.ndarray | None = None) -> np.ndarray:
    """Float ``embeddings`` (``(n, d)``, or one ``(d,)`` vector) stored as ``vectors`` (module docstring).

    Args:
        embeddings: float vectors.
        vectors: one of :data:`VECTOR_TYPES`.
        ranges: the scalar types' ``(2, d)`` ranges (default: :func:`calibration_ranges` of
            ``embeddings`` themselves, as sentence-transformers does without ``ranges``).
    Returns:
        the stored vectors (:func:`dtype_of`, :func:`stored_width` columns).
    Raises:
        ProtoembedError: an unknown type, integer embeddings, bad ``ranges``, or a scalar type without
            ranges on fewer than 2 embeddings.
    """
    check_vectors(vectors)
    x = np.asarray(embeddings)
    if not np.issubdtype(x.dtype, np.floating):
        raise ProtoembedError(f"only float vectors can be quantised, got {x.dtype}")
    if vectors == FLOAT32:
        return x.astype(np.float32)
    if vectors in BINARY_TYPES:
        packed = np.packbits(x > 0, axis=-1)
        return (packed.astype(np.int16) - 128).astype(np.int8) if vectors == "binary" else packed
    r = calibration_ranges(x) if ranges is None else check_ranges(ranges, x.shape[-1])
    starts, steps = _steps(r)
    levels = np.clip(np.floor((x - starts) / steps), 0, 255)
    return levels.astype(np.uint8) if vectors == "uint8" else (levels - 128).astype(np.int8)


def rescoring_vectors(
    stored: np.ndarray, vectors: str, dimension: int, ranges: np.ndarray | None = None
) -> np.ndarray:
    """The float values a float query is multiplied with to rescore ``stored`` vectors (any leading
    shape, the stored columns last), as sentence-transformers' ``semantic_search_faiss`` /
    ``semantic_search_usearch`` rescore: the bit types' bits as 0 / 1 (``dimension`` of them, the
    padding bits dropped), the scalar types' levels at the lower edge of their step
    (``min + level * step``, float64), float32 as it is.

    Raises:
        ProtoembedError: a scalar type without ``ranges``."""
    check_vectors(vectors)
    if vectors == FLOAT32:
        return np.asarray(stored, dtype=np.float32)
    if vectors in BINARY_TYPES:
        bits = np.unpackbits(unsigned_bits(np.asarray(stored), vectors), axis=-1)[..., :dimension]
        return bits.astype(np.float64)
    if ranges is None:
        raise ProtoembedError(f"{vectors} vectors are rescored with the ranges they were quantised with")
    starts, steps = _steps(check_ranges(ranges, dimension))
    levels = np.asarray(stored).astype(np.float64) + (128 if vectors == "int8" else 0)
    return levels * steps + starts


def unsigned_bits(stored: np.ndarray, vectors: str) -> np.ndarray:
    """The packed bits of ``binary`` or ``ubinary`` vectors as uint8 (``binary``'s minus-128 undone)."""
    packed = np.ascontiguousarray(stored)
    return packed if vectors == "ubinary" else (packed.view(np.uint8) ^ np.uint8(0x80))
