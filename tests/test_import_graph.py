"""The package's import graph has no cycle (beyond the allowances named below).

Every module of ``src/protoembed`` is parsed with :mod:`ast` (nothing is imported). Two graphs:

* import time: an edge A -> B is an import of package module B that runs when A is imported (module
  level, module-level ``if`` / ``try`` / ``with`` blocks, class bodies); it must have no cycle at all;
* every import: also the imports deferred into functions (a module reaching back up by a function-level
  import is still a circle between the two); its cycles must be among :data:`KNOWN_CYCLES`.

Imports under ``if TYPE_CHECKING:`` are never edges. ``from protoembed.x import y`` is an edge to
``protoembed.x.y`` when that is a module, else to ``protoembed.x``. Cycles are reported as the strongly
connected components of a graph (Tarjan).

The layers (:data:`LAYERS`, lowest first) and the imports allowed between them (:data:`ALLOWED`) are
docs/layout.md's table, checked on the every-import graph: an arrow from a layer to one it may not import
fails, deferred or not. The same page's tree names every module of the package, and names nothing else.

Run ``python tests/test_import_graph.py`` to print every component with one shortest cycle through it,
and every arrow between layers that the table does not allow.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from collections import deque
from pathlib import Path

import pytest

PACKAGE = "protoembed"
SRC = Path(__file__).resolve().parents[1] / "src" / PACKAGE

#: Cycles of the every-import graph known and not yet removed (each an exact strongly connected
#: component). A new cycle, or a known one that takes in another module, fails the test; remove an entry
#: when its cycle is gone.
KNOWN_CYCLES: list[frozenset[str]] = []

#: The code layout's page: its table is the layers' one home (read by :func:`layer_table`), and its tree
#: names every module (:func:`layout_tree`).
LAYOUT_DOC = SRC.parents[1] / "docs" / "layout.md"
#: A row of the layer table: ``| layer | `folder/`, `module.py` | layer, layer |`` (``nothing``: none).
_ROW = re.compile(r"^\| *(\w+) *\| *((?:`[^`]+`(?:, *)?)+) *\| *([\w, ]+?) *\|$")
#: An item of the tree: ``- `name/`: ...`` or ``- `a.py`, `b.py`: ...``, nested four spaces a level.
_ITEM = re.compile(r"^( *)- ((?:`[^`]+`(?:, *)?)+):")


def _names(cell: str) -> list[str]:
    """The backticked names of a table cell or a tree item, in order."""
    return re.findall(r"`([^`]+)`", cell)


def _member(name: str) -> str:
    """A layer table's entry as a top-level member name: ``model/`` -> ``model``, ``cli.py`` -> ``cli``,
    ``__init__.py`` -> ``""`` (the package itself)."""
    stem = name.rstrip("/").removesuffix(".py")
    return "" if stem == "__init__" else stem


def layer_table(text: str) -> tuple[dict[str, tuple[str, ...]], dict[str, set[str]]]:
    """docs/layout.md's layer table: (layer -> the top-level members it holds, lowest first; layer -> the
    layers it may import besides its own)."""
    layers: dict[str, tuple[str, ...]] = {}
    allowed: dict[str, set[str]] = {}
    for line in text.splitlines():
        row = _ROW.match(line.strip())
        if row and row[1] != "layer":
            layers[row[1]] = tuple(_member(name) for name in _names(row[2]))
            allowed[row[1]] = set() if row[3] == "nothing" else {n.strip() for n in row[3].split(",")}
    return layers, allowed


#: Layer -> the package's top-level members it holds (a subpackage with everything in it; ``""``: the
#: package's ``__init__``), lowest first, and layer -> the layers its modules may import besides its own,
#: deferred imports included: both from docs/layout.md's table, where each layer is described.
LAYERS, ALLOWED = layer_table(LAYOUT_DOC.read_text(encoding="utf-8"))


def module_names(root: Path = SRC) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under ``root`` (packages by their ``__init__``)."""
    names = {}
    for file in sorted(root.rglob("*.py")):
        parts = (PACKAGE, *file.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = file
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(body: list[ast.stmt], deferred: bool = False):
    """The statements of ``body`` that run at import time, recursing into compound statements and class
    bodies; with ``deferred`` also those in function bodies. Never those under ``if TYPE_CHECKING:``."""
    for node in body:
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not deferred:
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _statements(node.orelse, deferred)
            continue
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(node, field, None) or []:
                block = child.body if isinstance(child, (ast.ExceptHandler, ast.match_case)) else [child]
                yield from _statements(block, deferred)


def imports_of(name: str, file: Path, modules: dict[str, Path], deferred: bool = False) -> set[str]:
    """The package modules that module ``name`` (source ``file``) imports at import time (with
    ``deferred``: also inside its functions)."""
    is_package = file.name == "__init__.py"
    targets: set[str] = set()
    for node in _statements(ast.parse(file.read_text(encoding="utf-8")).body, deferred):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                targets.add(full if full in modules else base)
    return {t for t in targets if t in modules and t != name}


def import_graph(root: Path = SRC, deferred: bool = False) -> dict[str, set[str]]:
    """Module -> the package modules it imports at import time (``deferred``: or inside a function)."""
    modules = module_names(root)
    return {name: imports_of(name, file, modules, deferred) for name, file in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found, key=lambda c: sorted(c))


def shortest_cycle(graph: dict[str, set[str]], component: frozenset[str]) -> list[str]:
    """One shortest cycle through the alphabetically first module of ``component`` (breadth first)."""
    start = min(component)
    parent: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for succ in sorted(graph[node] & component):
            if succ == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [*reversed(path), start]
            if succ not in parent:
                parent[succ] = node
                queue.append(succ)
    raise AssertionError(f"{start} is on no cycle")


def describe(graph: dict[str, set[str]], found: list[frozenset[str]]) -> list[str]:
    """One line per component: its modules, then one shortest cycle through it."""
    return [f"{', '.join(sorted(c))}\n    e.g. {' -> '.join(shortest_cycle(graph, c))}" for c in found]


def test_edges_of_a_probe_module(tmp_path):
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import io\n"
        "from protoembed.data import paths, NAME\n"
        "if TYPE_CHECKING:\n"
        "    import protoembed.cli\n"
        "try:\n"
        "    import protoembed.inputs\n"
        "except ImportError:\n"
        "    pass\n"
        "class A:\n"
        "    from protoembed import version\n"
        "def f():\n"
        "    import protoembed.errors\n"
    )
    names = ["cli", "inputs", "errors", "io", "version", "data", "data.paths"]
    modules = {f"protoembed.{n}": Path() for n in names}
    (tmp_path / "probe.py").write_text(source, encoding="utf-8")
    at_import = {
        "protoembed.io",
        "protoembed.data.paths",
        "protoembed.data",
        "protoembed.inputs",
        "protoembed.version",
    }
    assert imports_of("protoembed.probe", tmp_path / "probe.py", modules) == at_import
    deferred = imports_of("protoembed.probe", tmp_path / "probe.py", modules, deferred=True)
    assert deferred == at_import | {"protoembed.errors"}


def test_cycles_on_a_known_graph():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"f"}, "f": {"e"}}
    assert cycles(graph) == [frozenset("abc"), frozenset("ef")]
    assert shortest_cycle(graph, frozenset("abc")) == ["a", "b", "c", "a"]


def test_no_import_time_cycle():
    graph = import_graph()
    assert not cycles(graph), "import cycles:\n" + "\n".join(describe(graph, cycles(graph)))


def test_no_new_cycle_with_deferred_imports():
    graph = import_graph(deferred=True)
    new = [c for c in cycles(graph) if c not in KNOWN_CYCLES]
    assert not new, "import cycles (counting imports inside functions):\n" + "\n".join(describe(graph, new))


def layer_of(module: str) -> str:
    """The layer of a package module (``protoembed.data.download.fetch`` -> ``data``)."""
    top = module.split(".")[1] if "." in module else ""
    for layer, members in LAYERS.items():
        if top in members:
            return layer
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a layer to one :data:`ALLOWED` does not give it, as ``a (layer) -> b (layer)``."""
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            a, b = layer_of(module), layer_of(target)
            if a != b and b not in ALLOWED[a]:
                found.append(f"{module} ({a}) -> {target} ({b})")
    return found


def test_every_module_is_in_a_layer_and_imports_only_what_its_layer_may():
    graph = import_graph(deferred=True)
    assert not upward(graph), "imports the layer table does not allow:\n" + "\n".join(upward(graph))


def test_the_layer_check_sees_an_arrow_back_up():
    graph = {"protoembed.data.sts": {"protoembed.evaluation.tasks"}, "protoembed.evaluation.tasks": set()}
    assert upward(graph) == ["protoembed.data.sts (data) -> protoembed.evaluation.tasks (evaluation)"]
    assert (
        upward({"protoembed.evaluation.tasks": {"protoembed.data.sts"}, "protoembed.data.sts": set()}) == []
    )


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_loading_a_model_never_imports_the_training_layer():
    # a saved model's modules (heads, the kept training MLP) and the loader sit below objectives/ and
    # training/: no arrow points up from them, deferred imports counted
    graph = import_graph(deferred=True)
    for start in (
        "protoembed.model.loading",
        "protoembed.model.heads.mlp",
        "protoembed.model.heads.cnn",
        "protoembed.model.heads.mask",
    ):
        upward = sorted(
            m
            for m in reachable(graph, start)
            if m.startswith(("protoembed.objectives", "protoembed.training"))
        )
        assert not upward, f"{start} imports {upward}"


def layout_tree(text: str) -> tuple[list[str], list[str]]:
    """docs/layout.md's two lists of paths: the items under its ``src/protoembed/`` heading (relative to
    the package: ``model/``, ``model/heads/mask.py``; an item's path is its parents' joined with its own)
    and those under its "Around the package" heading (relative to the repository)."""
    package: list[str] = []
    around: list[str] = []
    section: list[str] | None = None
    parents: list[str] = []
    for line in text.splitlines():
        if line.startswith("## "):
            section = package if "`src/protoembed/`" in line else around if "Around" in line else None
            parents = []
            continue
        item = _ITEM.match(line)
        if section is None or not item:
            continue
        depth = len(item[1]) // 4
        del parents[depth:]
        names = _names(item[2])
        section += ["".join(parents) + name for name in names]
        parents.append(names[-1] if names[-1].endswith("/") else "")
    return package, around


def _documented(module: str) -> str:
    """How docs/layout.md's tree names a module: ``protoembed.model.heads`` -> ``model/heads/``,
    ``protoembed.model.loading`` -> ``model/loading.py``, ``protoembed`` -> ``__init__.py``."""
    file = module_names()[module]
    relative = file.relative_to(SRC)
    if file.name == "__init__.py":
        return "__init__.py" if relative.parent == Path() else f"{relative.parent.as_posix()}/"
    return relative.as_posix()


def test_the_layout_page_names_every_module_and_nothing_else():
    package, around = layout_tree(LAYOUT_DOC.read_text(encoding="utf-8"))
    assert len(package) == len(set(package)), "named twice: " + ", ".join(
        sorted({p for p in package if package.count(p) > 1})
    )
    missing = sorted({_documented(m) for m in module_names()} - set(package))
    assert not missing, "modules docs/layout.md does not name: " + ", ".join(missing)
    absent = [p for p in package if not (SRC / p).exists()] + [
        p for p in around if not (SRC.parents[1] / p).exists()
    ]
    assert not absent, "docs/layout.md names what does not exist: " + ", ".join(absent)
    assert around, "docs/layout.md has no 'Around the package' list"


def test_every_folder_of_modules_is_a_regular_package_git_tracks():
    """A folder of modules without ``__init__.py`` imports as a namespace package, which the docs'
    reference (griffe) cannot read; a package file git ignores (``.gitignore``'s ``outputs/``) would be
    missing from a clone."""
    folders = {file.parent for file in SRC.rglob("*.py") if "__pycache__" not in file.parts}
    bare = sorted(str(f.relative_to(SRC)) for f in folders if not (f / "__init__.py").is_file())
    assert not bare, f"folders of modules without __init__.py: {bare}"
    git = shutil.which("git")
    if git is None or not (SRC.parents[1] / ".git").exists():
        pytest.skip("not a git checkout")
    files = [str(f) for f in sorted(SRC.rglob("*.py")) if "__pycache__" not in f.parts]
    done = subprocess.run(
        [git, "check-ignore", "--no-index", *files], cwd=SRC, capture_output=True, text=True
    )
    assert done.returncode == 1, f"package files .gitignore leaves out:\n{done.stdout}"


def test_the_layer_table_names_every_top_level_member_once():
    held = [member for members in LAYERS.values() for member in members]
    assert len(held) == len(set(held)), held
    top = {name.split(".")[1] if "." in name else "" for name in module_names()}
    assert top == set(held), f"in no layer: {sorted(top - set(held))}; not there: {sorted(set(held) - top)}"
    for layer, imports in ALLOWED.items():
        lower = list(LAYERS)[: list(LAYERS).index(layer)]
        assert imports <= set(lower), f"{layer} may import a layer above it: {sorted(imports - set(lower))}"


def test_the_layout_readers_on_a_sample():
    text = (
        "| layer | holds | imports from |\n|---|---|---|\n| core | `core/` | nothing |\n"
        "| top | `__init__.py`, `cli.py` | core |\n\n## The package: `src/protoembed/`\n\n"
        "- `core/`: the core\n    - `errors.py`: errors\n      (a second line)\n- `a.py`, `b.py`: two\n"
        "## Around the package\n\n- `tests/`: tests\n"
    )
    assert layer_table(text) == ({"core": ("core",), "top": ("", "cli")}, {"core": set(), "top": {"core"}})
    assert layout_tree(text) == (["core/", "core/errors.py", "a.py", "b.py"], ["tests/"])


def report() -> int:
    """Print both graphs' cycles; 1 if any is not allowed."""
    failed = False
    for deferred in (False, True):
        graph = import_graph(deferred=deferred)
        found = cycles(graph)
        kind = "every import (deferred too)" if deferred else "import time"
        print(f"{kind}: {len(graph)} modules, {sum(map(len, graph.values()))} edges, {len(found)} cycles")
        for component, line in zip(found, describe(graph, found)):
            allowed = deferred and component in KNOWN_CYCLES
            failed |= not allowed
            print(("  known: " if allowed else "  NEW: ") + line)
    arrows = upward(import_graph(deferred=True))
    print(f"imports the layer table does not allow: {len(arrows)}")
    for arrow in arrows:
        print(f"  {arrow}")
    return int(failed or bool(arrows))


if __name__ == "__main__":
    sys.exit(report())
