"""A tiny SentEval transfer layout and a deterministic bag-of-words encoder, for the transfer and
few-shot tests."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np


def write_toy(root: Path) -> None:
    """A tiny SentEval layout: separable classes ("good"/"bad" words, question words)."""
    base = root / "senteval"
    words = ["movie", "plot", "actor", "scene", "story", "music", "ending", "cast"]
    good = [f"a good {w} and a fine {v}" for w in words for v in words[:5]]
    bad = [f"a bad {w} and a poor {v}" for w in words for v in words[:5]]
    for task, (pos, neg) in {
        "MR": ("rt-polarity.pos", "rt-polarity.neg"),
        "CR": ("custrev.pos", "custrev.neg"),
        "SUBJ": ("subj.objective", "subj.subjective"),
        "MPQA": ("mpqa.pos", "mpqa.neg"),
    }.items():
        (base / task).mkdir(parents=True)
        (base / task / pos).write_text("\n".join(good) + "\n\n", encoding="utf-8")
        (base / task / neg).write_text("\n".join(bad) + "\n", encoding="utf-8")
    (base / "SST" / "binary").mkdir(parents=True)
    for split, sl in (("train", slice(0, 24)), ("dev", slice(24, 32)), ("test", slice(32, 40))):
        rows = [f"{s} \t1" for s in good[sl]] + [f"{s} \t0" for s in bad[sl]]
        (base / "SST" / "binary" / f"sentiment-{split}").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (base / "TREC").mkdir()
    for name, sl in (("train_5500.label", slice(0, 30)), ("TREC_10.label", slice(30, 40))):
        rows = [f"HUM:ind who played the {w} {i} ?" for i, w in enumerate(words * 5)][sl]
        rows += [f"LOC:city where is the {w} {i} ?" for i, w in enumerate(words * 5)][sl]
        (base / "TREC" / name).write_bytes(("\n".join(rows) + "\n").encode("latin-1"))
    (base / "MRPC").mkdir()
    for split, sl in (("train", slice(0, 30)), ("test", slice(30, 40))):
        rows = ["\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        rows += [f"1\t{i}\t{i}\t{g}\t{g} indeed" for i, g in enumerate(good[sl])]
        rows += [f"0\t{i}\t{i}\t{g}\t{b}" for i, (g, b) in enumerate(zip(good[sl], bad[sl]))]
        (base / "MRPC" / f"msr_paraphrase_{split}.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")


def bag_of_words(sentences: list[str]) -> np.ndarray:
    out = np.zeros((len(sentences), 64))
    for row, sentence in enumerate(sentences):
        for word in sentence.split():
            out[row] += np.random.default_rng(zlib.crc32(word.encode())).standard_normal(64)
    return out
