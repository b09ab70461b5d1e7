"""``protoembed.heads.cnn.CNNHead``, the path older saved models name (see :mod:`protoembed.heads`); the class
lives in :mod:`protoembed.model.heads.cnn`."""

from protoembed.model.heads.cnn import CNNHead as CNNHead
