"""Training data formats (data/examples.py, data/formats.py, data/pairs.py, data/nli.py): readers, quirks, errors, the
registry's file-name inference, concatenation, NLI triplets, and the staged benchmark files."""

from __future__ import annotations

import gzip
import json
import logging
import re
from collections import Counter
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from protoembed.core.errors import ProtoembedError
from protoembed.data.benchmarks.sts import read_sick, read_stsb
from protoembed.data.training.examples import NLI_LABELS, Examples
from protoembed.data.training.formats import FORMATS, convert, infer_format, nli_triplets, read_examples

C, E, N = (NLI_LABELS.index(name) for name in ("contradiction", "entailment", "neutral"))


def _write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def _raises(path: Path, line: int | None, expected: str) -> AbstractContextManager[Any]:
    """``pytest.raises`` for a ProtoembedError starting with ``file:line: `` (or ``file``) and saying ``expected``."""
    where = f"{path}:{line}" if line is not None else str(path)
    return pytest.raises(ProtoembedError, match=rf"^{re.escape(where)}\b.*{re.escape(expected)}")


# --------------------------------------------------------------------------- registry


def _one_file_per_format(root: Path) -> dict[str, Path]:
    """A small valid file of every format (the fixtures of this module's reader tests)."""
    return {
        "text": _write(root / "corpus.txt", "one sentence\nanother one\n"),
        "clustering": _write(root / "tweet-original-order.txt", "3\tfirst text\n7\tsecond text\n"),
        "stsb": _write(root / "sts-train.csv", STSB_SENTEVAL),
        "sick": _write(
            root / "SICK_train.txt", f"{SICK_HEADER}\n6\tA boy plays.\tA kid plays.\t4.5\tENTAILMENT\n"
        ),
        "snli_jsonl": _write(root / "snli_1.0_dev.jsonl", _jsonl(SNLI_ROWS)),
        "nli_txt": _write(
            root / "snli_1.0_dev.txt", f"{NLI_TXT_HEADER}\nentailment\t( a )\t( b )\tA.\tB.\tp1\n"
        ),
        "senteval_nli": _senteval_snli(
            root / "senteval", "dev", "A man sleeps .\n", "A man dreams .\n", "neutral\n"
        ),
        "simcse_nli": _write(root / "nli_for_simcse.csv", "sent0,sent1,hard_neg\nA,B,C\n"),
        "allnli": _write(root / "AllNLI.tsv", ALLNLI_ROWS),
    }


def test_every_format_is_registered_and_its_reader_yields_the_declared_columns(tmp_path: Path) -> None:
    expected = {
        "text": ("text",),
        "clustering": ("text",),
        "stsb": ("sentence1", "sentence2", "score"),
        "sick": ("sentence1", "sentence2", "score", "label"),
        "snli_jsonl": ("sentence1", "sentence2", "label"),
        "nli_txt": ("sentence1", "sentence2", "label"),
        "senteval_nli": ("sentence1", "sentence2", "label"),
        "simcse_nli": ("anchor", "positive", "negative"),
        "allnli": ("sentence1", "sentence2", "label"),
    }
    files = _one_file_per_format(tmp_path)
    assert sorted(files) == sorted(expected)
    for name, path in files.items():
        assert infer_format(path) == name
        examples = read_examples(path)
        assert examples.sources[0]["format"] == name
        assert examples.names == FORMATS[name].columns == expected[name], name


def test_a_new_format_is_its_reader_plus_one_registry_line(tmp_path: Path, monkeypatch) -> None:
    """A reader written here and registered by one :data:`FORMATS` entry is inferred from its file-name
    pattern, read (options passed through) and named among the known formats, with nothing else edited."""
    from protoembed.data.training.formats import Format

    def read_pipes(path: Path, **options: Any) -> Examples:
        rows = [line.split("|") for line in path.read_text(encoding="utf-8").splitlines()]
        scale = float(options.get("scale", 1.0))
        columns = {
            "sentence1": [a for a, _, _ in rows],
            "sentence2": [b for _, b, _ in rows],
            "score": [float(x) * scale for _, _, x in rows],
        }
        return Examples(
            columns, [{"path": str(path), "format": "pipes", "examples": len(rows), "skipped": {}}]
        )

    spec = Format(read_pipes, ("*.pipes",), ("sentence1", "sentence2", "score"), "a|b|score")
    monkeypatch.setitem(FORMATS, "pipes", spec)
    path = _write(tmp_path / "train.pipes", "A man plays.|A man is playing.|4.5\nA cat.|A dog.|1.0\n")
    assert infer_format(path) == "pipes" and infer_format(tmp_path / "train.txt") == "text"
    examples = read_examples(path, scale=2.0)
    assert examples.columns == {
        "sentence1": ["A man plays.", "A cat."],
        "sentence2": ["A man is playing.", "A dog."],
        "score": [9.0, 2.0],
    }
    with pytest.raises(ProtoembedError, match="unknown data format 'nope': expected one of .*pipes"):
        read_examples(path, format="nope")


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("sts-train.csv", "stsb"),
        ("sts-dev.csv", "stsb"),
        ("SICK_train.txt", "sick"),
        ("SICK_test_annotated.txt", "sick"),
        ("snli_1.0_train.jsonl", "snli_jsonl"),
        ("multinli_1.0_dev_matched.jsonl", "snli_jsonl"),
        ("snli_1.0_dev.txt", "nli_txt"),
        ("multinli_1.0_train.txt", "nli_txt"),
        ("s1.train", "senteval_nli"),
        ("s1.dev", "senteval_nli"),
        ("nli_for_simcse.csv", "simcse_nli"),
        ("AllNLI.tsv.gz", "allnli"),
        ("AllNLI.tsv", "allnli"),
        ("wiki1m_for_simcse.txt", "text"),
        ("corpus.txt", "text"),
    ],
)
def test_infer_format_from_file_name(name: str, fmt: str) -> None:
    assert infer_format(Path("some/dir") / name) == fmt


# --------------------------------------------------------------------------- stsb


STSB_SENTEVAL = "g\tf\t2012\t1\t5.000\ta man plays .\ta man is playing .\ng\tf\t2012\t2\t0.0\tx y\tz\n"


def test_stsb_senteval_layout(tmp_path: Path) -> None:
    path = _write(tmp_path / "sts-train.csv", STSB_SENTEVAL)
    examples = read_examples(path, unknown_option=1)  # unknown options are ignored
    assert examples.columns == {
        "sentence1": ["a man plays .", "x y"],
        "sentence2": ["a man is playing .", "z"],
        "score": [5.0, 0.0],
    }
    assert examples.sources == [{"path": str(path), "format": "stsb", "examples": 2, "skipped": {}}]


def test_stsb_raw_nine_columns_unbalanced_quotes_crlf_bom_no_final_newline(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "sts-dev.csv",
        '\ufeffg\tf\t2016\t1\t3.5\tHe said "hi.\tShe "said\tsrc a\tsrc b\r\n'
        'g\tf\t2012\t2\t1.000\t" A cat.\tA dog. "',
    )
    examples = read_examples(path)
    assert examples.columns["sentence1"] == ['He said "hi.', '" A cat.']
    assert examples.columns["sentence2"] == ['She "said', 'A dog. "']
    assert examples.columns["score"] == [3.5, 1.0]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("g\tf\t2012\t1\t2.0\ta", "expected 7 or 9 tab-separated columns (genre, file, year, id, score"),
        ("g\tf\t2012\t1\t2.0\ta\tb\tc", "expected 7 or 9 tab-separated columns"),
        ("g\tf\t2012\t1\tfive\ta\tb", "expected a numeric similarity score in [0, 5], got 'five'"),
        ("g\tf\t2012\t1\t5.2\ta\tb", "expected a numeric similarity score in [0, 5], got '5.2'"),
        ("g\tf\t2012\t1\t-1\ta\tb", "expected a numeric similarity score in [0, 5], got '-1'"),
        ("g\tf\t2012\t1\tnan\ta\tb", "expected a numeric similarity score in [0, 5], got 'nan'"),
        ("g\tf\t2012\t1\t2\t  \tb", "expected a non-empty sentence1"),
        ("g\tf\t2012\t1\t2\ta\t", "expected a non-empty sentence2"),
    ],
)
def test_stsb_bad_lines_name_file_and_line(tmp_path: Path, line: str, expected: str) -> None:
    path = _write(tmp_path / "sts-test.csv", STSB_SENTEVAL + line + "\n")
    with _raises(path, 3, expected):
        read_examples(path)


def test_stsb_training_reader_equals_evaluation_reader_on_a_fixture(tmp_path: Path) -> None:
    _write(tmp_path / "senteval" / "STS" / "STSBenchmark" / "sts-train.csv", STSB_SENTEVAL)
    pairs = read_stsb(tmp_path, "train")
    examples = read_examples(tmp_path / "senteval" / "STS" / "STSBenchmark" / "sts-train.csv")
    assert examples.columns["sentence1"] == pairs.sentences1
    assert examples.columns["sentence2"] == pairs.sentences2
    np.testing.assert_array_equal(examples.columns["score"], pairs.scores)


def test_evaluation_reader_rejects_scores_off_the_scale(tmp_path: Path) -> None:
    path = _write(tmp_path / "senteval" / "STS" / "STSBenchmark" / "sts-dev.csv", "g\tf\t2012\t1\t7\ta\tb\n")
    with _raises(path, 1, "expected a numeric similarity score in [0, 5], got '7'"):
        read_stsb(tmp_path, "dev")


# --------------------------------------------------------------------------- sick

SICK_HEADER = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"


def test_sick_score_and_label_crlf_bom(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "SICK_test_annotated.txt",
        "\ufeff" + SICK_HEADER + "\r\n"
        "6\tA boy plays.\tA kid plays.\t4.5\tENTAILMENT\r\n"
        "7\tX.\tY.\t1\tCONTRADICTION\r\n"
        "8\tP.\tQ.\t3.2\tNEUTRAL",
    )
    examples = read_examples(path, split="ignored")
    assert examples.columns == {
        "sentence1": ["A boy plays.", "X.", "P."],
        "sentence2": ["A kid plays.", "Y.", "Q."],
        "score": [4.5, 1.0, 3.2],
        "label": [E, C, N],
    }
    assert examples.sources[0]["format"] == "sick" and examples.sources[0]["examples"] == 3


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("9\tA.\tB.\t3.0", "expected 5 tab-separated columns (pair_ID, sentence_A"),
        ("9\tA.\tB.\tsix\tNEUTRAL", "expected a numeric similarity score in [0, 5], got 'six'"),
        (
            "9\tA.\tB.\t3.0\tUNKNOWN",
            "expected an NLI label (contradiction, entailment, neutral), got 'UNKNOWN'",
        ),
        ("9\tA.\tB.\t3.0\t-", "expected an NLI label (contradiction, entailment, neutral), got '-'"),
        ("9\t\tB.\t3.0\tNEUTRAL", "expected a non-empty sentence_A"),
    ],
)
def test_sick_bad_lines_name_file_and_line(tmp_path: Path, line: str, expected: str) -> None:
    path = _write(tmp_path / "SICK_trial.txt", f"{SICK_HEADER}\n1\tA.\tB.\t2\tNEUTRAL\n{line}\n")
    with _raises(path, 3, expected):
        read_examples(path)


# --------------------------------------------------------------------------- NLI releases


def _jsonl(rows: list[dict[str, object]]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


SNLI_ROWS = [
    {"gold_label": "neutral", "sentence1": "A man sleeps.", "sentence2": "A man dreams.", "pairID": "1"},
    {"gold_label": "-", "sentence1": "A man sleeps.", "sentence2": "Someone rests.", "pairID": "2"},
    {
        "gold_label": "entailment",
        "sentence1": "A man sleeps.",
        "sentence2": "A person sleeps.",
        "pairID": "3",
    },
    {"gold_label": "contradiction", "sentence1": "A man sleeps.", "sentence2": "A man runs.", "pairID": "4"},
]


def test_snli_jsonl_skips_and_counts_no_gold_label_and_blank_lines(tmp_path: Path) -> None:
    path = _write(tmp_path / "snli_1.0_dev.jsonl", _jsonl(SNLI_ROWS) + "\n")
    examples = read_examples(path)
    assert examples.columns == {
        "sentence1": ["A man sleeps."] * 3,
        "sentence2": ["A man dreams.", "A person sleeps.", "A man runs."],
        "label": [N, E, C],
    }
    assert examples.sources == [
        {
            "path": str(path),
            "format": "snli_jsonl",
            "examples": 3,
            "skipped": {"no_gold_label": 1, "empty_line": 1},
        }
    ]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("{not json", "expected a JSON object"),
        ('{"sentence1": "a", "sentence2": "b"}', "expected a JSON object with gold_label"),
        ('["a", "b"]', "expected a JSON object with gold_label, sentence1, sentence2"),
        ('{"gold_label": "entails", "sentence1": "a", "sentence2": "b"}', "expected an NLI label"),
        ('{"gold_label": "neutral", "sentence1": "a", "sentence2": " "}', "expected a non-empty sentence2"),
        ('{"gold_label": "neutral", "sentence1": null, "sentence2": "b"}', "expected a non-empty sentence1"),
    ],
)
def test_snli_jsonl_errors_name_file_and_line(tmp_path: Path, line: str, expected: str) -> None:
    path = _write(tmp_path / "snli_1.0_test.jsonl", _jsonl(SNLI_ROWS[:1]) + line + "\n")
    with _raises(path, 2, expected):
        read_examples(path)


NLI_TXT_HEADER = "gold_label\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1\tsentence2\tpairID"


def test_nli_txt_tabs_only_quotes_and_dashes(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "multinli_1.0_dev_matched.txt",
        f"{NLI_TXT_HEADER}\r\n"
        'entailment\t( a )\t( b )\tHe said "yes.\tHe spoke.\tp1\r\n'
        "-\t( a )\t( b )\tA.\tB.\tp2\r\n"
        "contradiction\t( a )\t( b )\tA dog.\tNo dog.\tp3",
    )
    examples = read_examples(path)
    assert examples.columns == {
        "sentence1": ['He said "yes.', "A dog."],
        "sentence2": ["He spoke.", "No dog."],
        "label": [E, C],
    }
    assert examples.sources[0]["skipped"] == {"no_gold_label": 1}


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        (
            "gold_label\tsentence1\n",
            1,
            "expected a header with the tab-separated fields gold_label, sentence1, "
            "sentence2 (missing sentence2)",
        ),
        ("", 1, "expected a header with the tab-separated fields"),
        (f"{NLI_TXT_HEADER}\nneutral\t(a)\t(b)\tA.\n", 2, "expected at least 5 tab-separated columns"),
        (f"{NLI_TXT_HEADER}\nNEUTRALISH\t(a)\t(b)\tA.\tB.\tp\n", 2, "expected an NLI label"),
        (f"{NLI_TXT_HEADER}\nneutral\t(a)\t(b)\t\tB.\tp\n", 2, "expected a non-empty sentence1"),
    ],
)
def test_nli_txt_errors(tmp_path: Path, text: str, line: int, expected: str) -> None:
    path = _write(tmp_path / "snli_1.0_train.txt", text)
    with _raises(path, line, expected):
        read_examples(path)


def _senteval_snli(folder: Path, split: str, s1: str, s2: str, labels: str) -> Path:
    _write(folder / f"s2.{split}", s2)
    _write(folder / f"labels.{split}", labels)
    return _write(folder / f"s1.{split}", s1)


def test_senteval_nli_reads_the_three_files(tmp_path: Path) -> None:
    path = _senteval_snli(
        tmp_path,
        "train",
        "A man sleeps . \nA man sleeps . \nTwo dogs .",
        "A man dreams . \n-\nNo dogs .\n",
        "neutral\n-\ncontradiction\n",
    )
    examples = read_examples(path)
    assert examples.columns == {
        "sentence1": ["A man sleeps .", "Two dogs ."],
        "sentence2": ["A man dreams .", "No dogs ."],
        "label": [N, C],
    }
    source = examples.sources[0]
    assert source["format"] == "senteval_nli" and source["skipped"] == {"no_gold_label": 1}
    assert source["labels"] == str(tmp_path / "labels.train")


def test_senteval_nli_errors(tmp_path: Path) -> None:
    path = _senteval_snli(tmp_path, "dev", "a\nb\n", "c\n", "neutral\nneutral\n")
    with pytest.raises(ProtoembedError, match=rf"^{re.escape(str(path))} has 2 lines, .*s2\.dev 1.*align"):
        read_examples(path)
    path = _senteval_snli(tmp_path, "dev", "a\nb\n", "c\nd\n", "neutral\nsame\n")
    with _raises(tmp_path / "labels.dev", 2, "expected an NLI label"):
        read_examples(path)
    path = _senteval_snli(tmp_path, "dev", "a\n \n", "c\nd\n", "neutral\nneutral\n")
    with _raises(path, 2, "expected a non-empty premise"):
        read_examples(path)
    (tmp_path / "s2.dev").unlink()
    with _raises(tmp_path / "s2.dev", None, "file not found"):
        read_examples(path)


def test_simcse_nli_triplets_and_pairs_with_csv_quoting(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "nli_for_simcse.csv",
        '\ufeffsent0,sent1,hard_neg\r\n"A man, tall.",A man.,"He said ""no""."\r\n"Two\nlines",B,C\nD,E,F',
    )
    examples = read_examples(path)
    assert examples.columns == {
        "anchor": ["A man, tall.", "Two\nlines", "D"],
        "positive": ["A man.", "B", "E"],
        "negative": ['He said "no".', "C", "F"],
    }
    assert examples.sources[0]["format"] == "simcse_nli"
    path = _write(tmp_path / "pairs_simcse.csv", "sent0,sent1\na,b\n")
    assert read_examples(path).columns == {"anchor": ["a"], "positive": ["b"]}


def test_simcse_nli_errors(tmp_path: Path) -> None:
    path = _write(tmp_path / "nli_for_simcse.csv", "premise,hypothesis\na,b\n")
    with _raises(path, 1, "expected the CSV header sent0,sent1,hard_neg or sent0,sent1"):
        read_examples(path)
    # the record that starts on line 3 spans lines 3-4
    path = _write(tmp_path / "nli_for_simcse.csv", 'sent0,sent1,hard_neg\na,b,c\n"x\ny",z\n')
    with _raises(path, 3, "expected 3 CSV fields (sent0, sent1, hard_neg), got 2"):
        read_examples(path)
    path = _write(tmp_path / "nli_for_simcse.csv", "sent0,sent1,hard_neg\na,b,c\nd,,f\n")
    with _raises(path, 3, "expected a non-empty sent1"):
        read_examples(path)


ALLNLI_ROWS = (
    "split\tdataset\tfilename\tsentence1\tsentence2\tlabel\n"
    'train\tSNLI\tsnli_1.0_train.jsonl\tA "man.\tA person.\tentailment\n'
    "dev\tSNLI\tsnli_1.0_dev.jsonl\tA.\tB.\tneutral\n"
    "train\tMultiNLI\tmultinli_1.0_train.jsonl\tC.\tD.\t-\n"
    "train\tMultiNLI\tmultinli_1.0_train.jsonl\tE.\tF.\tcontradiction"
)


@pytest.mark.parametrize("name", ["AllNLI.tsv", "AllNLI.tsv.gz"])
def test_allnli_plain_and_gzip_with_split_option(tmp_path: Path, name: str) -> None:
    data = ALLNLI_ROWS.encode()
    path = _write(tmp_path / name, gzip.compress(data) if name.endswith(".gz") else data)
    train = read_examples(path)
    assert train.columns == {
        "sentence1": ['A "man.', "E."],
        "sentence2": ["A person.", "F."],
        "label": [E, C],
    }
    assert train.sources == [
        {
            "path": str(path),
            "format": "allnli",
            "examples": 2,
            "skipped": {"other_split": 1, "no_gold_label": 1},
            "split": "train",
        }
    ]
    dev = read_examples(path, split="dev", drop_unterminated_last_line=True)
    assert dev.columns == {"sentence1": ["A."], "sentence2": ["B."], "label": [N]}
    with _raises(path, None, "no row of split 'test'; the file has the splits train (3), dev (1)"):
        read_examples(path, split="test")
    with _raises(path, None, "unknown AllNLI split 'validation'; expected one of train, dev, test"):
        read_examples(path, split="validation")


def test_allnli_errors(tmp_path: Path) -> None:
    path = _write(tmp_path / "AllNLI.tsv", "split\tsentence1\tsentence2\n")
    with _raises(path, 1, "(missing label)"):
        read_examples(path)
    path = _write(tmp_path / "AllNLI.tsv", ALLNLI_ROWS.replace("\tC.\tD.\t-", "\tC.\tD."))
    with _raises(path, 4, "expected at least 6 tab-separated columns (up to label), got 5"):
        read_examples(path)
    path = _write(tmp_path / "AllNLI.tsv.gz", ALLNLI_ROWS.encode())  # not compressed
    with _raises(path, 1, "expected gzip-compressed text"):
        read_examples(path)
    path = _write(tmp_path / "AllNLI.tsv.gz", gzip.compress(ALLNLI_ROWS.encode() + b"\ntrain\tx\ty\t\xff\n"))
    with _raises(path, 6, "expected UTF-8 text"):
        read_examples(path)


# --------------------------------------------------------------------------- concat and conversions


def test_concat_keeps_common_columns_and_logs_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    snli = read_examples(_write(tmp_path / "snli_1.0_dev.jsonl", _jsonl(SNLI_ROWS)))
    sick_path = _write(tmp_path / "SICK_train.txt", f"{SICK_HEADER}\n1\tA.\tB.\t4\tENTAILMENT\n")
    sick = read_examples(sick_path)
    with caplog.at_level(logging.WARNING, logger="protoembed.data.training.examples"):
        both = Examples.concat([snli, sick])
    assert both.columns == {
        "sentence1": ["A man sleeps."] * 3 + ["A."],
        "sentence2": ["A man dreams.", "A person sleeps.", "A man runs.", "B."],
        "label": [N, E, C, E],
    }
    assert "dropped_columns" not in both.sources[0] and both.sources[1]["dropped_columns"] == ["score"]
    assert "score" in caplog.text and str(sick_path) in caplog.text
    stsb = read_examples(_write(tmp_path / "sts-train.csv", STSB_SENTEVAL))
    assert Examples.concat([stsb, sick]).names == ("sentence1", "sentence2", "score")


def test_concat_without_a_common_sentence_column_is_an_error(tmp_path: Path) -> None:
    text = read_examples(_write(tmp_path / "corpus.txt", "one\ntwo\n"))
    snli = read_examples(_write(tmp_path / "snli_1.0_dev.jsonl", _jsonl(SNLI_ROWS)))
    with pytest.raises(
        ProtoembedError, match=r"share no sentence column .*corpus\.txt has text; .* has sentence1"
    ):
        Examples.concat([text, snli])


def test_nli_triplets_on_a_hand_built_set() -> None:
    rows = [
        ("P1", "e1", E),
        ("P2", "e3", E),  # P2 has no contradiction: skipped
        ("P1", "c1", C),
        ("P1", "n1", N),
        ("P3", "c2", C),
        ("P1", "e2", E),
        ("P3", "e4", E),
        ("P3", "c3", C),
        ("P3", "e5", E),
        ("P3", "e6", E),
    ]
    pairs = Examples(
        {"sentence1": [r[0] for r in rows], "sentence2": [r[1] for r in rows], "label": [r[2] for r in rows]},
        [{"path": "x", "format": "test", "examples": len(rows), "skipped": {}}],
    )
    triplets = nli_triplets(pairs)
    got = list(zip(*(triplets.columns[c] for c in ("anchor", "positive", "negative"))))
    assert got == [
        ("P1", "e1", "c1"),
        ("P1", "e2", "c1"),
        ("P3", "e4", "c2"),
        ("P3", "e5", "c3"),
        ("P3", "e6", "c2"),
    ]
    assert triplets.sources[0]["premises_without_triplet"] == 1
    assert convert(pairs, ["anchor", "positive", "negative"]).columns == triplets.columns


# --------------------------------------------------------------------------- the staged files


def test_staged_stsb_train_counts_and_equals_the_evaluation_reader(data_dir: Path) -> None:
    for variant, folder in (("senteval", "senteval/STS/STSBenchmark"), ("raw", "sts_raw/stsbenchmark")):
        examples = read_examples(data_dir / folder / "sts-train.csv")
        assert len(examples) == 5749 and examples.sources[0]["format"] == "stsb"
        pairs = read_stsb(data_dir, "train", variant)
        assert examples.columns["sentence1"] == pairs.sentences1
        assert examples.columns["sentence2"] == pairs.sentences2
        np.testing.assert_array_equal(examples.columns["score"], pairs.scores)


def test_staged_sick_counts_scores_and_labels(data_dir: Path) -> None:
    for name, split, n in (("SICK_train.txt", "train", 4500), ("SICK_trial.txt", "dev", 500)):
        path = data_dir / "senteval" / "SICK" / name
        examples = read_examples(path)
        assert len(examples) == n
        pairs = read_sick(data_dir, split, "raw")
        assert examples.columns["sentence1"] == pairs.sentences1
        assert examples.columns["sentence2"] == pairs.sentences2
        np.testing.assert_array_equal(examples.columns["score"], pairs.scores)
        judgments = [line.split("\t")[4].strip() for line in path.read_text().splitlines()[1:]]
        assert Counter(NLI_LABELS[i].upper() for i in examples.columns["label"]) == Counter(judgments)


def test_staged_senteval_snli_dev_and_test(data_dir: Path) -> None:
    for split, n in (("dev", 9842), ("test", 9824)):
        examples = read_examples(f"senteval/SNLI/s1.{split}", data_dir=data_dir)
        assert len(examples) == n and examples.sources[0]["skipped"] == {}
        labels = (data_dir / "senteval" / "SNLI" / f"labels.{split}").read_text().split()
        assert [NLI_LABELS[i] for i in examples.columns["label"]] == labels


def test_staged_snli_plus_sick_concatenate_to_pairs_and_triplets(data_dir: Path) -> None:
    snli = read_examples(data_dir / "senteval" / "SNLI" / "s1.dev")
    sick = read_examples(data_dir / "senteval" / "SICK" / "SICK_train.txt")
    both = Examples.concat([snli, sick])
    assert both.names == ("sentence1", "sentence2", "label") and len(both) == 9842 + 4500
    triplets = convert(both, ["anchor", "positive", "negative"])
    # counted from the raw s1.dev / labels.dev and SICK_train.txt: 3320 entailment hypotheses of premises
    # that also have a contradiction; 3415 of the 6465 distinct premises lack one of the two
    assert len(triplets) == 3320 and triplets.names == ("anchor", "positive", "negative")
    assert triplets.sources[0]["premises_without_triplet"] == 3415
