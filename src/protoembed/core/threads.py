"""How many CPU threads a model's forward pass uses: the one rule for torch, ONNX Runtime and OpenVINO.

A thread per core this process may run on (``sched_getaffinity``) is the fastest choice on a quiet
machine, and the worst on a busy one: each parallel operator waits at its end for its slowest thread,
and a thread that shares its core with another process's busy thread gets a time slice now and then,
so every operator waits for it (``protoembed encode`` ran 63 sentences/s with two threads on two cores,
one of them held by another process, against 304/s with one thread). :func:`free_cores` therefore
counts the usable cores that are idle, over a short look at ``/proc/stat``, and :func:`intra_op_threads`
uses that many (at least one), unless the caller or ``OMP_NUM_THREADS`` names a number.

The command line (:func:`configure_process`) also makes OpenMP's idle threads sleep instead of spin
(``OMP_WAIT_POLICY=PASSIVE``), so that a thread waiting at a barrier does not take a core from the one
it waits for; both are set in the environment before torch is imported (OpenMP reads them once).
No torch here.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, MutableMapping

#: How long :func:`free_cores` watches the cores (seconds).
WINDOW = 0.1
#: The OpenMP environment the command line sets unless the user has.
WAIT_POLICY = ("OMP_WAIT_POLICY", "PASSIVE")
#: The Hugging Face tokenizers' own threading (a Rust thread per core within each call) and its
#: setting here: off, as protoembed's tokenizer threads are the parallelism; a value the user set is kept.
TOKENIZERS_PARALLELISM = ("TOKENIZERS_PARALLELISM", "false")


def single_threaded_tokenizers() -> None:
    """Turn the fast tokenizers' own threads off (:data:`TOKENIZERS_PARALLELISM`, unless the user set
    it), so that ``tokenizer_workers`` threads tokenise on that many cores, from the command line and
    the Python API alike; called by the command line and wherever protoembed tokenises in a pool."""
    os.environ.setdefault(*TOKENIZERS_PARALLELISM)


def usable_cores() -> list[int]:
    """The cores this process may run on (its affinity; every core where the OS has no affinity): the
    one rule that the tokenizer threads, the DataLoader workers, the corpus workers' pinning and the
    forward's threads count from."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return list(range(os.cpu_count() or 1))


def read_cpu_times() -> dict[int, tuple[int, int]]:
    """Per core: (idle jiffies incl. I/O wait, total jiffies) from ``/proc/stat`` (empty where unreadable)."""
    times: dict[int, tuple[int, int]] = {}
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            for line in handle:
                name, *fields = line.split()
                if name.startswith("cpu") and name[3:].isdigit():
                    values = [int(x) for x in fields[:8]]
                    times[int(name[3:])] = (values[3] + values[4], sum(values))
    except (OSError, ValueError, IndexError):
        return {}
    return times


def free_cores(
    cores: list[int] | None = None,
    window: float = WINDOW,
    read: Callable[[], dict[int, tuple[int, int]]] = read_cpu_times,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """How many of ``cores`` (default: :func:`usable_cores`) were idle over ``window`` seconds: their
    count less the busy share of all of them summed and rounded (a process hopping between two cores
    half the time each counts as one busy core), at least 1. All of them where ``/proc/stat`` cannot be
    read."""
    cores = usable_cores() if cores is None else cores
    before = read()
    sleep(window)
    after = read()
    busy = 0.0
    for core in cores:
        if core not in before or core not in after:
            return len(cores)
        idle = after[core][0] - before[core][0]
        total = after[core][1] - before[core][1]
        busy += 1.0 - idle / total if total > 0 else 0.0
    return max(1, len(cores) - round(busy))


@functools.lru_cache(maxsize=1)
def _measured() -> int:
    """:func:`free_cores`, looked at once per process."""
    return free_cores()


def intra_op_threads(requested: int | None = None) -> int:
    """The threads of a forward pass: ``requested`` if given, else ``OMP_NUM_THREADS`` if set to a
    positive number, else the free usable cores (:func:`free_cores`, measured once per process)."""
    if requested:
        return int(requested)
    named = os.environ.get("OMP_NUM_THREADS", "")
    if named.isdigit() and int(named) > 0:
        return int(named)
    return _measured()


def configure_process(environ: MutableMapping[str, str] = os.environ) -> None:
    """Before torch is imported (the command line's first step for a model command): OpenMP's idle
    threads sleep (:data:`WAIT_POLICY`) and ``OMP_NUM_THREADS`` is :func:`intra_op_threads`, unless
    the user set either."""
    environ.setdefault(*WAIT_POLICY)
    if "OMP_NUM_THREADS" not in environ:
        environ["OMP_NUM_THREADS"] = str(intra_op_threads())
