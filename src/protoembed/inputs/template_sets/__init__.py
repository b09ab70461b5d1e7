"""ConPVP template sets: positive templates T+ and negative templates T- (ConPVP Sec. 3, Table 1).

A set is a text file with two sections, one template per line, ``<S>`` the sentence and ``[MASK]`` the
backbone's mask token (rendered per backbone by :mod:`protoembed.inputs.templates`)::

    # comments and blank lines are skipped
    [positive]
    This sentence : "<S>" means [MASK] .
    [negative]
    This sentence : "<S>" does not mean [MASK] .

Packaged sets (``templates/<name>.txt``):

- ``paper``: Table 1 of the ConPVP paper, 8 T+ and 8 T-.
- ``official``: the lists of the authors' released code, copied verbatim from
  ``github.com/lemon0830/promptCSE`` at commit ``de343d7043fb421f2d130f660d87360d1bad5c30``
  (``ConPVP/train.py`` in ``ConPVP.zip``, function ``prepare_features``), 9 T+ and 8 T-. They differ
  from Table 1 in a ninth positive (``" <S> " , is related to " [MASK] "``) and in wording (e.g.
  ``inconsistent to``, ``totally different to``, ``which not denotes``, ``not means``); the spaces
  around ``<S>`` and ``[MASK]`` are the code's own.

Any other name is read as the path of a user file in the format above. Every entry is validated with
:class:`protoembed.inputs.templates.Template`: an entry without ``<S>`` or ``[MASK]`` is an error naming
``file:line``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from protoembed.core.errors import ProtoembedError
from protoembed.inputs.templates import Template

#: Names of the template sets shipped with the package.
PACKAGED_SETS = ("paper", "official")
_SECTIONS = ("positive", "negative")


def template_set(name_or_path: str) -> tuple[list[Template], list[Template]]:
    """Load a template set: ``(positives, negatives)``.

    Args:
        name_or_path: ``paper``, ``official`` (packaged), or the path of a file with ``[positive]`` and
            ``[negative]`` sections.
    Returns:
        two non-empty lists of :class:`~protoembed.inputs.templates.Template`.
    Raises:
        ProtoembedError: unreadable file, a line outside a section, an unknown section, an invalid
            template (message names ``file:line``), or an empty section.
    """
    if name_or_path in PACKAGED_SETS:
        resource = resources.files(__name__).joinpath(f"{name_or_path}.txt")
        return _parse(resource.read_text(encoding="utf-8"), f"<template set {name_or_path}>")
    path = Path(str(name_or_path)).expanduser()
    if not path.is_file():
        raise ProtoembedError(
            f"template set {name_or_path!r}: not one of {', '.join(PACKAGED_SETS)} and no such file"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ProtoembedError(f"cannot read template set {path}: {err}") from None
    return _parse(text, str(path))


def _parse(text: str, source: str) -> tuple[list[Template], list[Template]]:
    sets: dict[str, list[Template]] = {name: [] for name in _SECTIONS}
    section: str | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]") and line[1:-1].strip().lower() in _SECTIONS:
            section = line[1:-1].strip().lower()
            continue
        if section is None:
            raise ProtoembedError(
                f"{source}:{number}: template before any [positive] / [negative] section header"
            )
        sets[section].append(Template(line, source=f"{source}:{number}"))
    for name in _SECTIONS:
        if not sets[name]:
            raise ProtoembedError(f"{source}: no {name} templates (expected a [{name}] section)")
    return sets["positive"], sets["negative"]


__all__ = ["PACKAGED_SETS", "template_set"]
