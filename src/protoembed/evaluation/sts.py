"""STS evaluation: cosine similarity of two embeddings against gold scores, no training.

Protocol (SentEval's ``all`` setting, as SimCSE reports it): for STS12-16 the subsets of a year
are pooled and one Spearman / Pearson correlation is computed over all scored pairs; STS-B and
SICK-R use their test split. Correlations are reported x100. Every distinct sentence of all
requested tasks is encoded in one call, so a model sees each sentence once.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import Field

from protoembed.core.errors import ProtoembedError
from protoembed.data.benchmarks.sts import StsPairs, Variant, check_variant
from protoembed.evaluation.correlation import correlations  # re-exported: importers of sts keep working
from protoembed.evaluation.shared import Encode, fmt, papers_row, sentence_embeddings, table_head
from protoembed.evaluation.suite import (
    ENCODING,
    OVER_SEEDS,
    CommandLine,
    Inputs,
    ReportLayout,
    Suite,
    SuiteOptions,
)
from protoembed.evaluation.tables import encoded_by
from protoembed.evaluation.tasks import Split, Task, get_tasks, main_score, table_names


def _unit_rows(embeddings: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (float64); all-zero rows stay zero, so their cosine is 0."""
    emb = np.asarray(embeddings, dtype=np.float64)
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    return emb / np.where(norms > 0, norms, 1.0)


def cosine_scores(pairs: StsPairs, unit: np.ndarray, index: dict[str, int]) -> np.ndarray:
    """Cosine similarity of each pair, given unit-length embeddings ``unit`` indexed by ``index``.

    A pair of identical sentences scores exactly 1 (not 1 +- rounding noise), so such pairs tie as
    they should instead of being ranked by float noise; values are clipped to [-1, 1].
    """
    rows1 = np.fromiter((index[s] for s in pairs.sentences1), dtype=np.int64, count=len(pairs))
    rows2 = np.fromiter((index[s] for s in pairs.sentences2), dtype=np.int64, count=len(pairs))
    sims = np.clip(np.einsum("ij,ij->i", unit[rows1], unit[rows2]), -1.0, 1.0)
    same = (rows1 == rows2) & unit[rows1].any(axis=1)
    sims[same] = 1.0
    return sims


def pair_cosines(encode: Encode, pairs: StsPairs) -> np.ndarray:
    """Cosine of every pair of ``pairs``, each distinct sentence encoded once (as :func:`evaluate_sts`)."""
    embeddings, index = sentence_embeddings(encode, [*pairs.sentences1, *pairs.sentences2])
    return cosine_scores(pairs, _unit_rows(embeddings), index)


def evaluate_sts(
    encode: Encode,
    data_dir: str | os.PathLike[str] | None,
    variant: str = "senteval",
    tasks: Sequence[str | Task] | None = None,
    split: str = "test",
) -> dict[str, Any]:
    """Evaluate an encoder on STS tasks.

    Args:
        encode: ``encode(sentences) -> array (len(sentences), dim)``, called exactly once on the
            deduplicated sentences of all ``tasks``.
        data_dir: the data directory (``None``: ``$PROTOEMBED_DATA``, else the user data directory).
        variant: ``senteval`` or ``raw``.
        tasks: task names (entries of :data:`protoembed.evaluation.tasks.TASKS` with the ``sts`` suite);
            the papers' table names (``STS-B``, ``SICK-R``) are accepted too. ``None``: the suite's
            default run for ``split``.
        split: for the tasks that have splits (STSBenchmark / SICKRelatedness: ``test``, ``dev``,
            ``train``; STS12-16 have only ``test``).
    Returns:
        ``{"variant", "split", "tasks": {task: {"spearman", "pearson", "n"}}, "avg"}`` with
        correlations x100 and ``avg`` the mean Spearman over the tasks. The caller adds ``"model"``.
    """
    check_variant(variant)
    entries = get_tasks(tasks, "sts", split)
    datasets = [entry.load(data_dir, variant, split) for entry in entries]
    embeddings, index = sentence_embeddings(
        encode, [s for pairs in datasets for s in (*pairs.sentences1, *pairs.sentences2)]
    )
    named = {entry.name: pairs for entry, pairs in zip(entries, datasets)}
    return {"variant": variant, "split": split, **score_sts(named, embeddings, index)}


def score_sts(datasets: dict[str, StsPairs], embeddings: np.ndarray, index: dict[str, int]) -> dict[str, Any]:
    """Correlations of the pairs' cosines with gold: ``{"tasks": {task: {"spearman", "pearson", "n"}},
    "avg"}`` (x100; ``avg`` the mean of the tasks' main scores: Spearman), from the embeddings of their
    sentences (``index``: sentence -> row)."""
    unit = _unit_rows(embeddings)
    results: dict[str, dict[str, Any]] = {}
    for task, pairs in datasets.items():
        spearman, pearson = correlations(cosine_scores(pairs, unit, index), pairs.scores)
        results[task] = {"spearman": spearman, "pearson": pearson, "n": len(pairs)}
    avg = float(np.mean([r[main_score(task, "spearman")] for task, r in results.items()]))
    return {"tasks": results, "avg": avg}


def stsb_dev_spearman(
    encode: Encode, data_dir: str | os.PathLike[str] | None, variant: str = "senteval"
) -> float:
    """Spearman x100 on the STS Benchmark dev split: the model-selection metric during training."""
    result = evaluate_sts(encode, data_dir, variant=variant, tasks=("STSBenchmark",), split="dev")
    return result["tasks"]["STSBenchmark"]["spearman"]


def format_sts_table(result: dict[str, Any]) -> str:
    """Render an :func:`evaluate_sts` result as two markdown tables.

    First: one row per task with Spearman, Pearson (x100, 2 decimals) and the number of pairs, then
    an ``Avg.`` row. Second: the papers' one-row layout (STS12 ... SICK-R, Avg.; Spearman x100).
    """
    tasks: dict[str, dict[str, Any]] = result["tasks"]
    title = f"STS ({result.get('variant', '?')} data, {result.get('split', 'test')} split"
    scored = {"scorer": "cosine", **result}  # a bi-encoder's pairs: the cosine of the two embeddings
    lines = table_head(title, scored, ["Task", "Spearman", "Pearson", "n"], "lrrr")
    for task, r in tasks.items():
        lines.append(f"| {task} | {fmt(r['spearman'])} | {fmt(r['pearson'])} | {r['n']} |")
    pearson_avg = float(np.mean([r["pearson"] for r in tasks.values()])) if tasks else math.nan
    lines.append(f"| Avg. | {fmt(result['avg'])} | {fmt(pearson_avg)} | |")
    names = table_names(tasks)
    values = [r["spearman"] for r in tasks.values()]
    lines += papers_row("Spearman x100 (papers' layout):", names, values, result["avg"])
    return "\n".join(lines) + "\n"


class StsOptions(SuiteOptions):
    """The ``sts`` suite's options."""

    variant: Variant = Field(
        "senteval", description="data variant: SentEval's tokenised copy or the raw (cased) originals"
    )
    split: Split = Field("test", description="split of the tasks that have one (STS-B, SICK-R)")
    cross_encoder: bool = Field(
        False,
        description="score each pair with the cross-encoder of MODEL (a cross_encoder run's best/ or its "
        "cross_encoder/ folder) instead of the cosine of two embeddings",
    )


def evaluate_suite(
    inputs: Inputs, tasks: Sequence[str] | None, variant: str, split: str, cross_encoder: bool
) -> dict[str, Any]:
    """The ``sts`` suite: :func:`evaluate_sts` (the cosine of two embeddings) on ``tasks`` (``None``:
    the suite's default run for ``split``), or with ``cross_encoder`` the pair scored as one input by the cross-encoder at
    ``inputs.model`` (the BERT/ALBERT paper's Table II; ``inputs.encode`` is then unused)."""
    if cross_encoder:
        from protoembed.evaluation.cross_encoder import evaluate_cross_encoder_sts

        if inputs.model is None:
            raise ProtoembedError("cross_encoder: give the model as the path of a cross-encoder folder")
        options = dict(tasks=tasks, split=split, batch_size=inputs.batch_size, device=inputs.device)
        result = evaluate_cross_encoder_sts(inputs.model, inputs.data_dir, variant=variant, **options)
        return {"scorer": "cross-encoder", **result}
    return evaluate_sts(inputs.encode, inputs.data_dir, variant=variant, tasks=tasks, split=split)


def sts_protocol(data: dict[str, Any]) -> dict[str, Any]:
    """What two STS results must share to share a table: the data variant, the split, and the runtime
    and precision that encoded the vectors (:data:`~protoembed.evaluation.suite.ENCODING`; ``None``
    where the file did not record them, as results written before they were recorded)."""
    return {
        "variant": data.get("variant"),
        "split": data.get("split", "test"),
        **{key: data.get(key) for key in ENCODING},
    }


def sts_protocol_line(p: dict[str, Any]) -> str:
    """The report's line under the STS tables (ConPVP Tables 3 and 4)."""
    return (
        f"Protocol: Spearman x100 of the cosine against gold, {p.get('variant')} data, {p.get('split')} "
        f"split (STS12-16: all subsets of a year pooled); {encoded_by(p)}; {OVER_SEEDS}."
    )


SUITE = Suite(
    name="sts",
    scores=("spearman", "pearson"),
    evaluate=evaluate_suite,
    options=StsOptions,
    format_table=format_sts_table,
    command=CommandLine(
        help="STS12-16, STS-B, SICK-R: cosine vs gold, Spearman/Pearson x100",
        description="Evaluate on STS12-16 (all subsets of a year pooled), STS Benchmark and SICK-R.",
        tasks_help="tasks to run, also by their table names (STS-B, SICK-R); default: the suite's "
        "default run (with --split dev/train: those of its tasks that have the split)",
        dims=("Spearman x100 by vector width (papers' layout):", "spearman"),
    ),
    report=ReportLayout(
        page_order=3,
        title="STS (ConPVP Table 3)",
        tables=((None, "spearman"),),
        ablation_title="Ablation (ConPVP Table 4)",
        summary=(("spearman", "STS (Table 3)"),),
        protocol=sts_protocol,
        protocol_line=sts_protocol_line,
    ),
)
