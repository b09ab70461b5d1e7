"""Reading results JSON for the report: which suite a file holds, which model (label) it belongs to,
checks of its numbers, and its table: one table never mixes protocols.

A results file is what ``protoembed eval <suite> --output`` or ``protoembed train`` (``results.json`` in
the run folder) writes, or an analysis JSON (``protoembed analyze ... --output``), whose figure the report
links. A results file names its suite (``"suite"``, one of :data:`protoembed.evaluation.suite.SUITES`).
A folder stands for every results JSON directly inside it (other JSON files, such as a study's
``study_time.json``, are skipped; a ``--dims`` file beside other results is left out, shown when named).

Labels: from the folder name when a folder was given, else from the file's ``model`` field (its last
path part, or the part before ``best`` for a trained run's kept model), else from the file's folder or
name; a trailing ``-seed<N>`` / ``_seed<N>`` is dropped, so the seeds of one method share a label and are
shown as mean ± std. ``--label`` overrides: one label per input in order, or ``OLD=NEW`` renames. A
``protoembed eval --dims`` file holds a result per vector width: each is a row of its own, its label
followed by `` (<width> dims)``.

Checks (a one-line error naming the file, the task and the field): every task of a results file has
the fields the page reads (:attr:`protoembed.evaluation.suite.ReportLayout.read_keys`); every per-task
field is a number or a list of numbers, and ``avg`` a number (``null`` is how ``eval`` writes a NaN
score; the page shows it as ``n/a``); the draws the page pools are numbers.

Tables: results of one suite must share its protocol record, except for the keys that say what computed
the vectors (:data:`protoembed.evaluation.suite.ENCODING`: runtime, precision): each combination of
those gets its own table (:class:`Table`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protoembed.core.errors import ProtoembedError
from protoembed.evaluation.suite import ENCODING
from protoembed.evaluation.suite import SUITES as DECLARED
from protoembed.outputs.run_layout import BEST_DIR, RESULTS_FILE

logger = logging.getLogger(__name__)

_SEED_SUFFIX = re.compile(r"[-_]seed\d+$")


@dataclass
class Result:
    """One results file: where it came from, its suite (or ``analysis``), its model's label, its data."""

    path: Path
    suite: str
    label: str
    data: dict[str, Any]


def suite_of(data: Any, path: Path) -> str:
    """The suite a results file records (``"suite"``), or ``analysis`` for an analysis JSON. A one-line
    error for anything else."""
    if isinstance(data, dict) and "analysis" in data and "figure" in data:
        return "analysis"
    tasks = data.get("tasks") if isinstance(data, dict) else None
    if not (isinstance(tasks, dict) and tasks and all(isinstance(t, dict) for t in tasks.values())):
        raise _not_results(path)
    recorded = data.get("suite")
    if recorded is None:
        raise ProtoembedError(f'{path}: no "suite"; expected one of: {", ".join(DECLARED)}')
    if not isinstance(recorded, str) or recorded not in DECLARED:
        raise ProtoembedError(f"{path}: {DECLARED.unknown(recorded)}")
    return recorded


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_fields(data: dict[str, Any], path: Path, suite: str) -> None:
    """The checks of a ``suite`` results file's numbers (module docstring); a one-line error naming
    ``path``, the task and the field, and what was expected, for the first that fails."""
    avg = data.get("avg")
    if avg is not None and not _is_number(avg):
        raise ProtoembedError(f'{path}: "avg" is {_shown(avg)}; expected a number')
    layout = DECLARED[suite].report
    for task, record in data["tasks"].items():
        where = f"{path}: {suite} task {task}:"
        for key in layout.read_keys:
            if key not in record:
                what = "a list of numbers" if key == layout.pooled else "a number"
                raise ProtoembedError(
                    f'{where} no "{key}"; expected {what} (as protoembed eval {suite} --output writes)'
                )
        for key, value in record.items():
            if key == layout.pooled:
                if not (isinstance(value, list) and value and all(map(_is_number, value))):
                    raise ProtoembedError(f'{where} "{key}" is {_shown(value)}; expected a list of numbers')
            elif key in layout.read_keys:
                if value is not None and not _is_number(value):
                    raise ProtoembedError(f'{where} "{key}" is {_shown(value)}; expected a number')
            elif not (value is None or _is_number(value) or _is_numbers(value)):
                raise ProtoembedError(
                    f'{where} "{key}" is {_shown(value)}; expected a number or a list of numbers'
                )


def _is_numbers(value: Any) -> bool:
    return isinstance(value, list) and all(v is None or _is_number(v) for v in value)


def _not_results(path: Path) -> ProtoembedError:
    return ProtoembedError(
        f"{path}: not a protoembed results JSON (expected per-task results of a suite: "
        f"{', '.join(DECLARED)}; or an analysis JSON)"
    )


def protocol(result: Result) -> dict[str, Any]:
    """What must be equal for two results to share a table: the suite's protocol record of the file
    (:attr:`protoembed.evaluation.suite.ReportLayout.protocol`)."""
    return DECLARED[result.suite].report.protocol(result.data)


def same_protocol(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two protocol records agree: every key equal, except that per-task records (dicts, such
    as transfer's ``C_grid``) need only agree on the tasks both have."""
    if a.keys() != b.keys():
        return False
    for key, value in a.items():
        other = b[key]
        if isinstance(value, dict) and isinstance(other, dict):
            if any(value[t] != other[t] for t in value.keys() & other.keys()):
                return False
        elif value != other:
            return False
    return True


def default_label(path: Path, data: dict[str, Any], folder: Path | None) -> str:
    """The label of a results file (module docstring), without its ``-seed<N>`` suffix."""
    model = data.get("model")
    if folder is not None:
        name = folder.name
    elif isinstance(model, str) and model:
        parts = Path(model.rstrip("/"))
        name = parts.parent.name if parts.name == BEST_DIR and parts.parent.name else parts.name
    elif path.name == RESULTS_FILE:
        name = path.parent.name
    else:
        name = path.stem
    return _SEED_SUFFIX.sub("", name) or name


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise ProtoembedError(f"cannot read {path}: {err}") from None
    except json.JSONDecodeError as err:
        raise ProtoembedError(f"{path}: invalid JSON ({err.msg} at line {err.lineno})") from None


def by_width(data: Any) -> list[tuple[str | None, Any]]:
    """The results inside one file's data: ``(width, result)`` for each width of an ``eval --dims`` file
    (``{"suite", "dims": {"384": result, ...}}``), else ``[(None, data)]``."""
    dims = data.get("dims") if isinstance(data, dict) and "tasks" not in data else None
    if isinstance(dims, dict) and dims:
        return list(dims.items())
    return [(None, data)]


def width_label(label: str, width: str | None) -> str:
    """A result's label on the page: a ``--dims`` file's widths each get their own row (``label (128
    dims)``)."""
    return label if width is None else f"{label} ({width} dims)"


def _expand(item: Path) -> list[tuple[Path, Any, Path | None]]:
    """(file, its data, the folder given or ``None``) for one input path."""
    if item.is_dir():
        found = []
        widths = []  # --dims files: the folder's results only where it holds no other
        for path in sorted(item.glob("*.json")):
            data = _read(path)
            try:
                suite_of(by_width(data)[0][1], path)
            except ProtoembedError:
                logger.debug("skipping %s: not a results JSON", path)
                continue
            (widths if isinstance(data, dict) and "dims" in data else found).append((path, data, item))
        found = found or widths
        if not found:
            raise ProtoembedError(f"{item}: no results JSON inside (e.g. a run folder's results.json)")
        return found
    if not item.is_file():
        raise ProtoembedError(f"{item}: no such results file or folder")
    data = _read(item)
    if not isinstance(data, dict):
        shown = {list: "an array", type(None): "null"}.get(type(data), f"a JSON {type(data).__name__}")
        raise ProtoembedError(
            f"{item}: expected a JSON object (a protoembed results file, e.g. from eval --output), got {shown}"
        )
    return [(item, data, None)]


def _labels(defaults: list[str], inputs: list[int], overrides: Sequence[str], n_inputs: int) -> list[str]:
    """Apply ``--label`` values to the default labels (``inputs[i]``: which input file ``i`` came from)."""
    if not overrides:
        return defaults
    renames = [o for o in overrides if "=" in o]
    if renames and len(renames) != len(overrides):
        raise ProtoembedError("--label: give either one label per input or OLD=NEW renames, not both")
    if renames:
        mapping = dict(o.split("=", 1) for o in renames)
        unknown = [old for old in mapping if old not in defaults]
        if unknown:
            raise ProtoembedError(f"--label {unknown[0]}=...: no input has the label {unknown[0]!r}")
        return [mapping.get(label, label) for label in defaults]
    if len(overrides) != n_inputs:
        raise ProtoembedError(
            f"--label given {len(overrides)} times for {n_inputs} inputs; give one per input"
        )
    return [overrides[i] for i in inputs]


def load_results(inputs: Sequence[str | Path], labels: Sequence[str] = ()) -> list[Result]:
    """Read every input (files and folders, in order; a file given twice counts once) into results."""
    files, seen, origin = [], set(), []
    for n, item in enumerate(inputs):
        for path, whole, folder in _expand(Path(item)):
            for width, data in by_width(whole):  # an eval --dims file: a result per width
                key = (path.resolve(), width)
                if key in seen:
                    continue
                seen.add(key)
                files.append((path, data, folder, width))
                origin.append(n)
    defaults = [default_label(path, data, folder) for path, data, folder, _ in files]
    chosen = _labels(defaults, origin, labels, len(inputs))
    results = [
        Result(p, suite_of(d, p), width_label(label, width), d)
        for (p, d, _, width), label in zip(files, chosen)
    ]
    for result in results:
        if result.suite != "analysis":
            check_fields(result.data, result.path, result.suite)
    return results


@dataclass
class Table:
    """One table of the page (with its ablation section, figure and summary column): a suite's results
    of one protocol record (``protocol``: its first file's), ``{label: [results]}`` in the order given."""

    suite: str
    protocol: dict[str, Any]
    groups: dict[str, list[Result]]


def by_table(results: Sequence[Result]) -> list[Table]:
    """The tables of ``results`` (analysis JSON left out) in the page's order (the paper's), a suite's
    tables in order of first appearance: one per combination of the :data:`ENCODING` keys, after checking
    that every suite's files agree on the rest of their protocol record (else a one-line error naming
    both files)."""
    found: dict[str, list[Table]] = {}
    for result in results:
        if result.suite == "analysis":
            continue
        record = protocol(result)
        tables = found.setdefault(result.suite, [])
        if tables and not same_protocol(_rest(record), _rest(tables[0].protocol)):
            first = next(iter(tables[0].groups.values()))[0]
            raise ProtoembedError(
                f"{result.path}: {result.suite} results of protocol {_show(record)} cannot share a "
                f"table with {first.path} ({_show(tables[0].protocol)}); only another runtime or precision "
                "gets a table of its own on the page"
            )
        encoding = [record.get(key) for key in ENCODING]
        table = next((t for t in tables if [t.protocol.get(k) for k in ENCODING] == encoding), None)
        if table is None:
            table = Table(result.suite, record, {})
            tables.append(table)
        table.groups.setdefault(result.label, []).append(result)
    order = sorted(DECLARED, key=lambda name: DECLARED[name].report.page_order)  # the paper's table order
    return [table for suite in order for table in found.get(suite, [])]


def _rest(record: dict[str, Any]) -> dict[str, Any]:
    """A protocol record less its :data:`ENCODING` keys."""
    return {k: v for k, v in record.items() if k not in ENCODING}


def _show(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"))
