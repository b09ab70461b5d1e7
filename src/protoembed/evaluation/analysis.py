"""Embedding-space analyses of the ConPVP paper's figures, comparing models side by side.

Each function takes ``models``, an iterable of ``(label, embedder)`` (the CLI loads each model only when
the iteration reaches it, so one model is in memory at a time), writes the PNG and returns what it drew
as a JSON-ready dict with a ``"models"`` list, one entry per model in order:

- :func:`similarity_vs_gold` (Fig. 4): the predicted cosine of every STS-B test pair, scaled to [0, 1]
  by the model's own minimum and maximum over the pairs, against the gold score; one panel per model.
- :func:`frequent_token_removal` (Fig. 5): average STS Spearman when the ``k`` most frequent tokens are
  left out of the mean pooling, for several ``k``; one line per model. Frequencies are counted over the
  word pieces of the evaluated sentences with each model's tokenizer (special tokens are not counted and
  always pooled). Mean-pooling models only: the other heads do not pool tokens.
- :func:`tsne_pairs` (Fig. 6): t-SNE (scikit-learn) of both sentences of 10 STS-B test pairs whose gold
  score is exactly 0 (orange), 10 exactly 3 (blue) and 10 exactly 5 (green), the same pairs for every
  model (drawn with a seed from the data alone); one panel per model, each point labelled with its pair's
  id (1-10 within its colour).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from protoembed.core.errors import ProtoembedError
from protoembed.data.benchmarks.sts import StsPairs
from protoembed.data.paths import resolve_data_dir
from protoembed.evaluation.analysis_defaults import TOP_K
from protoembed.evaluation.correlation import correlations
from protoembed.evaluation.shared import sentence_embeddings
from protoembed.evaluation.sts import pair_cosines, score_sts
from protoembed.evaluation.tasks import TASKS, Task, get_tasks
from protoembed.outputs.io import pyplot, save_figure

#: Fig. 6: gold score -> colour of its pairs (the paper's orange / blue / green).
TSNE_COLOURS = {0.0: "tab:orange", 3.0: "tab:blue", 5.0: "tab:green"}
#: One colour per model (lines of Fig. 5, violins of Fig. 7), in the order the models are given.
MODEL_COLOURS = ("#08519c", "#d94801", "#238b45", "#6a51a3", "#cb181d", "#525252", "#8c6d31", "#e7298a")

Models = Iterable[tuple[str, Any]]


def model_colour(i: int) -> str:
    """Colour of the ``i``-th model of a comparison."""
    return MODEL_COLOURS[i % len(MODEL_COLOURS)]


def draw_panels(
    figure: str | os.PathLike[str], labels: Sequence[str], draw: Callable[[Any, int], None], **share: bool
) -> Path:
    """One panel per label, side by side; ``draw(ax, i)`` fills panel ``i`` (titled with its label)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(labels), figsize=(4.3 * len(labels) + 0.6, 4.3), squeeze=False, **share)
    for i, (ax, label) in enumerate(zip(axes[0], labels)):
        draw(ax, i)
        ax.set_title(label, fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path=figure)


def _need_models(entries: list[dict[str, Any]]) -> None:
    if not entries:
        raise ProtoembedError("no model to analyse")


def _encoder(embedder, batch_size: int):
    return lambda s: embedder.encode(s, batch_size=batch_size, show_progress_bar=False)


def similarity_vs_gold(
    models: Models,
    data_dir,
    figure: str | os.PathLike[str],
    variant: str = "senteval",
    batch_size: int = 64,
) -> dict[str, Any]:
    """Fig. 4. Out: ``{"figure", "n", "gold", "models": [{"label", "head", "spearman", "pearson",
    "cosine_min", "cosine_max", "scaled"}]}`` (correlations x100 of the raw cosines, which the scaling
    does not change; ``scaled`` per pair, in the order of ``gold``)."""
    pairs = TASKS["STSBenchmark"].load(data_dir, variant)
    gold = np.asarray(pairs.scores, dtype=np.float64)
    entries = []
    for label, embedder in models:
        cosine = pair_cosines(_encoder(embedder, batch_size), pairs)
        spearman, pearson = correlations(cosine, gold)
        low, high = float(cosine.min()), float(cosine.max())
        scaled = (cosine - low) / (high - low) if high > low else np.zeros_like(cosine)
        entries.append(
            {"label": label, "head": embedder.head, "spearman": spearman, "pearson": pearson}
            | {"cosine_min": low, "cosine_max": high, "scaled": [round(float(v), 5) for v in scaled]}
        )
    _need_models(entries)

    def draw(ax, i: int) -> None:
        entry = entries[i]
        ax.scatter(gold, entry["scaled"], s=4, alpha=0.4, color=model_colour(i))
        ax.set_xlabel("gold similarity (0-5)")
        ax.set_ylabel("predicted cosine, scaled to [0, 1]")
        ax.text(0.03, 0.95, f"Spearman {entry['spearman']:.2f}", transform=ax.transAxes, va="top")

    target = draw_panels(figure, [e["label"] for e in entries], draw, sharey=True)
    return {"figure": str(target), "n": len(pairs), "gold": gold.tolist(), "models": entries}


class _MeansWithoutTopK(torch.nn.Module):
    """For every ``k`` of ``top_k``, the mean of the token states over the attention mask leaving out the
    ``k`` most frequent tokens; the means are concatenated (B, len(top_k) * H), so one backbone pass
    serves every ``k``."""

    def __init__(self, ranked: Sequence[int], top_k: Sequence[int], hidden: int) -> None:
        super().__init__()
        self.top_k, self.hidden = [int(k) for k in top_k], hidden
        self.ids = torch.tensor(list(ranked), dtype=torch.long)  # token ids, most frequent first

    def get_embedding_dimension(self) -> int:
        """Width of the output vectors: one backbone-width mean per ``k``."""
        return len(self.top_k) * self.hidden

    def forward(self, features: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        states, attention = features["token_embeddings"], features["attention_mask"].bool()
        ids = features["input_ids"]
        means = []
        for k in self.top_k:
            keep = attention & ~torch.isin(ids, self.ids[:k].to(ids.device))
            weights = keep.unsqueeze(-1).to(states.dtype)
            means.append((states * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0))
        features["sentence_embedding"] = torch.cat(means, dim=-1)
        return features


def token_frequencies(embedder, sentences: Sequence[str]) -> list[tuple[int, int]]:
    """(token id, count) over the word pieces of ``sentences``, most frequent first (ties by id)."""
    ids = embedder.tokenizer(list(sentences), add_special_tokens=False)["input_ids"]
    counts = Counter(token for row in ids for token in row)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def token_removal_rows(
    embedder, datasets: dict[str, StsPairs], top_k: Sequence[int], batch_size: int = 64
) -> list[dict[str, Any]]:
    """One model's Fig. 5 rows ``[{"k", "removed" (up to 10 tokens), "avg"}]``: the sentences go through
    the backbone once, and every ``k`` pools the same token states."""
    sentences = list(dict.fromkeys(s for p in datasets.values() for s in (*p.sentences1, *p.sentences2)))
    ranked = [token for token, _ in token_frequencies(embedder, sentences)]
    pooler, hidden = embedder.pooler, embedder.dimension
    embedder.pooler = _MeansWithoutTopK(ranked, top_k, hidden)
    try:
        stacked, index = sentence_embeddings(_encoder(embedder, batch_size), sentences)
    finally:
        embedder.pooler = pooler
    return [
        {
            "k": int(k),
            "removed": embedder.tokenizer.convert_ids_to_tokens(ranked[: min(k, 10)]),
            "avg": score_sts(datasets, stacked[:, j * hidden : (j + 1) * hidden], index)["avg"],
        }
        for j, k in enumerate(top_k)
    ]


def frequent_token_removal(
    models: Models,
    data_dir,
    figure: str | os.PathLike[str],
    top_k: Sequence[int] = TOP_K,
    tasks: Sequence[str | Task] | None = None,
    variant: str = "senteval",
    batch_size: int = 64,
) -> dict[str, Any]:
    """Fig. 5: average STS Spearman (x100) with the ``k`` most frequent tokens left out of mean pooling, on
    ``tasks`` (``None``: the STS suite's default run, the seven test sets).

    Out: ``{"figure", "tasks" (the tasks' names), "top_k", "models": [{"label", "head", "rows": [{"k", "removed", "avg"}]}]}``.
    """
    root = resolve_data_dir(data_dir)
    datasets = {t.name: t.load(root, variant) for t in get_tasks(tasks, "sts", "test")}
    entries = []
    for label, embedder in models:
        if embedder.head != "mean":
            raise ProtoembedError(
                f"the frequent-token analysis needs a mean-pooling model (--head mean); model {label!r} has "
                f"head {embedder.head!r}, which does not pool tokens"
            )
        rows = token_removal_rows(embedder, datasets, top_k, batch_size)
        entries.append({"label": label, "head": embedder.head, "rows": rows})
    _need_models(entries)

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.8, 4.5))
    for i, entry in enumerate(entries):
        ks, avg = [r["k"] for r in entry["rows"]], [r["avg"] for r in entry["rows"]]
        ax.plot(ks, avg, marker="o", color=model_colour(i), label=entry["label"])
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlabel("most frequent tokens removed from pooling (k)")
    ax.set_ylabel("average STS Spearman x100")
    ax.legend(fontsize=9)
    fig.tight_layout()
    target = save_figure(fig, figure)
    return {
        "figure": str(target),
        "tasks": list(datasets),
        "top_k": [int(k) for k in top_k],
        "models": entries,
    }


def draw_tsne_pairs(
    gold: Sequence[float], per_score: int = 10, seed: int = 0, scores: Sequence[float] = tuple(TSNE_COLOURS)
) -> list[tuple[float, list[int]]]:
    """Fig. 6's pairs: for each of ``scores``, ``per_score`` indices of pairs whose gold equals it exactly,
    drawn without replacement with ``numpy.random.default_rng(seed)`` (in the order of ``scores``) and
    sorted. Depends on the data and the seed only, so every model gets the same pairs."""
    values = np.asarray(gold, dtype=np.float64)
    rng = np.random.default_rng(seed)
    drawn = []
    for score in scores:
        candidates = np.flatnonzero(values == score)
        if len(candidates) < per_score or per_score < 1:
            raise ProtoembedError(
                f"need 1 <= pairs per score <= {len(candidates)} (STS-B test pairs with gold exactly "
                f"{score:g}); got {per_score}"
            )
        drawn.append((float(score), sorted(int(i) for i in rng.choice(candidates, per_score, replace=False))))
    return drawn


def tsne_pairs(
    models: Models,
    data_dir,
    figure: str | os.PathLike[str],
    per_score: int = 10,
    seed: int = 0,
    variant: str = "senteval",
    batch_size: int = 64,
) -> dict[str, Any]:
    """Fig. 6: t-SNE of both sentences of the :func:`draw_tsne_pairs` pairs, one panel per model.

    Every model embeds the same sentences (L2-normalised); t-SNE uses ``random_state=seed``, PCA
    initialisation and perplexity ``min(30, (points - 1) / 3)``.
    Out: ``{"figure", "seed", "pairs": [{"id", "gold", "index", "sentence1", "sentence2"}], "models":
    [{"label", "head", "xy": [[x1, y1, x2, y2] per pair]}]}`` (``index``: row of the STS-B test file).
    """
    from sklearn.manifold import TSNE
    from threadpoolctl import threadpool_limits

    data = TASKS["STSBenchmark"].load(data_dir, variant)
    pairs = [
        {"id": n, "gold": score, "index": i, "sentence1": data.sentences1[i], "sentence2": data.sentences2[i]}
        for score, indices in draw_tsne_pairs(data.scores, per_score, seed)
        for n, i in enumerate(indices, start=1)
    ]
    texts = [s for p in pairs for s in (p["sentence1"], p["sentence2"])]
    perplexity = min(30.0, (len(texts) - 1) / 3)
    entries = []
    for label, embedder in models:
        vectors = embedder.encode(texts, batch_size=batch_size, normalize=True, show_progress_bar=False)
        tsne = TSNE(n_components=2, perplexity=perplexity, random_state=seed, init="pca")
        with threadpool_limits(limits=1, user_api="openmp"):  # 60 points: threads only contend
            points = tsne.fit_transform(np.asarray(vectors, dtype=np.float64))
        xy = [[*points[2 * j].tolist(), *points[2 * j + 1].tolist()] for j in range(len(pairs))]
        entries.append({"label": label, "head": embedder.head, "xy": xy})
    _need_models(entries)

    def draw(ax, i: int) -> None:
        for pair, (x1, y1, x2, y2) in zip(pairs, entries[i]["xy"]):
            colour = TSNE_COLOURS[pair["gold"]]
            ax.plot([x1, x2], [y1, y2], color=colour, linewidth=0.6, alpha=0.5)
            ax.scatter([x1, x2], [y1, y2], color=colour, s=14)
            for x, y in ((x1, y1), (x2, y2)):
                ax.annotate(str(pair["id"]), (x, y), fontsize=7, xytext=(2, 2), textcoords="offset points")
        ax.set_xticks([])
        ax.set_yticks([])
        if i == 0:
            for score, colour in TSNE_COLOURS.items():
                ax.scatter([], [], color=colour, s=14, label=f"gold {score:g}")
            ax.legend(fontsize=8, loc="best")

    target = draw_panels(figure, [e["label"] for e in entries], draw)
    return {"figure": str(target), "seed": seed, "pairs": pairs, "models": entries}
