"""``protoembed report``: every table cell parsed back equals the mean (± sample std) of the results JSON
it comes from, labels and seeds, the per-suite tables share the report's code path, and bad input
(mixed suites or protocols, unknown files) gives one-line errors naming the file."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from protoembed.cli import main
from protoembed.core.errors import ProtoembedError
from protoembed.evaluation.clustering import format_clustering_table
from protoembed.evaluation.sts import format_sts_table
from protoembed.report import build_report, load_results, write_report

STS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness")
TRANSFER = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")
CLUSTERING = ("AgNews", "Tweet")
RNG = np.random.default_rng(7)


def sts_result(
    model: str, variant: str = "senteval", runtime: str | None = "torch", precision: str | None = "fp32"
) -> dict:
    """What ``protoembed eval sts --output`` writes (``runtime``/``precision`` ``None``: a file written
    before they were recorded)."""
    tasks = {t: {"spearman": RNG.uniform(60, 85), "pearson": RNG.uniform(60, 85), "n": 10} for t in STS}
    avg = float(np.mean([r["spearman"] for r in tasks.values()]))
    encoding = {k: v for k, v in (("runtime", runtime), ("precision", precision)) if v is not None}
    data = {"model": model, "head": "mean", **encoding, "suite": "sts", "variant": variant, "split": "test"}
    return {**data, "tasks": tasks, "avg": avg}


def transfer_result(model: str, folds: int = 10, tasks=TRANSFER) -> dict:
    tasks = {t: {"acc": RNG.uniform(70, 90), "dev_acc": 80.0, "C": 1.0} for t in tasks}
    grids = {t: [0.5, 32.0] if t in ("TREC", "MRPC") else [0.25, 8.0] for t in tasks}
    protocol = {"classifier": "sklearn", "folds": folds, "inner_folds": 10, "seed": 1111, "C_grid": grids}
    protocol["mrpc_features"] = "senteval"
    return {
        "model": model,
        "suite": "transfer",
        "protocol": protocol,
        "tasks": tasks,
        "avg": float(np.mean([r["acc"] for r in tasks.values()])),
    }


def clustering_result(model: str) -> dict:
    tasks = {
        t: {
            "acc": RNG.uniform(40, 80),
            "acc_std": 1.0,
            "nmi": RNG.uniform(40, 80),
            "nmi_std": 1.0,
            "n": 5,
            "classes": 2,
        }
        for t in CLUSTERING
    }
    return {
        "model": model,
        "suite": "clustering",
        "protocol": {"algorithm": "k-means", "runs": 10},
        "tasks": tasks,
        "avg": float(np.mean([r["acc"] for r in tasks.values()])),
    }


def fewshot_result(model: str) -> dict:
    tasks = {}
    for t in ("MR", "TREC"):
        seeds = RNG.uniform(50, 80, 5).tolist()
        tasks[t] = {"acc": float(np.mean(seeds)), "acc_std": float(np.std(seeds, ddof=1)), "seeds_acc": seeds}
    return {
        "model": model,
        "suite": "fewshot",
        "protocol": {"shots_per_class": 16, "seeds": 5, "C": 1.0},
        "tasks": tasks,
        "avg": 0.0,
    }


def write(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def tables(markdown: str) -> dict[str, list[dict[str, str]]]:
    """Parse every markdown table back: ``{heading or caption just above it: [{column: cell}]}``."""
    found, lines, title = {}, markdown.splitlines(), None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## ") or line.endswith(":"):
            title = line.lstrip("# ").rstrip(":")
        if line.startswith("| ") and i + 1 < len(lines) and lines[i + 1].startswith("|--"):
            header = [c.strip() for c in line.strip("|").split("|")]
            rows, i = [], i + 2
            while i < len(lines) and lines[i].startswith("| "):
                rows.append(dict(zip(header, [c.strip() for c in lines[i].strip("|").split("|")])))
                i += 1
            found[title if title not in found else f"{title} ({len(found)})"] = rows
            continue
        i += 1
    return found


def cell(values: list[float]) -> str:
    """What the report must show for a model's runs: mean, and ± sample std from two runs on."""
    mean = f"{np.mean(values):.2f}"
    return mean if len(values) == 1 else f"{mean} ± {np.std(values, ddof=1):.2f}"


@pytest.fixture()
def inputs(tmp_path):
    """Run folders of two seeds of ConPVP (train's results.json) and an ablation; eval files of a baseline."""
    runs = tmp_path / "runs"
    files = {
        "conpvp": [
            write(
                runs / f"conpvp-seed{s}" / "results.json", sts_result(str(runs / f"conpvp-seed{s}" / "best"))
            )
            for s in (1, 2)
        ],
        "no-neg": [write(runs / "no-neg-seed1" / "results.json", sts_result("x/no-neg-seed1/best"))],
        "base-sts": write(tmp_path / "base" / "sts.json", sts_result("default")),
        "base-transfer": write(tmp_path / "base" / "transfer.json", transfer_result("default")),
        "conpvp-transfer": [
            write(runs / f"conpvp-seed{s}" / "transfer.json", transfer_result(f"runs/conpvp-seed{s}/best"))
            for s in (1, 2)
        ],
        "clustering": [
            write(tmp_path / f"clu{s}.json", clustering_result("runs/simcse-seed" + s + "/best"))
            for s in "123"
        ],
        "fewshot": [
            write(tmp_path / f"few-{i}.json", fewshot_result(m))
            for i, m in enumerate(("default", "default", "simcse"))
        ],
    }
    (runs / "conpvp-seed1" / "study_time.json").write_text('{"seconds": 3}')  # not results: skipped
    return files


def test_report_tables_equal_their_json(inputs, tmp_path):
    runs = tmp_path / "runs"
    paths = [runs / "conpvp-seed1", runs / "conpvp-seed2", runs / "no-neg-seed1", tmp_path / "base"]
    paths += [*inputs["clustering"], *inputs["fewshot"]]
    results = load_results(paths)
    out = write_report(results, tmp_path / "out" / "report.md", ablation=["conpvp", "no-neg"], command="cmd")
    page = out.read_text()
    assert page.startswith("# Results\n\nMade by `cmd`.") and not list(
        out.parent.glob(".*")
    )  # atomic: no leftovers
    parsed = tables(page)
    sts = {row["Model"]: row for row in parsed["STS (ConPVP Table 3)"]}
    assert list(sts) == [
        "conpvp",
        "base",
    ]  # a folder gives its name  # the ablation variant stays out of Table 3
    seeds = [json.loads(p.read_text()) for p in inputs["conpvp"]]
    names = {"STSBenchmark": "STS-B", "SICKRelatedness": "SICK-R"}
    for task in STS:
        assert sts["conpvp"][names.get(task, task)] == cell([s["tasks"][task]["spearman"] for s in seeds])
    assert sts["conpvp"]["Avg."] == cell([s["avg"] for s in seeds])
    base = json.loads(inputs["base-sts"].read_text())
    assert sts["base"]["STS12"] == f"{base['tasks']['STS12']['spearman']:.2f}"
    ablation = parsed["Ablation (ConPVP Table 4)"]
    assert [r["Model"] for r in ablation] == ["conpvp", "no-neg"] and ablation[0] == sts["conpvp"]

    transfer = {row["Model"]: row for row in parsed["Transfer (ConPVP Table 5)"]}
    seeds = [json.loads(p.read_text()) for p in inputs["conpvp-transfer"]]
    assert list(transfer) == ["conpvp", "base"]
    assert transfer["conpvp"]["SST"] == cell([s["tasks"]["SST2"]["acc"] for s in seeds])
    assert transfer["conpvp"]["Avg."] == cell([s["avg"] for s in seeds])

    clu = [json.loads(p.read_text()) for p in inputs["clustering"]]
    (acc,) = parsed["Accuracy"]
    (nmi,) = parsed["NMI"]
    assert acc["Model"] == "simcse" and acc["Tweet"] == cell([c["tasks"]["Tweet"]["acc"] for c in clu])
    assert nmi["AgNews"] == cell([c["tasks"]["AgNews"]["nmi"] for c in clu])

    few = [json.loads(p.read_text()) for p in inputs["fewshot"]]
    rows = {row["Model"]: row for row in parsed["Few-shot (ConPVP Fig. 7)"]}
    pooled = few[0]["tasks"]["MR"]["seeds_acc"] + few[1]["tasks"]["MR"]["seeds_acc"]
    assert rows["default"]["MR"] == cell(pooled)
    assert (
        rows["simcse"]["TREC"]
        == f"{few[2]['tasks']['TREC']['acc']:.2f} ± {few[2]['tasks']['TREC']['acc_std']:.2f}"
    )
    means = [
        np.mean(few[0]["tasks"][t]["seeds_acc"] + few[1]["tasks"][t]["seeds_acc"]) for t in ("MR", "TREC")
    ]
    assert rows["default"]["Avg."] == f"{np.mean(means):.2f}"
    assert "![Fig. 7: few-shot accuracy over the draws](report-fewshot.png)" in page
    drawn = json.loads((out.parent / "report-fewshot.json").read_text())
    assert [(m["label"], m["runs"]) for m in drawn["models"]] == [("default", 2), ("simcse", 1)]
    inputs_table = {(r["Model"], r["Suite"]): r for r in parsed["Inputs"]}
    assert inputs_table[("conpvp", "sts")]["Runs"] == "2"
    assert "../runs/conpvp-seed1/results.json" in inputs_table[("conpvp", "sts")]["Files"]
    assert "study_time" not in page
    for line in (
        "Protocol: Spearman x100 of the cosine against gold, senteval data, test split",
        "by 10-fold CV",
        "C from 0.25..8 (MR, CR, SUBJ, MPQA, SST), 0.5..32 (TREC, MRPC); mrpc_features senteval;",
        "10 runs",
        "16 examples per class, 5 draws",
    ):
        assert line in page


def test_one_model_tables_are_the_reports(inputs, tmp_path):
    """``protoembed eval``'s papers' layout is the report's table for that one model (one code path)."""
    for data, formatter, heading in (
        (json.loads(inputs["base-sts"].read_text()), format_sts_table, "STS (ConPVP Table 3)"),
        (json.loads(inputs["clustering"][0].read_text()), format_clustering_table, "Accuracy"),
    ):
        path = write(tmp_path / "one" / f"{heading[:3]}.json", data)
        (row,) = tables(build_report(load_results([path]), tmp_path / "r.md"))[heading]
        (own,) = tables(formatter(data)).popitem()[1]
        assert own == {k: v for k, v in row.items() if k != "Model"}


def test_labels(inputs, tmp_path):
    few = [str(p) for p in inputs["fewshot"]]
    assert [r.label for r in load_results(few)] == ["default", "default", "simcse"]
    assert [r.label for r in load_results(few, ["A", "B", "B"])] == ["A", "B", "B"]
    assert [r.label for r in load_results(few, ["simcse=SimCSE"])] == ["default", "default", "SimCSE"]
    assert [r.label for r in load_results(inputs["conpvp"])] == [
        "conpvp",
        "conpvp",
    ]  # model field ".../conpvp-seedN/best"
    with pytest.raises(ProtoembedError, match="--label given 2 times for 3 inputs"):
        load_results(few, ["A", "B"])
    with pytest.raises(ProtoembedError, match="no input has the label 'nope'"):
        load_results(few, ["nope=X"])


def test_bad_input_names_the_file(inputs, tmp_path, capsys):
    raw = write(tmp_path / "raw.json", sts_result("default", variant="raw"))
    fivefold = write(tmp_path / "t5.json", transfer_result("m", folds=5))
    older = transfer_result("m")
    del older["protocol"]["mrpc_features"]  # before MRPC's features were a choice
    older = write(tmp_path / "older.json", older)
    not_results = write(tmp_path / "other.json", {"hello": 1})
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    empty = tmp_path / "empty"
    empty.mkdir()
    out = str(tmp_path / "r.md")
    cases = [
        (
            [inputs["base-sts"], raw],
            f'{raw}: sts results of protocol {{"precision":"fp32","runtime":"torch","split":"test","variant":"raw"}} cannot share a table with {inputs["base-sts"]}',
        ),
        ([inputs["base-transfer"], fivefold], f"{fivefold}: transfer results of protocol"),
        ([inputs["base-transfer"], older], f"{older}: transfer results of protocol"),
        ([not_results], f"{not_results}: not a protoembed results JSON"),
        ([broken], f"{broken}: invalid JSON"),
        ([empty], f"{empty}: no results JSON inside"),
        ([tmp_path / "missing.json"], f"{tmp_path / 'missing.json'}: no such results file or folder"),
    ]
    for paths, message in cases:
        assert main(["report", *map(str, paths), "-o", out]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert not Path(out).exists()
    # a few-shot figure from non-few-shot results is refused too
    assert main(["analyze", "fewshot", str(inputs["base-sts"]), "--figure", str(tmp_path / "f.png")]) == 2
    assert f"{inputs['base-sts']}: sts results, not few-shot results" in capsys.readouterr().err


def test_cli_report(inputs, tmp_path, capsys):
    out = tmp_path / "page.md"
    argv = ["report", str(tmp_path / "runs" / "conpvp-seed1"), str(inputs["base-sts"]), "-o", str(out)]
    assert main([*argv, "--label", "ConPVP", "--label", "BERT", "--no-figures"]) == 0
    page = out.read_text()
    assert re.search(r"^Made by `protoembed report .*`\.$", page, re.M)
    assert [r["Model"] for r in tables(page)["STS (ConPVP Table 3)"]] == ["ConPVP", "BERT"]
    assert [r["Model"] for r in tables(page)["Transfer (ConPVP Table 5)"]] == ["ConPVP"]
    assert f"wrote {out}" in capsys.readouterr().err


def test_report_and_analyze_commands_load_no_torch():
    """``--help`` stays fast: the report and analyze commands import torch and scikit-learn only to draw."""
    code = (
        "import sys, protoembed.commands.analyze, protoembed.commands.report; "
        "print(sorted(m for m in ('torch', 'transformers', 'sklearn', 'scipy', 'matplotlib') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def test_report_links_the_figures_of_analysis_json(inputs, tmp_path):
    figure = tmp_path / "figs" / "analysis-tsne.png"
    write(figure, {})  # any file: the report links it, it does not read it
    analysis = write(
        tmp_path / "figs" / "analysis-tsne.json",
        {"analysis": "tsne", "figure": str(figure), "models": [{"label": "A"}, {"label": "B"}]},
    )
    page = build_report(load_results([inputs["base-sts"], analysis]), tmp_path / "docs" / "r.md")
    title = "Fig. 6: t-SNE of STS-B test pairs with gold 0 (orange), 3 (blue), 5 (green)"
    assert f"![{title}](../figs/analysis-tsne.png)" in page and f"{title}; models: A, B." in page


def test_transfer_results_of_other_tasks_share_a_table(inputs, tmp_path):
    """Per-task protocol records (the C grids) need only agree on the tasks both files have."""
    two = write(tmp_path / "two.json", transfer_result("two", tasks=("MR", "TREC")))
    rows = tables(build_report(load_results([inputs["base-transfer"], two]), tmp_path / "r.md"))
    (_, row) = rows["Transfer (ConPVP Table 5)"]
    assert row["Model"] == "two" and row["CR"] == "n/a" and row["Avg."] == "n/a" and row["MR"] != "n/a"


def test_summary_is_the_pages_average_cells(inputs, tmp_path):
    """--summary's table (parsed back) holds, for every model and suite, the Avg. cell of the full page's
    table of that suite; a model without a suite gets a dash."""
    runs = tmp_path / "runs"
    paths = [runs / "conpvp-seed1", runs / "conpvp-seed2", tmp_path / "base", *inputs["clustering"]]
    paths += inputs["fewshot"]
    page = tables(build_report(load_results(paths), tmp_path / "page.md", figures=False))
    out = tmp_path / "summary.md"
    assert main(["report", *map(str, paths), "-o", str(out), "--summary"]) == 0
    text = out.read_text()
    assert text.startswith("| Model |") and not text.startswith("#")  # the table and nothing else
    summary = {row["Model"]: row for row in tables(text)[None]}
    sections = {
        "STS (Table 3)": "STS (ConPVP Table 3)",
        "Transfer (Table 5)": "Transfer (ConPVP Table 5)",
        "Few-shot (Fig. 7)": "Few-shot (ConPVP Fig. 7)",
        "Clustering acc. (Table 6)": "Accuracy",
        "Clustering NMI (Table 6)": "NMI",
    }
    assert list(summary) == ["conpvp", "base", "simcse", "default"]  # order of first appearance
    checked = 0
    for column, section in sections.items():
        averages = {row["Model"]: row["Avg."] for row in page[section]}
        for model, row in summary.items():
            assert row[column] == averages.get(model, "–"), (column, model)
            checked += model in averages
    assert checked == 8  # sts 2, transfer 2, clustering 2 x 1, few-shot 2
    per_run = [json.loads(f.read_text())["tasks"] for f in inputs["conpvp-transfer"]]
    assert summary["conpvp"]["Transfer (Table 5)"] == cell(
        [np.mean([t["acc"] for t in r.values()]) for r in per_run]
    )


def test_results_files_are_checked_when_read(inputs, tmp_path, capsys):
    """A field the page reads that is missing, or any per-task field that is not a number (or a list of
    them), is a one-line error naming the file, the task and the field; nothing is written."""

    def edited(name: str, data: dict, task: str, key: str, value: object = KeyError) -> Path:
        if value is KeyError:
            del data["tasks"][task][key]
        else:
            data["tasks"][task][key] = value
        return write(tmp_path / "in" / name, data)

    typed = edited("typed.json", sts_result("m"), "STS13", "spearman", "abc")
    missing = edited("missing.json", sts_result("m"), "STS14", "spearman")
    flag = edited("flag.json", sts_result("m"), "STS12", "pearson", True)
    size = edited("size.json", sts_result("m"), "SICKRelatedness", "n", "ten")
    no_nmi = edited("no-nmi.json", clustering_result("m"), "Tweet", "nmi")
    draws = edited("draws.json", fewshot_result("m"), "TREC", "seeds_acc", [70.0, "x"])
    no_draws = edited("no-draws.json", fewshot_result("m"), "MR", "seeds_acc")
    avg = write(tmp_path / "in" / "avg.json", {**sts_result("m"), "avg": "high"})
    run = write(tmp_path / "run" / "results.json", json.loads(typed.read_text()))  # in a folder: not skipped
    out = tmp_path / "r.md"
    cases = [
        ([typed], f'{typed}: sts task STS13: "spearman" is "abc"; expected a number'),
        (
            [inputs["base-sts"], missing],
            f'{missing}: sts task STS14: no "spearman"; expected a number (as protoembed eval sts --output writes)',
        ),
        ([flag], f'{flag}: sts task STS12: "pearson" is true; expected a number or a list of numbers'),
        ([size], f'{size}: sts task SICKRelatedness: "n" is "ten"; expected a number or a list of numbers'),
        (
            [no_nmi],
            f'{no_nmi}: clustering task Tweet: no "nmi"; expected a number (as protoembed eval clustering --output writes)',
        ),
        ([draws], f'{draws}: fewshot task TREC: "seeds_acc" is [70.0, "x"]; expected a list of numbers'),
        (
            [no_draws],
            f'{no_draws}: fewshot task MR: no "seeds_acc"; expected a list of numbers (as protoembed eval fewshot --output writes)',
        ),
        ([avg], f'{avg}: "avg" is "high"; expected a number'),
        ([run.parent], f'{run}: sts task STS13: "spearman" is "abc"; expected a number'),
    ]
    for paths, message in cases:
        assert main(["report", *map(str, paths), "-o", str(out)]) == 2
        assert capsys.readouterr().err == f"protoembed: error: {message}\n"
        assert main(["report", *map(str, paths), "-o", str(out), "--summary"]) == 2
        assert capsys.readouterr().err == f"protoembed: error: {message}\n"
    assert not out.exists()


def test_a_nan_score_is_an_na_cell(tmp_path):
    """``null`` is how eval writes a NaN score (a correlation of constant predictions): an ``n/a`` cell,
    the other tasks shown."""
    data = sts_result("m")
    data["tasks"]["STS12"]["spearman"] = None
    data["avg"] = None
    (row,) = tables(build_report(load_results([write(tmp_path / "nan.json", data)]), tmp_path / "r.md"))[
        "STS (ConPVP Table 3)"
    ]
    assert row["STS12"] == "n/a" and row["Avg."] == "n/a"
    assert row["STS13"] == f"{data['tasks']['STS13']['spearman']:.2f}"


def test_the_page_states_only_the_recorded_runtime_and_precision(tmp_path):
    """A file that never recorded its runtime or precision is not said to be torch or fp32."""
    line = "Protocol: Spearman x100 of the cosine against gold, senteval data, test split (STS12-16: all "
    line += "subsets of a year pooled); {}; mean ± std over a model's runs (seeds)."
    for runtime, precision, said in (
        (None, None, "runtime/precision not recorded"),
        ("onnx", None, "encoded by onnx (precision not recorded)"),
        (None, "bf16", "runtime not recorded, in bf16"),
        ("onnx", "int8", "encoded by onnx in int8"),
    ):
        path = write(tmp_path / "r.json", sts_result("m", runtime=runtime, precision=precision))
        page = build_report(load_results([path]), tmp_path / "r.md")
        assert line.format(said) in page.splitlines()
        assert ("torch" in page, "fp32" in page) == (False, False)


def test_runtimes_and_precisions_get_a_table_each(tmp_path, capsys):
    """torch fp32, ONNX int8 and unrecorded results of one STS protocol: a section each on one page (and
    an ablation section each), headed by its protocol, each cell the mean of that table's files only;
    ``--summary`` has a column each. Another data variant is still refused (test_bad_input_names_the_file)."""
    torch = [write(tmp_path / f"t{s}.json", sts_result(f"runs/conpvp-seed{s}/best")) for s in (1, 2)]
    torch.append(write(tmp_path / "t-no-neg.json", sts_result("runs/no-neg-seed1/best")))
    onnx = write(tmp_path / "o.json", sts_result("runs/conpvp-seed1/best", runtime="onnx", precision="int8"))
    old = write(tmp_path / "old.json", sts_result("runs/conpvp-seed1/best", runtime=None, precision=None))
    transfer = write(tmp_path / "transfer.json", transfer_result("runs/conpvp-seed1/best"))
    files = [*torch, onnx, old, transfer]
    out = tmp_path / "page.md"
    assert main(["report", *map(str, files), "-o", str(out), "--ablation", "conpvp,no-neg"]) == 0
    page = out.read_text()
    protocol = "variant senteval, split test, runtime {}, precision {}"
    kinds = [("torch", "fp32"), ("onnx", "int8"), ("not recorded", "not recorded")]
    headings = [
        f"## {s}: {protocol.format(*k)}"
        for k in kinds
        for s in ("STS (ConPVP Table 3)", "Ablation (ConPVP Table 4)")
    ]
    assert [line for line in page.splitlines() if line.startswith("## ")] == [
        *headings,
        "## Transfer (ConPVP Table 5)",
        "## Inputs",
    ]
    said = ["encoded by torch in fp32", "encoded by onnx in int8", "runtime/precision not recorded"]
    lines = [line for line in page.splitlines() if line.startswith("Protocol: Spearman")]
    assert [next(s for s in said if s in line) for line in lines] == [s for s in said for _ in "12"]
    parsed = tables(page)
    seeds = [json.loads(p.read_text()) for p in torch[:2]]
    one = {p: json.loads(p.read_text()) for p in (onnx, old)}
    for (runtime, precision), runs in zip(kinds, [seeds, [one[onnx]], [one[old]]]):
        (row,) = parsed[f"STS (ConPVP Table 3): {protocol.format(runtime, precision)}"]
        assert row["Model"] == "conpvp"
        assert row["STS16"] == cell([r["tasks"]["STS16"]["spearman"] for r in runs])
        assert row["Avg."] == cell([r["avg"] for r in runs])
    ablation = parsed[f"Ablation (ConPVP Table 4): {protocol.format('torch', 'fp32')}"]
    assert [r["Model"] for r in ablation] == ["conpvp", "no-neg"]
    (row,) = parsed[f"Ablation (ConPVP Table 4): {protocol.format('onnx', 'int8')}"]
    assert row == parsed[f"STS (ConPVP Table 3): {protocol.format('onnx', 'int8')}"][0]
    assert main(["report", *map(str, files), "-o", str(tmp_path / "summary.md"), "--summary"]) == 0
    (summary,) = tables((tmp_path / "summary.md").read_text()).values()
    averages = [cell([r["avg"] for r in runs]) for runs in (seeds, [one[onnx]], [one[old]])]
    columns = [f"STS (Table 3): {protocol.format(*k)}" for k in kinds]
    assert [list(row) for row in summary] == [["Model", *columns, "Transfer (Table 5)"]] * 2
    assert [row["Model"] for row in summary] == ["conpvp", "no-neg"]
    assert [summary[0][c] for c in columns] == averages
    assert [summary[1][c] for c in columns] == [
        f"{json.loads(torch[2].read_text())['avg']:.2f}",
        "–",
        "–",
    ]
    assert summary[0]["Transfer (Table 5)"] == f"{json.loads(transfer.read_text())['avg']:.2f}"
    capsys.readouterr()


def test_a_dims_file_is_a_row_per_width(tmp_path):
    """An ``eval --dims`` file (``{"suite", "dims": {width: result}}``) gives one row per width, labelled
    ``<label> (<width> dims)``, each row the numbers of its width; ``--label`` renames the model, the widths
    stay."""
    widths = {"32": sts_result("runs/m"), "8": sts_result("runs/m")}
    path = write(tmp_path / "dims.json", {"suite": "sts", "dims": widths})
    rows = tables(build_report(load_results([path]), tmp_path / "r.md"))["STS (ConPVP Table 3)"]
    assert [row["Model"] for row in rows] == ["m (32 dims)", "m (8 dims)"]
    for row, result in zip(rows, widths.values(), strict=True):
        assert row["STS12"] == f"{result['tasks']['STS12']['spearman']:.2f}"
        assert row["Avg."] == f"{result['avg']:.2f}"
    renamed = load_results([path], labels=["mrl"])
    assert [r.label for r in renamed] == ["mrl (32 dims)", "mrl (8 dims)"]
    folder = [r.label for r in load_results([tmp_path])]  # a folder: its name is the label
    assert folder == [f"{tmp_path.name} (32 dims)", f"{tmp_path.name} (8 dims)"]
