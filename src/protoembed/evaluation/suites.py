"""The suites of ``protoembed eval`` and of the report, one line each, in the command's order.

A new suite is its data reader (``protoembed.data``), its tasks' entries in
:data:`protoembed.evaluation.tasks.TASKS`, its module here with its
:class:`~protoembed.evaluation.suite.Suite`, and its line below. A new task of an existing suite is one
entry in :data:`~protoembed.evaluation.tasks.TASKS` alone.
"""

from __future__ import annotations

from protoembed.evaluation import clustering, fewshot, sts, transfer
from protoembed.evaluation.suite import Suite

#: Suite name -> its declaration, in ``protoembed eval --help``'s order (the report sorts by ``page_order``).
SUITES: dict[str, Suite] = {
    suite.name: suite
    for suite in (
        sts.SUITE,
        transfer.SUITE,
        fewshot.SUITE,
        clustering.SUITE,
    )
}
