"""What a run reads (:class:`Need`), which registry dataset provides it, and the one-line error that
names the file and the command that fetches it (:func:`check_present`).

An evaluation reads the files of its tasks, as their entries declare them (:func:`task_needs`; STS: in
``--variant``); a training config's needs are :func:`protoembed.training.needs.config_needs`. A path is resolved as the readers resolve it: an absolute
path or one that exists from the working directory is the user's own file; any other relative path lies
under the data directory (``data.data_dir``, ``--data-dir``, else ``$PROTOEMBED_DATA``, else the user data
directory: :func:`protoembed.data.paths.choose_data_dir`).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from protoembed.core.errors import ProtoembedError
from protoembed.data.download.registry import Dataset, dataset_for_path
from protoembed.data.paths import check_data_dir, choose_data_dir

if TYPE_CHECKING:
    from protoembed.evaluation.tasks import Task


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


def need_file(path: str, what: str, data_dir: str | None) -> Need:
    """The need of one file named by a run (``dataset``: the registry entry that installs it, if any)."""
    return Need(path, what, data_dir, None if _own(path) else dataset_for_path(path))


def task_needs(
    tasks: Iterable[Task],
    data_dir: str | None,
    variant: str = "senteval",
    split: str = "test",
    what: str = "task",
) -> list[Need]:
    """The files evaluation tasks read (their entries, :class:`protoembed.evaluation.tasks.Task`), each
    with the ``protoembed data`` entry the task names as its provider (none: the user's own files);
    ``variant`` / ``split`` as the STS suite's options (a task without ``split`` reads its test files, or
    its one set); ``what`` starts each need's description."""
    from protoembed.data.download.registry import DATASETS

    needs = []
    for task in tasks:
        provider = task.dataset_for(variant)
        dataset = DATASETS.get(provider) if provider else None
        for path in task.files(variant, split if split in task.splits else "test"):
            needs.append(Need(path, f"{what} {task.name}", data_dir, None if _own(path) else dataset))
    return needs


def _root(data_dir: str | None) -> Path:
    return choose_data_dir(data_dir).path


def missing(needs: Iterable[Need]) -> list[Need]:
    """The needs whose file (or folder) is not there (the user's own: an absolute path that does not
    exist)."""
    out = []
    for need in needs:
        if need.own:
            if not Path(need.path).expanduser().exists():
                out.append(need)
            continue
        if not (_root(need.data_dir) / need.path).exists():
            out.append(need)
    return out


def check_present(needs: Iterable[Need], config: str | None = None) -> None:
    """Raise the one-line error for the first missing file: the file, where it was looked for (a relative
    path of one's own: the working directory and the data directory), and the command that fetches it
    (``protoembed data download NAME``, or ``--for CONFIG``)."""
    gone = missing(needs)
    if not gone:
        return
    first = gone[0]
    more = f" ({len(gone) - 1} more missing)" if len(gone) > 1 else ""
    if first.own:
        raise ProtoembedError(
            f"{first.what}: {first.path!r} not found{more}; give the path of an existing file"
        )
    chosen = choose_data_dir(first.data_dir)
    check_data_dir(chosen, must_exist=False)  # the one-line "is a file, not a directory" error
    where = f"under {chosen.path}" + (f" ({chosen.why})" if chosen.source == "default" else "")
    if first.dataset is None:  # one's own file: local_path's rule looked in the working directory first
        where = f"in the working directory {Path.cwd()} nor {where}"
    names = list(dict.fromkeys(n.dataset.name for n in gone if n.dataset))
    if first.dataset is None:
        fix = "it is not a dataset protoembed fetches: give the file's path, or place it under the data directory"
    else:
        fix = f"fetch it with `protoembed data download {' '.join(names)}`"
        if config:
            fix += (
                f" (or everything this config reads: `protoembed data download --for {shlex.quote(config)}`)"
            )
    raise ProtoembedError(f"{first.what}: {first.path!r} not found {where}{more}; {fix}")
