"""The core: what every layer above may use and nothing here imports from them.

:mod:`~protoembed.core.errors` (the one-line user error), :mod:`~protoembed.core.version`,
:mod:`~protoembed.core.registry` (the one shape of every name -> entry table),
:mod:`~protoembed.core.pydantic_util` (strict option models with one-line errors),
:mod:`~protoembed.core.threads` (thread sizing) and :mod:`~protoembed.core.progress` (progress on stderr).
No torch.
"""
