"""Rank and linear correlation of predicted scores against gold scores, x100 (the STS metrics).

Its own module so that every scorer of STS pairs (:mod:`~protoembed.evaluation.sts`'s cosines,
:mod:`~protoembed.evaluation.cross_encoder`'s pair scores, the analysis figures) shares one definition
without importing one another.
"""

from __future__ import annotations

import math

import numpy as np


def correlations(predicted: np.ndarray, gold: np.ndarray) -> tuple[float, float]:
    """(Spearman, Pearson) x100 of ``predicted`` against ``gold``; NaN when either is constant."""
    from scipy.stats import pearsonr, spearmanr

    if len(gold) < 2 or np.ptp(predicted) == 0 or np.ptp(gold) == 0:
        return math.nan, math.nan
    return float(spearmanr(predicted, gold)[0]) * 100, float(pearsonr(predicted, gold)[0]) * 100
