"""The package version, at the bottom of the import graph (read by the CLI, saved models and exports)."""

from __future__ import annotations

__version__ = "0.1.0"
