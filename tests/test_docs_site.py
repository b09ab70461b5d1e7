"""The documentation site (mkdocs.yml) builds strictly, and its generated references are complete: every
command and every flag of the parser on its CLI page, the public functions' docstrings on the API pages."""

from __future__ import annotations

import argparse
import ast
import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from protoembed.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as ``make docs`` builds it (``--strict``: any warning fails) into a temporary folder."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def _article(path: Path) -> str:
    """A built page's content (the article, without the nav), as HTML."""
    page = path.read_text(encoding="utf-8")
    return page[page.index("<article") : page.index("</article>")]


def _text(markup: str) -> str:
    """HTML as its text, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", markup)).split())


def _parsers() -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every parser of the command line with the words after ``protoembed`` that reach it."""
    found = []
    todo: list[tuple[tuple[str, ...], argparse.ArgumentParser]] = [((), build_parser())]
    while todo:
        words, parser = todo.pop(0)
        found.append((words, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += [((*words, name), child) for name, child in action.choices.items()]
    return found


def test_every_command_and_flag_is_on_its_cli_page(site: Path) -> None:
    parsers = _parsers()
    assert len(parsers) > len(build_parser()._actions)  # the walk reached the sub-commands
    for words, parser in parsers:
        page = site / "cli" / Path(*words) / "index.html"
        article = _article(page)
        assert f"protoembed {' '.join(words)}".strip() in _text(re.search(r"<h1.*?</h1>", article).group())
        for action in parser._actions:
            if action.help is argparse.SUPPRESS:
                continue
            if isinstance(action, argparse._SubParsersAction):
                for name in action.choices:  # each sub-command linked from its group's page
                    assert f'href="{name}/"' in article, (page, name)
                continue
            # a positional by the name --help shows it under (its metavar, choices or dest)
            names = action.option_strings or [parser._get_formatter()._format_action_invocation(action)]
            for name in names:
                # a flag's cell: <code>--flag</code> or <code>--flag METAVAR</code>
                assert re.search(rf"<code>{re.escape(html.escape(str(name)))}[ <]", article), (page, name)


def _first_line(path: str, function: str) -> str:
    """The first line of ``function``'s docstring in ``src/path``, as the page shows it: a Sphinx role as
    its name (``~``: the last part), ````code```` as its text."""
    tree = ast.parse((ROOT / "src" / path).read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function)
    line = ast.get_docstring(node).splitlines()[0]
    line = re.sub(r":\w+:`~[\w.]*?(\w+)`", r"\1", line)
    line = re.sub(r":\w+:`([^`]+)`", r"\1", line)
    return " ".join(line.replace("`", "").split())


@pytest.mark.parametrize(
    ("source", "function"),
    [("protoembed/model/loading.py", "load"), ("protoembed/corpus/encoding.py", "encode_corpus")],
)
def test_the_api_page_shows_the_docstrings(site: Path, source: str, function: str) -> None:
    article = _article(site / "reference" / "api" / "index.html")
    assert re.search(rf'<h[23] id="protoembed\.[\w.]*\b{function}"', article), function
    assert _first_line(source, function) in _text(article)


def test_the_configs_page_is_the_committed_readme(site: Path) -> None:
    readme = (ROOT / "configs" / "README.md").read_text(encoding="utf-8")
    article = _text(_article(site / "reference" / "configs" / "index.html"))
    assert readme.splitlines()[0].lstrip("# ") in article
    assert "model: default" in article  # a line of the schema block


def test_screenshots_without_chromium_say_what_to_install(tmp_path: Path, capsys) -> None:
    """``make docs-screenshots`` where no Chromium is installed: one line naming what to install, exit 2."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("screenshots", ROOT / "docs" / "hooks" / "screenshots.py")
    screenshots = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(screenshots)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("<html></html>", encoding="utf-8")
    missing = tmp_path / "no-chromium"
    argv = ["--site", str(tmp_path / "site"), "--out", str(tmp_path / "png"), "--chromium", str(missing)]
    assert screenshots.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(missing) in err
    assert "apt-get install chromium" in err and "playwright install chromium" in err
    assert not (tmp_path / "png").exists()
