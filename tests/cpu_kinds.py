"""The CPU kinds the test suite simulates (:data:`protoembed.model.precision.CPU_FLAGS_ENV`), so that every
CPU-dependent choice (``--runtime auto``, native or emulated bf16, OpenVINO's precision) is tested the same
whatever machine runs the tests.

The suite runs as :data:`DEFAULT_KIND` unless ``PROTOEMBED_TEST_CPU`` names another kind; tests of a
choice run under each kind (:func:`simulate`). Only protoembed's choices follow the simulated flags: the
arithmetic of ONNX Runtime's and OpenVINO's kernels is the host's.
"""

from __future__ import annotations

import os

import pytest

from protoembed.model.precision import CPU_FLAGS_ENV

#: kind -> the flags ``/proc/cpuinfo`` lists for it (those protoembed reads, and their neighbours)
CPU_KINDS: dict[str, tuple[str, ...]] = {
    "avx2": ("sse4_2", "avx", "avx2", "fma"),
    "avx512-vnni": ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni"),
    "avx512-bf16": ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16"),
    "amx": (
        "sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
        "amx_tile", "amx_bf16", "amx_int8",
    ),
}  # fmt: skip
#: the kinds whose bf16 is native (AVX512-BF16 or AMX)
NATIVE_BF16 = ("avx512-bf16", "amx")
#: the kind the suite runs as: AVX2 only, the lowest CPU protoembed supports
DEFAULT_KIND = "avx2"
#: the variable that names another kind for the whole suite
TEST_CPU_ENV = "PROTOEMBED_TEST_CPU"


def suite_kind() -> str:
    """The kind the suite simulates (:data:`TEST_CPU_ENV`, else :data:`DEFAULT_KIND`)."""
    kind = os.environ.get(TEST_CPU_ENV, DEFAULT_KIND)
    if kind not in CPU_KINDS:
        raise pytest.UsageError(f"{TEST_CPU_ENV}={kind!r}: expected one of {', '.join(CPU_KINDS)}")
    return kind


def flags_of(kind: str) -> str:
    """The value of :data:`CPU_FLAGS_ENV` that simulates ``kind``."""
    return " ".join(CPU_KINDS[kind])


def simulate(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """Make this process and the interpreters it spawns see a CPU of ``kind``."""
    monkeypatch.setenv(CPU_FLAGS_ENV, flags_of(kind))
