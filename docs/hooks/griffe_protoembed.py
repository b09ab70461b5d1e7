"""Griffe extension for the API reference (mkdocs.yml: mkdocstrings' ``extensions``).

protoembed's docstrings are Markdown-friendly prose with Google-style sections (``Args:``, ``Returns:``,
``Raises:``, ``Attributes:``) and Sphinx roles (``:func:`load```, ``:class:`~protoembed.model.embedder.Embedder```).
mkdocstrings renders the first two itself; this extension turns each role into a link to the object's
entry in the reference when the object has one (an optional cross-reference: plain code otherwise, no
warning), its text the name as Sphinx shows it (``~``: the last part only).

A pydantic model's fields get their ``Field(description=...)`` as their docstring, so that the reference
lists them (``ServeSettings``, ``Task``, the objectives' options). It also lists the options of each
registered objective (:data:`protoembed.objectives.registry.REGISTRY`)
as a table under its class: at run time the class's docstring gets them from the registry
(``Objective.__init_subclass__``), which a static read of the source does not see.
"""

from __future__ import annotations

import ast
import html
import re
import sys
from pathlib import Path
from typing import Any

import griffe

SRC = Path(__file__).resolve().parents[2] / "src"
if str(SRC) not in sys.path:  # this checkout's registry, not an installed copy's
    sys.path.insert(0, str(SRC))

#: ``:role:`target``` (``:py:func:``... too); ``target`` may start with ``~`` or ``.``, or be ``title <target>``.
ROLE = re.compile(r":(?:py:)?(?:func|meth|class|data|attr|mod|obj|exc|const|type):`([^`]+)`")

#: A reST literal-block marker ending a line (``Example::``, ``the layout::``): the indented block after it
#: is already a Markdown code block; the marker becomes ``:`` (a bold title when it is the whole line, so
#: that ``Example:`` is not read as a Google section).
LITERAL = re.compile(r"^(\s*)(.*?)::$", re.MULTILINE)

#: A Google section title (``Args:``, ``Returns:``...) on its own line; griffe reads one only after a blank
#: line, which protoembed's docstrings do not leave (``Returns:`` right after the ``Args:`` lines).
SECTION = re.compile(
    r"\n(?=[ \t]*(?:Args|Arguments|Parameters|Returns|Yields|Raises|Attributes|Examples|Warns|Note|Notes):[ \t]*\n)"
)


def _literal(match: re.Match[str]) -> str:
    indent, text = match[1], match[2]
    if not text:
        return ""
    return f"{indent}**{text}**" if re.fullmatch(r"\w+", text) else f"{indent}{text}:"


def _full_path(obj: griffe.Object, target: str) -> str:
    """``target`` as a full dotted path, resolved from ``obj``'s scope where it is relative."""
    if target.startswith("protoembed."):
        return target
    head, _, rest = target.lstrip(".").partition(".")
    scope: griffe.Object | None = obj
    while scope is not None:
        try:
            resolved = scope.resolve(head)
        except griffe.NameResolutionError:
            scope = scope.parent
            continue
        return f"{resolved}.{rest}" if rest else resolved
    return target


def _link(obj: griffe.Object, match: re.Match[str]) -> str:
    text = match[1].strip()
    explicit = re.fullmatch(r"(.+?)\s*<(.+)>", text)
    if explicit:
        title, target = explicit[1], explicit[2]
    else:
        target = text
        title = text[1:].rsplit(".", 1)[-1] if text.startswith("~") else text.lstrip(".")
    target = target.lstrip("~")
    identifier = _full_path(obj, target)
    return f'<autoref identifier="{html.escape(identifier)}" optional><code>{html.escape(title)}</code></autoref>'


def _field_description(attr: griffe.Attribute) -> str | None:
    """A pydantic field's ``Field(..., description=...)`` text (an f-string's names looked up among its
    module's string constants), or ``None``."""
    if not isinstance(attr.value, griffe.ExprCall) or not str(attr.value.function).endswith("Field"):
        return None
    try:
        call = ast.parse(str(attr.value), mode="eval").body
    except SyntaxError:
        return None
    node = next((k.value for k in getattr(call, "keywords", []) if k.arg == "description"), None)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if not isinstance(node, ast.JoinedStr):
        return None
    parts = []
    for part in node.values:
        if isinstance(part, ast.Constant):
            parts.append(str(part.value))
            continue
        name = ast.unparse(part.value)
        constant = attr.module.members.get(name)
        value = getattr(constant, "value", None)
        parts.append(value.strip("'\"") if isinstance(value, str) else f"{{{name}}}")
    return "".join(parts)


def _plain_field(attr: griffe.Attribute) -> None:
    """Show a pydantic field as ``name: type = default``: the ``Field(...)`` call as its default, and an
    ``Annotated[type, ...]`` as its type."""
    call = ast.parse(str(attr.value), mode="eval").body
    default = next(
        (k.value for k in call.keywords if k.arg == "default"), call.args[0] if call.args else None
    )
    if default is not None and not (isinstance(default, ast.Constant) and default.value is Ellipsis):
        attr.value = ast.unparse(default)
    else:
        attr.value = None
    if attr.annotation is not None:
        annotation = ast.parse(str(attr.annotation), mode="eval").body
        if isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value).endswith("Annotated"):
            inner = annotation.slice.elts[0] if isinstance(annotation.slice, ast.Tuple) else annotation.slice
            attr.annotation = ast.unparse(inner)


def _options_table(options: Any) -> str:
    """A Markdown table of an objective's options model: key, default, description."""
    rows = ["| Option | Default | Description |", "|---|---|---|"]
    for name, field in options.model_fields.items():
        default = field.get_default(call_default_factory=True)
        shown = "null" if default is None else str(default).lower() if isinstance(default, bool) else default
        description = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{name}` | `{shown}` | {description} |")
    return "\n".join(rows)


class ProtoembedDocstrings(griffe.Extension):
    """Sphinx roles -> cross-references, reST ``::`` -> Markdown, a blank line above each section; each
    registered objective's options as a table."""

    def __init__(self) -> None:
        from protoembed.objectives.registry import REGISTRY  # no torch: the registry is a table

        #: the class's full path -> (its registry name, its options model)
        self.objectives = {
            entry.target.replace(":", "."): (name, entry.options) for name, entry in REGISTRY.items()
        }

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring (run once the whole package is loaded, so names resolve)."""
        if obj.is_alias:
            return
        if obj.is_attribute and obj.docstring is None and obj.parent is not None and obj.parent.is_class:
            description = _field_description(obj)  # a pydantic field: its description is its docstring
            if description:
                obj.docstring = griffe.Docstring(description, parent=obj)
                _plain_field(obj)
            return
        if obj.docstring is None:
            return
        docstring = obj.docstring
        value = ROLE.sub(lambda match: _link(obj, match), docstring.value)
        docstring.value = SECTION.sub("\n\n", LITERAL.sub(_literal, value))
        if obj.path in self.objectives and "Registered as" not in docstring.value:
            name, options = self.objectives[obj.path]
            docstring.value += (
                f"\n\nRegistered as `{name}` (a config's `objective: {{name: {name}}}`). Its options, the "
                "other keys of `objective:`:\n\n" + _options_table(options)
            )

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """The package's own docstring (``on_object`` runs for the objects inside it)."""
        self.on_object(obj=pkg)
