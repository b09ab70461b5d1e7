"""Pieces shared by the evaluation suites: encoding each distinct sentence once and the per-task loop
with progress lines (markdown tables: :mod:`protoembed.evaluation.tables`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from protoembed.core.errors import ProtoembedError
from protoembed.evaluation.tables import fmt, papers_row, table_head  # noqa: F401 (re-exported)
from protoembed.evaluation.tasks import main_score
from protoembed.inputs.prompts import encode_with_role

Data = TypeVar("Data")
#: ``encode(sentences) -> (n, d) array``; the retrieval suite also asks ``encode(sentences,
#: prompt_name=role)`` of one that takes a ``prompt_name`` (:func:`protoembed.inputs.prompts.encode_with_role`).
Encode = Callable[..., np.ndarray]


def sentence_embeddings(
    encode: Encode, sentences: Sequence[str], dtype: type[np.floating] = np.float64, role: str | None = None
) -> tuple[np.ndarray, dict[str, int]]:
    """Encode each distinct sentence once (one ``encode`` call, in order of first appearance), with the
    model's prompt of ``role`` when given (:func:`~protoembed.inputs.prompts.encode_with_role`).

    Returns:
        (embeddings as ``dtype``: float64 by default, float32 for a retrieval corpus, sentence -> row).
    Raises:
        ProtoembedError: ``encode`` returned an array of the wrong shape.
    """
    unique = list(dict.fromkeys(sentences))
    vectors = encode(unique) if role is None else encode_with_role(encode, unique, role)
    embeddings = np.asarray(vectors, dtype=dtype)
    if embeddings.ndim != 2 or embeddings.shape[0] != len(unique):
        raise ProtoembedError(
            f"the encoder returned an array of shape {embeddings.shape} for {len(unique)} sentences; "
            "expected (number of sentences, dimension)"
        )
    return embeddings, {s: i for i, s in enumerate(unique)}


def evaluate_tasks(
    suite: str,
    tasks: Sequence[str],
    load: Callable[[str], Data],
    evaluate: Callable[[Data], dict[str, Any]],
    describe: Callable[[dict[str, Any]], str],
    progress: bool = False,
    score: str = "acc",
) -> dict[str, Any]:
    """Read every task's data (so bad data fails before any encoding), then ``evaluate`` each in order.

    With ``progress``, one stderr line per finished task: ``<suite>: <name>: <describe(result)>
    (<seconds> s)``.

    Returns:
        ``{"tasks": {name: evaluate(data)}, "avg": mean of their main scores}`` (each task entry's
        ``main_score``: ``acc`` for every transfer, few-shot and clustering task; ``score`` for a task
        given as an entry that was never registered).
    """
    tasks = list(dict.fromkeys(tasks))
    if not tasks:
        raise ProtoembedError(f"no {suite} task to evaluate")
    datasets = [load(task) for task in tasks]
    results: dict[str, dict[str, Any]] = {}
    for data in datasets:
        started = time.monotonic()
        name = data.name  # type: ignore[attr-defined]
        results[name] = evaluate(data)
        if progress:
            seconds = time.monotonic() - started
            print(
                f"{suite}: {name}: {describe(results[name])} ({seconds:.0f} s)", file=sys.stderr, flush=True
            )
    avg = float(np.mean([r[main_score(name, score)] for name, r in results.items()]))
    return {"tasks": results, "avg": avg}
