"""experiments/cross_encoder_curve.py: the curve page marks each loss's best dev point, from the JSON."""

from __future__ import annotations

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
