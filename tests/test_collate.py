"""The training DataLoader collates the views (``training.num_workers``): its tensors equal the
objective's own collation of the same examples, in the main process and in worker processes, for every
contrastive objective; ConPVP's template draws follow its running generator with 0 workers and a
generator keyed by the batch with workers (reproducible across runs and worker counts)."""

from __future__ import annotations

import copy

import pytest
import torch

from grad_cache_cases import SENTENCES, TRIPLETS, build
from protoembed.data.training.examples import Examples
from protoembed.objectives.views import ViewBatch
from protoembed.training.components import EpochShuffleSampler, example_loader
from protoembed.training.step import Collator, draw_key

CASES = ["conpvp", "conpvp_denoise", "conpvp_no_proto", "simcse", "promptbert", "simcse_sup"]
BATCH = 4


def _examples(case: str) -> Examples:
    columns = TRIPLETS if case == "simcse_sup" else {"text": SENTENCES}
    return Examples({k: list(v) for k, v in columns.items()})


def _batches(objective, examples: Examples, workers: int, seed: int = 5) -> tuple[list[list[int]], list]:
    sampler = EpochShuffleSampler(len(examples), seed)
    order = list(sampler)
    indices = [order[i : i + BATCH] for i in range(0, len(order) - BATCH + 1, BATCH)]
    loader = example_loader(examples, BATCH, sampler, Collator(examples, objective, workers, seed), workers)
    return indices, list(loader)


def _same(a: ViewBatch, b: ViewBatch) -> None:
    assert a.features.keys() == b.features.keys() and a.n == b.n
    for key in a.features:
        assert torch.equal(a.features[key], b.features[key]), key
    assert torch.equal(a.lengths, b.lengths)
    assert a.index.keys() == b.index.keys() and all(torch.equal(a.index[k], b.index[k]) for k in a.index)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("workers", [0, 2])
def test_loader_batches_are_the_objective_collation(
    tiny_model_dirs, tmp_path, case: str, workers: int
) -> None:
    templates = tmp_path / "one-pair.txt"
    templates.write_text('[positive]\nBy "<S>" they mean [MASK] .\n[negative]\n"<S>" is not a [MASK] one\n')
    objective = build(tiny_model_dirs["bert"], case, templates)
    direct = copy.deepcopy(objective)  # the same draw generator state
    replay = copy.deepcopy(objective).eval()  # steps on the raw examples, collated at the step
    examples = _examples(case)
    indices, batches = _batches(objective, examples, workers)
    assert len(batches) == len(SENTENCES) // BATCH
    keyed = workers and getattr(objective, "keyed_draws", False)
    for idx, batch in zip(indices, batches):
        assert isinstance(batch, ViewBatch) and batch.features["input_ids"].dtype == torch.long
        raw = examples.select(idx)
        expected = direct.collate(raw, draw_key=draw_key(5, 0, idx)) if keyed else direct.collate(raw)
        _same(batch, expected)
        # the step on the loader's tensors is the step on the raw examples (which collates them itself)
        if not keyed:
            assert torch.equal(objective.eval()(batch), replay(raw))


def test_keyed_draws_do_not_depend_on_the_worker_count(tiny_model_dirs) -> None:
    objective = build(tiny_model_dirs["bert"], "conpvp", "")
    examples = _examples("conpvp")
    _, one = _batches(copy.deepcopy(objective), examples, 1)
    _, two = _batches(copy.deepcopy(objective), examples, 2)
    for a, b in zip(one, two):
        _same(a, b)
    assert not torch.equal(one[0].features["input_ids"][BATCH:], one[1].features["input_ids"][BATCH:])


def test_objectives_without_views_get_columns(tiny_model_dirs) -> None:
    import protoembed
    from protoembed.model.loading import build as build_embedder
    from protoembed.objectives import build_objective

    embedder = protoembed.load(str(tiny_model_dirs["bert"]), head="mean")
    objective = build_objective(
        "cosine_regression", build_embedder(embedder.encoder.auto_model, embedder.encoder.tokenizer, "mean")
    )
    examples = Examples(
        {"sentence1": SENTENCES, "sentence2": SENTENCES[::-1], "score": [1.0] * len(SENTENCES)}
    )
    indices, batches = _batches(objective, examples, 0)
    assert batches[0] == examples.select(indices[0])
