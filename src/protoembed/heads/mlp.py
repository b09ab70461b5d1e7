"""``protoembed.heads.mlp.MLPPooling``, the path older saved models name (see :mod:`protoembed.heads`); the class
lives in :mod:`protoembed.model.heads.mlp`."""

from protoembed.model.heads.mlp import MLPPooling as MLPPooling
