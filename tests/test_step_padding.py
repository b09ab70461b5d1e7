"""``training.padding``: a step's columns in one forward (``joint``) or a forward each, padded to their own
longest row (``column``), and ``auto``'s choice between them by padded tokens.

With dropout off the two give the same loss and gradients (1e-5) for every contrastive objective and
ConPVP's ablations (the cases of :mod:`grad_cache_cases`) and for the siamese objectives; GradCache's
chunks stay within a column; the config's setting reaches the objective.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from grad_cache_cases import CASES, batch_for, build, gradients, max_relative_difference, twin, write_one_pair
from protoembed.core.errors import ProtoembedError
from protoembed.objectives.cache import chunks
from protoembed.objectives.views import segments
from training_helpers import tiny_config, write_corpus

RTOL = 1e-5


def test_segments_by_padded_tokens() -> None:
    # titles of 5 tokens beside snippets of 9: per column 2*5 + 2*9 + 2*9 = 46 <= 0.9 * 6*9 padded tokens
    assert segments([5, 4, 9, 8, 9, 3], 2, "auto") == ((0, 2), (2, 4), (4, 6))
    # two dropout views of the same rows: no saving, one forward
    assert segments([5, 9, 5, 9], 2, "auto") == ()
    # a saving under COLUMN_SAVING (a tenth) is not worth two more forwards: 2*9 + 2*10 + 2*10 = 58 of 60
    assert segments([9, 8, 10, 9, 10, 9], 2, "auto") == ()
    assert segments([9, 8, 10, 9, 10, 9], 2, "column") == ((0, 2), (2, 4), (4, 6))
    assert segments([5, 9, 5, 9], 2, "column") == ((0, 2), (2, 4))
    assert segments([5, 4, 9, 8], 2, "joint") == ()
    # PromptBERT's template-alone rows after the 2n views: a last, shorter block
    assert segments([7, 7, 9, 9, 3], 2, "column") == ((0, 2), (2, 4), (4, 5))
    assert segments([7, 7], 2, "column") == ()  # one block: one forward
    with pytest.raises(ProtoembedError, match=r"padding: expected one of auto, column, joint, got 'rows'"):
        segments([1, 2], 1, "rows")


def test_cache_chunks_stay_within_a_forward() -> None:
    assert chunks(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert chunks(10, 4, [(0, 5), (5, 10)]) == [(0, 4), (4, 5), (5, 9), (9, 10)]


@pytest.mark.parametrize("case", list(CASES))
def test_column_padding_equals_one_forward_with_dropout_off(
    tiny_model_dirs, tmp_path: Path, case: str
) -> None:
    # float64: ConPVP's denoising subtraction of two close states amplifies float32 rounding of the
    # padding past 1e-5 in float32
    joint = build(tiny_model_dirs["bert"], case, write_one_pair(tmp_path)).double().eval()
    column = twin(joint)
    views = joint.collate(batch_for(case))  # one draw of ConPVP's templates for both
    split = replace(views, segments=segments(views.lengths.tolist(), views.n, "column"))
    assert views.forwards() == [(0, len(views))] or CASES[case][0] != "simcse"
    assert len(split.forwards()) >= 2
    expected = joint(replace(views, segments=()))
    expected.backward()
    got = column(split)
    got.backward()
    assert got.item() == pytest.approx(expected.item(), rel=RTOL)
    assert max_relative_difference(gradients(column), gradients(joint)) < RTOL, case


@pytest.mark.parametrize("name", ["cosine_regression", "nli_softmax"])
def test_siamese_columns_apart_equal_one_forward_with_dropout_off(tiny_model_dirs, name: str) -> None:
    import protoembed
    from protoembed.objectives import build_objective

    batch = {
        "sentence1": ["a man plays .", "the cat sat on the mat and looked out ."],
        "sentence2": ["two dogs are running through a field of tall grass today .", "a woman cuts ."],
    }
    batch |= {"score": [0.2, 0.9]} if name == "cosine_regression" else {"label": [0, 2]}
    joint = build_objective(name, protoembed.load(str(tiny_model_dirs["bert"]), head="mean")).eval()
    column = twin(joint)
    joint.views.padding, column.views.padding = "joint", "column"
    expected = joint(batch)
    expected.backward()
    got = column(batch)
    got.backward()
    assert got.item() == pytest.approx(expected.item(), rel=RTOL)
    assert max_relative_difference(gradients(column), gradients(joint)) < RTOL


def test_the_config_s_padding_reaches_the_objective(tiny_model_dirs, tmp_path: Path) -> None:
    from protoembed.training.components import build_objective_from_config, embedder_for

    corpus = write_corpus(tmp_path / "corpus.txt")
    for padding in ("auto", "column", "joint"):
        cfg = tiny_config(
            tiny_model_dirs["bert"], corpus, tmp_path / padding, "simcse", "cls", padding=padding
        )
        objective = build_objective_from_config(cfg, embedder_for(cfg, torch.device("cpu")))
        assert objective.views.padding == padding
