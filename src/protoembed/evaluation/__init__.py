"""Evaluation suites, one module each, all on frozen embeddings from an ``encode(sentences)`` callable.

- :mod:`~protoembed.evaluation.sts`: STS12-16, STS-B, SICK-R (cosine vs gold, Spearman / Pearson x100);
- :mod:`~protoembed.evaluation.transfer`: the SentEval transfer tasks (logistic regression);
- :mod:`~protoembed.evaluation.fewshot`: few-shot transfer (K examples per class, several seeds);
- :mod:`~protoembed.evaluation.clustering`: short-text clustering (k-means, matched accuracy, NMI);
- :mod:`~protoembed.evaluation.analysis`: the embedding-space figures;
- :mod:`~protoembed.evaluation.shared`: what the suites share (deduplicated encoding, table cells).

The package imports none of them up front (they pull in scipy, scikit-learn or torch).
"""
