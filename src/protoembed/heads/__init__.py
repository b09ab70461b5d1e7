"""Where the ``modules.json`` (and a kept MLP's ``pooler_type``) of models saved before the package's layers
name the heads' pooling modules: ``protoembed.heads.mask.MaskTokenPooling``, ``protoembed.heads.cnn.CNNHead``
and ``protoembed.heads.mlp.MLPPooling``.

``SentenceTransformer(path)`` and :func:`protoembed.load` import them by those paths, so these modules stay,
one name each. The heads live in :mod:`protoembed.model.heads` (what new saves name); nothing in the package
imports this one.
"""
