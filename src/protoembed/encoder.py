"""Where the ``modules.json`` of models saved before the package's layers name the input module.

Such a folder names ``protoembed.encoder.PromptEncoder``, and ``SentenceTransformer(path)`` and
:func:`protoembed.load` import it by that path, so this module stays, as that one name. The class lives in
:mod:`protoembed.model.encoder` (what new saves name); nothing in the package imports this module.
"""

from protoembed.model.encoder import PromptEncoder as PromptEncoder
