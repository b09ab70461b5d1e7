"""Retrieval: rank a corpus for each query by embedding similarity; nDCG@k, MRR@k, Recall@k, MAP@k and
Precision@k at k in 1, 3, 5, 10, 100 against the judgments, nDCG@10 the main score.

Protocol (BEIR's exact search, as MTEB runs its retrieval tasks): the tasks are folders in the BEIR layout
(:mod:`protoembed.data.benchmarks.beir`); a document is its title joined to its text by a space
(:func:`~protoembed.data.benchmarks.beir.join_title`); the queries are those judged in the split. Queries
get the model's ``query`` prompt and documents its ``document`` prompt, each named to the model's
``encode`` (:func:`protoembed.inputs.prompts.encode_with_role`; a role the model lacks: the text as it
is), each distinct text of a role is encoded once, and every query's 100 best documents are
found by exact search (:func:`protoembed.semantic_search.top_k`: the corpus scored block by block, never
a whole queries x corpus matrix in memory) under ``cosine`` or ``dot``. A query whose id is also a
document's id never retrieves that document (BEIR's ``ignore_identical_ids``, on by default there). The
metrics are trec_eval's, averaged over the queries as BEIR averages ``pytrec_eval``'s
(:mod:`protoembed.evaluation.retrieval_metrics`), reported x100.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Annotated, Any

import numpy as np
from pydantic import AfterValidator, Field

from protoembed.core.pydantic_util import Flag, check_options, checked
from protoembed.data.benchmarks.beir import TITLE_SEPARATOR, RetrievalData
from protoembed.evaluation.retrieval_metrics import (
    K_VALUES,
    MAIN_SCORE,
    metric_key,
    metric_keys,
    retrieval_scores,
)
from protoembed.evaluation.shared import (
    Encode,
    evaluate_tasks,
    fmt,
    papers_row,
    sentence_embeddings,
    table_head,
)
from protoembed.evaluation.suite import (
    OVER_SEEDS,
    CommandLine,
    Inputs,
    ReportLayout,
    Suite,
    SuiteOptions,
    extra_protocol,
    result_protocol,
)
from protoembed.evaluation.tasks import Split, Task, beir_folder_task, get_tasks, table_names
from protoembed.inputs.prompts import DOCUMENT, QUERY, ROLES, prompt_text, prompts_of
from protoembed.model.protocol import SCORE_FUNCTIONS, check_score_function
from protoembed.model.quantize import FLOAT32, VECTOR_TYPES, check_vectors
from protoembed.retrieval.quantized_search import RESCORE_MULTIPLIER
from protoembed.retrieval.semantic_search import CORPUS_CHUNK_SIZE, rank_quantized, top_k


class RetrievalOptions(SuiteOptions):
    """The ``retrieval`` suite's options."""

    split: Split = Field("test", description="the qrels split evaluated (qrels/<split>.tsv)")
    score_function: Annotated[
        str, AfterValidator(checked(check_score_function)), Flag(choices=lambda: SCORE_FUNCTIONS)
    ] = Field("cosine", description="query-document score: cosine, or dot (the raw inner product)")
    corpus_chunk_size: int = Field(
        CORPUS_CHUNK_SIZE, ge=1, description="documents scored per block (bounds the memory of the search)"
    )
    vectors: Annotated[str, AfterValidator(checked(check_vectors)), Flag(choices=lambda: VECTOR_TYPES)] = (
        Field(
            FLOAT32,
            description="the documents' vectors as searched: float32, or quantised (int8 / uint8 ranges "
            "calibrated on the corpus) and the best rescored with the float query",
        )
    )
    rescore_multiplier: int = Field(
        RESCORE_MULTIPLIER,
        ge=0,
        description="quantised vectors: candidates per hit rescored with the float query (0: none)",
    )


#: The options' defaults (the functions below default to them).
DEFAULT = RetrievalOptions()
#: The rule by which a document's text is made, as the protocol records it.
TITLE_JOIN = f"title + {TITLE_SEPARATOR!r} + text, stripped"


def search(
    encode: Encode,
    data: RetrievalData,
    score_function: str = DEFAULT.score_function,
    corpus_chunk_size: int = DEFAULT.corpus_chunk_size,
    vectors: str = DEFAULT.vectors,
    rescore_multiplier: int = DEFAULT.rescore_multiplier,
) -> tuple[dict[str, dict[str, float]], int]:
    """Every judged query's ``max(K_VALUES)`` best documents: ``(run, identical)``, run = query id ->
    document id -> score, identical = the number of queries whose own id was kept out of their ranking.

    Queries get the model's ``query`` prompt, documents its ``document`` prompt (named to ``encode``:
    :func:`~protoembed.evaluation.shared.sentence_embeddings`); each distinct text is encoded once per
    role, in one ``encode`` call per role. ``vectors`` other than ``float32``: the documents are searched
    quantised, the best ``100 x rescore_multiplier`` rescored with the float query
    (:func:`~protoembed.retrieval.semantic_search.rank_quantized`).
    """
    queries, query_row = sentence_embeddings(encode, data.query_texts, np.float32, QUERY)  # as top_k scores
    documents, document_row = sentence_embeddings(encode, data.corpus_texts, np.float32, DOCUMENT)
    row = {doc_id: i for i, doc_id in enumerate(data.corpus_ids)}
    exclude = [[row[q]] if q in row else [] for q in data.query_ids]
    q = queries[[query_row[t] for t in data.query_texts]]
    c = documents[[document_row[t] for t in data.corpus_texts]]
    if vectors == FLOAT32:
        rankings = top_k(
            q,
            c,
            k=max(K_VALUES),
            score_function=score_function,
            exclude=exclude,
            corpus_chunk_size=corpus_chunk_size,
        )
    else:
        rankings = rank_quantized(
            q, c, max(K_VALUES), score_function, vectors, rescore_multiplier, exclude=exclude
        )
    run = {q: {data.corpus_ids[i]: s for i, s in ranking} for q, ranking in zip(data.query_ids, rankings)}
    return run, sum(1 for e in exclude if e)


def evaluate_task(
    encode: Encode,
    data: RetrievalData,
    score_function: str = DEFAULT.score_function,
    corpus_chunk_size: int = DEFAULT.corpus_chunk_size,
    vectors: str = DEFAULT.vectors,
    rescore_multiplier: int = DEFAULT.rescore_multiplier,
) -> dict[str, Any]:
    """One task: :func:`search`, then the metrics x100 (keys :func:`~protoembed.evaluation.retrieval_metrics.metric_keys`),
    the numbers of queries and documents, of queries kept from retrieving themselves, and of judged
    documents and queries the folder lacks (:mod:`protoembed.data.benchmarks.beir`)."""
    run, identical = search(encode, data, score_function, corpus_chunk_size, vectors, rescore_multiplier)
    scores = {key: value * 100 for key, value in retrieval_scores(data.qrels, run, K_VALUES).items()}
    return {
        **scores,
        "queries": len(data.query_ids),
        "corpus": len(data.corpus_ids),
        "identical_ids": identical,
        "missing_documents": data.missing_documents,
        "missing_queries": data.missing_queries,
    }


def evaluate_retrieval(
    encode: Encode,
    data_dir: str | os.PathLike[str] | None,
    tasks: Sequence[str | Task] | None = None,
    split: str = DEFAULT.split,
    score_function: str = DEFAULT.score_function,
    corpus_chunk_size: int = DEFAULT.corpus_chunk_size,
    progress: bool = False,
    vectors: str = DEFAULT.vectors,
    rescore_multiplier: int = DEFAULT.rescore_multiplier,
) -> dict[str, Any]:
    """Evaluate an encoder on retrieval tasks (module docstring).

    Every task's split is read (and checked) before the first encoding; the model's prompts, which the
    protocol records, are read from ``encode`` (its ``prompts``, :func:`protoembed.inputs.prompts.prompts_of`)
    after that.

    Args:
        encode: ``encode(texts, prompt_name=role) -> array (len(texts), dim)``, called once per task and
            role on its distinct queries (``prompt_name="query"``) and documents (``"document"``), the
            model applying its prompt of that role; an ``encode(texts)`` without ``prompt_name`` gets the
            texts with its ``prompts``' (if any) put in front
            (:func:`protoembed.inputs.prompts.encode_with_role`).
        data_dir: the data directory (``None``: ``$PROTOEMBED_DATA``, else the user data directory; a task of absolute paths needs none).
        tasks: the tasks (``None``: the suite's default run for ``split``).
        split: the qrels split.
        score_function: ``cosine`` or ``dot``.
        corpus_chunk_size: documents scored per block.
        progress: one stderr line per finished task.
        vectors: the documents' vectors as searched (:func:`search`).
        rescore_multiplier: quantised vectors: candidates per hit rescored with the float query.
    Returns:
        ``{"protocol", "tasks": {task: {"ndcg_at_1", ..., "precision_at_100", "queries", "corpus",
        "identical_ids", "missing_documents", "missing_queries"}}, "avg"}`` (metrics x100; ``avg``: the mean of the tasks' main scores, nDCG@10).
        The caller adds ``"model"``.
    """
    options = {
        "split": split,
        "score_function": score_function,
        "corpus_chunk_size": corpus_chunk_size,
        "vectors": vectors,
        "rescore_multiplier": rescore_multiplier,
    }
    check_options(RetrievalOptions, options)
    entries = {t.name: t for t in get_tasks(tasks, "retrieval", split)}
    used: dict[str, dict[str, str]] = {}

    def evaluate(data: RetrievalData) -> dict[str, Any]:
        if "prompts" not in used:  # read once, after every task's data (a lazy encoder loads its model)
            used["prompts"] = prompts_of(encode)
        return evaluate_task(encode, data, score_function, corpus_chunk_size, vectors, rescore_multiplier)

    results = evaluate_tasks(
        "retrieval",
        list(entries),
        lambda task: entries[task].load(data_dir, split=split),
        evaluate,
        lambda r: f"nDCG@10 {r[MAIN_SCORE]:.2f}, Recall@100 {r[metric_key('recall', 100)]:.2f}",
        progress,
        score=MAIN_SCORE,
    )
    prompts = used.get("prompts", {})
    protocol = {
        "split": split,
        "score_function": score_function,
        "k_values": list(K_VALUES),
        "exclude_identical_ids": True,
        "title_join": TITLE_JOIN,
        "prompts": {role: prompt_text(prompts, role) for role in ROLES},
    }
    if vectors != FLOAT32:  # a float32 run's protocol is as it was
        protocol.update(vectors=vectors, rescore_multiplier=rescore_multiplier)
    return {"protocol": protocol, **results}


#: The columns of the printed table: (heading, result key).
TABLE_COLUMNS = (
    ("nDCG@1", metric_key("ndcg", 1)),
    ("nDCG@10", MAIN_SCORE),
    ("MRR@10", metric_key("mrr", 10)),
    ("MAP@10", metric_key("map", 10)),
    ("R@10", metric_key("recall", 10)),
    ("R@100", metric_key("recall", 100)),
    ("P@10", metric_key("precision", 10)),
)


def format_retrieval_table(result: dict[str, Any]) -> str:
    """Render an :func:`evaluate_retrieval` result: one row per task (:data:`TABLE_COLUMNS`, queries,
    documents), then the papers' one-row layout of nDCG@10."""
    tasks: dict[str, dict[str, Any]] = result["tasks"]
    p = result.get("protocol", {})
    own = ", a query's own id excluded" if p.get("exclude_identical_ids") else ""
    title = f"Retrieval ({p.get('split', '?')} split, {p.get('score_function', '?')}{own}; x100"
    headings = ["Task", *(h for h, _ in TABLE_COLUMNS), "queries", "corpus"]
    lines = table_head(title, result, headings, "l" + "r" * (len(headings) - 1))
    for task, r in tasks.items():
        cells = [fmt(r[key]) for _, key in TABLE_COLUMNS] + [str(r["queries"]), str(r["corpus"])]
        lines.append(f"| {task} | {' | '.join(cells)} |")
    values = [r[MAIN_SCORE] for r in tasks.values()]
    lines += papers_row("nDCG@10 x100 (papers' layout):", table_names(tasks), values, result["avg"])
    return "\n".join(lines) + "\n"


def evaluate_suite(
    inputs: Inputs,
    tasks: Sequence[str] | None,
    split: str,
    score_function: str,
    corpus_chunk_size: int,
    vectors: str,
    rescore_multiplier: int,
) -> dict[str, Any]:
    """The ``retrieval`` suite: :func:`evaluate_retrieval` on ``tasks`` (``None``: the suite's default run)."""
    return evaluate_retrieval(
        inputs.encode,
        inputs.data_dir,
        tasks=tasks,
        split=split,
        score_function=score_function,
        corpus_chunk_size=corpus_chunk_size,
        progress=inputs.progress,
        vectors=vectors,
        rescore_multiplier=rescore_multiplier,
    )


def retrieval_protocol(data: dict[str, Any]) -> dict[str, Any]:
    """What two retrieval results must share to share a table: the protocol record less the prompts (a
    model's own setting, like its head)."""
    return {k: v for k, v in result_protocol(data).items() if k != "prompts"}


def retrieval_protocol_line(p: dict[str, Any]) -> str:
    """The report's line under the retrieval tables."""
    ks = ", ".join(map(str, p.get("k_values", K_VALUES)))
    return (
        f"Protocol: exact search by {p.get('score_function', '?')} on the {p.get('split', '?')} split "
        f"(documents: {p.get('title_join', TITLE_JOIN)}; a query never retrieves a document of its own id), "
        f"trec_eval's metrics at k = {ks}, mean over the judged queries, x100"
        f"{extra_protocol(p, ('split', 'score_function', 'k_values', 'exclude_identical_ids', 'title_join'))}; "
        f"{OVER_SEEDS}."
    )


SUITE = Suite(
    name="retrieval",
    scores=metric_keys(K_VALUES),
    evaluate=evaluate_suite,
    options=RetrievalOptions,
    format_table=format_retrieval_table,
    command=CommandLine(
        help="retrieval on BEIR-layout folders: nDCG@10, MRR, Recall, MAP, P at k",
        description="Rank each task's corpus for its judged queries by exact embedding search (the "
        "model's query / document prompts applied) and report nDCG, MRR, Recall, MAP and Precision at "
        "1, 3, 5, 10, 100 (x100) as trec_eval computes them; nDCG@10 is the main score.",
        tasks_help="registered retrieval tasks to run (a folder of your own: --task-dir)",
        folder_task=beir_folder_task,
        dims=("nDCG@10 x100 by vector width (papers' layout):", MAIN_SCORE),
    ),
    report=ReportLayout(
        page_order=8,
        title="Retrieval (BEIR layout)",
        tables=(("nDCG@10:", MAIN_SCORE), ("Recall@100:", metric_key("recall", 100))),
        summary=((MAIN_SCORE, "Retrieval nDCG@10"),),
        protocol=retrieval_protocol,
        protocol_line=retrieval_protocol_line,
    ),
)
