"""Embedding-space analyses of the ConPVP paper's figures, each a JSON summary plus a PNG.

- :func:`similarity_vs_gold` (Fig. 4): predicted cosine against the gold score of every STS-B test pair.
- :func:`frequent_token_removal` (Fig. 5): average STS Spearman when the ``k`` most frequent tokens are
  left out of the mean pooling, for several ``k``. Frequencies are counted over the word pieces of the
  evaluated sentences (special tokens are not counted and always pooled). Mean-pooling models only:
  the other heads do not pool tokens.
- :func:`tsne_pairs` (Fig. 6): t-SNE (scikit-learn) of both sentences of chosen STS-B test pairs, the
  pairs drawn with a seed among those with gold score >= ``min_score``; a pair shares its colour.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from protoembed.data.paths import resolve_data_dir
from protoembed.data.sts import load_sts_task
from protoembed.errors import ProtoembedError
from protoembed.evaluation.shared import sentence_embeddings
from protoembed.evaluation.sts import STS_TASKS, correlations, pair_cosines, score_sts
from protoembed.io import pyplot, save_figure

#: Default numbers of removed tokens for Fig. 5.
TOP_K = (0, 1, 2, 5, 10, 20, 50, 100)


def _figure(path: str | os.PathLike[str], draw) -> Path:
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    draw(ax)
    fig.tight_layout()
    return save_figure(fig, path)


def similarity_vs_gold(
    embedder, data_dir, figure: str | os.PathLike[str], variant: str = "senteval", batch_size: int = 64
) -> dict[str, Any]:
    """Fig. 4: cosine of each STS-B test pair against its gold score; returns correlations and n."""
    pairs = load_sts_task("STSBenchmark", resolve_data_dir(data_dir), variant, "test")
    cosine = pair_cosines(lambda s: embedder.encode(s, batch_size=batch_size, show_progress_bar=False), pairs)
    spearman, pearson = correlations(cosine, pairs.scores)

    def draw(ax):
        ax.scatter(pairs.scores, cosine, s=4, alpha=0.4, color="#08519c")
        ax.set_xlabel("gold similarity (0-5)")
        ax.set_ylabel("predicted cosine")
        ax.set_title(f"STS-B test: Spearman {spearman:.2f}", fontsize=10)

    target = _figure(figure, draw)
    return {"figure": str(target), "spearman": spearman, "pearson": pearson, "n": len(pairs)}


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


def frequent_token_removal(
    embedder,
    data_dir,
    figure: str | os.PathLike[str],
    top_k: Sequence[int] = TOP_K,
    tasks: Sequence[str] = STS_TASKS,
    variant: str = "senteval",
    batch_size: int = 64,
) -> dict[str, Any]:
    """Fig. 5: average STS Spearman (x100) with the ``k`` most frequent tokens left out of mean pooling.

    The sentences go through the backbone once; every ``k`` pools the same token states.
    """
    if embedder.head != "mean":
        raise ProtoembedError(
            f"the frequent-token analysis needs a mean-pooling model (--head mean); this one has head "
            f"{embedder.head!r}, which does not pool tokens"
        )
    root = resolve_data_dir(data_dir)
    datasets = {t: load_sts_task(t, root, variant, "test") for t in tasks}
    sentences = list(dict.fromkeys(s for p in datasets.values() for s in (*p.sentences1, *p.sentences2)))
    ranked = [token for token, _ in token_frequencies(embedder, sentences)]
    pooler, hidden = embedder.pooler, embedder.dimension
    embedder.pooler = _MeansWithoutTopK(ranked, top_k, hidden)
    try:
        stacked, index = sentence_embeddings(
            lambda s: embedder.encode(s, batch_size=batch_size, show_progress_bar=False), sentences
        )
    finally:
        embedder.pooler = pooler
    rows = [
        {
            "k": int(k),
            "removed": embedder.tokenizer.convert_ids_to_tokens(ranked[: min(k, 10)]),
            "avg": score_sts(datasets, stacked[:, j * hidden : (j + 1) * hidden], index)["avg"],
        }
        for j, k in enumerate(top_k)
    ]

    def draw(ax):
        ax.plot([r["k"] for r in rows], [r["avg"] for r in rows], marker="o", color="#08519c")
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlabel("most frequent tokens removed from pooling (k)")
        ax.set_ylabel("average STS Spearman x100")

    target = _figure(figure, draw)
    return {"figure": str(target), "tasks": list(tasks), "rows": rows}


def tsne_pairs(
    embedder,
    data_dir,
    figure: str | os.PathLike[str],
    pairs: int = 12,
    min_score: float = 4.0,
    seed: int = 0,
    variant: str = "senteval",
    batch_size: int = 64,
) -> dict[str, Any]:
    """Fig. 6: t-SNE of both sentences of ``pairs`` STS-B test pairs with gold >= ``min_score``."""
    from sklearn.manifold import TSNE

    data = load_sts_task("STSBenchmark", resolve_data_dir(data_dir), variant, "test")
    candidates = np.flatnonzero(np.asarray(data.scores) >= min_score)
    if len(candidates) < pairs or pairs < 2:
        raise ProtoembedError(
            f"need 2 <= pairs <= {len(candidates)} (STS-B test pairs with gold >= {min_score}); got {pairs}"
        )
    chosen = np.sort(np.random.default_rng(seed).choice(candidates, size=pairs, replace=False))
    texts = [s for i in chosen for s in (data.sentences1[i], data.sentences2[i])]
    vectors = embedder.encode(texts, batch_size=batch_size, normalize=True, show_progress_bar=False)
    perplexity = min(30.0, (len(texts) - 1) / 3)
    points = TSNE(n_components=2, perplexity=perplexity, random_state=seed, init="pca").fit_transform(vectors)

    def draw(ax):
        colours = pyplot().colormaps["tab20"]
        for j in range(pairs):
            (x1, y1), (x2, y2) = points[2 * j], points[2 * j + 1]
            ax.plot([x1, x2], [y1, y2], color=colours(j % 20), marker="o", linewidth=1)
        ax.set_title(f"t-SNE of {pairs} STS-B test pairs (gold >= {min_score:g})", fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])

    target = _figure(figure, draw)
    return {
        "figure": str(target),
        "pairs": [
            {
                "index": int(i),
                "gold": float(data.scores[i]),
                "sentence1": data.sentences1[i],
                "sentence2": data.sentences2[i],
                "xy": [points[2 * j].tolist(), points[2 * j + 1].tolist()],
            }
            for j, i in enumerate(chosen)
        ],
    }
