"""The domain adaptation study (experiments/domain_adapt.py): its report from the records, its resumption."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def test_report_cells_are_seed_means_and_changes_from_before(tmp_path):
    """The study's table: mean ± sample std over seeds and the change of the mean from the untrained row."""
    from experiments.domain_adapt_report import write_report

    records = tmp_path / "records"
    before = {
        "tasks": {"Tweet": {"acc": 50.0, "acc_std": 1.0, "nmi": 60.0, "nmi_std": 2.0}},
        "model": "default",
    }
    (records / "untrained-default").mkdir(parents=True)
    (records / "untrained-default" / "clustering.json").write_text(json.dumps(before))
    for seed, (acc, nmi, sts) in enumerate([(52.0, 61.0, 70.0), (56.0, 57.0, 72.0)], 1):
        run = records / f"simcse-tweet-seed{seed}"
        run.mkdir()
        (run / "clustering.json").write_text(json.dumps({"tasks": {"Tweet": {"acc": acc, "nmi": nmi}}}))
        (run / "results.json").write_text(json.dumps({"tasks": {"STSBenchmark": {"spearman": sts}}}))
        (run / "study_time.json").write_text(json.dumps({"train_s": 10.0 * seed, "clustering_s": 5.0}))
    report = write_report(
        tmp_path / "report.md", records, {"tweet": "Tweet"}, {"simcse": "SimCSE"}, Path("c"), "`cmd`"
    )
    text = report.read_text(encoding="utf-8")
    # acc 54 ± std(52, 56) = 2.83, +4.00; NMI 59 ± 2.83, -1.00; STS 71 ± 1.41; 15 s train + 5 s clustering
    assert (
        "| Tweet | SimCSE | 2 | 54.00 ± 2.83 | +4.00 | 59.00 ± 2.83 | -1.00 | 71.00 ± 1.41 | 20 s (15 + 5) |"
        in text
    )
    assert "accuracy +4.00 (2 of 2 seeds above before), NMI -1.00 (1 of 2 above)" in text
    assert "Runs recorded: 2 of 3" in text


def test_a_recorded_untrained_model_is_left_as_it_is(tmp_path, monkeypatch):
    from experiments import domain_adapt

    out = tmp_path / domain_adapt.UNTRAINED
    out.mkdir()
    for name in (domain_adapt.CLUSTERING_FILE, domain_adapt.RESULTS_FILE, domain_adapt.ENVIRONMENT_FILE):
        (out / name).write_text("{}")
    monkeypatch.setattr("subprocess.call", lambda *a, **k: pytest.fail("nothing is to run"))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert domain_adapt.evaluate_untrained(tmp_path, ["Tweet"], None)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def _tweet_runs(records: Path, scores: list[tuple[float, float, float]]) -> None:
    for seed, (acc, nmi, sts) in enumerate(scores, 1):
        run = records / f"simcse-tweet-seed{seed}"
        run.mkdir(parents=True, exist_ok=True)
        (run / "clustering.json").write_text(json.dumps({"tasks": {"Tweet": {"acc": acc, "nmi": nmi}}}))
        (run / "results.json").write_text(json.dumps({"tasks": {"STSBenchmark": {"spearman": sts}}}))


def test_a_rerun_with_the_current_step_shows_the_numbers_before_and_after(tmp_path):
    """``--step-before`` keeps the records' seed means; records rerun later are shown beside them, with
    the old step's settings and the current defaults named."""
    from experiments import domain_adapt
    from experiments.domain_adapt_report import write_report
    from experiments.step_rerun import STEP_BEFORE_FILE

    records = tmp_path / "records"
    # no records yet: a one-line error (exit 2), nothing written
    assert domain_adapt.main(["--step-before", "--records-dir", str(records)]) == 2
    assert not (records / STEP_BEFORE_FILE).exists()
    _tweet_runs(records, [(52.0, 61.0, 70.0), (56.0, 57.0, 72.0)])
    assert domain_adapt.main(["--step-before", "--records-dir", str(records)]) == 0
    kept = json.loads((records / STEP_BEFORE_FILE).read_text())
    assert kept["settings"] == {"training.padding": "joint", "training.dropout": "torch"}
    assert kept["numbers"] == {
        "Tweet, SimCSE: accuracy": 54.0,
        "Tweet, SimCSE: NMI": 59.0,
        "Tweet, SimCSE: STS-B test": 71.0,
        # the other sets and ConPVP have no records: no numbers
    }
    _tweet_runs(records, [(53.0, 60.0, 71.5), (57.5, 58.0, 72.0)])  # the rerun's records replace them
    text = write_report(
        tmp_path / "report.md", records, {"tweet": "Tweet"}, {"simcse": "SimCSE"}, Path("c"), "`cmd`"
    ).read_text(encoding="utf-8")
    section = text[text.index("## Before and after the rerun") : text.index("## Runs")]
    assert "made again with `training.padding: auto`, `training.dropout: fast` (the defaults)" in section
    assert "made with `training.padding: joint`, `training.dropout: torch`" in section
    # after: accuracy (53 + 57.5) / 2 = 55.25, NMI 59.00, STS-B 71.75
    assert "| Tweet, SimCSE: accuracy | 54.00 | 55.25 | +1.25 |" in section
    assert "| Tweet, SimCSE: NMI | 59.00 | 59.00 | +0.00 |" in section
    assert "| Tweet, SimCSE: STS-B test | 71.00 | 71.75 | +0.75 |" in section
    # without the file, no such section
    (records / STEP_BEFORE_FILE).unlink()
    text = write_report(
        tmp_path / "report.md", records, {"tweet": "Tweet"}, {"simcse": "SimCSE"}, Path("c"), "`cmd`"
    ).read_text(encoding="utf-8")
    assert "## Before and after the rerun" not in text
