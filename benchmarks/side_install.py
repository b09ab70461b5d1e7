"""Running a peer library from a side install (``pip install --no-deps --target DIR``, made by ``make
bench-env``) in a child interpreter that does not see the main environment's packages built against the
versions the side install replaces.

A side install holds older releases of packages the main environment also has (sentence-transformers 5,
transformers 4.x, huggingface-hub 0.x, ...) and takes everything else (torch, numpy, openvino, ...) from the
main environment. Putting the side folder first on ``PYTHONPATH`` is not enough: a main-environment package
that *requires* one the side install replaces was resolved against the main's copy and may not import
against the side's (datasets 5 imports names huggingface-hub 0.x lacks, and sentence-transformers imports
datasets whenever it is installed). So the child starts without ``site`` (``python -S``: the main
site-packages is not on its path) and gets, after the side folder, a *view* of the main site-packages:
a folder of links to its entries, less every distribution that depends, directly or through others, on a
distribution the side install holds (and less the ones the side install holds).
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import re
import site
import sys
from pathlib import Path


def _name(text: str) -> str:
    """A distribution's normalised name (PEP 503)."""
    return re.sub(r"[-_.]+", "-", text).lower()


def _requires(dist: metadata.Distribution) -> set[str]:
    """Names of the distributions ``dist`` requires unconditionally (extras' requirements left out)."""
    names = set()
    for requirement in dist.requires or []:
        if "extra ==" in requirement.replace('"', "").replace("'", ""):
            continue
        names.add(_name(re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0]))
    return names


def _top_level(dist: metadata.Distribution) -> set[str]:
    """The entries of its site-packages folder that ``dist`` installed (packages, modules, its dist-info)."""
    entries = {Path(f).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
    return {e for e in entries if e not in ("__pycache__",)}


def main_site_packages() -> list[Path]:
    """The main environment's site-packages folders (those of the running interpreter)."""
    return [Path(p) for p in site.getsitepackages() if Path(p).is_dir()]


def hidden_distributions(side: Path) -> set[str]:
    """Main-environment distributions the child must not see: those ``side`` holds and every one that
    depends on them (transitively)."""
    held = {_name(d.metadata["Name"]) for d in metadata.distributions(path=[str(side)])}
    main = {
        _name(d.metadata["Name"]): d
        for d in metadata.distributions(path=[str(p) for p in main_site_packages()])
    }
    hidden = set(held)
    grew = True
    while grew:
        grew = False
        for name, dist in main.items():
            if name not in hidden and _requires(dist) & hidden:
                hidden.add(name)
                grew = True
    return (hidden & set(main)) | held


def build_view(side: Path, view: Path) -> set[str]:
    """Fill the empty folder ``view`` with links to the main site-packages' entries the child may see.

    Returns the hidden distributions' names."""
    hidden = hidden_distributions(side)
    folders = main_site_packages()
    blocked: set[str] = set()
    for dist in metadata.distributions(path=[str(p) for p in folders]):
        if _name(dist.metadata["Name"]) in hidden:
            blocked |= _top_level(dist)
    view.mkdir(parents=True, exist_ok=True)
    for folder in folders:
        for entry in folder.iterdir():
            if entry.name in blocked or entry.suffix == ".pth" or (view / entry.name).exists():
                continue
            (view / entry.name).symlink_to(entry)
    return hidden


def child_command(script: Path | str, *args: str) -> list[str]:
    """``python -S script args``: the running interpreter without the main site-packages on its path."""
    return [sys.executable, "-S", str(script), *args]


def child_env(side: Path, view: Path) -> dict[str, str]:
    """The environment of a child over ``side``: its path is the side folder, then the view (and no user
    site-packages)."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(side.resolve()), str(view)]),
        "PYTHONNOUSERSITE": "1",
    }
