"""GradCache (``training.mini_batch_size``): the cached step's loss and gradients equal the uncached step's.

Every contrastive objective and ConPVP's ablations, fp32, one process here (two gloo processes in
test_distributed.py): with dropout ON against the uncached computation on the same chunks and random
state (:mod:`grad_cache_cases`), with dropout off against the plain one-forward step (float64); the random state
after a cached step is the one after its first pass; errors for a bad ``mini_batch_size``; (a cached
training run resuming exactly is in test_training_trainer.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from grad_cache_cases import (
    CASES,
    MINI_BATCH,
    batch_for,
    build,
    chunked_uncached_loss,
    gradients,
    max_relative_difference,
    split_as,
    twin,
    write_one_pair,
)
from protoembed.core.errors import ProtoembedError
from protoembed.objectives.cache import chunks, grad_cache_step
from protoembed.training.dropout import dropout_kernel
from protoembed.training.step import check_mini_batch
from training_helpers import tiny_config, write_corpus

RTOL = 1e-5


@pytest.fixture()
def one_pair(tmp_path: Path) -> Path:
    return write_one_pair(tmp_path)


@pytest.mark.parametrize("kernel", ["torch", "fast"])  # training.dropout
@pytest.mark.parametrize("case", list(CASES))
def test_cached_step_equals_uncached_with_dropout_on(
    tiny_model_dirs, one_pair: Path, case: str, kernel: str
) -> None:
    reference = build(tiny_model_dirs["bert"], case, one_pair)
    cached = twin(reference)
    views = reference.collate(batch_for(case))  # one draw of ConPVP's templates for both

    with dropout_kernel(kernel, torch.device("cpu")):
        torch.manual_seed(11)
        expected_loss = chunked_uncached_loss(reference, views)
        expected_loss.backward()
        after_reference = torch.get_rng_state()
        torch.manual_seed(11)
        loss = grad_cache_step(cached, views, MINI_BATCH)

    assert len(views) > MINI_BATCH  # several chunks
    assert loss.item() == pytest.approx(expected_loss.item(), rel=RTOL)
    expected = gradients(reference)
    assert max_relative_difference(gradients(cached), expected) < RTOL, case
    assert any("mlp" in k for k in expected) and any("auto_model" in k for k in expected)
    # the second pass replays each chunk's state without consuming the global generator
    assert torch.equal(torch.get_rng_state(), after_reference)
    # dropout is on: without the replay the second pass would draw other masks
    torch.manual_seed(12)
    with dropout_kernel(kernel, torch.device("cpu")):
        other = chunked_uncached_loss(twin(reference), views)
    assert other.item() != pytest.approx(loss.item(), rel=RTOL)


@pytest.mark.parametrize("padding", ["joint", "column", "auto"])
@pytest.mark.parametrize("case", ["conpvp", "conpvp_denoise", "promptbert", "simcse_sup"])
def test_cached_step_equals_plain_step_with_dropout_off(
    tiny_model_dirs, one_pair: Path, case: str, padding: str
) -> None:
    # float64: the plain step pads its forwards (all rows, a column each, or its length buckets), the
    # chunks each to their own longest row, and ConPVP's denoising subtraction amplifies that float32 noise
    plain = build(tiny_model_dirs["bert"], case, one_pair).double().eval()
    cached = twin(plain)
    plain.views.padding = "joint"
    views = split_as(plain.collate(batch_for(case)), padding)  # auto: the rows sorted, several forwards
    expected_loss = plain(views)  # the plain step: its forwards as training.padding says
    expected_loss.backward()
    loss = grad_cache_step(cached, views, MINI_BATCH)
    assert loss.item() == pytest.approx(expected_loss.item(), rel=RTOL)
    assert max_relative_difference(gradients(cached), gradients(plain)) < RTOL


def test_mini_batch_size_errors(tiny_model_dirs, tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus.txt")
    for value, batch in ((16, 8), (3, 8)):
        with pytest.raises(ProtoembedError) as err:
            tiny_config(
                tiny_model_dirs["bert"], corpus, tmp_path / "out", mini_batch_size=value, batch_size=batch
            )
        message = str(err.value)
        assert "training.mini_batch_size" in message and "\n" not in message
        assert f"got {value}" in message
    objective = build(tiny_model_dirs["bert"], "simcse", "")
    check_mini_batch(objective, 4, 8, 2)  # 4 rows per chunk of each process's 4 examples
    with pytest.raises(
        ProtoembedError, match=r"training.mini_batch_size 4 does not divide the per-process batch 2"
    ):
        check_mini_batch(objective, 4, 8, 4)
    with pytest.raises(
        ProtoembedError, match=r"training.mini_batch_size: objective 'Linear' has no cached step"
    ):
        check_mini_batch(torch.nn.Linear(2, 2), 4, 8, 1)


@pytest.mark.parametrize("case", ["conpvp", "simcse"])
def test_cached_step_under_bf16_autocast(tiny_model_dirs, one_pair: Path, case: str) -> None:
    """Both passes of every chunk run under the given autocast (bf16 on CPU, as Accelerate's bf16)."""

    def bf16():
        return torch.autocast("cpu", dtype=torch.bfloat16)

    reference = build(tiny_model_dirs["bert"], case, one_pair)
    cached = twin(reference)
    views = reference.collate(batch_for(case))
    torch.manual_seed(11)
    states = []
    for a, b in chunks(len(views), MINI_BATCH):  # one autocast region per chunk, as in the cached step
        with bf16():  # (one region over all chunks would share, and sum in bf16, one cast of each weight)
            states.append(reference.embed_features(views.rows(a, b)))
    with bf16():
        expected_loss = reference.loss(torch.cat(states), views)
    expected_loss.backward()
    torch.manual_seed(11)
    loss = grad_cache_step(cached, views, MINI_BATCH, autocast=bf16)
    assert loss.dtype == torch.float32  # the loss itself stays fp32
    assert loss.item() == pytest.approx(expected_loss.item(), rel=RTOL)
    assert max_relative_difference(gradients(cached), gradients(reference)) < RTOL
    # and it differs from the fp32 step: autocast was on in the passes
    torch.manual_seed(11)
    assert grad_cache_step(twin(reference), views, MINI_BATCH).item() != loss.item()
