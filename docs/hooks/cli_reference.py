"""MkDocs hook: the CLI reference, generated from the argparse parsers at build time.

``protoembed.cli.build_parser()`` is the one home of the command line; this hook walks it and writes one
page per command (``cli/<command>.md``) and per sub-command (``cli/<group>/<command>.md``, the group's
page ``cli/<group>/index.md``), each with its usage line, its description and a table of every argument
(flags, default, help; the ``--help`` text, ``%(default)s`` expanded), plus ``cli/index.md`` (the global
flags and the commands). The pages exist only in the build (``File.generated``): nothing to commit, nothing
to go stale. The nav entry ``CLI reference: cli/index.md`` of mkdocs.yml becomes a section with them all.
"""

from __future__ import annotations

import argparse
import html
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

SRC = Path(__file__).resolve().parents[2] / "src"
if str(SRC) not in sys.path:  # document this checkout's parser, not an installed copy's
    sys.path.insert(0, str(SRC))

#: The nav entry (mkdocs.yml) that this hook turns into the CLI reference section.
NAV_TITLE = "CLI reference"
#: The folder of the generated pages, inside docs/.
FOLDER = "cli"
#: The command tree of the current build (set by on_config).
_TREE: Command


@dataclass
class Command:
    """One parser of the tree: ``words`` after ``protoembed`` (empty for the top level)."""

    words: tuple[str, ...]
    parser: argparse.ArgumentParser
    help: str = ""
    children: list[Command] = field(default_factory=list)

    @property
    def uri(self) -> str:
        """The page's path inside docs/: ``cli/index.md``, ``cli/encode.md``, ``cli/eval/index.md``..."""
        if not self.words:
            return f"{FOLDER}/index.md"
        stem = "/".join(self.words)
        return f"{FOLDER}/{stem}/index.md" if self.children else f"{FOLDER}/{stem}.md"

    @property
    def name(self) -> str:
        return " ".join(("protoembed", *self.words))


def subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    """The parser's sub-command action, if it has one."""
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def command_tree(parser: argparse.ArgumentParser, words: tuple[str, ...] = (), help: str = "") -> Command:
    """``parser`` and every sub-command below it, in the order they were added."""
    command = Command(words, parser, help)
    action = subparsers(parser)
    if action is not None:
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, child in action.choices.items():
            if child.prog.split()[-1] != name:  # an alias: documented under its command's name
                continue
            command.children.append(command_tree(child, (*words, name), helps.get(name, "")))
    return command


def walk(command: Command) -> list[Command]:
    """``command`` and its descendants, depth first."""
    return [command, *(c for child in command.children for c in walk(child))]


def documented_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments a page lists: all but the sub-command action and those hidden from ``--help``."""
    return [
        action
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction) and action.help is not argparse.SUPPRESS
    ]


def _text(text: str) -> str:
    """argparse prose as Markdown text: whitespace reflowed (as ``--help`` does), HTML and Markdown escaped."""
    text = html.escape(" ".join(text.split()), quote=False)
    return re.sub(r"([\\`*_\[\]|#])", r"\\\1", text)


def _code(text: str) -> str:
    """``text`` as inline code that is safe inside a table cell."""
    return "<code>" + html.escape(text).replace("|", "&#124;") + "</code>"


def _default(action: argparse.Action) -> str:
    """The default column: empty for switches, ``None``, ``--help`` and ``--version``."""
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS) or action.required:
        return ""
    default = action.default
    if isinstance(default, list | tuple):
        return " ".join(_code(str(item)) for item in default) if default else ""
    return _code(str(default))


def _flags(action: argparse.Action, formatter: argparse.HelpFormatter) -> str:
    """The flags column: each option string with its metavar (``-o OUT_DIR``), or a positional's name."""
    if not action.option_strings:
        return _code(formatter._format_action_invocation(action))
    if action.nargs == 0:
        return ", ".join(_code(flag) for flag in action.option_strings)
    args = formatter._format_args(action, action.dest.upper())
    return ", ".join(_code(f"{flag} {args}") for flag in action.option_strings)


def _table(actions: list[argparse.Action], formatter: argparse.HelpFormatter) -> list[str]:
    rows = ["| Argument | Default | Description |", "|---|---|---|"]
    for action in actions:
        help_text = formatter._expand_help(action) if action.help else ""
        if action.required and action.option_strings:
            help_text = f"(required) {help_text}"
        rows.append(f"| {_flags(action, formatter)} | {_default(action)} | {_text(help_text)} |")
    return rows


def page(command: Command) -> str:
    """The Markdown page of one command."""
    parser = command.parser
    formatter = parser._get_formatter()
    lines = [f"# {command.name}", ""]
    if command.help:
        lines += [_text(command.help), ""]
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    if parser.description:
        lines += [_text(parser.description), ""]
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if a in documented_actions(parser)]
        if not actions:
            continue
        title = group.title or "Arguments"
        lines += [f"## {title[0].upper()}{title[1:]}", ""]
        if group.description:
            lines += [_text(group.description), ""]
        lines += [*_table(actions, formatter), ""]
    if command.children:
        lines += ["## Commands", "", "| Command | Description |", "|---|---|"]
        for child in command.children:
            link = Path(child.uri).relative_to(Path(command.uri).parent).as_posix()
            lines.append(f"| [{_code(child.name)}]({link}) | {_text(child.help)} |")
        lines.append("")
    if parser.epilog:
        lines += [_text(parser.epilog), ""]
    return "\n".join(lines)


def build_tree() -> Command:
    """The command tree of ``protoembed.cli.build_parser()``."""
    from protoembed.cli import build_parser

    return command_tree(build_parser())


def _nav(command: Command, top: bool = False) -> Any:
    """The nav entries of ``command``'s pages: a page, or a section (its index page, then its children)."""
    title = "Overview" if top else " ".join(command.words)
    if not command.children:
        return {title: command.uri}
    entries = [command.uri, *(_nav(child) for child in command.children)]
    return entries if top else {title: entries}


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Replace the nav's ``CLI reference`` entry by a section of every generated page."""
    global _TREE
    tree = _TREE = build_tree()  # read back by on_files: one parser build per build
    for index, entry in enumerate(config.nav or []):
        if isinstance(entry, dict) and NAV_TITLE in entry:
            config.nav[index] = {NAV_TITLE: _nav(tree, top=True)}
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add one generated page per command."""
    for command in walk(_TREE):
        files.append(File.generated(config, command.uri, content=page(command)))
    return files
