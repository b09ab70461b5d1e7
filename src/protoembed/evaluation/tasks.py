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

A new task is one :class:`Task` given to :func:`register_task` (``protoembed.register_task``), one
entry of a training config's ``tasks:`` list (:class:`TaskDeclaration`), or one entry point of the group
``protoembed.tasks`` (an installed package's tasks: a :class:`Task`, a list of them, or a function
returning either); :func:`pairs_file_task` (STS-like),
:func:`classification_file_task` (transfer / few-shot), :func:`clustering_file_task`, :func:`beir_task`
and :func:`pair_retrieval_task` (retrieval: a BEIR folder, (query, document) pairs) build one for
files in the usual layouts. An entry is validated when it is made: an unknown suite, a ``protoembed
data`` entry that does not exist, a split other than train / dev / test, or a main score its suites do
not compute is a one-line :class:`~protoembed.errors.ProtoembedError`.

Nothing here reads a file or imports torch; the built-in entries are made on first use.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from protoembed.core.errors import ProtoembedError
from protoembed.core.registry import Registry

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
    named (only the papers' tasks are; a task registered by a user or an installed package joins only when
    it says so). ``languages``: ISO 639-1 codes. ``citation``: the paper that introduced the data.

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

    The built-in entries and those of installed packages' entry points are made on first use (each
    entry's validation reads the suites, whose modules read this one). Besides its name, a task's table
    name is its own: no other task may be named, or printed, as it is.
    """

    def __init__(self) -> None:
        super().__init__("task", builtin=lambda: [*_builtin(), *_entry_point_tasks()])

    def register(self, entry: Task, *, name: str | None = None, replace: bool = False) -> Task:
        """Add ``entry`` (see :meth:`Registry.register`; ``name``, when given, must be its own).

        Raises:
            ProtoembedError: its name or table name is another task's, or its name is taken and
                ``replace`` is false.
        """
        if name is not None and name != entry.name:
            raise ValueError(f"task {entry.name!r} registered as {name!r}: a task is registered by its name")
        for other in self.values():
            names = {other.name.lower(), other.table_name.lower()}
            if other.name != entry.name and names & {entry.name.lower(), entry.table_name.lower()}:
                raise ProtoembedError(
                    f"task {entry.name!r}: its name or table name is taken by {other.name!r}"
                )
        return super().register(entry, replace=replace)


#: Every task, by name.
TASKS = TaskRegistry()


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
    name = get_task(name).name
    del TASKS[name]
    _DECLARED.pop(name, None)


@contextlib.contextmanager
def registered_for_now(entries: Iterable[str | Task] | str | None) -> Iterator[None]:
    """The :class:`Task` objects among ``entries`` that are not registered (a ``--task-dir`` folder, a
    :func:`beir_folder_task` given to :func:`protoembed.evaluate`) in :data:`TASKS` for the block only;
    names and registered entries are left as they are."""
    if entries is None or isinstance(entries, str):
        entries = []
    added = [e for e in entries if isinstance(e, Task) and TASKS.get(e.name) is not e]
    for entry in added:
        register_task(entry)
    try:
        yield
    finally:
        for entry in added:
            unregister_task(entry.name)


def _entry_point_tasks() -> list[Task]:
    """The tasks of installed packages' ``protoembed.tasks`` entry points."""
    from importlib.metadata import entry_points

    found: list[Task] = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            value = point.load()
        except Exception as err:  # a broken package is named, not a traceback
            raise ProtoembedError(f"entry point {point.name!r} ({point.value}): cannot load: {err}") from None
        value = value() if callable(value) and not isinstance(value, Task) else value
        items = [value] if isinstance(value, Task) else list(value)
        if not all(isinstance(item, Task) for item in items):
            raise ProtoembedError(f"entry point {point.name!r} ({point.value}): expected Task entries")
        found += items
    return found


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
    default: bool = Field(
        False, description="part of its suites' default run (the papers' tasks only, unless true)"
    )
    c_grid: tuple[float, ...] | None = Field(None, description="classification: the C values searched")
    f1: bool = Field(False, description="classification: report F1 of class 1 too")
    n_clusters: int | None = Field(None, ge=2, description="clustering: k (default: the classes)")
    citation: str = ""

    def build(self) -> Task:
        """The entry (checked as every entry is)."""
        fields: dict[str, Any] = {"display": self.display, "default": self.default, "citation": self.citation}
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


#: Names registered from declarations, and the declaration each came from (a config read twice in one
#: process declares its tasks again: the same declaration is no conflict).
_DECLARED: dict[str, TaskDeclaration] = {}


def register_declared(declarations: Iterable[TaskDeclaration]) -> list[Task]:
    """Register each declared task (:func:`register_task`); one already registered from the same
    declaration is kept as it is. Returns the entries.

    Raises:
        ProtoembedError: an invalid declaration, or a name taken by another task.
    """
    entries = []
    for declaration in declarations:
        if _DECLARED.get(declaration.name) == declaration and declaration.name in TASKS:
            entries.append(TASKS[declaration.name])
            continue
        entries.append(register_task(declaration.build()))
        _DECLARED[declaration.name] = declaration
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
    """The entry of ``name``: a canonical name or a table name (``STS-B``), case ignored (an entry, even
    one never registered, is returned as it is); with ``suite``, only that suite's tasks.

    Raises:
        ProtoembedError: one line naming ``name`` and the known names (``STSBenchmark (STS-B)``).
    """
    if isinstance(name, Task):  # an entry, registered or not, is itself
        if suite is not None and suite not in name.suites:
            raise ProtoembedError(
                f"task {name.name!r} is not a task of suite {suite} (its suites: {', '.join(name.suites)})"
            )
        return name
    known = [t for t in TASKS.values() if suite is None or suite in t.suites]
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
        known = [t.name for t in TASKS.values() if suite in t.suites]
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
    """The tasks ``suite`` runs when none are named: its entries marked ``default``, in :data:`TASKS`'
    order; with ``split``, those that have it (STS's ``--split dev``: STS-B and SICK-R)."""
    return [
        t.name
        for t in TASKS.values()
        if suite in t.suites and t.default and (split is None or split in t.splits)
    ]


def table_name(name: str) -> str:
    """The name the papers' tables print for task ``name`` (itself when no entry has it)."""
    task = TASKS.get(name)
    return task.table_name if task is not None else name


def main_score(name: str, default: str) -> str:
    """The per-task key that a suite's ``avg`` averages for task ``name`` (``default`` when no entry has
    it)."""
    task = TASKS.get(name)
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
