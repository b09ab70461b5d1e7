"""The built-in suites of ``protoembed eval`` and of the report, one line each, in the command's order.

A new suite is its data reader (``protoembed.data``), its tasks' entries
(:func:`protoembed.evaluation.tasks.register_task`), its module here with its
:class:`~protoembed.evaluation.suite.Suite`, and its line below. A new task of an existing suite is one
task entry alone. The ``protoembed.evaluation`` package imports this module before anything else of
it, so :data:`SUITES` is complete whenever a task entry is checked.
"""

from __future__ import annotations

from protoembed.evaluation import clustering, fewshot, sts, transfer
from protoembed.evaluation.suite import SUITES, register_suite

for _suite in (sts.SUITE, transfer.SUITE, fewshot.SUITE, clustering.SUITE):
    if _suite.name not in SUITES:
        register_suite(_suite)

__all__ = ["SUITES"]
