"""One markdown page of the ConPVP paper's tables (3-6) and figures (4-7) for any number of models.

``load_results(paths, labels)`` reads results JSON (files or run folders); ``write_report(results,
"report.md")`` writes the page. ``protoembed report`` is the command line.
"""

from protoembed.report.page import build_report, summary_table, write_report, write_summary
from protoembed.report.results import Result, Table, by_table, load_results

__all__ = [
    "Result",
    "Table",
    "build_report",
    "by_table",
    "load_results",
    "summary_table",
    "write_report",
    "write_summary",
]
