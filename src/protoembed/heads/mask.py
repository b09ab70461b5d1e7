"""``protoembed.heads.mask.MaskTokenPooling``, the path older saved models name (see :mod:`protoembed.heads`); the class
lives in :mod:`protoembed.model.heads.mask`."""

from protoembed.model.heads.mask import MaskTokenPooling as MaskTokenPooling
