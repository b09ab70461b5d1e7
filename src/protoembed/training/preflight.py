"""What ``protoembed train`` checks before it imports torch, transformers or sentence-transformers.

Those imports take seconds on an idle machine and most of a minute on a busy one, so every mistake that
can be found without them is found first (:func:`preflight`): the config (already validated when read),
the output folders (writable; a finished or interrupted run there only with ``--resume``), the files the run reads (present: :mod:`protoembed.training.needs`), the
base model (a model folder, a cached hub id or ``default``: :func:`protoembed.backbones.resolve_model_dir`)
and the first rows of each training file (they parse and give columns). The output folders' locks are
taken right after, by the command (:func:`protoembed.folder_lock.hold_output_dirs`), still before the
imports. ``protoembed train --check`` runs the same checks with every file read (not only the first rows
of the streamable ones, and the files of the selection and test tasks by their tasks' readers, as the
run's evaluations read them) and the precision checked against this machine, then stops.
This module imports no torch.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from protoembed.core.errors import ProtoembedError
from protoembed.objectives.registry import MATRYOSHKA
from protoembed.training.config_models import TrainConfig

#: Rows of each training file parsed before the run starts (``--check``: also every file that cannot
#: be streamed, read whole).
FIRST_ROWS = 100

Stages = Sequence[tuple[str, TrainConfig]]


def output_folders(stages: Stages) -> list[Path]:
    """The run folders: one for a single run, one per stage (``output_dir/<stage name>``) for a staged
    run."""
    return [Path(str(cfg.output_dir)).expanduser() for _, cfg in stages]


def check_model(stages: Stages) -> str:
    """The first stage's base model resolved to a local folder (later stages start from the previous
    stage's ``best/``), each stage's ``max_seq_length`` within its position limit and its Matryoshka
    dims within the embedding size (``max_position_embeddings`` and ``hidden_size`` of its
    ``config.json``); returns what was found. Raises :class:`ProtoembedError` naming the model."""
    from protoembed.model.backbones import hidden_size, position_limit, resolve_model_dir

    model = stages[0][1].model
    folder = resolve_model_dir(model)
    limit, size = position_limit(folder), hidden_size(folder)
    for name, cfg in stages:
        stage = f"stage {name!r}: " if name else ""
        if limit is not None and cfg.max_seq_length is not None and cfg.max_seq_length > limit:
            raise ProtoembedError(
                f"{stage}max_seq_length {cfg.max_seq_length} is above the "
                f"position limit of base model {model}: {limit} (max_position_embeddings in "
                f"{folder / 'config.json'})"
            )
        matryoshka = getattr(cfg.objective.plan.options, MATRYOSHKA, None)
        if size is not None and matryoshka is not None:
            try:
                matryoshka.check_dims(size, f"base model {model} (hidden_size in {folder / 'config.json'})")
            except ProtoembedError as err:
                raise ProtoembedError(f"{stage}{err}") from None
    return f"base model {model}: found ({folder})"


def check_rows(stages: Stages, whole_files: bool = False) -> list[str]:
    """Parse the first :data:`FIRST_ROWS` rows of every training file that can be streamed (and, with
    ``whole_files``, read the others whole); a ``hub:`` dataset is left to the ``datasets`` library.

    Returns one line per file read (path, format, rows parsed, columns). Raises the readers'
    :class:`ProtoembedError` (``file:line`` and what is wrong), with the stage named in a staged run.
    """
    from protoembed.data.training.formats import FORMATS, format_of, open_stream, read_examples
    from protoembed.data.training.hf import HUB_PREFIX

    said = []
    for name, cfg in stages:
        data = cfg.data
        for file in data.files():
            if file.path.startswith(HUB_PREFIX):
                continue
            try:
                fmt = format_of(file.path, file.format, data.data_dir, file.columns)
                if FORMATS[fmt].stream is not None:
                    stream = open_stream(
                        file.path, fmt, data.data_dir, file.columns, **data.reader_options(file)
                    )
                    rows = sum(1 for _ in itertools.islice(stream, FIRST_ROWS))
                    if not rows:  # the reader says why (empty lines, skipped rows), as a run would
                        read_examples(
                            file.path, fmt, data.data_dir, file.columns, **data.reader_options(file)
                        )
                    said.append(
                        f"{stream.path}: {fmt}, the first {rows} example(s) parse (columns "
                        f"{', '.join(stream.names)})"
                    )
                elif whole_files:
                    examples = read_examples(
                        file.path, fmt, data.data_dir, file.columns, **data.reader_options(file)
                    )
                    said.append(
                        f"{examples.where()}: {fmt}, {len(examples)} example(s) parse (columns "
                        f"{', '.join(examples.names)})"
                    )
            except ProtoembedError as err:
                raise ProtoembedError(f"stage {name!r}: {err}" if name else str(err)) from None
    return said


def check_tasks(stages: Stages) -> list[str]:
    """Read the files of each stage's selection and test tasks whole, by their tasks' readers, as the run
    reads them at its evaluations (:meth:`~protoembed.evaluation.evaluator.Evaluator.read_files`); returns
    one line per task. Raises the readers' :class:`ProtoembedError`, with the stage named in a staged run.
    """
    said = []
    for name, cfg in stages:
        stage = f"stage {name!r}: " if name else ""
        evaluators = (
            (cfg.selection_evaluator(cfg.data.data_dir), "model selection on"),
            (cfg.test_evaluator(cfg.data.data_dir), "test set"),
        )
        try:
            for evaluator, what in evaluators:
                if evaluator is not None:
                    said += evaluator.read_files(f"{stage}{what}")
        except ProtoembedError as err:
            raise ProtoembedError(f"{stage}{err}") from None
    return said


def check_run_folders(stages: Stages, resume: bool) -> list[str]:
    """Each run folder checked as the trainer checks it (:func:`protoembed.training.checkpoint.check_output_dir`:
    no finished or interrupted run overwritten without ``--resume``, the same config to resume); returns
    one line per folder saying what the run does there."""
    from protoembed.training.checkpoint import check_output_dir, find_checkpoint

    said = []
    for folder, (_, cfg) in zip(output_folders(stages), stages):
        finished = check_output_dir(folder.absolute(), cfg.to_dict(), resume)
        checkpoint = find_checkpoint(folder) if resume else None
        what = (
            "a finished run (--resume returns its results)"
            if finished is not None
            else f"resumes from {checkpoint}"
            if checkpoint is not None
            else "a new run"
        )
        said.append(f"output folder {folder}: writable; {what}")
    return said


def preflight(stages: Stages, config: str, whole_files: bool = False, resume: bool = False) -> list[str]:
    """The checks of the module docstring but the output folders and their locks (the command's), in
    order; returns one line per check made.

    In: the run (:func:`protoembed.training.stages.load_run`), the config file's path (for the fetch
    command of a missing file), ``whole_files`` (:func:`check_rows`, and :func:`check_tasks`), ``resume``
    (:func:`check_run_folders`).
    Raises :class:`ProtoembedError` (one line) at the first problem.
    """
    from protoembed.data.needs import check_present
    from protoembed.training.needs import config_needs

    said = check_run_folders(stages, resume)
    needs = config_needs(stages)
    check_present(needs, config)  # every stage's files, before any model is loaded
    said.append(f"{len(needs)} file(s) the run reads are present")
    said.append(check_model(stages))
    said += check_rows(stages, whole_files)
    if whole_files:
        said += check_tasks(stages)
    return said
