"""Experiments that use protoembed (run from the repository root); not part of the installed package.

- :mod:`experiments.unsup_cpu`: the unsupervised CPU study (``make experiment-unsup``), with its report
  (:mod:`experiments.unsup_cpu_report`), figure (:mod:`experiments.unsup_cpu_figure`) and the other
  suites on its models (:mod:`experiments.unsup_cpu_suites`).
- :mod:`experiments.supervised_cpu`: the supervised CPU study (``make experiment-supervised``) and its report
  (:mod:`experiments.supervised_cpu_report`).
- :mod:`experiments.domain_adapt`: domain adaptation on the clustering sets (``make experiment-adapt``).
- :mod:`experiments.records`: what the studies share (time files, the machine, record folders, exit codes).
- :mod:`experiments.script_path`: the prologue that lets a study run as ``python experiments/<study>.py``.
"""
