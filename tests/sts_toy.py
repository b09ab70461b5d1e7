"""Six scored sentence pairs and a writer of STS Benchmark's layout, for the tests of STS-like tasks."""

from __future__ import annotations

from pathlib import Path

ROWS = [
    ("a man plays a guitar", "a man plays the guitar", 4.8),
    ("a dog runs in a park", "a cat sleeps on a sofa", 0.6),
    ("the sky is blue", "the sky is very blue", 4.2),
    ("children play football", "kids are playing soccer", 3.9),
    ("a woman cuts an onion", "a man rides a horse", 0.2),
    ("stocks fell sharply today", "markets dropped a lot today", 3.5),
]


def write_pairs(path: Path, rows: list[tuple[str, str, float]] = ROWS) -> Path:
    """``rows`` as STS Benchmark lines (``genre, file, year, id, score, sentence1, sentence2``) at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"g\tf\t2024\t{i}\t{score}\t{a}\t{b}\n" for i, (a, b, score) in enumerate(rows)]
    path.write_text("".join(lines), encoding="utf-8")
    return path
