"""What a model's vectors find: nearest neighbours in a corpus, and hard negatives mined with them.

- :mod:`~protoembed.retrieval.semantic_search`: similarity matrices, the exact top-k search block by block
  and ``protoembed.search`` (a model, queries and a corpus of texts -> rankings);
- :mod:`~protoembed.retrieval.faiss_index`: the optional FAISS index for corpora beyond exact search;
- :mod:`~protoembed.retrieval.mining`: ``protoembed.mine_hard_negatives`` (``protoembed mine``).

A model's score functions (``cosine``, ``dot``) are the model's own (:mod:`protoembed.model.protocol`); the
retrieval suite (:mod:`protoembed.evaluation.retrieval`) scores with this search.
"""
