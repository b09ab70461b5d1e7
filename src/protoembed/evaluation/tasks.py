"""Every evaluation task, one :class:`Task` entry each: what it is, what it reads, how it is scored.

A task is data, as an MTEB task is its ``TaskMetadata``: its name and the name the papers' tables print,
the suites that evaluate it (``protoembed eval <suite>``, :func:`protoembed.evaluate`), the
``protoembed data`` entry that provides its files (:mod:`protoembed.data.registry`), its splits, its main
score, its languages and its citation, and two functions: the files it reads (relative to the data
directory) and the reader that turns them into the suite's input. ``protoembed eval`` checks and reads a
task through its entry, the report prints its table name, ``protoembed data download --for TASK`` fetches
its dataset, and ``docs/tasks.md`` lists the entries (``python -m protoembed.evaluation.tasks``).

A new STS-like task is one entry in :data:`TASKS`; :func:`pairs_file_task` builds one for a file in the
STS Benchmark or SICK layout. Nothing here reads a file or imports torch.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from protoembed.errors import ProtoembedError

#: ``(data directory, variant, split) -> the suite's input`` (:class:`~protoembed.data.sts.StsPairs`,
#: :class:`~protoembed.data.transfer.TransferData`, :class:`~protoembed.data.clustering.ClusteringData`).
Reader = Callable[[Path, str, str], Any]
#: ``(variant, split) -> the files the reader reads``, relative to the data directory, ``/``-separated.
Files = Callable[[str, str], list[str]]


@dataclass(frozen=True)
class Task:
    """One evaluation task.

    ``name``: the canonical name (results files key their ``tasks`` by it). ``suites``: the suites that
    evaluate it, the first one by default. ``dataset``: the ``protoembed data`` entry that provides its
    files (``raw_dataset``: the one for STS's ``--variant raw``, when that reads other files). ``files``
    and ``read``: see :data:`Files` and :data:`Reader`. ``display``: the name the papers' tables print
    (``None``: ``name``). ``splits``: the splits it has (STS's ``--split`` applies only to tasks with
    more than ``test``). ``main_score``: the per-task key a suite's ``avg`` averages. ``languages``: ISO
    639-1 codes. ``citation``: the paper that introduced the data.
    """

    name: str
    suites: tuple[str, ...]
    dataset: str
    files: Files
    read: Reader
    display: str | None = None
    splits: tuple[str, ...] = ("test",)
    main_score: str = "acc"
    languages: tuple[str, ...] = ("en",)
    citation: str = ""
    raw_dataset: str | None = None

    @property
    def table_name(self) -> str:
        """The name the report's and the command's tables print (``STSBenchmark`` -> ``STS-B``)."""
        return self.display or self.name

    def dataset_for(self, variant: str = "senteval") -> str:
        """The ``protoembed data`` entry that provides the files of ``variant``."""
        return self.raw_dataset if variant == "raw" and self.raw_dataset else self.dataset


# --------------------------------------------------------------------------- the built-in entries


def _sts_year(year: str, citation: str) -> Task:
    from protoembed.data.sts import read_sts_year, sts_task_files

    return Task(
        name=year,
        suites=("sts",),
        dataset="senteval",
        raw_dataset="sts-raw",
        files=lambda variant, split: sts_task_files(year, variant, "test"),
        read=lambda root, variant, split: read_sts_year(root, year, variant),
        main_score="spearman",
        citation=citation,
    )


def _sts_split_task(name: str, raw_dataset: str | None, citation: str) -> Task:
    from protoembed.data.sts import SHORT_NAMES, read_sick, read_stsb, sts_task_files

    reader = read_stsb if name == "STSBenchmark" else read_sick
    return Task(
        name=name,
        suites=("sts",),
        dataset="senteval",
        raw_dataset=raw_dataset,
        files=lambda variant, split: sts_task_files(name, variant, split),
        read=lambda root, variant, split: reader(root, split, variant),
        display=SHORT_NAMES[name],
        splits=("train", "dev", "test"),
        main_score="spearman",
        citation=citation,
    )


#: The transfer tasks with splits (the others are one set, cross-validated).
_TRANSFER_SPLITS = {"SST2": ("train", "dev", "test"), "TREC": ("train", "test"), "MRPC": ("train", "test")}


def _transfer(name: str, citation: str, display: str | None = None) -> Task:
    from protoembed.data.transfer import load_transfer_task, transfer_task_files

    return Task(
        name=name,
        suites=("transfer", "fewshot"),
        dataset="senteval",
        files=lambda variant, split: transfer_task_files(name),
        read=lambda root, variant, split: load_transfer_task(name, root),
        display=display,
        splits=_TRANSFER_SPLITS.get(name, ()),
        citation=citation,
    )


def _clustering(name: str, dataset: str, citation: str) -> Task:
    from protoembed.data.clustering import clustering_task_files, read_clustering

    return Task(
        name=name,
        suites=("clustering",),
        dataset=dataset,
        files=lambda variant, split: clustering_task_files(name),
        read=lambda root, variant, split: read_clustering(name, root),
        splits=(),
        citation=citation,
    )


def pairs_file_task(
    name: str,
    dataset: str,
    paths: Mapping[str, str],
    layout: Literal["stsb", "sick"] = "stsb",
    *,
    display: str | None = None,
    citation: str = "",
    languages: tuple[str, ...] = ("en",),
) -> Task:
    """An STS-like task read from one file per split, in STS Benchmark's layout (``genre, file, year, id,
    score, sentence1, sentence2``, tab-separated) or SICK's (a header, then ``pair_ID, sentence_A,
    sentence_B, relatedness_score, entailment_judgment``): gold in [0, 5], scored as STS-B is.

    ``paths``: split -> file, relative to the data directory (the same file for both variants; the
    ``senteval`` variant normalises whitespace, ``raw`` strips). ``dataset``: the ``protoembed data`` entry
    that installs the files.
    """
    from protoembed.data.pairs import parse_sick_lines, parse_stsb_lines
    from protoembed.data.sts import StsPairs, read_lines

    if not paths:
        raise ProtoembedError(f"task {name!r}: give the file of at least one split")

    def read(root: Path, variant: str, split: str) -> Any:
        import numpy as np

        path = root / paths[split]
        if variant == "senteval":
            clean: Callable[[str], str] = lambda s: " ".join(s.split())  # noqa: E731
        else:
            clean = str.strip
        lines = read_lines(path, variant == "raw")
        if layout == "stsb":
            pairs = parse_stsb_lines(path, lines, (7,), clean)
        else:
            pairs = parse_sick_lines(path, lines, clean)
        scores = np.asarray(pairs.scores, dtype=np.float64)
        return StsPairs(f"{name}/{split}", pairs.sentences1, pairs.sentences2, scores)

    return Task(
        name=name,
        suites=("sts",),
        dataset=dataset,
        files=lambda variant, split: [paths[split]],
        read=read,
        display=display,
        splits=tuple(paths),
        main_score="spearman",
        languages=languages,
        citation=citation,
    )


def _builtin() -> list[Task]:
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
        _sts_split_task(
            "STSBenchmark",
            "sts-raw",
            "Cer et al., 2017. SemEval-2017 Task 1: Semantic Textual Similarity Multilingual and "
            "Crosslingual Focused Evaluation.",
        ),
        _sts_split_task(
            "SICKRelatedness",
            None,
            "Marelli et al., 2014. A SICK cure for the evaluation of compositional distributional semantic "
            "models.",
        ),
        _transfer(
            "MR",
            "Pang and Lee, 2005. Seeing stars: Exploiting class relationships for sentiment categorization "
            "with respect to rating scales.",
        ),
        _transfer("CR", "Hu and Liu, 2004. Mining and summarizing customer reviews."),
        _transfer(
            "SUBJ",
            "Pang and Lee, 2004. A sentimental education: Sentiment analysis using subjectivity "
            "summarization based on minimum cuts.",
        ),
        _transfer("MPQA", "Wiebe et al., 2005. Annotating expressions of opinions and emotions in language."),
        _transfer(
            "SST2",
            "Socher et al., 2013. Recursive deep models for semantic compositionality over a sentiment "
            "treebank.",
            display="SST",
        ),
        _transfer("TREC", "Li and Roth, 2002. Learning question classifiers."),
        _transfer(
            "MRPC", "Dolan and Brockett, 2005. Automatically constructing a corpus of sentential paraphrases."
        ),
        _clustering(
            "AgNews",
            "agnews",
            "Zhang et al., 2015. Character-level convolutional networks for text classification.",
        ),
        _clustering(
            "SearchSnippets",
            "searchsnippets",
            "Phan et al., 2008. Learning to classify short and sparse text & web with hidden topics from "
            "large-scale data collections.",
        ),
        _clustering(
            "StackOverflow",
            "stackoverflow",
            "Xu et al., 2017. Self-taught convolutional neural networks for short text clustering.",
        ),
        _clustering(
            "Biomedical",
            "biomedical",
            "Xu et al., 2017. Self-taught convolutional neural networks for short text clustering.",
        ),
        _clustering(
            "Tweet",
            "tweet",
            "Yin and Wang, 2016. A model-based approach for text clustering with outlier detection.",
        ),
        *(
            _clustering(
                f"GoogleNews-{part}",
                f"googlenews-{part.lower()}",
                "Yin and Wang, 2016. A model-based approach for text clustering with outlier detection.",
            )
            for part in ("TS", "T", "S")
        ),
    ]


#: Task name -> its entry, in the papers' column order within each suite.
TASKS: dict[str, Task] = {task.name: task for task in _builtin()}


# --------------------------------------------------------------------------- looking tasks up


def get_task(name: str, suite: str | None = None) -> Task:
    """The entry of ``name``: a canonical name or a table name (``STS-B``), case ignored; with ``suite``,
    only that suite's tasks.

    Raises:
        ProtoembedError: one line naming ``name`` and the known names (``STSBenchmark (STS-B)``).
    """
    known = [t for t in TASKS.values() if suite is None or suite in t.suites]
    wanted = str(name).lower()
    for task in known:
        if wanted in (task.name.lower(), task.table_name.lower()):
            return task
    listed = ", ".join(f"{t.name} ({t.display})" if t.display else t.name for t in known)
    of = f" of suite {suite}" if suite else ""
    raise ProtoembedError(f"unknown task {name!r}{of}; choose from: {listed}")


def get_tasks(names: Iterable[str], suite: str, split: str | None = None) -> list[Task]:
    """The entries of ``names`` (each once, in order) among ``suite``'s tasks, each checked to have
    ``split`` (``None``: not checked).

    Raises:
        ProtoembedError: no name, an unknown one (the known names listed), or a split a task lacks.
    """
    entries = list({e.name: e for e in (get_task(name, suite) for name in names)}.values())
    if not entries:
        raise ProtoembedError(f"no {suite} task to evaluate")
    for entry in entries:
        if split is not None and split not in entry.splits:
            have = " / ".join(entry.splits) or "no"
            raise ProtoembedError(f"{entry.name} has only a {have} split (asked for {split!r})")
    return entries


def suite_tasks(suite: str) -> tuple[str, ...]:
    """The names of the tasks ``suite`` evaluates, in :data:`TASKS`' order."""
    return tuple(name for name, task in TASKS.items() if suite in task.suites)


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


def read_task(
    name: str, data_dir: str | os.PathLike[str] | None, variant: str = "senteval", split: str = "test"
) -> Any:
    """The suite input of task ``name`` (its entry's reader, on the resolved data directory)."""
    from protoembed.data.paths import resolve_data_dir

    return get_task(name).read(resolve_data_dir(data_dir), variant, split)


def markdown(tasks: Sequence[Task] | None = None) -> str:
    """``docs/tasks.md``: a table of every entry (suites, dataset, splits, main score, languages,
    citation)."""
    rows = [
        "| Task | Table name | Suites | `protoembed data` entry | Splits | Main score | Languages | Citation |"
    ]
    rows.append("|---|---|---|---|---|---|---|---|")
    for t in tasks if tasks is not None else TASKS.values():
        dataset = t.dataset + (f" (raw: {t.raw_dataset})" if t.raw_dataset else "")
        splits = ", ".join(t.splits) or "none (one set)"
        cells = [t.name, t.table_name, ", ".join(t.suites), dataset, splits, t.main_score]
        rows.append("| " + " | ".join([*cells, ", ".join(t.languages), t.citation]) + " |")
    head = [
        "# Evaluation tasks",
        "",
        "Every task `protoembed eval` and `protoembed.evaluate` run, from its entry in",
        "`src/protoembed/evaluation/tasks.py` (made by `python -m protoembed.evaluation.tasks > docs/tasks.md`).",
        "`protoembed data download --for TASK` fetches the entry that provides a task's files.",
        "",
    ]
    return "\n".join([*head, *rows]) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
