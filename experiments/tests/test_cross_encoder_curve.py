"""experiments/cross_encoder_curve.py: the curve page marks each loss's best dev point, from the JSON."""

from __future__ import annotations

import pytest
from experiments.cross_encoder_curve import markdown

CURVES = {
    "mse": {
        "epochs": 4,
        "eval_steps": 90,
        "seconds": 1800.0,
        "points": [
            {"step": 90, "epoch": 0.503, "cross_encoder_dev": 37.98, "cls_dev": 75.92},
            {"step": 180, "epoch": 1.006, "cross_encoder_dev": 80.08, "cls_dev": 77.69},
            {"step": 270, "epoch": 1.508, "cross_encoder_dev": 79.5, "cls_dev": 78.1},
        ],
    },
    "bce": {
        "epochs": 2,
        "eval_steps": 90,
        "points": [{"step": 90, "epoch": 0.503, "cross_encoder_dev": 70.0, "cls_dev": 76.0}],
    },
}


def test_curve_page_marks_the_best_point_of_each_loss():
    page = markdown(CURVES)
    assert "## loss: mse (4 epochs, eval every 90 steps, 30 min)" in page
    assert "| 180 | 1.01 | **80.08** | 77.69 |" in page
    assert "| 270 | 1.51 | 79.50 | 78.10 |" in page
    assert "## loss: bce (2 epochs, eval every 90 steps, unfinished)" in page
    assert "| 90 | 0.50 | **70.00** | 76.00 |" in page


def test_a_curve_run_writes_its_records_folder_resumes_and_skips_when_finished(
    tiny_model_dirs, data_dir, tmp_path, monkeypatch, capsys
):
    """``--records-dir``, ``--runs-dir`` and ``--set`` (a rerun's folders and settings): the curve's JSON and
    page go to that folder, its entry lists the overrides after the curve's own, one point per evaluation.
    Interrupted after step 3 (checkpoint at step 2), a run of other settings is refused (the folder holds
    the interrupted run), the same command resumes it keeping the step-2 point, and once finished it is
    skipped."""
    import json

    from experiments.cross_encoder_curve import CURVE_FILE, main

    from protoembed.training import trainer as trainer_module
    from training_helpers import Interrupt, stop_after

    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))
    records, runs = tmp_path / "records", tmp_path / "runs"
    extra = [f"model={tiny_model_dirs['bert']}", "training.max_steps=4", "training.test_tasks=[]"]
    argv = ["--epochs", "1", "--eval-steps", "2", "--records-dir", str(records), "--runs-dir", str(runs)]
    argv += [a for item in extra for a in ("--set", item)]

    real_train = trainer_module.train
    with monkeypatch.context() as patch:
        patch.setattr(
            trainer_module, "train", lambda cfg, **kw: real_train(cfg, callback=stop_after(3), **kw)
        )
        with pytest.raises(Interrupt):
            main(argv)
    first = json.loads((records / CURVE_FILE).read_text())["mse"]
    assert [p["step"] for p in first["points"]] == [2] and "seconds" not in first
    assert "| 2 | " in (records / CURVE_FILE).with_suffix(".md").read_text()

    capsys.readouterr()
    assert main([*argv, "--set", "training.lr=1e-4"]) == 2  # not this folder's run: refused, untouched
    assert capsys.readouterr().err == (
        f"cross_encoder_curve: error: {runs / 'mse'}: an interrupted run at step 2 whose dev points up to it "
        f"are not in {records / CURVE_FILE}; remove that folder to start the curve again\n"
    )
    assert json.loads((records / CURVE_FILE).read_text())["mse"] == first

    assert main(argv) == 0  # resumed from the step-2 checkpoint
    entry = json.loads((records / CURVE_FILE).read_text())["mse"]
    assert entry["overrides"][-4:] == [f"output_dir={runs / 'mse'}", *extra]
    assert entry["points"][0] == first["points"][0] and [p["step"] for p in entry["points"]] == [2, 4]
    assert entry["resumed_at"] == [2] and entry["seconds"] >= entry["points"][-1]["elapsed_s"]
    assert (runs / "mse" / "best").is_dir()
    page = (records / CURVE_FILE).with_suffix(".md").read_text()
    assert (
        f"## loss: mse (1 epochs, eval every 2 steps, {entry['seconds'] / 60:.0f} min, resumed at step 2)"
        in page
    )
    (runs / "mse" / "best").rename(runs / "moved")  # run again: the finished curve is skipped, not retrained
    assert main(argv) == 0
    assert (
        json.loads((records / CURVE_FILE).read_text())["mse"] == entry
        and not (runs / "mse" / "best").exists()
    )
