"""What lets a study run as a script (``python experiments/<study>.py``) import its siblings.

Run that way, Python puts ``experiments/`` itself on ``sys.path``, so ``from experiments.records import
...`` would fail. A driver's prologue imports this module (as a plain module, found beside it):

    if __package__ in (None, ""):  # run as a script
        import script_path  # noqa: F401

and importing it puts the repository root first on ``sys.path``. Imported as ``experiments.<study>``
(tests, ``python -m``), the root is already there and the prologue does nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

#: the repository root (the folder holding ``experiments/``)
ROOT = Path(__file__).resolve().parents[1]

sys.path.insert(0, str(ROOT))
