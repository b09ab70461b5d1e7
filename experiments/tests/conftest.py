"""The experiments' tests share the library tests' fixtures (the benchmark ``data_dir``, the tiny
backbones, ``one_thread``), their guard against loading the default backbone unmarked and their markers (``backbone``, ``data``, ``subprocess``): they are
tests/conftest.py's, imported, not copied.

A marker list of tests/conftest.py names a test by ``<file>::<test>``, so a test here is listed there
like any other (e.g. ``SUBPROCESS_TESTS``).
"""

from tests.conftest import (  # noqa: F401  (fixtures and hooks take effect by being defined here)
    _no_hidden_backbone,
    data_dir,
    one_thread,
    pytest_collection_modifyitems,
    tiny_model_dir,
    tiny_model_dirs,
)
