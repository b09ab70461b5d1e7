"""Shared cases of the GradCache tests (one process and gloo workers): every contrastive objective and
ConPVP's ablations, a tiny BERT, and the uncached computation the cached step must reproduce.

The uncached reference embeds the same chunks of rows as the cached step, from the same random state,
WITH a graph, computes the loss on all of them and back-propagates once: so dropout draws the same masks
in both (dropout stays on), and the only difference left is GradCache's gradient factorisation
(Gao et al., 2021, Sec. 3.2). With dropout off, the reference is the plain one-forward step itself.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

import torch

import protoembed
from protoembed.objectives import build_objective
from protoembed.objectives.cache import chunks
from protoembed.objectives.views import ViewBatch, segments

SENTENCES = [
    "a man is playing a guitar .",
    "the cat sat on the mat and looked out of the window .",
    "two dogs are running through a field of grass .",
    "stocks fell sharply after the report on monday .",
    "a woman is slicing an onion .",
    "the quick brown fox jumps over the lazy dog .",
    "a child is riding a horse while people watch the game .",
    "this sentence means something .",
]
TRIPLETS = {
    "anchor": SENTENCES,
    "positive": SENTENCES[1:] + SENTENCES[:1],
    "negative": SENTENCES[2:] + SENTENCES[:2],
}
ONE_PAIR = '[positive]\nBy "<S>" they mean [MASK] .\n[negative]\n"<S>" is not a [MASK] one\n'
#: case -> (objective, head, options); ``<one-pair>`` is replaced by a one-pair template file.
CASES = {
    "conpvp": ("conpvp", "soft_prompt", {}),
    "conpvp_denoise": ("conpvp", "soft_prompt", {"templates": "<one-pair>", "denoise": "attention_mask"}),
    "conpvp_manual": ("conpvp", "mask", {"anchor": "manual"}),
    "conpvp_no_neg": ("conpvp", "soft_prompt", {"negative_prototypes": False}),
    "conpvp_no_proto": ("conpvp", "soft_prompt", {"prototypes": False}),
    "simcse": ("simcse", "cls", {}),
    "promptbert": ("promptbert", "mask", {"denoise": True}),
    "simcse_sup": ("simcse_sup", "cls", {}),
}


def write_one_pair(folder: Path) -> Path:
    """The one-pair template file (:data:`ONE_PAIR`) in ``folder``."""
    path = folder / "one-pair.txt"
    path.write_text(ONE_PAIR, encoding="utf-8")
    return path


#: rows per chunk: does not divide the rows of every case (PromptBERT's denoising rows), on purpose.
MINI_BATCH = 4


def batch_for(case: str, rank: int = 0, world: int = 1) -> dict[str, list[str]]:
    """This process's share of the batch of ``case``."""
    n = len(SENTENCES) // world
    columns = TRIPLETS if CASES[case][0] == "simcse_sup" else {"text": SENTENCES}
    return {k: v[rank * n : (rank + 1) * n] for k, v in columns.items()}


def build(model_dir: str | Path, case: str, templates: str | Path, seed: int = 0):
    """The objective of ``case`` in train mode (dropout on), float32, weights seeded by ``seed``."""
    name, head, options = CASES[case]
    options = {k: (str(templates) if v == "<one-pair>" else v) for k, v in options.items()}
    torch.manual_seed(seed)  # the same soft prompt and MLP in every process
    embedder = protoembed.load(str(model_dir), head=head)
    return build_objective(name, embedder, **options).train()


def twin(objective):
    """An independent copy with the same weights and state (its own gradients)."""
    return copy.deepcopy(objective)


def chunked_uncached_loss(objective, views, mini_batch_size: int = MINI_BATCH) -> torch.Tensor:
    """The uncached loss on the cached step's chunks: every chunk embedded with a graph, one loss."""
    spans = chunks(len(views), mini_batch_size, views.forwards())
    states = [objective.embed_features(views.rows(a, b)) for a, b in spans]
    return objective.loss(views.in_step_order(torch.cat(states)), views)


def split_as(views: ViewBatch, padding: str) -> ViewBatch:
    """``views`` (one forward, row order) as ``padding`` splits them (``auto`` at a price of 1 token a
    forward: nearly every length its own forward, the rows sorted), as :meth:`ViewBuilder.batch` would."""
    order, bounds = segments(views.lengths.tolist(), views.n, padding, forward_tokens=1)
    if order is None:
        return replace(views, segments=bounds)
    index = torch.tensor(order)
    features = {k: v[index] for k, v in views.features.items()}
    return replace(views, features=features, lengths=views.lengths[index], segments=bounds, order=index)


def gradients(objective) -> dict[str, torch.Tensor]:
    """Every parameter's gradient (cloned), by name."""
    return {k: p.grad.clone() for k, p in objective.named_parameters() if p.grad is not None}


def max_relative_difference(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> float:
    """``max over parameters of max|got - expected| / max|expected|`` (0 for equal gradients).

    A gradient that vanishes mathematically (the last LayerNorm bias under ConPVP's and PromptBERT's
    denoising, which the subtraction of two states carrying the same bias cancels: ~1e-7 against a
    largest entry of ~50) holds float noise only; so each parameter's scale is floored at 1e-2 of the
    largest gradient entry of the model.
    """
    assert got.keys() == expected.keys()
    floor = 1e-2 * max(float(ref.abs().max()) for ref in expected.values())
    worst = 0.0
    for key, ref in expected.items():
        scale = max(float(ref.abs().max()), floor)
        worst = max(worst, float((got[key] - ref).abs().max()) / scale)
    return worst
