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
from protoembed.evaluation.sts import STS_TASKS, correlations, evaluate_sts, pair_cosines
from protoembed.io import write_atomic

#: Default numbers of removed tokens for Fig. 5.
TOP_K = (0, 1, 2, 5, 10, 20, 50, 100)


def _figure(path: str | os.PathLike[str], draw) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    draw(ax)
    fig.tight_layout()
    target = write_atomic(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110), suffix=".png")
    plt.close(fig)
    return target


def similarity_vs_gold(
    embedder, data_dir, figure: str | os.PathLike[str], variant: str = "senteval"
) -> dict[str, Any]:
    """Fig. 4: cosine of each STS-B test pair against its gold score; returns correlations and n."""
    pairs = load_sts_task("STSBenchmark", resolve_data_dir(data_dir), variant, "test")
    cosine = pair_cosines(lambda s: embedder.encode(s, show_progress_bar=False), pairs)
    spearman, pearson = correlations(cosine, pairs.scores)

    def draw(ax):
        ax.scatter(pairs.scores, cosine, s=4, alpha=0.4, color="#08519c")
        ax.set_xlabel("gold similarity (0-5)")
        ax.set_ylabel("predicted cosine")
        ax.set_title(f"STS-B test: Spearman {spearman:.2f}", fontsize=10)

    target = _figure(figure, draw)
    return {"figure": str(target), "spearman": spearman, "pearson": pearson, "n": len(pairs)}


class _MeanWithout(torch.nn.Module):
    """Mean of the token states over the attention mask, leaving out the given token ids."""

    def __init__(self, excluded: Sequence[int], dimension: int) -> None:
        super().__init__()
        self.dimension = dimension
        self.register_buffer("excluded", torch.tensor(sorted(excluded), dtype=torch.long))

    def get_embedding_dimension(self) -> int:
        """Width of the output vectors (the backbone's hidden size)."""
        return self.dimension

    def forward(self, features: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        keep = features["attention_mask"].bool() & ~torch.isin(features["input_ids"], self.excluded)
        weights = keep.unsqueeze(-1).to(features["token_embeddings"].dtype)
        total = (features["token_embeddings"] * weights).sum(dim=1)
        features["sentence_embedding"] = total / weights.sum(dim=1).clamp(min=1.0)
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
) -> dict[str, Any]:
    """Fig. 5: average STS Spearman (x100) with the ``k`` most frequent tokens left out of mean pooling."""
    if embedder.head != "mean":
        raise ProtoembedError(
            f"the frequent-token analysis needs a mean-pooling model (--head mean); this one has head "
            f"{embedder.head!r}, which does not pool tokens"
        )
    root = resolve_data_dir(data_dir)
    sentences = [
        s
        for t in tasks
        for p in [load_sts_task(t, root, variant, "test")]
        for s in (*p.sentences1, *p.sentences2)
    ]
    ranked = token_frequencies(embedder, list(dict.fromkeys(sentences)))
    pooler, rows = embedder.pooler, []
    try:
        for k in top_k:
            removed = [token for token, _ in ranked[:k]]
            embedder.pooler = _MeanWithout(removed, embedder.dimension).to(embedder.device)
            result = evaluate_sts(
                lambda s: embedder.encode(s, show_progress_bar=False), root, variant=variant, tasks=tasks
            )
            rows.append(
                {
                    "k": int(k),
                    "removed": embedder.tokenizer.convert_ids_to_tokens(removed[:10]),
                    "avg": result["avg"],
                }
            )
    finally:
        embedder.pooler = pooler

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
    vectors = embedder.encode(texts, normalize=True, show_progress_bar=False)
    perplexity = min(30.0, (len(texts) - 1) / 3)
    points = TSNE(n_components=2, perplexity=perplexity, random_state=seed, init="pca").fit_transform(vectors)

    def draw(ax):
        colours = __import__("matplotlib").colormaps["tab20"]
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
