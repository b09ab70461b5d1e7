"""``training.padding``: a step's rows in one forward (``joint``), a forward per column padded to its own
longest row (``column``), or sorted by length into the forwards that pad fewest tokens at a price per
forward (``auto``).

With dropout off all three give the same loss and gradients (1e-5) for every contrastive objective and
ConPVP's ablations (the cases of :mod:`grad_cache_cases`) and for the siamese objectives; ``auto``'s cuts
are the cheapest partition (checked against every partition of a small step); GradCache's chunks stay
within a forward; the config's setting reaches the objective.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from grad_cache_cases import (
    CASES,
    batch_for,
    build,
    gradients,
    max_relative_difference,
    split_as,
    twin,
    write_one_pair,
)
from protoembed.core.errors import ProtoembedError
from protoembed.objectives.cache import chunks
from protoembed.objectives.views import segments
from training_helpers import tiny_config, write_corpus

RTOL = 1e-5


def test_column_and_joint_keep_the_row_order() -> None:
    assert segments([5, 4, 9, 8, 9, 3], 2, "column") == (None, ((0, 2), (2, 4), (4, 6)))
    assert segments([5, 9, 5, 9], 2, "column") == (None, ((0, 2), (2, 4)))
    # PromptBERT's template-alone rows after the 2n views: a last, shorter block
    assert segments([7, 7, 9, 9, 3], 2, "column") == (None, ((0, 2), (2, 4), (4, 5)))
    assert segments([7, 7], 2, "column") == (None, ())  # one block: one forward
    assert segments([5, 4, 9, 8], 2, "joint") == (None, ())
    with pytest.raises(ProtoembedError, match=r"padding: expected one of auto, column, joint, got 'rows'"):
        segments([1, 2], 1, "rows")


def test_auto_sorts_the_rows_and_cuts_where_a_forward_pays() -> None:
    # titles of 4-5 tokens beside snippets of 8-9, at 10 tokens a forward: 2 forwards (4*5 + 4*9 + 20 =
    # 76 < 8*9 + 10 = 82), the rows sorted by length, ties in row order
    assert segments([5, 4, 9, 8, 9, 3, 4, 9], 2, "auto", forward_tokens=10) == (
        (5, 1, 6, 0, 3, 2, 4, 7),
        ((0, 4), (4, 8)),
    )
    # at 16 tokens a forward the cut no longer pays (88 > 82): one forward in row order, i.e. joint
    assert segments([5, 4, 9, 8, 9, 3, 4, 9], 2, "auto", forward_tokens=16) == (None, ())
    # SimCSE's two dropout views of the same rows: the cut falls between short and long sentences
    assert segments([3, 20, 3, 20], 2, "auto", forward_tokens=5) == ((0, 2, 1, 3), ((0, 2), (2, 4)))
    assert segments([3, 20, 3, 20], 2, "auto") == (None, ())  # at FORWARD_TOKENS one forward


@pytest.mark.parametrize("seed", range(20))
def test_auto_s_cuts_are_the_cheapest_partition(seed: int) -> None:
    import itertools
    import random

    rng = random.Random(seed)
    lengths = [rng.randint(1, 30) for _ in range(rng.randint(2, 7))]
    price = rng.choice([0, 5, 20, 60])
    order, bounds = segments(lengths, 2, "auto", forward_tokens=price)
    rows = list(order or range(len(lengths)))
    assert sorted(rows) == list(range(len(lengths)))
    cuts = bounds or ((0, len(lengths)),)
    got = sum((e - s) * max(lengths[r] for r in rows[s:e]) + price for s, e in cuts)

    def cost(groups: list[list[int]]) -> int:
        return sum(len(g) * max(lengths[r] for r in g) + price for g in groups)

    def partitions(items: list[int]) -> list[list[list[int]]]:  # every set partition, by brute force
        if not items:
            return [[]]
        first, rest = items[0], items[1:]
        found = []
        for p in partitions(rest):
            found.append([[first], *p])
            for i in range(len(p)):
                found.append([*p[:i], [first, *p[i]], *p[i + 1 :]])
        return found

    assert got == min(cost(p) for p in partitions(list(range(len(lengths)))))
    assert len(list(itertools.pairwise(cuts))) == len(cuts) - 1 and all(
        a[1] == b[0] for a, b in itertools.pairwise(cuts)
    )


def test_cache_chunks_stay_within_a_forward() -> None:
    assert chunks(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert chunks(10, 4, [(0, 5), (5, 10)]) == [(0, 4), (4, 5), (5, 9), (9, 10)]


@pytest.mark.parametrize("padding", ["column", "auto"])
@pytest.mark.parametrize("case", list(CASES))
def test_padding_apart_equals_one_forward_with_dropout_off(
    tiny_model_dirs, tmp_path: Path, case: str, padding: str
) -> None:
    # float64: ConPVP's denoising subtraction of two close states amplifies float32 rounding of the
    # padding past 1e-5 in float32
    joint = build(tiny_model_dirs["bert"], case, write_one_pair(tmp_path)).double().eval()
    apart = twin(joint)
    joint.views.padding = "joint"
    views = joint.collate(batch_for(case))  # one draw of ConPVP's templates for both
    split = split_as(views, padding)
    assert len(split.forwards()) >= 2
    assert (split.order is not None) == (padding == "auto")
    assert padding == "column" or split.order.tolist() != list(range(len(views)))
    assert views.forwards() == [(0, len(views))] and views.order is None
    expected = joint(views)
    expected.backward()
    got = apart(split)
    got.backward()
    assert got.item() == pytest.approx(expected.item(), rel=RTOL)
    assert max_relative_difference(gradients(apart), gradients(joint)) < RTOL, case


@pytest.mark.parametrize("padding", ["column", "auto"])
@pytest.mark.parametrize("name", ["cosine_regression", "nli_softmax"])
def test_siamese_columns_apart_equal_one_forward_with_dropout_off(
    tiny_model_dirs, name: str, padding: str
) -> None:
    import protoembed
    from protoembed.objectives import build_objective

    batch = {
        "sentence1": ["a man plays .", "the cat sat on the mat and looked out ."],
        "sentence2": ["two dogs are running through a field of tall grass today .", "a woman cuts ."],
    }
    batch |= {"score": [0.2, 0.9]} if name == "cosine_regression" else {"label": [0, 2]}
    joint = build_objective(name, protoembed.load(str(tiny_model_dirs["bert"]), head="mean")).eval()
    apart = twin(joint)
    joint.views.padding, apart.views.padding = "joint", padding
    apart.views.forward_tokens = 1  # auto: the two short sentences in one forward, the long ones in others
    forwards = []
    apart.embedder.encoder.register_forward_hook(
        lambda m, args, out: forwards.append(args[0]["input_ids"].shape)
    )
    expected = joint(batch)
    expected.backward()
    got = apart(batch)
    got.backward()
    assert len(forwards) >= 2
    assert got.item() == pytest.approx(expected.item(), rel=RTOL)
    assert max_relative_difference(gradients(apart), gradients(joint)) < RTOL


def test_the_config_s_padding_reaches_the_objective(tiny_model_dirs, tmp_path: Path) -> None:
    from protoembed.training.components import build_objective_from_config, embedder_for

    corpus = write_corpus(tmp_path / "corpus.txt")
    for padding in ("auto", "column", "joint"):
        cfg = tiny_config(
            tiny_model_dirs["bert"], corpus, tmp_path / padding, "simcse", "cls", padding=padding
        )
        objective = build_objective_from_config(cfg, embedder_for(cfg, torch.device("cpu")))
        assert objective.views.padding == padding
