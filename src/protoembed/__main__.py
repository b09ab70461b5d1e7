"""``python -m protoembed`` (also what ``torchrun -m protoembed`` runs)."""

import sys

from protoembed.cli import main

sys.exit(main())
