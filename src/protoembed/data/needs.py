"""What a training config or an evaluation suite reads, which registry dataset provides it, and the
one-line error that names the file and the command that fetches it.

A training config reads, in each stage: its ``data.corpus`` files, STS-B dev (model selection, in the
config's ``training.eval_variant``) and the STS test sets of ``training.test_tasks``. An evaluation reads
the files of its tasks, as their entries in :data:`protoembed.evaluation.tasks.TASKS` declare them (STS:
in ``--variant``). A path is resolved as the readers resolve it: an absolute
path or one that exists from the working directory is the user's own file; any other relative path lies
under the data directory (``data.data_dir``, ``--data-dir``, else ``$PROTOEMBED_DATA``).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protoembed.data.registry import Dataset, dataset_for_path
from protoembed.errors import ProtoembedError

if TYPE_CHECKING:
    from protoembed.training.config_models import TrainConfig


@dataclass(frozen=True)
class Need:
    """One file a run reads: ``path`` as written, what it is for, the config's data directory (``None``:
    the default), and the dataset that provides it (``None``: the user's own file, or no entry)."""

    path: str
    what: str
    data_dir: str | None
    dataset: Dataset | None

    @property
    def own(self) -> bool:
        """An absolute path, or one that exists from the working directory: the user's own file."""
        return _own(self.path)


def _own(path: str) -> bool:
    expanded = Path(path).expanduser()
    return expanded.is_absolute() or expanded.exists()


def _need(path: str, what: str, data_dir: str | None) -> Need:
    return Need(path, what, data_dir, None if _own(path) else dataset_for_path(path))


def stage_needs(name: str, cfg: TrainConfig) -> list[Need]:
    """The files one training stage reads (see the module docstring)."""
    stage = f"stage {name!r}: " if name else ""
    data_dir = cfg.data.data_dir
    needs = [_need(f.path, f"{stage}training file", data_dir) for f in cfg.data.files()]
    variant = cfg.training.eval_variant
    needs += task_needs(["STSBenchmark"], data_dir, variant, "dev", f"{stage}model selection on")
    needs += task_needs(cfg.training.test_tasks, data_dir, variant, "test", f"{stage}test set")
    return needs


def config_needs(stages: Sequence[tuple[str, TrainConfig]]) -> list[Need]:
    """The files every stage of a run reads, each path once (first use kept)."""
    seen: dict[tuple[str, str | None], Need] = {}
    for name, cfg in stages:
        for need in stage_needs(name, cfg):
            seen.setdefault((need.path, need.data_dir), need)
    return list(seen.values())


def task_needs(
    tasks: Iterable[Any],
    data_dir: str | None,
    variant: str = "senteval",
    split: str = "test",
    what: str = "task",
) -> list[Need]:
    """The files evaluation tasks read (names of entries in :data:`protoembed.evaluation.tasks.TASKS`,
    or entries), each with the ``protoembed data`` entry the task names as its provider (none: the
    user's own files); ``variant`` / ``split`` as the STS suite's options (a task without ``split`` reads
    its test files, or its one set); ``what`` starts each need's description."""
    from protoembed.data.registry import DATASETS
    from protoembed.evaluation.tasks import Task, get_task

    needs = []
    for name in tasks:
        task = name if isinstance(name, Task) else get_task(name)
        provider = task.dataset_for(variant)
        dataset = DATASETS.get(provider) if provider else None
        for path in task.files(variant, split if split in task.splits else "test"):
            needs.append(Need(path, f"{what} {task.name}", data_dir, None if _own(path) else dataset))
    return needs


def _root(data_dir: str | None) -> Path | None:
    base = data_dir or os.environ.get("PROTOEMBED_DATA")
    return Path(base).expanduser().absolute() if base else None


def missing(needs: Iterable[Need]) -> list[Need]:
    """The needs whose file (or folder) is not there."""
    out = []
    for need in needs:
        if need.own:
            continue
        root = _root(need.data_dir)
        if root is None or not (root / need.path).exists():
            out.append(need)
    return out


def check_present(needs: Iterable[Need], config: str | None = None) -> None:
    """Raise the one-line error for the first missing file: the file, where it was looked for, and the
    command that fetches it (``protoembed data download NAME``, or ``--for CONFIG``)."""
    gone = missing(needs)
    if not gone:
        return
    first = gone[0]
    root = _root(first.data_dir)
    if root is not None and root.exists() and not root.is_dir():
        from protoembed.data.paths import resolve_data_dir

        resolve_data_dir(first.data_dir)  # the one-line "is a file, not a directory" error
    where = f"under {root}" if root else "($PROTOEMBED_DATA is not set and no data directory was given)"
    names = list(dict.fromkeys(n.dataset.name for n in gone if n.dataset))
    if first.dataset is None:
        fix = "it is not a dataset protoembed fetches: give the file's path, or place it under the data directory"
    else:
        fix = f"fetch it with `protoembed data download {' '.join(names)}`"
        if config:
            fix += (
                f" (or everything this config reads: `protoembed data download --for {shlex.quote(config)}`)"
            )
    more = f" ({len(gone) - 1} more missing)" if len(gone) > 1 else ""
    raise ProtoembedError(f"{first.what}: {first.path!r} not found {where}{more}; {fix}")
