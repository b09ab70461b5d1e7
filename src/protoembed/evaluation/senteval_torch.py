"""SentEval's PyTorch logistic regression (``usepytorch=True``, classifier ``nhid=0``), many fits at once.

SentEval's ``MLP`` with no hidden layer is one ``nn.Linear(dim, classes)`` trained with mini-batch Adam
(default learning rate 1e-3, betas 0.9 / 0.999, eps 1e-8) on the mean cross-entropy of each batch, with
the L2 strength as Adam's (coupled) ``weight_decay`` on the weight and the bias. One fit:

1. seed torch and numpy with ``seed`` (every fit starts from the same generator state), build the layer
   (so every fit of one input size starts from the same weights);
2. validation rows: given (``valid``), else the first ``int(validation_split * n)`` of a permutation of
   the training rows drawn from the fit's numpy generator, the rest (in that order) being trained on;
3. rounds: ``epoch_size`` epochs (each a fresh permutation of the training rows cut into batches of
   ``batch_size``), then the validation accuracy; a round that beats the best so far keeps a copy of the
   weights; otherwise, once ``tenacity`` rounds have failed to (counted over the whole fit, not reset
   by an improvement), the next failure stops the fit. Rounds start while the epoch count is at most
   ``max_epoch`` (200: at most 51 rounds of 4 epochs);
4. the kept (best) weights predict (the largest score's class).

Protocols (SentEval's ``validation.py``), L2 grid ``10^-5 .. 10^-2`` (:data:`L2_GRID`): each candidate is
scored by the mean validation accuracy x100 over the folds, rounded to 2 decimals, and the first best
(smallest L2 on ties) is kept. The inner fits validate (early-stop) on the fold they are scored on; the
refit on the whole training set early-stops on its own ``validation_split``. :func:`select_and_refit`
does this for a cross-validation (MR, CR, SUBJ, MPQA inside each outer fold; TREC and MRPC on train);
a dev split (SST-2) is both the early-stopping and the selection set, and the chosen L2's fit is the one
SentEval refits (the same seed gives the same run), so it is reused.

Batched: fits that share training and validation rows (a fold, over the L2 grid) share their batches,
and all the fits of a task step together as one batched matrix product per step (padding a shorter
last batch, pausing a fit whose round is shorter, freezing fits that stopped), in float32 as SentEval.
Each fit is the arithmetic of its own SentEval run up to float rounding (a test checks the predictions
against a one-fit-at-a-time ``nn.Linear`` + ``torch.optim.Adam`` loop).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from protoembed.core.errors import ProtoembedError

logger = logging.getLogger(__name__)

#: SentEval's L2 (weight decay) grid for its PyTorch classifier.
L2_GRID = tuple(10.0**t for t in range(-5, -1))


@dataclass(frozen=True)
class TorchClassifier:
    """The classifier configuration of the ConPVP and SimCSE ``evaluation.py`` (``--mode test``):
    ``{nhid: 0, optim: adam, batch_size: 64, tenacity: 5, epoch_size: 4}``, SentEval's ``max_epoch``
    200 and refit ``validation_split`` 0.05; Adam's defaults (``lr``, ``betas``, ``eps``)."""

    batch_size: int = 64
    tenacity: int = 5
    epoch_size: int = 4
    max_epoch: int = 200
    validation_split: float = 0.05
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    def record(self) -> dict[str, object]:
        """The protocol entries of a results file (``optim`` and ``nhid`` are fixed: Adam, none)."""
        out = {"optim": "adam", "nhid": 0, **asdict(self)}
        out["betas"] = list(self.betas)
        return out


@dataclass(frozen=True)
class Fit:
    """One fit's rows of the feature matrix: ``train`` (in SentEval's order) and ``valid`` (the
    early-stopping rows; ``None``: split off ``validation_split`` of ``train`` by the fit's generator)."""

    train: np.ndarray
    valid: np.ndarray | None = None


@dataclass
class Fitted:
    """Kept weights (F, R, dim, classes) and biases (F, R, classes) of every fit x L2 candidate, float32,
    their validation accuracy (F, R; fraction) and number of rounds run (F, R)."""

    weight: torch.Tensor
    bias: torch.Tensor
    valid_acc: np.ndarray
    rounds: np.ndarray

    def predict(self, x: np.ndarray, fit: int, reg: int) -> np.ndarray:
        """Class indices (n,) that fit ``fit`` with L2 candidate ``reg`` predicts for ``x`` (n, dim)."""
        z = torch.as_tensor(x, dtype=torch.float32) @ self.weight[fit, reg] + self.bias[fit, reg]
        return z.argmax(-1).numpy()


def initial_layer(dim: int, classes: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """SentEval's starting weights: ``nn.Linear(dim, classes)`` built right after
    ``torch.manual_seed(seed)`` (the global generator is left as it was). Out: weight (dim, classes),
    bias (classes,)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layer = torch.nn.Linear(dim, classes)
    return layer.weight.detach().T.contiguous(), layer.bias.detach().clone()


def _rows(fit: Fit, rng: np.random.RandomState, split: float) -> tuple[np.ndarray, np.ndarray]:
    train = np.asarray(fit.train)
    if fit.valid is not None:
        return train, np.asarray(fit.valid)
    order = rng.permutation(len(train))
    cut = int(split * len(train))
    return train[order[cut:]], train[order[:cut]]


def fit_many(
    x: np.ndarray,
    y: np.ndarray,
    fits: Sequence[Fit],
    regs: Sequence[float],
    n_classes: int,
    seed: int,
    config: TorchClassifier = TorchClassifier(),
) -> Fitted:
    """SentEval's PyTorch logistic regression (module docstring) for every fit x L2 in ``regs``.

    In: features ``x`` (n, dim), class indices ``y`` (n,) in ``0 .. n_classes - 1``, the fits' rows,
    the L2 candidates, SentEval's ``seed``. Out: :class:`Fitted`.
    """
    if not len(fits) or not len(regs):
        raise ProtoembedError(f"need at least one fit and one L2 value, got {len(fits)} and {len(regs)}")
    features = torch.as_tensor(np.asarray(x), dtype=torch.float32)
    labels = torch.as_tensor(np.asarray(y), dtype=torch.long)
    n_fits, n_regs, k = len(fits), len(regs), n_classes
    dim = features.shape[1]
    rngs = [np.random.RandomState(seed) for _ in fits]
    rows = [_rows(fit, rng, config.validation_split) for fit, rng in zip(fits, rngs)]
    for f, (train, valid) in enumerate(rows):
        if not len(train) or not len(valid):
            raise ProtoembedError(f"fit {f} has {len(train)} training and {len(valid)} validation rows")
    w0, b0 = initial_layer(dim, k, seed)
    weight = w0[None, :, None, :].repeat(n_fits, 1, n_regs, 1)  # (F, dim, R, k)
    bias = b0[None, None, :].repeat(n_fits, n_regs, 1)  # (F, R, k)
    state = [
        torch.zeros_like(weight),
        torch.zeros_like(weight),
        torch.zeros_like(bias),
        torch.zeros_like(bias),
    ]
    steps = np.zeros(n_fits, dtype=np.int64)
    decay = torch.tensor(regs, dtype=torch.float32)
    onehot = torch.nn.functional.one_hot(labels, k).float()
    best_w, best_b = weight.clone(), bias.clone()
    best = np.full((n_fits, n_regs), -1, dtype=np.int64)
    failures = np.zeros((n_fits, n_regs), dtype=np.int64)
    stopped = np.zeros((n_fits, n_regs), dtype=bool)
    rounds = np.zeros((n_fits, n_regs), dtype=np.int64)
    union = np.unique(np.concatenate([v for _, v in rows]))
    member = np.zeros((len(union), n_fits), dtype=bool)
    for f, (_, valid) in enumerate(rows):
        member[np.searchsorted(union, valid), f] = True
    valid_size = member.sum(0)
    epoch = 0
    while epoch <= config.max_epoch and not stopped.all():
        live = np.flatnonzero(~stopped.all(1))
        batches = [_round_batches(len(rows[f][0]), rngs[f], config) for f in live]
        _train_round(
            features,
            onehot,
            [rows[f][0] for f in live],
            batches,
            live,
            weight,
            bias,
            state,
            steps,
            decay,
            config,
        )
        epoch += config.epoch_size
        correct = _correct(features[union], labels[union], weight[live], bias[live], member[:, live])
        going = ~stopped[live]
        rounds[live] += going
        better = going & (correct > best[live])
        worse = going & ~better
        for i, f in enumerate(live):
            for r in np.flatnonzero(better[i]):
                best_w[f, :, r], best_b[f, r] = weight[f, :, r], bias[f, r]
        best[live] = np.where(better, correct, best[live])
        stopped[live] |= worse & (failures[live] >= config.tenacity)
        failures[live] += worse
    return Fitted(best_w.permute(0, 2, 1, 3).contiguous(), best_b, best / valid_size[:, None], rounds)


def _round_batches(n: int, rng: np.random.RandomState, config: TorchClassifier) -> list[np.ndarray]:
    """The batches (positions in the fit's training rows) of one round: ``epoch_size`` permutations."""
    out = []
    for _ in range(config.epoch_size):
        order = rng.permutation(n)
        out += [order[i : i + config.batch_size] for i in range(0, n, config.batch_size)]
    return out


def _train_round(
    features: torch.Tensor,
    onehot: torch.Tensor,
    train_rows: list[np.ndarray],
    batches: list[list[np.ndarray]],
    live: np.ndarray,
    weight: torch.Tensor,
    bias: torch.Tensor,
    state: list[torch.Tensor],
    steps: np.ndarray,
    decay: torch.Tensor,
    config: TorchClassifier,
) -> None:
    """One round of Adam steps for the fits ``live`` (in place on ``weight``, ``bias``, ``state`` and
    ``steps``); a fit with fewer batches than the others pauses for the steps it lacks."""
    g, size = len(live), config.batch_size
    n_steps = max(len(b) for b in batches)
    index = np.zeros((g, n_steps, size), dtype=np.int64)
    mask = np.zeros((g, n_steps, size), dtype=np.float32)
    for i, (train, fit_batches) in enumerate(zip(train_rows, batches)):
        for s, batch in enumerate(fit_batches):
            index[i, s, : len(batch)] = train[batch]
            mask[i, s, : len(batch)] = 1.0 / len(batch)
    index_t, mask_t = torch.as_tensor(index), torch.as_tensor(mask)
    counts = np.array([len(b) for b in batches])
    live_t = torch.as_tensor(live)
    w, b = weight[live_t], bias[live_t]
    mw, vw, mb, vb = (s[live_t] for s in state)
    _, dim, n_regs, k = w.shape
    beta1, beta2 = config.betas
    for s in range(n_steps):
        on = s < counts
        t = steps[live] + on
        xb = features[index_t[:, s]]  # (g, B, dim)
        z = torch.baddbmm(b.view(g, 1, n_regs * k), xb, w.view(g, dim, n_regs * k)).view(g, size, n_regs, k)
        residual = (torch.softmax(z, -1) - onehot[index_t[:, s]][:, :, None, :]) * mask_t[:, s, :, None, None]
        grad_w = torch.bmm(xb.transpose(1, 2), residual.view(g, size, n_regs * k)).view(g, dim, n_regs, k)
        grad_b = residual.sum(1)
        grad_w = grad_w + decay[None, None, :, None] * w
        grad_b = grad_b + decay[None, :, None] * b
        correction1 = torch.tensor(config.lr / (1 - beta1 ** np.maximum(t, 1)), dtype=torch.float32)
        correction2 = torch.tensor((1 - beta2 ** np.maximum(t, 1)) ** 0.5, dtype=torch.float32)
        new = []
        for param, m, v, grad, shape in ((w, mw, vw, grad_w, (g, 1, 1, 1)), (b, mb, vb, grad_b, (g, 1, 1))):
            m2 = torch.lerp(m, grad, 1 - beta1)
            v2 = (v * beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = (v2.sqrt() / correction2.view(shape)).add_(config.eps)
            p2 = param - correction1.view(shape) * (m2 / denom)
            if not on.all():
                keep = torch.as_tensor(on).view(shape)
                m2, v2, p2 = (torch.where(keep, a, old) for a, old in ((m2, m), (v2, v), (p2, param)))
            new.append((p2, m2, v2))
        (w, mw, vw), (b, mb, vb) = new
        steps[live] = t
    weight[live_t], bias[live_t] = w, b
    for full, part in zip(state, (mw, vw, mb, vb)):
        full[live_t] = part


def _correct(
    x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, member: np.ndarray
) -> np.ndarray:
    """Correct validation predictions (g, R) of the fits' current weights (g, dim, R, k) on the rows
    ``x`` (u, dim) that ``member`` (u, g) marks as each fit's validation rows."""
    g, dim, n_regs, k = weight.shape
    with torch.no_grad():
        z = (x @ weight.permute(1, 0, 2, 3).reshape(dim, g * n_regs * k)).view(-1, g, n_regs, k) + bias
        right = (z.argmax(-1) == y[:, None, None]).float()  # (u, g, R)
    return (
        torch.einsum("ugr,ug->gr", right, torch.as_tensor(member, dtype=torch.float32)).round().long().numpy()
    )


def mean_scores(valid_acc: np.ndarray) -> list[float]:
    """SentEval's score of each L2 candidate: the mean over folds (rows) of the validation accuracy,
    x100, rounded to 2 decimals."""
    return [round(100 * float(np.mean(valid_acc[:, r])), 2) for r in range(valid_acc.shape[1])]


def select_and_refit(
    x: np.ndarray,
    y: np.ndarray,
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    n_classes: int,
    inner_folds: int,
    seed: int,
    regs: Sequence[float] = L2_GRID,
    config: TorchClassifier = TorchClassifier(),
) -> list[dict[str, object]]:
    """For each ``(train rows, test rows)`` of ``x``: the L2 chosen by an inner stratified
    ``inner_folds``-fold cross-validation of the training rows (shuffled with ``seed``; each inner fit
    early-stops on the fold it is scored on), then the refit on all training rows (early-stopping on
    its own ``validation_split``) predicting the test rows. All fits of all splits train together.

    Out per split: ``{"l2", "dev_acc" (the chosen L2's rounded mean inner accuracy x100), "predicted"}``.
    """
    from sklearn.model_selection import StratifiedKFold

    fits: list[Fit] = []
    plans = []
    for train, test in splits:
        splitter = StratifiedKFold(n_splits=inner_folds, shuffle=True, random_state=seed)
        inner = [Fit(train[a], train[b]) for a, b in splitter.split(np.zeros(len(train)), y[train])]
        plans.append((len(fits), len(inner), test))
        fits += [*inner, Fit(train)]
    fitted = fit_many(x, y, fits, regs, n_classes, seed, config)
    out = []
    for first, count, test in plans:
        scores = mean_scores(fitted.valid_acc[first : first + count])
        best = int(np.argmax(scores))
        predicted = fitted.predict(x[test], first + count, best)
        out.append({"l2": float(regs[best]), "dev_acc": scores[best], "predicted": predicted})
    return out


def dev_selected(
    train: tuple[np.ndarray, np.ndarray],
    dev: tuple[np.ndarray, np.ndarray],
    test_x: np.ndarray,
    n_classes: int,
    seed: int,
    regs: Sequence[float] = L2_GRID,
    config: TorchClassifier = TorchClassifier(),
) -> dict[str, object]:
    """SentEval's ``SplitClassifier`` (SST-2): every L2 trained on ``train`` early-stopping on ``dev``,
    the best dev accuracy (x100, rounded to 2 decimals; smallest L2 on ties) chosen, its kept weights
    predicting ``test_x``. Out: ``{"l2", "dev_acc", "predicted"}``."""
    (x_train, y_train), (x_dev, y_dev) = train, dev
    x = np.concatenate([x_train, x_dev])
    y = np.concatenate([y_train, y_dev])
    n = len(y_train)
    fitted = fit_many(x, y, [Fit(np.arange(n), n + np.arange(len(y_dev)))], regs, n_classes, seed, config)
    scores = [round(100 * float(a), 2) for a in fitted.valid_acc[0]]
    best = int(np.argmax(scores))
    return {"l2": float(regs[best]), "dev_acc": scores[best], "predicted": fitted.predict(test_x, 0, best)}
