"""SentEval's PyTorch logistic regression (``--classifier pytorch``) against a one-fit-at-a-time
re-implementation of SentEval's ``MLP(nhid=0).fit`` loop and its ``InnerKFoldClassifier`` /
``SplitClassifier`` selection (facebookresearch/SentEval, senteval/tools/classifier.py, validation.py)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from sklearn.model_selection import StratifiedKFold

from protoembed.evaluation.senteval_torch import (
    L2_GRID,
    Fit,
    TorchClassifier,
    dev_selected,
    fit_many,
    select_and_refit,
)
from protoembed.evaluation.tasks import TASKS
from protoembed.evaluation.transfer import protocol_record, transfer_protocol

SEED = 1111
#: SentEval's classifier with fewer epochs (at most 6 rounds), to keep the one-at-a-time reference short.
SHORT = TorchClassifier(max_epoch=20)


def senteval_fit(x, y, classes, l2, seed, valid=None, split=0.05, tenacity=5, epoch_size=4, max_epoch=200):
    """SentEval's ``MLP(nhid=0)`` fit: global seeds, ``nn.Linear``, Adam with ``weight_decay``, mean
    cross-entropy, batches of 64, validation every ``epoch_size`` epochs, best model kept.
    Out: (model, best validation accuracy, rounds)."""
    np.random.seed(seed)
    torch.manual_seed(seed)
    model = torch.nn.Linear(x.shape[1], classes)
    loss_fn = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), weight_decay=l2)
    if valid is None:
        permutation = np.random.permutation(len(x))
        cut = int(split * len(x))
        train_x, train_y, dev_x, dev_y = (
            x[permutation[cut:]],
            y[permutation[cut:]],
            x[permutation[:cut]],
            y[permutation[:cut]],
        )
    else:
        (train_x, train_y), (dev_x, dev_y) = (x, y), valid
    train_x, dev_x = torch.tensor(train_x, dtype=torch.float32), torch.tensor(dev_x, dtype=torch.float32)
    train_y, dev_y = torch.tensor(train_y), torch.tensor(dev_y)
    nepoch, best, count, stop, rounds = 0, -1.0, 0, False, 0
    while not stop and nepoch <= max_epoch:
        for _ in range(epoch_size):
            permutation = np.random.permutation(len(train_x))
            for i in range(0, len(train_x), 64):
                idx = torch.from_numpy(permutation[i : i + 64]).long()
                loss = loss_fn(model(train_x[idx]), train_y[idx])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        nepoch += epoch_size
        rounds += 1
        with torch.no_grad():
            correct = sum(
                int((model(dev_x[i : i + 64]).argmax(1) == dev_y[i : i + 64]).sum())
                for i in range(0, len(dev_x), 64)
            )
        accuracy = correct / len(dev_x)
        if accuracy > best:
            best, kept = accuracy, copy.deepcopy(model)
        else:
            if count >= tenacity:
                stop = True
            count += 1
    return kept, best, rounds


def _predict(model, x):
    with torch.no_grad():
        return model(torch.tensor(x, dtype=torch.float32)).argmax(1).numpy()


def _task(n=240, dim=6, classes=2, seed=0):
    """Overlapping Gaussian classes: accuracies well below 1, so early stopping has work to do."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    x = rng.standard_normal((n, dim)) + 0.8 * np.eye(classes, dim)[y]
    return x, y


def test_one_fit_equals_senteval_fit_loop():
    x, y = _task(classes=3)
    fits = [Fit(np.arange(180), np.arange(180, 240)), Fit(np.arange(200))]
    regs = [1e-5, 1e-2]
    fitted = fit_many(x, y, fits, regs, 3, SEED)
    for f, fit in enumerate(fits):
        for r, l2 in enumerate(regs):
            valid = None if fit.valid is None else (x[fit.valid], y[fit.valid])
            model, best, rounds = senteval_fit(x[fit.train], y[fit.train], 3, l2, SEED, valid)
            assert fitted.valid_acc[f, r] == best
            assert fitted.rounds[f, r] == rounds
            np.testing.assert_array_equal(fitted.predict(x, f, r), _predict(model, x))
            torch.testing.assert_close(fitted.weight[f, r], model.weight.detach().T, rtol=0, atol=1e-5)


def test_inner_kfold_selection_equals_senteval():
    """SentEval's InnerKFoldClassifier (outer 3 folds, inner 3 folds): chosen L2, rounded dev score
    and the refit's test predictions."""
    x, y = _task(n=120, dim=5)
    outer = list(StratifiedKFold(n_splits=3, shuffle=True, random_state=SEED).split(x, y))
    got = select_and_refit(x, y, outer, 2, 3, SEED, config=SHORT)
    for (train, test), mine in zip(outer, got):
        inner = StratifiedKFold(n_splits=3, shuffle=True, random_state=SEED)
        scores = []
        for l2 in L2_GRID:
            accs = []
            for a, b in inner.split(x[train], y[train]):
                xt, yt = x[train][a], y[train][a]
                accs.append(senteval_fit(xt, yt, 2, l2, SEED, (x[train][b], y[train][b]), max_epoch=20)[1])
            scores.append(round(100 * np.mean(accs), 2))
        best = int(np.argmax(scores))
        model, _, _ = senteval_fit(x[train], y[train], 2, L2_GRID[best], SEED, max_epoch=20)
        assert (mine["l2"], mine["dev_acc"]) == (L2_GRID[best], scores[best])
        np.testing.assert_array_equal(mine["predicted"], _predict(model, x[test]))


def test_dev_selection_equals_senteval_split_classifier():
    x, y = _task(n=200, dim=4, classes=3, seed=3)
    got = dev_selected((x[:140], y[:140]), (x[140:170], y[140:170]), x[170:], 3, SEED)
    fits = [senteval_fit(x[:140], y[:140], 3, l2, SEED, (x[140:170], y[140:170])) for l2 in L2_GRID]
    scores = [round(100 * best, 2) for _, best, _ in fits]
    best = int(np.argmax(scores))
    assert (got["l2"], got["dev_acc"]) == (L2_GRID[best], scores[best])
    np.testing.assert_array_equal(got["predicted"], _predict(fits[best][0], x[170:]))


def test_the_global_generators_are_left_alone():
    torch.manual_seed(5)
    np.random.seed(5)
    expected_torch, expected_np = torch.rand(3), np.random.rand(3)
    torch.manual_seed(5)
    np.random.seed(5)
    x, y = _task(n=60)
    fit_many(x, y, [Fit(np.arange(60))], [1e-3], 2, SEED, TorchClassifier(max_epoch=4))
    assert torch.equal(torch.rand(3), expected_torch)
    np.testing.assert_array_equal(np.random.rand(3), expected_np)


def test_every_transfer_result_records_its_classifier():
    """What the report compares is the file's protocol record, and the library always writes the
    classifier into it."""
    for classifier in ("sklearn", "pytorch"):
        record = protocol_record(classifier, 10, 10, SEED, [TASKS["MR"]], "senteval")
        assert transfer_protocol({"protocol": record}) == record and record["classifier"] == classifier


@pytest.mark.parametrize("regs", [[], [1e-3]])
def test_no_fits_is_a_user_error(regs):
    from protoembed.core.errors import ProtoembedError

    with pytest.raises(ProtoembedError, match="at least one fit"):
        fit_many(np.zeros((4, 2)), np.array([0, 1, 0, 1]), [] if regs else [Fit(np.arange(4))], regs, 2, SEED)


def test_the_report_refuses_to_mix_the_two_classifiers(tmp_path):
    from pathlib import Path

    from protoembed.core.errors import ProtoembedError
    from protoembed.report.results import Result, by_table

    def result(name, protocol):
        data = {"suite": "transfer", "protocol": protocol, "tasks": {"MR": {"acc": 80.0}}, "avg": 80.0}
        return Result(Path(name), "transfer", name, data)

    old = result("old.json", {"classifier": "sklearn", "folds": 10})
    (table,) = by_table([old, result("new.json", {"classifier": "sklearn", "folds": 10})])
    assert list(table.groups) == ["old.json", "new.json"]
    with pytest.raises(
        ProtoembedError, match=r"torch.json: transfer results of protocol .*pytorch.* cannot share"
    ):
        by_table([old, result("torch.json", {"classifier": "pytorch", "folds": 10})])
