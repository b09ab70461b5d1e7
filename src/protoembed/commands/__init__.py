"""Sub-commands of the ``protoembed`` CLI; each module exposes ``register(subparsers)``."""
