"""Readers for the SentEval transfer tasks: MR, CR, SUBJ, MPQA, SST-2, TREC, MRPC.

In: the data directory (``senteval/<TASK>/`` as SentEval's ``data/downstream`` lays it out, see
``protoembed data download``). Out: a :class:`TransferData` per task, with sentences whitespace-normalised
the way SentEval rejoins its tokens, and integer labels.

Format quirks handled here:

- MR, CR, SUBJ, MPQA: one sentence per line, one file per class. CR and MPQA contain empty lines
  (4 and 3); SentEval keeps them as empty sentences, we skip them and count them (``skipped_empty``).
- SST-2: ``sentence<TAB>label`` lines, train/dev/test files.
- TREC: ``COARSE:fine question`` lines; the label is the coarse class (6 classes, as SentEval); the
  training file is latin-1, not UTF-8.
- MRPC: tab-separated with a header and a UTF-8 byte-order mark; columns quality, id1, id2, s1, s2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from protoembed.core.errors import ProtoembedError
from protoembed.data.benchmarks.sts import MISSING_HINT, read_lines


@dataclass
class Split:
    """One split: ``texts`` (one sentence per example) or ``pairs`` (MRPC), and integer ``labels``."""

    labels: np.ndarray
    texts: list[str] = field(default_factory=list)
    pairs: list[tuple[str, str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, rows: list[int]) -> Split:
        """The examples at ``rows``, in that order."""
        return Split(
            self.labels[rows],
            texts=[self.texts[r] for r in rows] if self.texts else [],
            pairs=[self.pairs[r] for r in rows] if self.pairs else [],
        )

    def sentences(self) -> list[str]:
        """Every sentence of the split (both sides of each pair), in order."""
        return list(self.texts) if not self.pairs else [s for pair in self.pairs for s in pair]


@dataclass
class TransferData:
    """A task's data: ``splits`` is ``{"all"}`` (cross-validated tasks) or ``{"train", ["dev"], "test"}``."""

    name: str
    classes: list[str]
    splits: dict[str, Split]
    skipped_empty: int = 0


def _normalise(text: str) -> str:
    return " ".join(text.split())


def _task_dir(path: Path) -> Path:
    if not path.is_dir():
        raise ProtoembedError(f"{path}: directory not found; {MISSING_HINT}")
    return path


def read_binary(task: str, folder: Path, files: Sequence[tuple[str, str]]) -> TransferData:
    """MR, CR, SUBJ or MPQA: one sentence per line, one file per class (``files``: ``(file name, class
    name)``, the class labelled 1 first, as SentEval orders them); all examples in one split (``all``),
    for k-fold cross-validation."""
    path = _task_dir(folder)
    texts: list[str] = []
    labels: list[int] = []
    skipped = 0
    for label, (name, _) in enumerate(files):
        for line in read_lines(path / name):
            text = _normalise(line)
            if not text:
                skipped += 1
                continue
            texts.append(text)
            labels.append(1 - label)  # SentEval: first file (pos / objective) is 1
    classes = [files[1][1], files[0][1]]
    return TransferData(task, classes, {"all": Split(np.array(labels), texts=texts)}, skipped)


def read_sst2(folder: Path) -> TransferData:
    """SST-2 (binary SST, SentEval's split; ``folder``: its ``binary`` folder): train / dev / test."""
    path = _task_dir(folder)
    splits = {}
    for split in ("train", "dev", "test"):
        file = path / f"sentiment-{split}"
        texts, labels = [], []
        for lineno, line in enumerate(read_lines(file), 1):
            text, sep, label = line.rpartition("\t")
            if not sep or label.strip() not in ("0", "1"):
                raise ProtoembedError(f"{file}:{lineno}: expected 'sentence<TAB>0|1', got {line[:60]!r}")
            texts.append(_normalise(text))
            labels.append(int(label))
        splits[split] = Split(np.array(labels), texts=texts)
    return TransferData("SST2", ["negative", "positive"], splits)


def read_trec(folder: Path) -> TransferData:
    """TREC question type (6 coarse classes): train (5,452, latin-1) / test (500)."""
    path = _task_dir(folder)
    raw: dict[str, list[tuple[str, str]]] = {}
    for split, name in (("train", "train_5500.label"), ("test", "TREC_10.label")):
        file = path / name
        rows = []
        for lineno, line in enumerate(read_lines(file, encoding="latin-1"), 1):
            target, colon, rest = line.partition(":")
            fine_and_text = rest.split(" ", 1)
            if not colon or len(fine_and_text) != 2 or not target.isupper():
                raise ProtoembedError(f"{file}:{lineno}: expected 'COARSE:fine question', got {line[:60]!r}")
            rows.append((target, _normalise(fine_and_text[1])))
        raw[split] = rows
    classes = sorted({target for rows in raw.values() for target, _ in rows})
    index = {c: i for i, c in enumerate(classes)}
    splits = {
        split: Split(np.array([index[t] for t, _ in rows]), texts=[text for _, text in rows])
        for split, rows in raw.items()
    }
    return TransferData("TREC", classes, splits)


def read_mrpc(folder: Path) -> TransferData:
    """MRPC paraphrase pairs: train (4,076) / test (1,725); label 1 = paraphrase."""
    path = _task_dir(folder)
    splits = {}
    for split in ("train", "test"):
        file = path / f"msr_paraphrase_{split}.txt"
        pairs, labels = [], []
        for lineno, line in enumerate(read_lines(file)[1:], 2):
            cols = line.split("\t")
            if len(cols) != 5 or cols[0] not in ("0", "1"):
                raise ProtoembedError(
                    f"{file}:{lineno}: expected 5 tab-separated columns (quality 0|1, id1, id2, s1, s2), "
                    f"got {len(cols)}"
                )
            pairs.append((_normalise(cols[3]), _normalise(cols[4])))
            labels.append(int(cols[0]))
        splits[split] = Split(np.array(labels), pairs=pairs)
    return TransferData("MRPC", ["not paraphrase", "paraphrase"], splits)


def read_labelled_files(name: str, paths: Mapping[str, Path], pairs: bool = False) -> TransferData:
    """A user's classification task: ``text<TAB>label`` lines (``pairs``: ``text1<TAB>text2<TAB>label``),
    one file per split (``{"all": file}`` for one cross-validated set, else train / [dev] / test);
    whitespace normalised, labels any non-empty strings, classes in sorted order. A line that does not
    have the columns is an error naming ``file:line``; an empty text is skipped and counted."""
    columns = 3 if pairs else 2
    what = "text1<TAB>text2<TAB>label" if pairs else "text<TAB>label"
    rows: dict[str, list[tuple[tuple[str, ...], str]]] = {}
    skipped = 0
    for split, file in paths.items():
        rows[split] = []
        for lineno, line in enumerate(read_lines(file), 1):
            cols = line.split("\t")
            if len(cols) != columns or not cols[-1].strip():
                raise ProtoembedError(f"{file}:{lineno}: expected {what}, got {len(cols)} column(s)")
            texts = tuple(_normalise(c) for c in cols[:-1])
            if not all(texts):
                skipped += 1
                continue
            rows[split].append((texts, cols[-1].strip()))
    classes = sorted({label for part in rows.values() for _, label in part})
    index = {c: i for i, c in enumerate(classes)}
    splits = {}
    for split, part in rows.items():
        labels = np.array([index[label] for _, label in part], dtype=np.int64)
        if pairs:
            splits[split] = Split(labels, pairs=[(t[0], t[1]) for t, _ in part])
        else:
            splits[split] = Split(labels, texts=[t[0] for t, _ in part])
    return TransferData(name, classes, splits, skipped)
