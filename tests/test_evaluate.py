"""``protoembed.evaluate`` returns exactly the JSON ``protoembed eval`` writes; a task is one entry of
:data:`protoembed.evaluation.tasks.TASKS`, which eval, the report and ``data download --for`` all read;
bad task names, suites and options are one-line errors that name the value and the known ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

import protoembed
from protoembed.cli import main
from protoembed.core.errors import ProtoembedError
from protoembed.data.download.registry import DATASETS, Dataset, Source
from protoembed.evaluation.tasks import TASKS, get_task, markdown, pairs_file_task
from protoembed.report import build_report, load_results
from sts_toy import ROWS, write_pairs


def _cli(argv: list[str], out: Path) -> dict[str, Any]:
    assert main([*argv, "--output", str(out)]) == 0
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def tiny(tiny_model_dirs: dict[str, Path]) -> str:
    return str(tiny_model_dirs["bert"])


def test_evaluate_returns_what_the_command_writes(tiny: str, data_dir: Path, tmp_path: Path) -> None:
    got = protoembed.evaluate(tiny, tasks=["STS-B", "sick-r", "Tweet"], data_dir=str(data_dir), runs=2)
    assert list(got) == ["sts", "clustering"]
    base = ["--model", tiny, "--data-dir", str(data_dir)]
    sts = _cli(["eval", "sts", *base, "--tasks", "STS-B", "SICK-R"], tmp_path / "sts.json")
    clustering = _cli(["eval", "clustering", *base, "--tasks", "Tweet", "--runs", "2"], tmp_path / "c.json")
    assert got == {"sts": sts, "clustering": clustering}
    assert list(sts["tasks"]) == ["STSBenchmark", "SICKRelatedness"] and sts["suite"] == "sts"
    assert clustering["protocol"]["runs"] == 2
    # a task of two suites runs in the one named; the options are the command's
    fewshot = protoembed.evaluate(
        tiny, ["TREC"], suite="fewshot", data_dir=str(data_dir), shots=2, seeds=2, c=0.5
    )
    argv = ["eval", "fewshot", *base, "--tasks", "TREC", "--shots", "2", "--seeds", "2", "--C", "0.5"]
    assert fewshot == {"fewshot": _cli(argv, tmp_path / "f.json")}
    assert fewshot["fewshot"]["protocol"] == {"shots_per_class": 2, "seeds": 2, "C": 0.5}


def test_a_loaded_model_is_evaluated_as_its_folder_is(tiny: str, data_dir: Path) -> None:
    by_spec = protoembed.evaluate(tiny, "STS-B", data_dir=str(data_dir))["sts"]
    by_model = protoembed.evaluate(protoembed.load(tiny), "STS-B", data_dir=str(data_dir), name=tiny)["sts"]
    assert by_model == by_spec


def test_a_new_sts_task_is_one_entry(
    tiny: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    register_tasks: Any,
) -> None:
    source = Source("https://example.org/my-sts.tar.gz", "my_sts", "tar")
    monkeypatch.setitem(DATASETS, "my-sts", Dataset("my-sts", "My STS", "CC0", (source,), "sts"))
    task = pairs_file_task(
        "MySTS", "my-sts", {"test": "my_sts/test.tsv"}, display="My-STS", citation="Me, 2024."
    )
    register_tasks(task)
    root = tmp_path / "data"
    write_pairs(root / "my_sts" / "test.tsv", ROWS)

    # evaluated, from Python and by the command, against an independent computation
    got = protoembed.evaluate(tiny, ["my-sts"], data_dir=str(root))["sts"]
    assert got == _cli(
        ["eval", "sts", "--model", tiny, "--data-dir", str(root), "--tasks", "My-STS"], tmp_path / "r.json"
    )
    vectors = protoembed.load(tiny).encode([s for a, b, _ in ROWS for s in (a, b)], show_progress_bar=False)
    u, v = np.asarray(vectors, dtype=np.float64)[0::2], np.asarray(vectors, dtype=np.float64)[1::2]
    cosine = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    gold = [score for *_, score in ROWS]
    expected = spearmanr(cosine, gold).statistic * 100
    assert got["tasks"] == {
        "MySTS": {
            "spearman": pytest.approx(expected, abs=1e-9),
            "pearson": pytest.approx(pearsonr(cosine, gold).statistic * 100, abs=1e-9),
            "n": 6,
        }
    }
    assert got["avg"] == got["tasks"]["MySTS"]["spearman"]
    assert "| My-STS | Avg. |" in capsys.readouterr().out  # the command's table names it

    # reported under its table name
    page = build_report(load_results([tmp_path / "r.json"]), tmp_path / "report.md", figures=False)
    assert "| Model | My-STS | Avg. |" in page
    assert f"| {Path(tiny).name} | {got['avg']:.2f} | {got['avg']:.2f} |" in page

    # listed by data download --for, and named when its file is missing
    empty = tmp_path / "empty"
    assert main(["data", "download", "--for", "MySTS", "--dry-run", "--data-dir", str(empty)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert (
        line.split()[0] == "my-sts"
        and f"https://example.org/my-sts.tar.gz -> {empty / 'my_sts'} (to fetch)" in line
    )
    with pytest.raises(
        ProtoembedError, match=r"task MySTS: 'my_sts/test\.tsv' not found .*`protoembed data download my-sts`"
    ):
        protoembed.evaluate(tiny, ["MySTS"], data_dir=str(empty))
    with pytest.raises(ProtoembedError, match=r"MySTS has only a test split \(asked for 'dev'\)"):
        protoembed.evaluate(tiny, ["MySTS"], data_dir=str(root), split="dev")

    # named in a training config's test tasks (by its table name), as the built-in STS tasks are
    from protoembed.training.config import config_from_dict

    config = {
        "output_dir": str(tmp_path / "run"),
        "data": {"corpus": "c.txt"},
        "objective": {"name": "simcse"},
    }
    config["training"] = {"test_tasks": ["my-sts", "STS-B"]}
    assert config_from_dict(config).training.test_tasks == ["MySTS", "STSBenchmark"]


def test_every_task_reads_only_files_of_its_dataset() -> None:
    from protoembed.data.download.registry import get_dataset

    for task in TASKS.values():
        for variant in ("senteval", "raw") if "sts" in task.suites else ("senteval",):
            dataset = get_dataset(task.dataset_for(variant))
            for split in task.splits or ("test",):
                for path in task.files(variant, split):
                    assert any(path == t or path.startswith(t + "/") for t in dataset.targets), (
                        task.name,
                        path,
                    )


@pytest.mark.parametrize(
    ("call", "needles"),
    [
        (
            dict(tasks=["STS-C"]),
            ["unknown task 'STS-C': expected one of STS12,", "STSBenchmark (STS-B)", "GoogleNews-S"],
        ),
        (
            dict(tasks=["Tweet"], suite="sts"),
            ["unknown task 'Tweet' of suite sts: expected one of STS12,", "SICKRelatedness (SICK-R)"],
        ),
        (
            dict(tasks=["MR"], suite="bogus"),
            ["unknown suite 'bogus': expected one of sts, transfer, fewshot, clustering"],
        ),
        (
            dict(tasks=["STS-B"], shots=3),
            ["unknown option 'shots' for the suites run (sts: variant, split, cross_encoder)"],
        ),
        (dict(), ["name the tasks"]),
        (dict(tasks=[]), ["no task to evaluate"]),
    ],
)
def test_bad_names_are_one_line_errors(call: dict[str, Any], needles: list[str]) -> None:
    with pytest.raises(ProtoembedError) as err:
        protoembed.evaluate("never-loaded", **call)
    message = str(err.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message
    assert get_task("sts-b").name == "STSBenchmark"


def test_the_docs_task_list_is_the_entries() -> None:
    docs = Path(__file__).resolve().parents[1] / "docs" / "tasks.md"
    assert docs.read_text(encoding="utf-8") == markdown()  # rewrite: python -m protoembed.evaluation.tasks
    stsb = (
        "| STSBenchmark | STS-B | sts | senteval (raw: sts-raw) | train, dev, test | spearman | yes | en | Cer "
        "et al., 2017."
    )
    mr = "| MR | MR | transfer, fewshot | senteval | none (one set) | acc | yes | en | Pang and Lee, 2005."
    assert stsb in markdown() and mr in markdown()
