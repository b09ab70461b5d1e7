"""MkDocs hook: pages whose source lives outside docs/, added to the build as they are (``File.generated``),
so the site shows the committed file itself and no copy can go stale.

:data:`PAGES` maps each site path to its file in the repository; the nav names them like any page.
A guide page links to one as to any page (``[the config schema](reference/configs.md)``).
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
#: site path (inside docs/) -> the repository file it shows.
PAGES = {"reference/configs.md": "configs/README.md"}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add each page of :data:`PAGES`."""
    for uri, source in PAGES.items():
        files.append(File.generated(config, uri, abs_src_path=str(ROOT / source)))
    return files
