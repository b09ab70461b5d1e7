"""The sentences the export tests encode through every runtime: one cut by ``max_seq_length=12``
(:data:`LONG`), short and long ones, and int8 calibration sentences (one batch of distinct ones)."""

from __future__ import annotations

LONG = " ".join(["the quick brown fox jumps over the lazy dog ."] * 8)  # cut by max_seq_length=12
SENTENCES = [
    "a man is playing a guitar .",
    LONG,
    "hello",
    "two dogs are running through a field of grass while the cat sat on the mat .",
    "stocks fell sharply after the report on monday .",
]
CALIBRATION = [
    f"calibration sentence {i} : the {w} sat on the mat ." for i in range(8) for w in ("cat", "dog")
]
