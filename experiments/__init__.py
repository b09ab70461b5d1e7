"""Experiments that use protoembed (run from the repository root); not part of the installed package.

- :mod:`experiments.unsup_cpu`: the unsupervised CPU study (``make experiment-unsup``), with its report
  (:mod:`experiments.unsup_cpu_report`) and figure (:mod:`experiments.unsup_cpu_figure`).
"""
