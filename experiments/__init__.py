"""Experiments that use protoembed (run from the repository root); not part of the installed package.

- :mod:`experiments.unsup_cpu`: the unsupervised CPU study (``make experiment-unsup``), with its report
  (:mod:`experiments.unsup_cpu_report`), figure (:mod:`experiments.unsup_cpu_figure`) and the other
  suites on its models (:mod:`experiments.unsup_cpu_suites`).
- :mod:`experiments.supervised_cpu`: the supervised CPU study (``make experiment-supervised``) and its report
  (:mod:`experiments.supervised_cpu_report`).
- :mod:`experiments.domain_adapt`: domain adaptation on the clustering sets (``make experiment-adapt``).
- :mod:`experiments.records`: what the studies share (time files, the machine, record folders, exit codes).
- :mod:`experiments.script_path`: the prologue that lets a study run as ``python experiments/<study>.py``.

They are studies of the library: they use protoembed through its command line and its public API (the names
of ``protoembed.__all__``) only, apart from the few diagnostics of the trainer's inner parts that
``experiments/tests/test_experiments_imports.py`` lists with their reasons. Their tests are in
``experiments/tests`` (run by ``make test`` with the library's).
"""
