"""Evaluation suites; one module per suite (``sts``, later ``transfer``, ``clustering``...)."""

from __future__ import annotations

from protoembed.evaluation.sts import STS_TASKS, evaluate_sts, format_sts_table, stsb_dev_spearman

__all__ = ["STS_TASKS", "evaluate_sts", "format_sts_table", "stsb_dev_spearman"]
