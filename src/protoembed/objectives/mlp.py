"""The old home of the training MLP and :class:`MLPPooling`, now in :mod:`protoembed.model.heads.mlp`.

Model folders saved before the move name ``protoembed.objectives.mlp.MLPPooling`` in their
``modules.json``; this alias keeps them loading (in protoembed and in sentence-transformers).
"""

from protoembed.model.heads.mlp import MLP, MLPPooling, init_like_backbone

__all__ = ["MLP", "MLPPooling", "init_like_backbone"]
