"""Every evaluation task, one :class:`Task` entry each: what it is, what it reads, how it is scored.

A task is data, as an MTEB task is its ``TaskMetadata``: its name and the name the papers' tables print,
the suites that evaluate it (``protoembed eval <suite>``, :func:`protoembed.evaluate`), the
``protoembed data`` entry that provides its files (:mod:`protoembed.data.download.registry`), its splits, its main
score, whether it joins its suites' default run, its languages and its citation, what its suite needs to
know of it (a transfer task's C grid and F1, a clustering task's k), and two functions: the files it
reads (relative to the data directory) and the reader that turns them into the suite's input.
``protoembed eval`` and training's pre-flight check and read a task through its entry, the report prints
its table name, ``protoembed data download --for TASK`` fetches its dataset, and ``docs/tasks.md`` lists
the entries (``python -m protoembed.evaluation.tasks``). Nothing else lists tasks.

A new task is one :class:`Task` given to :func:`register_task` (``protoembed.register_task``: in
:data:`TASKS`, the process's registry), one entry point of the group ``protoembed.tasks`` (an installed
package's tasks: a :class:`Task`, a list of them, or a function returning either; loaded once, with the
built-in entries), or a run's own: one entry of a training config's ``tasks:`` list
(:class:`TaskDeclaration`), a ``--task-dir`` folder, a :class:`Task` given to an evaluator, known by name
inside that run only (:func:`tasks_in_scope`), never registered. :func:`pairs_file_task` (STS-like),
:func:`classification_file_task` (transfer / few-shot), :func:`clustering_file_task`, :func:`beir_task`
and :func:`pair_retrieval_task` (retrieval: a BEIR folder, (query, document) pairs) build one for
files in the usual layouts. An entry is validated when it is made: an unknown suite, a ``protoembed
data`` entry that does not exist, a split other than train / dev / test, or a main score its suites do
not compute is a one-line :class:`~protoembed.errors.ProtoembedError`.

Nothing here reads a file or imports torch; the built-in entries are made on first use.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from protoembed.core.errors import ProtoembedError
from protoembed.core.registry import Registry

logger = logging.getLogger(__name__)

#: ``(data directory, variant, split) -> the suite's input`` (:class:`~protoembed.data.benchmarks.sts.StsPairs`,
#: :class:`~protoembed.data.benchmarks.transfer.TransferData`, :class:`~protoembed.data.benchmarks.clustering.ClusteringData`).
Reader = Callable[[Path, str, str], Any]
#: ``(variant, split) -> the files the reader reads``, relative to the data directory, ``/``-separated.
Files = Callable[[str, str], list[str]]
#: The splits a task may have.
Split = Literal["train", "dev", "test"]

#: SentEval's grid of the inverse L2 strength C for the transfer tasks' logistic regression.
SENTEVAL_C_GRID: tuple[float, ...] = tuple(2.0**t for t in range(-2, 4))
#: SentEval's wider grid (its TREC and MRPC tasks).
WIDE_C_GRID: tuple[float, ...] = tuple(2.0**t for t in range(-1, 6))
#: The entry-point group that installed packages register their tasks under.
ENTRY_POINT_GROUP = "protoembed.tasks"


class Task(BaseModel):
    """One evaluation task.

    ``name``: the canonical name (results files key their ``tasks`` by it). ``suites``: the suites that
    evaluate it, the first one by default. ``dataset``: the ``protoembed data`` entry that provides its
    files (``None``: the user's own files; ``raw_dataset``: the one for STS's ``--variant raw``, when that
    reads other files). ``files`` and ``read``: see :data:`Files` and :data:`Reader`. ``display``: the name
    the papers' tables print (``None``: ``name``). ``splits``: the splits it has (none: one set, which a
    transfer task cross-validates; STS's ``--split`` applies to the tasks that have it). ``main_score``:
    the per-task key a suite's ``avg`` averages. ``default``: part of its suites' run when no task is
    named: for the papers' suites (those with built-in tasks) a closed list of built-in entries; the
    ``default`` of a task registered by a user or an installed package applies to the suites of a
    package's own only (:func:`default_tasks`). ``languages``: ISO 639-1 codes. ``citation``: the paper that introduced the data.

    Suite-specific: ``c_grid`` (transfer, scikit-learn classifier: the C values searched), ``f1``
    (transfer: F1 of class 1 reported beside accuracy, as for MRPC), ``n_clusters`` (clustering: k;
    ``None``: the number of classes in the data).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    name: str = Field(min_length=1)
    suites: tuple[str, ...] = Field(min_length=1)
    dataset: str | None
    files: Files
    read: Reader
    display: str | None = None
    splits: tuple[Split, ...] = ("test",)
    main_score: str = "acc"
    default: bool = False
    languages: tuple[str, ...] = ("en",)
    citation: str = ""
    raw_dataset: str | None = None
    c_grid: tuple[float, ...] = Field(SENTEVAL_C_GRID, min_length=1)
    f1: bool = False
    n_clusters: int | None = Field(None, ge=2)

    @field_validator("suites", "splits")
    @classmethod
    def _once(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        repeated = [v for v in values if values.count(v) > 1]
        if repeated:
            raise ValueError(f"{repeated[0]!r} is listed twice")
        return values

    @field_validator("c_grid")
    @classmethod
    def _positive(cls, grid: tuple[float, ...]) -> tuple[float, ...]:
        if any(not c > 0 for c in grid):
            raise ValueError(f"every C must be > 0, got {list(grid)}")
        return grid

    @model_validator(mode="after")
    def _known(self) -> Task:
        from protoembed.data.download.registry import DATASETS
        from protoembed.evaluation.suite import SUITES

        for suite in self.suites:
            if suite not in SUITES:
                raise ValueError(SUITES.unknown(suite))
            if self.main_score not in SUITES[suite].scores:
                raise ValueError(
                    f"main score {self.main_score!r} is not computed by suite {suite} "
                    f"(it computes: {', '.join(SUITES[suite].scores)})"
                )
        for dataset in (self.dataset, self.raw_dataset):
            if dataset is not None and dataset not in DATASETS:
                raise ValueError(
                    f"unknown `protoembed data` entry {dataset!r} (None: the user's own files); "
                    f"known: {', '.join(DATASETS)}"
                )
        return self

    @property
    def table_name(self) -> str:
        """The name the report's and the command's tables print (``STSBenchmark`` -> ``STS-B``)."""
        return self.display or self.name

    def dataset_for(self, variant: str = "senteval") -> str | None:
        """The ``protoembed data`` entry that provides the files of ``variant`` (``None``: the user's)."""
        return self.raw_dataset if variant == "raw" and self.raw_dataset else self.dataset

    def load(
        self, data_dir: str | os.PathLike[str] | None = None, variant: str = "senteval", split: str = "test"
    ) -> Any:
        """The suite's input for ``split`` (a task without that split: its one set), read from the data
        directory (``None``: :func:`protoembed.data.paths.choose_data_dir`'s default; a task whose files are
        all absolute paths needs none).
        A missing file is the one-line error that names it and the ``protoembed data download`` command
        that fetches it, before anything is read."""
        from protoembed.data.needs import check_present, task_needs
        from protoembed.data.paths import resolve_data_dir

        if self.splits and split not in self.splits:
            raise ProtoembedError(
                f"{self.name} has only a {' / '.join(self.splits)} split (asked for {split!r})"
            )
        # not required to exist: check_present names the first missing file and the command that fetches it
        root = resolve_data_dir(data_dir, must_exist=False)
        given = None if data_dir is None else os.fspath(data_dir)  # the error says where root came from
        check_present(task_needs([self], given, variant, split))
        return self.read(root, variant, split)


def make_task(**fields: Any) -> Task:
    """A :class:`Task` from its fields; an invalid one is a one-line error naming the task and the field."""
    try:
        return Task(**fields)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        name = fields.get("name", "?")
        raise ProtoembedError(f"task {name!r}: {where + ': ' if where else ''}{message}") from None


# --------------------------------------------------------------------------- the registry


class TaskRegistry(Registry[Task]):
    """Task name -> its entry (a :class:`~protoembed.core.registry.Registry`), in the papers' column order
    within each suite, then the registered ones.

    The built-in entries, then those of installed packages' entry points, are made once, on first use
    (each entry's validation reads the suites, whose modules read this one). A package whose entry point
    fails to load, gives something other than :class:`Task` entries, or names a task as another is named
    is skipped with one warning naming it; the built-in entries and the other packages' stay. Besides its
    name, a task's table name is its own: no other task may be named, or printed, as it is.
    """

    def __init__(self) -> None:
        super().__init__("task", builtin=lambda: _builtin())
        self._plugins_pending = True
        self._builtin_names: frozenset[str] = frozenset()

    @property
    def _data(self) -> dict[str, Task]:
        """The entries: the built-in ones, then the plugins', made on first use (once)."""
        if self._plugins_pending:
            self._plugins_pending = False  # first: registering the built-in entries reads this property
            self._builtin_names = frozenset(super()._data)
            self._add_plugins()
        return super()._data

    @property
    def builtin_names(self) -> frozenset[str]:
        """The names of protoembed's own entries (the papers' tasks and the BEIR datasets)."""
        _ = self._data
        return self._builtin_names

    def _add_plugins(self) -> None:
        """Register the tasks of each ``protoembed.tasks`` entry point, all of a package's or none."""
        from importlib.metadata import entry_points

        for point in entry_points(group=ENTRY_POINT_GROUP):
            try:
                entries = _plugin_entries(point.load())
                for i, entry in enumerate(entries):
                    problem = _clash(entry, [*self.values(), *entries[:i]])
                    if problem:
                        raise ProtoembedError(problem)
            except Exception as err:  # a broken package is named, not a traceback, and costs nothing else
                logger.warning("task plugin %r (%s) skipped: %s", point.name, point.value, err)
                continue
            for entry in entries:
                super().register(entry)

    def register(self, entry: Task, *, name: str | None = None, replace: bool = False) -> Task:
        """Add ``entry`` (see :meth:`Registry.register`; ``name``, when given, must be its own).

        Raises:
            ProtoembedError: its name or table name is another task's, or its name is taken and
                ``replace`` is false.
        """
        if name is not None and name != entry.name:
            raise ValueError(f"task {entry.name!r} registered as {name!r}: a task is registered by its name")
        problem = _clash(entry, [other for other in self.values() if other.name != entry.name])
        if problem:
            raise ProtoembedError(problem)
        return super().register(entry, replace=replace)


def _clash(entry: Task, others: Iterable[Task]) -> str | None:
    """The message when ``entry``'s name or table name is the name or table name of another of ``others``
    (case ignored; ``entry`` itself is no other), else ``None``."""
    mine = {entry.name.lower(), entry.table_name.lower()}
    for other in others:
        if other is not entry and mine & {other.name.lower(), other.table_name.lower()}:
            return f"task {entry.name!r}: its name or table name is taken by {other.name!r}"
    return None


def _plugin_entries(value: Any) -> list[Task]:
    """An entry point's value as its :class:`Task` entries (a Task, a list of them, or a function returning
    either)."""
    value = value() if callable(value) and not isinstance(value, Task) else value
    items = [value] if isinstance(value, Task) else list(value)
    if not all(isinstance(item, Task) for item in items):
        raise ProtoembedError("expected Task entries")
    return items


#: Every task, by name.
TASKS = TaskRegistry()

#: The entries known by name in this context besides :data:`TASKS` (:func:`tasks_in_scope`).
_IN_SCOPE: ContextVar[Mapping[str, Task]] = ContextVar(
    "protoembed_tasks_in_scope", default=MappingProxyType({})
)


def register_task(task: Task | None = None, /, *, replace: bool = False, **fields: Any) -> Task:
    """Add a task (a :class:`Task`, or its fields) to :data:`TASKS`, so that ``protoembed eval``,
    :func:`protoembed.evaluate`, training's ``test_tasks`` and the report know it by name.

    Returns:
        the entry.
    Raises:
        ProtoembedError: an invalid entry, or a name (or table name) already taken and ``replace`` false.
    """
    entry = task if task is not None else make_task(**fields)
    return TASKS.register(entry, replace=replace)


def unregister_task(name: str) -> None:
    """Remove a registered task (tests and notebooks that register a task for a while)."""
    del TASKS[get_task(name).name]


def check_own(entries: Sequence[Task]) -> None:
    """Check that tasks of one's own (a config's, a ``--task-dir`` folder's) can be known by name beside
    :data:`TASKS`: none named, or printed, as a registered task (itself excepted) or an earlier one.

    Raises:
        ProtoembedError: the first such entry and the task whose name it takes.
    """
    for i, entry in enumerate(entries):
        problem = _clash(entry, [*(t for t in TASKS.values() if t is not entry), *entries[:i]])
        if problem:
            raise ProtoembedError(problem)


@contextlib.contextmanager
def tasks_in_scope(entries: Iterable[str | Task] | str | None) -> Iterator[None]:
    """The :class:`Task` objects among ``entries`` (a config's own tasks, a ``--task-dir`` folder, an
    evaluator's tasks) known by name, as registered ones are, inside the block and in this context only
    (a :class:`~contextvars.ContextVar`; an outer block's entries stay known unless one here has their
    name); :data:`TASKS` is left as it is, so one run's tasks are never another's. Names are ignored.

    Raises:
        ProtoembedError: an entry named, or printed, as a registered task or another entry
            (:func:`check_own`).
    """
    if entries is None or isinstance(entries, str):
        entries = []
    own = [e for e in entries if isinstance(e, Task)]
    check_own(own)
    token = _IN_SCOPE.set({**_IN_SCOPE.get(), **{e.name: e for e in own}})
    try:
        yield
    finally:
        _IN_SCOPE.reset(token)


def known_tasks() -> list[Task]:
    """Every entry known by name here: :data:`TASKS`' (in order), then those in scope
    (:func:`tasks_in_scope`), each of which takes the place of a registered entry of its name."""
    scoped = _IN_SCOPE.get()
    return [*(t for t in TASKS.values() if t.name not in scoped), *scoped.values()]


def _entry(name: str) -> Task | None:
    """The entry of canonical name ``name`` in scope, else in :data:`TASKS`, else ``None``."""
    scoped = _IN_SCOPE.get().get(name)
    return scoped if scoped is not None else TASKS.get(name)


# --------------------------------------------------------------------------- entries for files


def pairs_file_task(
    name: str,
    dataset: str | None,
    paths: Mapping[str, str],
    layout: Literal["stsb", "sick"] = "stsb",
    **fields: Any,
) -> Task:
    """An STS-like task read from one file per split, in STS Benchmark's layout (``genre, file, year, id,
    score, sentence1, sentence2``, tab-separated) or SICK's (a header, then ``pair_ID, sentence_A,
    sentence_B, relatedness_score, entailment_judgment``): gold in [0, 5], scored as STS-B is.

    ``paths``: split -> file, relative to the data directory or absolute (the same file for both
    variants; the ``senteval`` variant normalises whitespace, ``raw`` strips). ``dataset``: the
    ``protoembed data`` entry that installs the files (``None``: the user's own). ``fields``: further
    :class:`Task` fields (``display``, ``citation``, ``default``, ...).
    """
    from protoembed.data.benchmarks.sts import read_pairs_file

    return _file_per_split_task(
        name,
        "sts",
        dataset,
        paths,
        lambda file, variant, split: read_pairs_file(file, f"{name}/{split}", layout, variant),
        "spearman",
        **fields,
    )


def _file_per_split_task(
    name: str,
    suite: str,
    dataset: str | None,
    paths: Mapping[str, str],
    read: Callable[[Path, str, str], Any],
    main_score: str,
    **fields: Any,
) -> Task:
    """A task of ``suite`` read from one file per split (``paths``: split -> file, relative to the data
    directory or absolute) by ``read(file, variant, split)``."""
    if not paths:
        raise ProtoembedError(f"task {name!r}: give the file of at least one split")
    return make_task(
        name=name,
        suites=(suite,),
        dataset=dataset,
        files=lambda variant, split: [paths[split]],
        read=lambda root, variant, split: read(root / paths[split], variant, split),
        splits=tuple(paths),
        main_score=main_score,
        **fields,
    )


def classification_file_task(
    name: str, dataset: str | None, paths: Mapping[str, str], *, pairs: bool = False, **fields: Any
) -> Task:
    """A transfer / few-shot task read from ``text<TAB>label`` lines (``pairs``: ``text1<TAB>text2<TAB>
    label``, classified on SentEval's pair features), labels any strings (classes in sorted order).

    ``paths``: ``{"all": file}`` (one set: cross-validated) or ``{"train", ["dev"], "test"}`` files,
    relative to the data directory or absolute. ``fields``: further :class:`Task` fields (``c_grid``,
    ``f1``, ``display``, ``suites`` (default transfer and few-shot), ...).
    """
    from protoembed.data.benchmarks.transfer import read_labelled_files

    splits = tuple(s for s in paths if s != "all")
    if (
        ("all" in paths) == bool(splits)
        or (splits and "train" not in splits)
        or (splits and "test" not in splits)
    ):
        raise ProtoembedError(
            f"task {name!r}: give {{'all': file}} or train, [dev,] test files; got {list(paths)}"
        )
    fields.setdefault("suites", ("transfer", "fewshot"))
    return make_task(
        name=name,
        dataset=dataset,
        files=lambda variant, split: list(paths.values()),
        read=lambda root, variant, split: read_labelled_files(
            name, {s: root / p for s, p in paths.items()}, pairs
        ),
        splits=splits,
        **fields,
    )


def clustering_file_task(name: str, dataset: str | None, path: str, **fields: Any) -> Task:
    """A clustering task read from one ``label<TAB>text`` file (integer labels), relative to the data
    directory or absolute. ``fields``: further :class:`Task` fields (``n_clusters``, ``citation``, ...)."""
    from protoembed.data.benchmarks.clustering import read_clustering_file

    return make_task(
        name=name,
        suites=("clustering",),
        dataset=dataset,
        files=lambda variant, split: [path],
        read=lambda root, variant, split: read_clustering_file(root / path, name),
        splits=(),
        **fields,
    )


def beir_task(
    name: str, dataset: str | None, path: str, splits: Sequence[str] = ("test",), **fields: Any
) -> Task:
    """A retrieval task read from a folder in the BEIR layout (``corpus.jsonl``, ``queries.jsonl``,
    ``qrels/<split>.tsv``: :mod:`protoembed.data.benchmarks.beir`), relative to the data directory or
    absolute; main score nDCG@10. ``splits``: the qrels files it has (default test). ``fields``: further
    :class:`Task` fields (``display``, ``citation``, ``default``, ...)."""
    from protoembed.data.benchmarks.beir import beir_files, read_beir
    from protoembed.evaluation.retrieval_metrics import MAIN_SCORE

    return make_task(
        name=name,
        suites=("retrieval",),
        dataset=dataset,
        files=lambda variant, split: beir_files(path, split),
        read=lambda root, variant, split: read_beir(root / path, split, name),
        splits=tuple(splits),
        main_score=MAIN_SCORE,
        **fields,
    )


def pair_retrieval_task(
    name: str,
    dataset: str | None,
    paths: Mapping[str, str],
    columns: Mapping[str, str] | None = None,
    **fields: Any,
) -> Task:
    """A retrieval task read from (query, document) pairs, one file per split (the dev or test part of
    one's own training pairs; :mod:`protoembed.data.benchmarks.pair_retrieval`): any training data format,
    ``columns`` mapping ``anchor`` / ``positive`` / ``negative`` to the file's own columns; main score
    nDCG@10. ``paths``: split -> file, relative to the data directory or absolute. ``fields``: further
    :class:`Task` fields."""
    from protoembed.data.benchmarks.pair_retrieval import read_pair_retrieval
    from protoembed.evaluation.retrieval_metrics import MAIN_SCORE

    return _file_per_split_task(
        name,
        "retrieval",
        dataset,
        paths,
        lambda file, variant, split: read_pair_retrieval(file, name, columns),
        MAIN_SCORE,
        **fields,
    )


def beir_folder_task(folder: str | os.PathLike[str]) -> Task:
    """A user's BEIR folder as a one-off retrieval task (``protoembed eval retrieval --task-dir``): named
    after the folder, read from its absolute path, with the splits whose qrels file it has.

    Raises:
        ProtoembedError: not a folder, or a folder without any ``qrels/<split>.tsv``.
    """
    from protoembed.data.benchmarks.beir import beir_splits

    path = Path(folder).expanduser().resolve()
    if not path.is_dir():
        raise ProtoembedError(
            f"{folder}: not a folder; give a folder in the BEIR layout (corpus.jsonl, queries.jsonl, "
            "qrels/<split>.tsv)"
        )
    return beir_task(path.name, None, path.as_posix(), beir_splits(path, get_args(Split)))


# --------------------------------------------------------------------------- entries from a config


class TaskDeclaration(BaseModel):
    """A task declared in a config (a training config's ``tasks:`` list): one of the file layouts above
    (``kind``: ``pairs`` -> :func:`pairs_file_task`, ``classification`` -> :func:`classification_file_task`,
    ``clustering`` -> :func:`clustering_file_task`, ``retrieval`` -> :func:`beir_task`,
    ``retrieval_pairs`` -> :func:`pair_retrieval_task`), its ``files``
    (split -> path; clustering: ``{all: path}``; retrieval: ``{all: folder}`` with its qrels ``splits``),
    and the :class:`Task` fields a config may set. A relative path of one's own files (no ``dataset``) is
    read as ``data.corpus`` is: from the working directory if it is there, else from the data directory;
    the files of a ``protoembed data`` entry (``dataset``) from the data directory.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="the task's name (results files key their tasks by it)")
    kind: Literal["pairs", "classification", "clustering", "retrieval", "retrieval_pairs"] = Field(
        description="pairs (STS-like, gold 0-5) | classification (transfer, few-shot) | clustering | "
        "retrieval (a folder in the BEIR layout) | retrieval_pairs ((query, document) pairs as training "
        "data is read)"
    )
    files: dict[str, str] = Field(
        min_length=1,
        description="split -> file (classification: all, or train/[dev]/test; clustering: all; retrieval: "
        "all -> the BEIR folder; retrieval_pairs: split -> pairs file); a relative path from the working "
        "directory if it is there, else from the data directory (always, with dataset)",
    )
    columns: dict[str, str] | None = Field(
        None,
        description="retrieval_pairs: anchor / positive / negative -> the file's own column names",
    )
    splits: tuple[Split, ...] | None = Field(
        None, min_length=1, description="retrieval: the qrels files the folder has (default: test)"
    )
    layout: Literal["stsb", "sick"] = Field("stsb", description="pairs: STS Benchmark's or SICK's columns")
    pairs: bool = Field(False, description="classification: text1<TAB>text2<TAB>label lines")
    dataset: str | None = Field(None, description="the `protoembed data` entry that installs the files")
    display: str | None = Field(None, description="the name the tables print")
    c_grid: tuple[float, ...] | None = Field(None, description="classification: the C values searched")
    f1: bool = Field(False, description="classification: report F1 of class 1 too")
    n_clusters: int | None = Field(None, ge=2, description="clustering: k (default: the classes)")
    citation: str = ""

    def build(self) -> Task:
        """The entry (checked as every entry is)."""
        fields: dict[str, Any] = {"display": self.display, "citation": self.citation}
        files = self.files if self.dataset is not None else {k: _own(v) for k, v in self.files.items()}
        if self.splits is not None and self.kind != "retrieval":
            raise ProtoembedError(
                f"task {self.name!r}: splits is for retrieval tasks (a {self.kind} task's splits are the "
                "keys of files)"
            )
        if self.columns is not None and self.kind != "retrieval_pairs":
            raise ProtoembedError(f"task {self.name!r}: columns is for retrieval_pairs tasks")
        if self.kind == "pairs":
            return pairs_file_task(self.name, self.dataset, files, self.layout, **fields)
        if self.kind == "retrieval_pairs":
            return pair_retrieval_task(self.name, self.dataset, files, self.columns, **fields)
        if self.kind == "classification":
            extra = {"c_grid": self.c_grid} if self.c_grid else {}
            return classification_file_task(
                self.name, self.dataset, files, pairs=self.pairs, f1=self.f1, **extra, **fields
            )
        if set(files) != {"all"}:
            reads = (
                "one folder: files: {all: FOLDER}"
                if self.kind == "retrieval"
                else "one file: files: {all: FILE}"
            )
            raise ProtoembedError(f"task {self.name!r}: a {self.kind} task reads {reads}")
        if self.kind == "retrieval":
            return beir_task(self.name, self.dataset, files["all"], self.splits or ("test",), **fields)
        return clustering_file_task(
            self.name, self.dataset, files["all"], n_clusters=self.n_clusters, **fields
        )


def _own(path: str) -> str:
    """A path of one's own files as :func:`~protoembed.data.paths.local_path` finds it (the working
    directory first), else as given (read under the data directory)."""
    from protoembed.data.paths import local_path

    local = local_path(path)
    return path if local is None else local.as_posix()


def declared_tasks(declarations: Iterable[TaskDeclaration]) -> list[Task]:
    """The entries of a config's declared tasks, checked (:meth:`TaskDeclaration.build`,
    :func:`check_own`) and registered nowhere: they are the run's own (:func:`tasks_in_scope`).

    Raises:
        ProtoembedError: an invalid declaration, or a name taken by a registered or an earlier task.
    """
    entries = [declaration.build() for declaration in declarations]
    check_own(entries)
    return entries


# --------------------------------------------------------------------------- the built-in entries


def _sts_year(year: str, citation: str) -> Task:
    from protoembed.data.benchmarks.sts import STS_YEAR_SUBSETS, read_sts_year, sts_subset_files

    def files(variant: str, split: str) -> list[str]:
        pairs = [sts_subset_files(Path(), year, subset, variant) for subset in STS_YEAR_SUBSETS[year]]
        return [p.as_posix() for pair in pairs for p in pair]

    return make_task(
        default=True,
        name=year,
        suites=("sts",),
        dataset="senteval",
        raw_dataset="sts-raw",
        files=files,
        read=lambda root, variant, split: read_sts_year(root, year, variant),
        main_score="spearman",
        citation=citation,
    )


def _stsb(citation: str) -> Task:
    from protoembed.data.benchmarks.sts import read_stsb, stsb_file

    return make_task(
        default=True,
        name="STSBenchmark",
        display="STS-B",
        suites=("sts",),
        dataset="senteval",
        raw_dataset="sts-raw",
        files=lambda variant, split: [stsb_file(split, variant)],
        read=lambda root, variant, split: read_stsb(root, split, variant),
        splits=("train", "dev", "test"),
        main_score="spearman",
        citation=citation,
    )


def _sick(citation: str) -> Task:
    from protoembed.data.benchmarks.sts import read_sick, sick_file

    return make_task(
        default=True,
        name="SICKRelatedness",
        display="SICK-R",
        suites=("sts",),
        dataset="senteval",
        files=lambda variant, split: [sick_file(split)],
        read=lambda root, variant, split: read_sick(root, split, variant),
        splits=("train", "dev", "test"),
        main_score="spearman",
        citation=citation,
    )


def _binary(name: str, folder: str, files: tuple[tuple[str, str], tuple[str, str]], citation: str) -> Task:
    """MR, CR, SUBJ, MPQA: one file per class (``(file, class name)``, the label-1 class first), one set."""
    from protoembed.data.benchmarks.transfer import read_binary

    return make_task(
        default=True,
        name=name,
        suites=("transfer", "fewshot"),
        dataset="senteval",
        files=lambda variant, split: [f"senteval/{folder}/{file}" for file, _ in files],
        read=lambda root, variant, split: read_binary(name, root / "senteval" / folder, files),
        splits=(),
        citation=citation,
    )


def _transfer(name: str, folder: str, reader: Callable[[Path], Any], citation: str, **fields: Any) -> Task:
    return make_task(
        default=True,
        name=name,
        suites=("transfer", "fewshot"),
        dataset="senteval",
        files=lambda variant, split: [f"senteval/{folder}"],
        read=lambda root, variant, split: reader(root / "senteval" / folder),
        citation=citation,
        **fields,
    )


def _clustering(name: str, dataset: str, path: str, citation: str) -> Task:
    return clustering_file_task(name, dataset, f"clustering/{path}", citation=citation, default=True)


def _beir(name: str, folder: str, splits: tuple[str, ...], citation: str) -> Task:
    """A BEIR dataset of ``protoembed data`` (``beir-<folder>``) as a retrieval task, named as MTEB names it;
    outside every default run (the papers evaluate none): ``eval retrieval --task NAME`` runs it."""
    return beir_task(name, f"beir-{folder}", f"beir/{folder}", splits, citation=citation)


_YIN_WANG = "Yin and Wang, 2016. A model-based approach for text clustering with outlier detection."
_XU = "Xu et al., 2017. Self-taught convolutional neural networks for short text clustering."


def _builtin() -> list[Task]:
    from protoembed.data.benchmarks.transfer import read_mrpc, read_sst2, read_trec

    return [
        _sts_year(
            "STS12", "Agirre et al., 2012. SemEval-2012 Task 6: A Pilot on Semantic Textual Similarity."
        ),
        _sts_year("STS13", "Agirre et al., 2013. *SEM 2013 shared task: Semantic Textual Similarity."),
        _sts_year(
            "STS14", "Agirre et al., 2014. SemEval-2014 Task 10: Multilingual Semantic Textual Similarity."
        ),
        _sts_year(
            "STS15",
            "Agirre et al., 2015. SemEval-2015 Task 2: Semantic Textual Similarity, English, Spanish and "
            "Pilot on Interpretability.",
        ),
        _sts_year(
            "STS16",
            "Agirre et al., 2016. SemEval-2016 Task 1: Semantic Textual Similarity, Monolingual and "
            "Cross-Lingual Evaluation.",
        ),
        _stsb(
            "Cer et al., 2017. SemEval-2017 Task 1: Semantic Textual Similarity Multilingual and "
            "Crosslingual Focused Evaluation."
        ),
        _sick(
            "Marelli et al., 2014. A SICK cure for the evaluation of compositional distributional semantic "
            "models."
        ),
        _binary(
            "MR",
            "MR",
            (("rt-polarity.pos", "positive"), ("rt-polarity.neg", "negative")),
            "Pang and Lee, 2005. Seeing stars: Exploiting class relationships for sentiment categorization "
            "with respect to rating scales.",
        ),
        _binary(
            "CR",
            "CR",
            (("custrev.pos", "positive"), ("custrev.neg", "negative")),
            "Hu and Liu, 2004. Mining and summarizing customer reviews.",
        ),
        _binary(
            "SUBJ",
            "SUBJ",
            (("subj.objective", "objective"), ("subj.subjective", "subjective")),
            "Pang and Lee, 2004. A sentimental education: Sentiment analysis using subjectivity "
            "summarization based on minimum cuts.",
        ),
        _binary(
            "MPQA",
            "MPQA",
            (("mpqa.pos", "positive"), ("mpqa.neg", "negative")),
            "Wiebe et al., 2005. Annotating expressions of opinions and emotions in language.",
        ),
        _transfer(
            "SST2",
            "SST/binary",
            read_sst2,
            "Socher et al., 2013. Recursive deep models for semantic compositionality over a sentiment "
            "treebank.",
            display="SST",
            splits=("train", "dev", "test"),
        ),
        _transfer(
            "TREC",
            "TREC",
            read_trec,
            "Li and Roth, 2002. Learning question classifiers.",
            splits=("train", "test"),
            c_grid=WIDE_C_GRID,
        ),
        _transfer(
            "MRPC",
            "MRPC",
            read_mrpc,
            "Dolan and Brockett, 2005. Automatically constructing a corpus of sentential paraphrases.",
            splits=("train", "test"),
            c_grid=WIDE_C_GRID,
            f1=True,
        ),
        _clustering(
            "AgNews",
            "agnews",
            "agnews8k/agnewsdataraw-8000",
            "Zhang et al., 2015. Character-level convolutional networks for text classification.",
        ),
        _clustering(
            "SearchSnippets",
            "searchsnippets",
            "searchsnippets/search_snippets_true_text",
            "Phan et al., 2008. Learning to classify short and sparse text & web with hidden topics from "
            "large-scale data collections.",
        ),
        _clustering("StackOverflow", "stackoverflow", "stackoverflow/stackoverflow_true_text", _XU),
        _clustering("Biomedical", "biomedical", "biomedical/biomedical_true_text", _XU),
        _clustering("Tweet", "tweet", "tweet/tweet-original-order.txt", _YIN_WANG),
        *(
            _clustering(f"GoogleNews-{part}", f"googlenews-{part.lower()}", f"googlenews/{part}", _YIN_WANG)
            for part in ("TS", "T", "S")
        ),
        _beir(
            "SciFact",
            "scifact",
            ("train", "test"),
            "Wadden et al., 2020. Fact or fiction: Verifying scientific claims.",
        ),
        _beir(
            "NFCorpus",
            "nfcorpus",
            ("train", "dev", "test"),
            "Boteva et al., 2016. A full-text learning to rank dataset for medical information retrieval.",
        ),
        _beir(
            "FiQA2018",
            "fiqa",
            ("train", "dev", "test"),
            "Maia et al., 2018. WWW'18 open challenge: Financial opinion mining and question answering.",
        ),
        _beir(
            "ArguAna",
            "arguana",
            ("test",),
            "Wachsmuth et al., 2018. Retrieval of the best counterargument without prior topic knowledge.",
        ),
        _beir(
            "SCIDOCS",
            "scidocs",
            ("test",),
            "Cohan et al., 2020. SPECTER: Document-level representation learning using citation-informed "
            "transformers.",
        ),
        _beir(
            "QuoraRetrieval",
            "quora",
            ("dev", "test"),
            "Thakur et al., 2021. BEIR: A heterogeneous benchmark for zero-shot evaluation of information "
            "retrieval models.",
        ),
        _beir(
            "TRECCOVID",
            "trec-covid",
            ("test",),
            "Voorhees et al., 2020. TREC-COVID: Constructing a pandemic information retrieval test collection.",
        ),
    ]


# --------------------------------------------------------------------------- looking tasks up


def get_task(name: str | Task, suite: str | None = None) -> Task:
    """The entry of ``name``: a canonical name or a table name (``STS-B``), case ignored, among the
    registered entries and those in scope (:func:`known_tasks`; an entry, even one never registered, is
    returned as it is); with ``suite``, only that suite's tasks.

    Raises:
        ProtoembedError: one line naming ``name`` and the known names (``STSBenchmark (STS-B)``).
    """
    if isinstance(name, Task):  # an entry, registered or not, is itself
        if suite is not None and suite not in name.suites:
            raise ProtoembedError(
                f"task {name.name!r} is not a task of suite {suite} (its suites: {', '.join(name.suites)})"
            )
        return name
    known = [t for t in known_tasks() if suite is None or suite in t.suites]
    wanted = str(name).lower()
    for task in known:
        if wanted in (task.name.lower(), task.table_name.lower()):
            return task
    listed = [f"{t.name} ({t.display})" if t.display else t.name for t in known]
    of = f" of suite {suite}" if suite else ""
    if not known:
        raise ProtoembedError(
            f"unknown task {name!r}{of}: no task{of} is registered; give its Task entry (e.g. "
            "beir_folder_task(folder)) or register one (register_task)"
        )
    raise ProtoembedError(TASKS.unknown(name, listed, scope=of))


def get_tasks(names: Iterable[str | Task] | None, suite: str, split: str | None = None) -> list[Task]:
    """The entries of ``names`` (each once, in order; ``None``: the suite's default run for ``split``,
    :func:`default_tasks`) among ``suite``'s tasks, each checked to have ``split`` (``None``: not
    checked).

    Raises:
        ProtoembedError: no name, an unknown one (the known names listed), or a split a task lacks.
    """
    if names is None:
        names = default_tasks(suite, split)
    entries = list({e.name: e for e in (get_task(name, suite) for name in names)}.values())
    if not entries:
        known = [t.name for t in known_tasks() if suite in t.suites]
        raise ProtoembedError(
            f"no {suite} task to evaluate: none runs by default; name one"
            + (f" (choose from: {', '.join(known)})" if known else "")
            + (" or give a folder in the BEIR layout (--task-dir)" if suite == "retrieval" else "")
        )
    for entry in entries:
        if split is not None and split not in entry.splits:
            have = " / ".join(entry.splits) or "no"
            raise ProtoembedError(f"{entry.name} has only a {have} split (asked for {split!r})")
    return entries


def default_tasks(suite: str, split: str | None = None) -> list[str]:
    """The tasks ``suite`` runs when none are named, in :data:`TASKS`' order: its entries marked
    ``default``, only built-in ones when it has any (a papers' suite: a closed list, which no plugin or
    registered task changes; a suite of a package's own: its entries so marked); with ``split``, those
    that have it (STS's ``--split dev``: STS-B and SICK-R). Entries in scope (:func:`tasks_in_scope`)
    run when named only."""
    of_suite = [t for t in TASKS.values() if suite in t.suites]
    papers = [t for t in of_suite if t.name in TASKS.builtin_names]
    return [t.name for t in papers or of_suite if t.default and (split is None or split in t.splits)]


def table_name(name: str) -> str:
    """The name the papers' tables print for task ``name`` (itself when no entry has it)."""
    task = _entry(name)
    return task.table_name if task is not None else name


def main_score(name: str, default: str) -> str:
    """The per-task key that a suite's ``avg`` averages for task ``name`` (``default`` when no entry has
    it)."""
    task = _entry(name)
    return task.main_score if task is not None else default


def table_names(names: Iterable[str]) -> list[str]:
    """:func:`table_name` of each."""
    return [table_name(name) for name in names]


def markdown(tasks: Sequence[Task] | None = None) -> str:
    """``docs/tasks.md``: a table of every entry (suites, dataset, splits, main score, default run,
    languages, citation)."""
    rows = [
        "| Task | Table name | Suites | `protoembed data` entry | Splits | Main score | Default run "
        "| Languages | Citation |"
    ]
    rows.append("|---|---|---|---|---|---|---|---|---|")
    for t in tasks if tasks is not None else TASKS.values():
        dataset = (t.dataset or "own files") + (f" (raw: {t.raw_dataset})" if t.raw_dataset else "")
        splits = ", ".join(t.splits) or "none (one set)"
        cells = [t.name, t.table_name, ", ".join(t.suites), dataset, splits, t.main_score]
        cells += ["yes" if t.default else "no", ", ".join(t.languages), t.citation]
        rows.append("| " + " | ".join(cells) + " |")
    head = [
        "# Evaluation tasks",
        "",
        "Every task `protoembed eval` and `protoembed.evaluate` run, from its entry in",
        "`src/protoembed/evaluation/tasks.py` (made by `python -m protoembed.evaluation.tasks > docs/tasks.md`).",
        "`protoembed data download --for TASK` fetches the entry that provides a task's files; a task",
        'marked "Default run" runs when `protoembed eval <suite>` names no task.',
        "",
    ]
    return "\n".join([*head, *rows]) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
