"""STS readers: exact pair counts on the staged data, and every format quirk / error on small files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from protoembed.core.errors import ProtoembedError
from protoembed.data.benchmarks.sts import (
    STS_YEAR_SUBSETS,
    VARIANTS,
    read_sick,
    read_sts_subset,
    read_sts_year,
    read_stsb,
)
from protoembed.data.paths import resolve_data_dir

EXPECTED_TEST_PAIRS = {
    "STS12": 3108,
    "STS13": 1500,
    "STS14": 3750,
    "STS15": 3000,
    "STS16": 1186,
    "STSBenchmark": 1379,
    "SICKRelatedness": 4927,
}
# Scored pairs per subset where gold lines can be blank (counted on the staged files), plus STS13's three subsets.
EXPECTED_SUBSET_PAIRS = {
    ("STS13", "FNWN"): 189,
    ("STS13", "headlines"): 750,
    ("STS13", "OnWN"): 561,
    ("STS15", "answers-forums"): 375,
    ("STS15", "belief"): 375,
    ("STS15", "images"): 750,
    ("STS16", "answer-answer"): 254,
    ("STS16", "headlines"): 249,
    ("STS16", "plagiarism"): 230,
    ("STS16", "postediting"): 244,
    ("STS16", "question-question"): 209,
}


def load_sts_task(task, data_dir, variant="senteval", split="test"):
    """An STS task's pairs, read through its entry."""
    from protoembed.evaluation.tasks import get_task

    return get_task(task, "sts").load(data_dir, variant, split)


# --------------------------------------------------------------------------- the staged data


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("task", list(EXPECTED_TEST_PAIRS))
def test_real_test_pair_counts(data_dir: Path, task: str, variant: str) -> None:
    pairs = load_sts_task(task, data_dir, variant)
    assert len(pairs) == len(pairs.sentences1) == len(pairs.sentences2) == EXPECTED_TEST_PAIRS[task]
    assert pairs.scores.dtype == np.float64
    assert np.all((pairs.scores >= 0) & (pairs.scores <= 5))
    assert all(s1 and s2 for s1, s2 in zip(pairs.sentences1, pairs.sentences2))


@pytest.mark.parametrize("variant", VARIANTS)
def test_real_dev_and_train_counts(data_dir: Path, variant: str) -> None:
    assert len(read_stsb(data_dir, "dev", variant)) == 1500
    assert len(read_stsb(data_dir, "train", variant)) == 5749
    assert len(read_sick(data_dir, "trial", variant)) == len(read_sick(data_dir, "dev", variant)) == 500
    assert len(read_sick(data_dir, "train", variant)) == 4500


@pytest.mark.parametrize("variant", VARIANTS)
def test_real_subset_counts_and_pooling(data_dir: Path, variant: str) -> None:
    for (year, subset), n in EXPECTED_SUBSET_PAIRS.items():
        assert len(read_sts_subset(data_dir, year, subset, variant)) == n, (year, subset)
    year = read_sts_year(data_dir, "STS15", variant)
    parts = [read_sts_subset(data_dir, "STS15", s, variant) for s in STS_YEAR_SUBSETS["STS15"]]
    assert year.sentences1 == [s for p in parts for s in p.sentences1]
    np.testing.assert_array_equal(year.scores, np.concatenate([p.scores for p in parts]))


def test_subset_lists_follow_senteval() -> None:
    assert STS_YEAR_SUBSETS["STS13"] == ("FNWN", "headlines", "OnWN")  # no SMT
    assert len(STS_YEAR_SUBSETS["STS12"]) == 5 and len(STS_YEAR_SUBSETS["STS14"]) == 6


def test_variants_differ_as_documented(data_dir: Path) -> None:
    tok = read_sts_subset(data_dir, "STS16", "headlines", "senteval")
    raw = read_sts_subset(data_dir, "STS16", "headlines", "raw")
    assert len(tok) == len(raw)
    np.testing.assert_array_equal(tok.scores, raw.scores)
    assert all(s == s.lower() for s in tok.sentences1)
    assert any(s != s.lower() for s in raw.sentences1)
    stsb = read_stsb(data_dir, "test", "raw")
    assert stsb.sentences1[0] == "A girl is styling her hair."
    assert read_stsb(data_dir, "test", "senteval").sentences1[0] == "a girl is styling her hair ."


# --------------------------------------------------------------------------- quirks on small files


def _write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def _sts15(root: Path, inputs: str | bytes, gold: str | bytes, subset: str = "belief") -> tuple[Path, Path]:
    folder = root / "senteval" / "STS" / "STS15-en-test"
    return (
        _write(folder / f"STS.input.{subset}.txt", inputs),
        _write(folder / f"STS.gs.{subset}.txt", gold),
    )


def test_blank_gold_crlf_bom_and_whitespace(tmp_path: Path) -> None:
    _sts15(
        tmp_path,
        "\ufeffA  b\tc d\r\nunscored\tpair\r\n e \tf\u2028g\x85h\r\n",
        "\ufeff4.2\r\n\r\n1\r\n",
    )
    pairs = read_sts_subset(tmp_path, "STS15", "belief")
    assert pairs.name == "STS15/belief"
    assert pairs.sentences1 == ["A b", "e"]
    # only \n ends a line; U+2028 / U+0085 are whitespace to SentEval's s.split()
    assert pairs.sentences2 == ["c d", "f g h"]
    np.testing.assert_array_equal(pairs.scores, [4.2, 1.0])


def test_raw_variant_only_strips(tmp_path: Path) -> None:
    folder = tmp_path / "sts_raw" / "STS16-en-test"
    _write(folder / "STS2016.input.headlines.txt", " A  b \tC\tsrc1\tsrc2\nx\ty\ts\tt\n")
    _write(folder / "STS2016.gs.headlines.txt", "3\n\n")
    pairs = read_sts_subset(tmp_path, "STS16", "headlines", "raw")
    assert pairs.sentences1 == ["A  b"] and pairs.sentences2 == ["C"]


def test_raw_sts16_needs_four_columns(tmp_path: Path) -> None:
    folder = tmp_path / "sts_raw" / "STS16-en-test"
    path = _write(folder / "STS2016.input.headlines.txt", "a\tb\tc\td\na\tb\n")
    _write(folder / "STS2016.gs.headlines.txt", "1\n2\n")
    with pytest.raises(ProtoembedError, match=rf"{path}:2: expected 4 tab-separated columns"):
        read_sts_subset(tmp_path, "STS16", "headlines", "raw")


def test_wrong_column_count_names_file_and_line(tmp_path: Path) -> None:
    path, _ = _sts15(tmp_path, "a\tb\nno tab here\n", "1\n2\n")
    with pytest.raises(ProtoembedError) as info:
        read_sts_subset(tmp_path, "STS15", "belief")
    message = str(info.value)
    assert message.startswith(f"{path}:2: expected 2 tab-separated columns")
    assert "\n" not in message


def test_non_numeric_score_names_gold_file_and_line(tmp_path: Path) -> None:
    _, gold = _sts15(tmp_path, "a\tb\nc\td\ne\tf\n", "1\n\nfive\n")
    with pytest.raises(ProtoembedError, match=rf"{gold}:3: expected a numeric similarity score"):
        read_sts_subset(tmp_path, "STS15", "belief")
    _sts15(tmp_path, "a\tb\n", "nan\n")
    with pytest.raises(ProtoembedError, match=":1: expected a numeric"):
        read_sts_subset(tmp_path, "STS15", "belief")


def test_line_count_mismatch_names_both_files(tmp_path: Path) -> None:
    inputs, gold = _sts15(tmp_path, "a\tb\nc\td\n", "1\n")
    with pytest.raises(ProtoembedError) as info:
        read_sts_subset(tmp_path, "STS15", "belief")
    assert str(gold) in str(info.value) and str(inputs) in str(info.value)


def test_invalid_utf8_names_line(tmp_path: Path) -> None:
    path, _ = _sts15(tmp_path, b"a\tb\nc\xff\td\n", "1\n2\n")
    with pytest.raises(ProtoembedError, match=rf"{path}:2: expected UTF-8"):
        read_sts_subset(tmp_path, "STS15", "belief")


def test_missing_file_says_how_to_fetch(tmp_path: Path) -> None:
    with pytest.raises(ProtoembedError) as info:
        read_sts_year(tmp_path, "STS12")
    message = str(info.value)
    assert "STS.input.MSRpar.txt" in message and "protoembed data download" in message
    with pytest.raises(ProtoembedError, match="sts-test.csv"):
        read_stsb(tmp_path, "test")
    with pytest.raises(ProtoembedError, match=r"SICK_test_annotated\.txt.*protoembed data download"):
        read_sick(tmp_path, "test", "raw")
    with pytest.raises(ProtoembedError, match=r"sts_raw/stsbenchmark/sts-test\.csv: file not found"):
        read_stsb(tmp_path, "test", "raw")
    # read through its entry, a task names the dataset of the variant that provides the file
    with pytest.raises(
        ProtoembedError, match=r"task STSBenchmark: 'sts_raw/.*`protoembed data download sts-raw`"
    ):
        load_sts_task("STS-B", tmp_path, "raw")
    with pytest.raises(
        ProtoembedError, match=r"task STS12: 'senteval/STS/.*`protoembed data download senteval`"
    ):
        load_sts_task("STS12", tmp_path)


def test_stsb_raw_nine_columns_and_quotes(tmp_path: Path) -> None:
    folder = tmp_path / "sts_raw" / "stsbenchmark"
    _write(
        folder / "sts-test.csv",
        'g\tf\t2016\t0001\t3.5\tHe said "hi.\tShe "said\tsrc a\tsrc b\n'
        "g\tf\t2012\t0002\t1.000\tA cat.\tA dog.\n",
    )
    pairs = read_stsb(tmp_path, "test", "raw")
    assert pairs.sentences1 == ['He said "hi.', "A cat."]
    assert pairs.sentences2 == ['She "said', "A dog."]
    np.testing.assert_array_equal(pairs.scores, [3.5, 1.0])


def test_stsb_senteval_needs_seven_columns(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "senteval" / "STS" / "STSBenchmark" / "sts-dev.csv",
        "g\tf\t2012\t1\t2.0\ta\tb\ng\tf\t2012\t2\t2.0\ta\tb\textra\n",
    )
    with pytest.raises(ProtoembedError, match=rf"{path}:2: expected 7 tab-separated columns"):
        read_stsb(tmp_path, "dev")
    _write(path, "g\tf\t2012\t1\tx\ta\tb\n")
    with pytest.raises(ProtoembedError, match=rf"{path}:1: expected a numeric"):
        read_stsb(tmp_path, "dev")


def test_sick_header_crlf_and_errors(tmp_path: Path) -> None:
    header = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\r\n"
    path = _write(
        tmp_path / "senteval" / "SICK" / "SICK_test_annotated.txt",
        "\ufeff" + header + "6\tA boy.\tA kid.\t3.3\tNEUTRAL\r\n7\tX.\tY.\t1\tCONTRADICTION\r\n",
    )
    for variant in VARIANTS:
        pairs = read_sick(tmp_path, "test", variant)
        assert pairs.sentences1 == ["A boy.", "X."] and pairs.sentences2 == ["A kid.", "Y."]
        np.testing.assert_array_equal(pairs.scores, [3.3, 1.0])
    _write(path, header + "6\tA boy.\tA kid.\tNEUTRAL\r\n")
    with pytest.raises(ProtoembedError, match=rf"{path}:2: expected 5 tab-separated columns"):
        read_sick(tmp_path, "test")


def test_unknown_names_and_splits(tmp_path: Path) -> None:
    with pytest.raises(ProtoembedError, match="unknown task 'STS17' of suite sts"):
        load_sts_task("STS17", tmp_path)
    with pytest.raises(ProtoembedError, match="only a test split"):
        load_sts_task("STS12", tmp_path, split="dev")
    with pytest.raises(ProtoembedError, match="unknown STS data variant"):
        read_stsb(tmp_path, "test", "cased")
    with pytest.raises(ProtoembedError, match="split"):
        read_sick(tmp_path, "validation")
    with pytest.raises(ProtoembedError, match="subset"):
        read_sts_subset(tmp_path, "STS13", "SMT")


# --------------------------------------------------------------------------- data dir lookup


def test_resolve_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROTOEMBED_DATA", str(tmp_path))
    assert resolve_data_dir(None) == tmp_path
    other = tmp_path / "other"
    other.mkdir()
    assert resolve_data_dir(str(other)) == other
    with pytest.raises(ProtoembedError, match="does not exist.*data download"):
        resolve_data_dir(str(tmp_path / "absent"))
    # neither: the user data directory (platformdirs), named with why it was chosen when it is missing
    import platformdirs

    default = tmp_path / "user" / "protoembed"
    monkeypatch.setattr(
        platformdirs, "user_data_dir", lambda appname=None, *a, **k: str(tmp_path / "user" / appname)
    )
    monkeypatch.delenv("PROTOEMBED_DATA")
    with pytest.raises(ProtoembedError) as info:
        resolve_data_dir(None)
    assert str(info.value) == (
        f"benchmark data directory {default} (the default: neither --data-dir nor $PROTOEMBED_DATA is set) does "
        "not exist; fetch data into it with `protoembed data download NAME...` (`protoembed data list` names the "
        "datasets), or pass --data-dir DIR / set PROTOEMBED_DATA=DIR to use another"
    )
    default.mkdir(parents=True)
    assert resolve_data_dir(None) == default
    assert resolve_data_dir(str(other / ".." / "other")) == other  # normalised
