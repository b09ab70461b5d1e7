"""Many L2-regularised logistic regressions on one feature matrix, solved together.

Each problem ``p`` is a set of training rows ``R_p`` of ``x`` and an inverse regularisation strength
``C_p``; its objective is scikit-learn's ``LogisticRegression`` (L2 penalty, unpenalised intercept)::

    sum_{i in R_p} loss(y_i, x_i W + b) + ||W||^2 / (2 C_p)

with scikit-learn's two losses: for two classes one column and the binomial log-loss of the second
class (``log(1 + e^z) - y z``), for K > 2 classes K columns and the multinomial log-loss
(``logsumexp(z) - z_y``). The objective is strictly convex in ``W``, so its minimiser (and hence every
prediction) does not depend on the solver; we solve to a gradient tolerance far below scikit-learn's
(``max |gradient| <= tol * |R_p|``, default ``tol = 1e-8`` against scikit-learn's ``1e-4``).

Solver: Newton's method with a lagged Hessian (a Hessian costs as much as hundreds of gradient
steps, so it is reused as long as it works). The problems of each ``C`` on the union of all training
rows (the *anchors*) are solved first, warm-started along increasing ``C``, each stepping with the
Hessian of the previous solution (zero weights for the first). Every other problem starts from its
``C``'s anchor solution and steps with the anchor's Hessian scaled to its number of rows (a row
subset's Hessian is close to that fraction of the anchor's). A problem whose step shrinks its largest
gradient entry by less than 10%, or had to be shortened, gets a Hessian of its own. Steps are
backtracked to a sufficient decrease of the objective. The gradients of all problems come from two
matrix products per step (a column block per problem), which is what makes a nested cross-validation
(hundreds of fits) cost about as much as a few single fits.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch

from protoembed.core.errors import ProtoembedError

logger = logging.getLogger(__name__)

#: Largest gradient entry, relative to the number of training rows, at which a problem is solved.
TOL = 1e-8
MAX_ITER = 200
#: A problem gets a Hessian of its own when a step leaves more than this fraction of its gradient.
REFRESH = 0.9
#: Problems with fewer (examples x features x problems) than this run on one thread.
SMALL = 10_000_000


class _Problems:
    """The objective, gradient and Hessian of problems sharing one design matrix ``[x, 1]``."""

    def __init__(
        self, x: torch.Tensor, y: torch.Tensor, n_classes: int, masks: torch.Tensor, lam: torch.Tensor
    ):
        self.x = x  # (n, D): features and a column of ones (the intercept)
        self.y = y  # (n,) class indices
        self.k = 1 if n_classes == 2 else n_classes  # weight columns per problem
        self.onehot = torch.nn.functional.one_hot(y, n_classes).to(x.dtype) if self.k > 1 else y.to(x.dtype)
        self.masks = masks  # (n, P) 1.0 on the training rows of each problem
        self.lam = lam  # (P,) 1 / C
        self.penalised = torch.ones(x.shape[1], dtype=x.dtype)
        self.penalised[-1] = 0.0  # the intercept
        self.x32 = x.float()

    def scores(self, w: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
        """``x @ W`` for every problem: (n, P, k) from weights (P, D, k)."""
        x = self.x if x is None else x
        p, d, k = w.shape
        return (x @ w.permute(1, 0, 2).reshape(d, p * k)).view(-1, p, k)

    def value_grad(self, w: torch.Tensor, cols: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Objective (P',) and gradient (P', D, k) of the problems ``cols`` at their weights ``w``."""
        z = self.scores(w)
        masks = self.masks[:, cols]
        if self.k == 1:
            z = z[..., 0]
            y = self.onehot[:, None]
            loss = torch.logaddexp(torch.zeros((), dtype=z.dtype), z) - y * z
            residual = (torch.sigmoid(z) - y)[..., None]
        else:
            lse = torch.logsumexp(z, dim=-1)
            loss = lse - z.gather(-1, self.y[:, None, None].expand(-1, z.shape[1], 1))[..., 0]
            residual = torch.exp(z - lse[..., None]) - self.onehot[:, None, :]
        residual = residual * masks[..., None]
        p, d, k = w.shape
        grad = (self.x.T @ residual.reshape(-1, p * k)).view(d, p, k).permute(1, 0, 2)
        penalty = w * self.penalised[None, :, None]
        grad = grad + self.lam[cols, None, None] * penalty
        value = (masks * loss).sum(0) + 0.5 * self.lam[cols] * penalty.pow(2).sum((1, 2))
        return value, grad

    def data_hessian(self, w: torch.Tensor, col: int) -> torch.Tensor:
        """Hessian of problem ``col``'s loss term at ``w`` (D, k): (k D, k D), class-major blocks.

        Computed in float32 (it only preconditions the steps; the gradients that decide convergence
        are float64)."""
        z = self.scores(w[None])[:, 0, :]
        mask = self.masks[:, col]
        x = self.x32
        if self.k == 1:
            s = torch.sigmoid(z[:, 0])
            return (x.T @ (x * (mask * s * (1 - s)).float()[:, None])).double()
        prob = torch.softmax(z, dim=-1)
        d, k = w.shape
        out = torch.empty((k * d, k * d), dtype=w.dtype)
        for a in range(k):
            for b in range(a, k):
                weight = (mask * prob[:, a] * (float(a == b) - prob[:, b])).float()
                block = (x.T @ (x * weight[:, None])).double()
                out[a * d : (a + 1) * d, b * d : (b + 1) * d] = block
                out[b * d : (b + 1) * d, a * d : (a + 1) * d] = block.T
        return out

    def factor(self, data_hessian: torch.Tensor, lam: float, rows: float) -> torch.Tensor:
        """Cholesky factor of ``data_hessian + lam * penalty``; the intercepts get a small ridge (the
        multinomial loss is flat along adding one constant to every intercept), grown if rounding
        leaves the matrix indefinite."""
        d = self.x.shape[1]
        diagonal = (lam * self.penalised).repeat(self.k)
        matrix = (data_hessian + data_hessian.T) / 2 + torch.diag(diagonal)
        for ridge in (1e-6, 1e-4, 1e-2):
            matrix[range(d - 1, len(matrix), d), range(d - 1, len(matrix), d)] += ridge * rows
            factor, info = torch.linalg.cholesky_ex(matrix)
            if int(info) == 0:
                break
        return factor


def _newton(
    problems: _Problems,
    w: torch.Tensor,
    factors: list[torch.Tensor],
    slot: torch.Tensor,
    tol: float,
    max_iter: int,
    refresh: float,
) -> tuple[torch.Tensor, int]:
    """Lagged-Hessian Newton iterations on all problems from ``w`` (P, D, k); ``factors[slot[p]]`` is
    problem ``p``'s current Cholesky factor, replaced by its own Hessian's when a step shrinks the
    largest gradient entry by less than the factor ``refresh``. Out: the solutions and the number of
    iterations."""
    n_problems, d, k = w.shape
    all_cols = torch.arange(n_problems)
    rows = problems.masks.sum(0)
    value, grad = problems.value_grad(w, all_cols)
    active = all_cols[grad.abs().amax((1, 2)) > tol * rows]
    iteration = 0
    while len(active) and iteration < max_iter:
        iteration += 1
        g = grad[active]
        direction = torch.empty_like(g)
        flat = g.permute(0, 2, 1).reshape(len(active), k * d)  # class-major, as the factors
        for s in slot[active].unique().tolist():
            pick = slot[active] == s
            step = torch.cholesky_solve(flat[pick].T, factors[s]).T
            direction[pick] = -step.view(-1, k, d).permute(0, 2, 1)
        slope = (g * direction).sum((1, 2))
        t = torch.ones(len(active), dtype=w.dtype)
        pending = torch.arange(len(active))
        new_w = w[active].clone()
        new_value, new_grad = value[active].clone(), grad[active].clone()
        for _ in range(30):  # backtracking to a sufficient decrease (with room for rounding)
            cols = active[pending]
            trial = w[cols] + t[pending, None, None] * direction[pending]
            v, gr = problems.value_grad(trial, cols)
            slack = 1e-12 * value[cols].abs()
            ok = v <= value[cols] + 1e-4 * t[pending] * slope[pending] + slack
            new_w[pending[ok]], new_value[pending[ok]], new_grad[pending[ok]] = trial[ok], v[ok], gr[ok]
            pending = pending[~ok]
            if not len(pending):
                break
            t[pending] /= 2
        shrink = new_grad.abs().amax((1, 2)) / g.abs().amax((1, 2))
        w[active], value[active], grad[active] = new_w, new_value, new_grad
        for p in active[(shrink > refresh) | (t < 1)].tolist():  # slow: a Hessian of its own
            factors.append(
                problems.factor(problems.data_hessian(w[p], p), float(problems.lam[p]), float(rows[p]))
            )
            slot[p] = len(factors) - 1
        active = active[grad[active].abs().amax((1, 2)) > tol * rows[active]]
    if len(active):
        worst = float((grad[active].abs().amax((1, 2)) / rows[active]).max())
        logger.warning(
            "%d of %d logistic regressions stopped after %d iterations (largest gradient %.2e per row)",
            len(active),
            n_problems,
            max_iter,
            worst,
        )
    return w, iteration


def fit_many(
    x: np.ndarray,
    y: np.ndarray,
    rows: Sequence[np.ndarray],
    cs: Sequence[float],
    tol: float = TOL,
    max_iter: int = MAX_ITER,
) -> np.ndarray:
    """Fit one logistic regression per ``(rows[p], cs[p])`` on ``x`` (n, d) with labels ``y`` (n,).

    Every problem's training rows must contain every class of ``y[union of rows]``. Out: weights
    (P, d + 1, k) in float64, the intercept last, ``k = 1`` for two classes (the second class's logit)
    and the number of classes otherwise; :func:`predict_many` turns them into labels.
    Small problems run on one thread (thread hand-offs would cost more than their arithmetic).
    """
    if len(rows) != len(cs) or not len(rows):
        raise ProtoembedError(f"need one C per set of training rows, got {len(rows)} and {len(cs)}")
    threads = torch.get_num_threads()
    if x.size * len(rows) < SMALL:
        torch.set_num_threads(1)
    try:
        return _fit_many(x, y, rows, cs, tol, max_iter)
    finally:
        torch.set_num_threads(threads)


def _fit_many(
    x: np.ndarray, y: np.ndarray, rows: Sequence[np.ndarray], cs: Sequence[float], tol: float, max_iter: int
) -> np.ndarray:
    union = np.unique(np.concatenate([np.asarray(r) for r in rows]))
    classes = np.unique(y[union])
    for p, r in enumerate(rows):
        if len(np.unique(y[r])) != len(classes):
            raise ProtoembedError(f"training rows {p} lack a class: have {np.unique(y[r]).tolist()}")
    labels = torch.as_tensor(np.searchsorted(classes, y[union]))
    design = torch.cat(
        [torch.as_tensor(x[union], dtype=torch.float64), torch.ones(len(union), 1, dtype=torch.float64)], 1
    )
    position = np.full(len(y), -1)
    position[union] = np.arange(len(union))
    masks = torch.zeros((len(union), len(rows)), dtype=torch.float64)
    for p, r in enumerate(rows):
        masks[position[r], p] = 1.0
    k = 1 if len(classes) == 2 else len(classes)
    d = design.shape[1]

    # Anchors: every C on all the rows, Newton's method warm-started along increasing C.
    grid = sorted(set(float(c) for c in cs))
    anchors = _Problems(
        design,
        labels,
        len(classes),
        torch.ones((len(union), len(grid)), dtype=torch.float64),
        torch.tensor([1.0 / c for c in grid], dtype=torch.float64),
    )
    anchor_w = torch.zeros((len(grid), d, k), dtype=torch.float64)
    anchor_h = []
    start = torch.zeros((1, d, k), dtype=torch.float64)
    for a in range(len(grid)):
        single = _Problems(design, labels, len(classes), anchors.masks[:, a : a + 1], anchors.lam[a : a + 1])
        h = anchor_h[-1] if anchor_h else single.data_hessian(start[0], 0)
        solved, _ = _newton(
            single,
            start.clone(),
            [single.factor(h, float(single.lam[0]), len(union))],
            torch.zeros(1, dtype=torch.long),
            tol,
            max_iter,
            REFRESH,
        )
        anchor_w[a] = start = solved
        anchor_h.append(single.data_hessian(solved[0], 0))

    # Every other problem: from its anchor, with the anchor's Hessian scaled to its rows.
    lam = torch.tensor([1.0 / c for c in cs], dtype=torch.float64)
    problems = _Problems(design, labels, len(classes), masks, lam)
    which = torch.tensor([grid.index(float(c)) for c in cs])
    w = anchor_w[which].clone()
    size = masks.sum(0)
    factors: list[torch.Tensor] = []
    slot = torch.zeros(len(rows), dtype=torch.long)
    keys: dict[tuple[int, float], int] = {}
    for p in range(len(rows)):
        fraction = round(float(size[p]) / len(union), 3)
        key = (int(which[p]), fraction)
        if key not in keys:
            keys[key] = len(factors)
            factors.append(problems.factor(fraction * anchor_h[key[0]], float(lam[p]), float(size[p])))
        slot[p] = keys[key]
    w, _ = _newton(problems, w, factors, slot, tol, max_iter, REFRESH)
    return w.numpy()


def predict_many(weights: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Class indices (P, n) that each problem's weights (from :func:`fit_many`) predict for ``x``.

    Two classes: the second when its logit is positive; more: the largest score (the first on ties),
    as scikit-learn's ``predict``.
    """
    w = torch.as_tensor(weights)
    design = torch.cat(
        [torch.as_tensor(x, dtype=torch.float64), torch.ones(len(x), 1, dtype=torch.float64)], 1
    )
    p, d, k = w.shape
    z = (design @ w.permute(1, 0, 2).reshape(d, p * k)).view(-1, p, k).permute(1, 0, 2)
    return (z[..., 0] > 0).long().numpy() if k == 1 else z.argmax(-1).numpy()
