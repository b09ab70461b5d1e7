"""Suites describe themselves: the eval command's sub-commands, the results files' ``"suite"`` and the
report's sections all come from :data:`protoembed.evaluation.suite.SUITES`; a results file written
before files recorded their suite is still read (by its per-task keys); a suite added by one declaration,
its tasks' entries and one registry line gets its sub-command, its results file and its report section."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from pydantic import Field

import protoembed
from protoembed.cli import build_parser, main
from protoembed.core.errors import ProtoembedError
from protoembed.evaluation.suite import SUITES, CommandLine, Inputs, ReportLayout, Suite, SuiteOptions
from protoembed.evaluation.tables import papers_row
from protoembed.evaluation.tasks import TASKS, Task, default_tasks, table_name
from protoembed.report import build_report, load_results, summary_table
from protoembed.report.results import by_table, suite_of

SRC = Path(__file__).resolve().parents[1] / "src" / "protoembed"


def _eval_choices() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub = next(a for a in top.choices["eval"]._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def test_eval_has_one_sub_command_per_declared_suite_with_its_tasks_and_names() -> None:
    choices = _eval_choices()
    assert list(choices) == ["sts", "transfer", "fewshot", "clustering", "retrieval"] == list(SUITES)
    for name, suite in SUITES.items():
        args = choices[name].parse_args(["--model", "m"])
        assert args.func.args == (suite,)
        assert args.tasks is None  # the suite's default run: its entries marked default
        assert default_tasks(name) == [t.name for t in TASKS.values() if name in t.suites and t.default]
    parse = build_parser().parse_args
    assert parse(["eval", "transfer", "--model", "m", "--tasks", "sst", "MR"]).tasks == ["SST2", "MR"]
    assert parse(["eval", "fewshot", "--model", "m", "--tasks", "SST"]).tasks == ["SST2"]
    assert parse(["eval", "sts", "--model", "m", "--tasks", "sick-r", "STS-B"]).tasks == [
        "SICKRelatedness",
        "STSBenchmark",
    ]


def test_the_table_names_are_written_once_in_the_task_entries() -> None:
    assert [table_name(t) for t in ("SST2", "STSBenchmark", "SICKRelatedness", "MR")] == [
        "SST",
        "STS-B",
        "SICK-R",
        "MR",
    ]
    written = [p.relative_to(SRC) for p in SRC.rglob("*.py") if 'display="SST"' in p.read_text("utf-8")]
    assert written == [Path("evaluation/tasks.py")]


@pytest.mark.parametrize(
    "entry",
    [
        {"spearman": 70.0, "pearson": 71.0, "n": 3},
        {"acc": 60.0, "nmi": 50.0},
        {"acc": 60.0, "seeds_acc": [59.0, 61.0]},
        {"acc": 60.0, "dev_acc": 61.0},
    ],
)
def test_the_suite_is_the_recorded_one_and_a_file_without_one_is_an_error(
    tmp_path: Path, entry: dict[str, Any]
) -> None:
    """A file's ``suite`` decides, whatever its per-task keys; a file without one names none."""
    unnamed = {"model": "m", "tasks": {"T": entry}, "avg": 60.0}
    for recorded in SUITES:
        assert suite_of({**unnamed, "suite": recorded}, tmp_path / "new.json") == recorded
    with pytest.raises(ProtoembedError, match=r"new\.json: unknown suite 'bogus': expected one of sts, "):
        suite_of({**unnamed, "suite": "bogus"}, tmp_path / "new.json")
    with pytest.raises(ProtoembedError, match=r'old\.json: no "suite"; expected one of: sts, '):
        suite_of(unnamed, tmp_path / "old.json")


def test_a_folder_skips_json_without_tasks_even_with_a_suite_key(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "study_time.json").write_text(json.dumps({"suite": "sts", "seconds": 3}), encoding="utf-8")
    result = {"suite": "transfer", "model": "m", "protocol": {}, "tasks": {"MR": {"acc": 70.0}}, "avg": 70.0}
    (run / "transfer.json").write_text(json.dumps(result), encoding="utf-8")
    (loaded,) = load_results([run])
    assert (loaded.path.name, loaded.suite, loaded.label) == ("transfer.json", "transfer", "run")


class _Embedder:
    head, runtime, precision = "mean", "torch", "fp32"
    encoder = SimpleNamespace(template=None)

    def encode(self, sentences: list[str], **_: Any) -> np.ndarray:
        return np.array([[len(s), s.count("a")] for s in sentences], dtype=np.float64)


def _toy_evaluate(inputs: Inputs, tasks: list[str], scale: float = 1.0) -> dict[str, Any]:
    texts = {"Short": ["a", "ab"], "Long": ["banana", "abracadabra", "cat"]}
    scores = {t: {"acc": float(np.asarray(inputs.encode(texts[t]))[:, 0].mean()) * scale} for t in tasks}
    return {
        "protocol": {"scale": scale},
        "tasks": scores,
        "avg": float(np.mean([r["acc"] for r in scores.values()])),
    }


def _toy_task(name: str, display: str | None = None) -> Task:
    return Task(
        name=name,
        suites=("toy",),
        dataset=None,
        files=lambda v, s: [],
        read=lambda root, v, s: None,
        display=display,
        default=True,  # the new suite's own run
    )


def _toy_table(result: dict[str, Any]) -> str:
    tasks = result["tasks"]
    return (
        "\n".join(papers_row("Toy:", list(tasks), [r["acc"] for r in tasks.values()], result["avg"])) + "\n"
    )


class ToyOptions(SuiteOptions):
    scale: float = Field(1.0, gt=0, description="multiplies the mean length")


TOY = Suite(
    name="toy",
    scores=("acc",),
    evaluate=_toy_evaluate,
    options=ToyOptions,
    format_table=_toy_table,
    command=CommandLine(
        help="length of the texts",
        description="The mean length of each task's texts, scaled.",
    ),
    report=ReportLayout(
        page_order=4,
        title="Toy (Table 4.5)",
        summary=(("acc", "Toy"),),
        protocol_line=lambda p: f"Protocol: mean length x{p['scale']}.",
    ),
)


def test_a_new_suite_is_its_declaration_and_one_registry_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], register_tasks: Any
) -> None:
    monkeypatch.setitem(SUITES, "toy", TOY)
    register_tasks(_toy_task("Short", "S"), _toy_task("Long"))
    monkeypatch.setattr(protoembed, "load", lambda spec, **_: _Embedder())
    outputs = []
    for seed, scale in ((1, 2.0), (2, 2.0)):
        out = tmp_path / f"toy-seed{seed}" / "toy.json"
        assert (
            main(
                [
                    "eval",
                    "toy",
                    "--model",
                    f"runs/toy-seed{seed}",
                    "--scale",
                    str(scale),
                    "--output",
                    str(out),
                ]
            )
            == 0
        )
        outputs.append(out)
    printed = _toy_table(json.loads(outputs[0].read_text(encoding="utf-8"))) + "\n"  # print() adds one
    assert capsys.readouterr().out == 2 * printed
    saved = json.loads(outputs[0].read_text(encoding="utf-8"))
    short, long = np.mean([1, 2]) * 2, np.mean([6, 11, 3]) * 2  # mean length x scale
    assert saved == {
        "model": "runs/toy-seed1",
        "head": "mean",
        "runtime": "torch",
        "precision": "fp32",
        "suite": "toy",
        "protocol": {"scale": 2.0},
        "tasks": {"Short": {"acc": short}, "Long": {"acc": long}},
        "avg": (short + long) / 2,
    }
    results = load_results(outputs)
    assert [(r.suite, r.label) for r in results] == [("toy", "toy"), ("toy", "toy")]
    page = build_report(results, tmp_path / "report.md", figures=False)
    assert "## Toy (Table 4.5)\n\nProtocol: mean length x2.0.\n\n| Model | S | Long | Avg. |" in page
    assert f"| toy | {short:.2f} ± 0.00 | {long:.2f} ± 0.00 | {(short + long) / 2:.2f} ± 0.00 |" in page
    assert summary_table(by_table(results)) == [
        "| Model | Toy |",
        "|---|---:|",
        f"| toy | {(short + long) / 2:.2f} ± 0.00 |",
    ]

    # the options model is the flag (help, default), the Python keyword and the check of both
    help_text = " ".join(_eval_choices()["toy"].format_help().split())
    assert "--scale SCALE multiplies the mean length (default: 1.0)" in help_text
    assert main(["eval", "toy", "--model", "m", "--scale", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "toy: scale must be a positive number, got 0.0" in err
    with pytest.raises(ProtoembedError, match=r"^toy: scale must be a positive number, got 0$"):
        protoembed.evaluate("never-loaded", ["Short"], scale=0)
    got = protoembed.evaluate(_Embedder(), ["Long"], scale=3)["toy"]  # an int is a valid float
    assert got["protocol"] == {"scale": 3.0} and got["tasks"]["Long"]["acc"] == np.mean([6, 11, 3]) * 3
