"""Thread sizing (protoembed.core.threads): the free usable cores, the user's numbers first, set before torch."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from protoembed.core import threads


def _snapshots(*pairs):
    """A ``read`` that returns the given /proc/stat snapshots in turn."""
    it = iter(pairs)
    return lambda: next(it)


def test_free_cores_counts_the_idle_share_of_the_usable_cores():
    sleep = lambda seconds: None  # noqa: E731
    quiet = ({0: (0, 0), 1: (0, 0)}, {0: (100, 100), 1: (100, 100)})
    one_held = ({0: (0, 0), 1: (0, 0)}, {0: (0, 100), 1: (95, 100)})  # core 0 spun by another process
    hopping = ({0: (0, 0), 1: (0, 0)}, {0: (50, 100), 1: (50, 100)})  # one busy process, half on each
    both_held = ({0: (0, 0), 1: (0, 0)}, {0: (0, 100), 1: (0, 100)})
    assert threads.free_cores([0, 1], read=_snapshots(*quiet), sleep=sleep) == 2
    assert threads.free_cores([0, 1], read=_snapshots(*one_held), sleep=sleep) == 1
    assert threads.free_cores([0, 1], read=_snapshots(*hopping), sleep=sleep) == 1
    assert threads.free_cores([0, 1], read=_snapshots(*both_held), sleep=sleep) == 1  # at least one
    assert threads.free_cores([1], read=_snapshots(*one_held), sleep=sleep) == 1  # only core 1 is ours
    assert threads.free_cores([0, 1], read=_snapshots({}, {}), sleep=sleep) == 2  # no /proc/stat: all


def test_read_cpu_times_reads_every_core():
    times = threads.read_cpu_times()
    assert set(threads.usable_cores()) <= set(times)
    assert all(0 <= idle <= total for idle, total in times.values())


def test_the_user_s_numbers_come_first(monkeypatch):
    monkeypatch.setattr(threads, "_measured", lambda: 3)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert threads.intra_op_threads() == 3 and threads.intra_op_threads(5) == 5
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert threads.intra_op_threads() == 2 and threads.intra_op_threads(5) == 5
    monkeypatch.delenv("OMP_NUM_THREADS")
    environ: dict[str, str] = {}
    threads.configure_process(environ)
    assert environ == {"OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": "3"}
    mine = {"OMP_WAIT_POLICY": "ACTIVE", "OMP_NUM_THREADS": "7"}
    threads.configure_process(mine)
    assert mine == {"OMP_WAIT_POLICY": "ACTIVE", "OMP_NUM_THREADS": "7"}


@pytest.mark.parametrize("command", ["encode", "report"])
def test_model_commands_size_torch_s_threads_before_it_loads(command, tmp_path):
    """A model command sets OMP_* before torch is imported, so torch runs that many threads; the others
    leave the environment alone."""
    code = (
        "import os, sys\n"
        "from protoembed.cli import main\n"
        f"main([{command!r}, {str(tmp_path / 'missing.txt')!r}, '-o', {str(tmp_path / 'out')!r}])\n"
        "import torch\n"
        "print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('OMP_NUM_THREADS'), torch.get_num_threads())\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    policy, named, used = done.stdout.split()
    if command == "encode":
        assert policy == "PASSIVE" and 1 <= int(named) <= len(os.sched_getaffinity(0)) and used == named
    else:
        assert (policy, named) == ("None", "None")


def test_the_usable_cores_have_one_home(monkeypatch):
    """The tokenizer threads, the DataLoader workers and the corpus workers' cores all count the affinity
    that :func:`threads.usable_cores` reads, and no other module reads it."""
    from pathlib import Path

    import torch

    import protoembed
    from protoembed.corpus.encoding import worker_cores
    from protoembed.model.batching import default_tokenizer_workers
    from protoembed.training.components import loader_workers

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 5}, raising=False)
    assert threads.usable_cores() == [0, 1, 2, 3, 5]
    assert default_tokenizer_workers("cuda") == 4 and loader_workers(None, torch.device("cuda")) == 4
    assert worker_cores(2) == [[0, 1], [2, 3, 5]]
    package = Path(protoembed.__file__).parent
    readers = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "sched_getaffinity" in path.read_text(encoding="utf-8")
    )
    assert readers == ["core/threads.py"]
