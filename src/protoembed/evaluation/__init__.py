"""Evaluation suites, one module each, all on frozen embeddings from an ``encode(sentences)`` callable.

- :mod:`~protoembed.evaluation.sts`: STS12-16, STS-B, SICK-R (cosine vs gold, Spearman / Pearson x100);
- :mod:`~protoembed.evaluation.transfer`: the SentEval transfer tasks (logistic regression);
- :mod:`~protoembed.evaluation.fewshot`: few-shot transfer (K examples per class, several seeds);
- :mod:`~protoembed.evaluation.clustering`: short-text clustering (k-means, matched accuracy, NMI);
- :mod:`~protoembed.evaluation.retrieval`: retrieval on BEIR-layout folders (exact search; nDCG, MRR,
  Recall, MAP, Precision at k: :mod:`~protoembed.evaluation.retrieval_metrics`);
- :mod:`~protoembed.evaluation.analysis`: the embedding-space figures;
- :mod:`~protoembed.evaluation.shared`: what the suites share (deduplicated encoding, table cells).
- :mod:`~protoembed.evaluation.encoders`: :class:`~protoembed.evaluation.encoders.LazyEncoder`, the
  ``encode`` callable a suite takes (model loaded on first use, torch or ONNX runtime, embedding store);
- :mod:`~protoembed.evaluation.correlation`: Spearman / Pearson x100, shared by every STS scorer.

- :mod:`~protoembed.evaluation.tasks`: every task's entry (name, table name, suites, the ``protoembed data``
  entry that provides its files, splits, main score, languages, citation, files and reader);
- :mod:`~protoembed.evaluation.run`: :func:`~protoembed.evaluation.run.evaluate` (``protoembed.evaluate``),
  the suites run from Python, returning the JSON ``protoembed eval`` writes.

Each suite module declares its :class:`~protoembed.evaluation.suite.Suite` (typed evaluation, command
line, report section); the package registers the built-in ones below, in ``protoembed eval --help``'s
order, before anything else of it is used, so that every task entry (:mod:`~protoembed.evaluation.tasks`)
is checked against every suite. A new suite is its data reader (``protoembed.data.benchmarks``), its
module here with its :class:`~protoembed.evaluation.suite.Suite`, its line below, and its tasks' entries;
a new task of an existing suite is one task entry alone. A suite module imports scipy, scikit-learn or
torch only inside the functions that compute.
"""

from protoembed.evaluation import clustering, fewshot, retrieval, sts, transfer
from protoembed.evaluation.suite import SUITES, register_suite

for _suite in (sts.SUITE, transfer.SUITE, fewshot.SUITE, clustering.SUITE, retrieval.SUITE):
    if _suite.name not in SUITES:
        register_suite(_suite)
