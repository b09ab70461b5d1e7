"""Table formats (jsonl, csv, tsv, parquet): inference, column mappings, every error message, round trips."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from protoembed.core.errors import ProtoembedError
from protoembed.data.training.columns import check_columns, parse_columns
from protoembed.data.training.examples import COLUMN_NAMES, NLI_LABELS
from protoembed.data.training.formats import FORMATS, infer_format, open_stream, read_examples

QUESTIONS = ["what is a cat ?", "who wrote it , then ?", 'a "quoted" one', "é unicode ü"]
ANSWERS = ["a small animal .", "nobody knows", "yes, with a comma", "ünïcödé"]
NEGATIVES = ["a large tree .", "the wind", "no", "ascii"]


def _rows() -> list[dict[str, str]]:
    return [
        {"id": str(i), "question": q, "answer": a, "hard_negative": n}
        for i, (q, a, n) in enumerate(zip(QUESTIONS, ANSWERS, NEGATIVES))
    ]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return path


def _write_tsv(path: Path, rows: list[dict[str, Any]]) -> Path:
    lines = ["\t".join(rows[0])] + ["\t".join(str(v) for v in row.values()) for row in rows]
    path.write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")  # CRLF ends too
    return path


def _write_parquet(path: Path, rows: list[dict[str, Any]], row_group_size: int = 2) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=row_group_size)
    return path


WRITERS = {"jsonl": _write_jsonl, "csv": _write_csv, "tsv": _write_tsv, "parquet": _write_parquet}
MAPPING = {"anchor": "question", "positive": "answer", "negative": "hard_negative"}


def _raises(message: str):
    return pytest.raises(ProtoembedError, match=f"^{re.escape(message)}$")


# --------------------------------------------------------------------------- registry and inference


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("pairs.jsonl", "jsonl"),
        ("pairs.jsonl.gz", "jsonl"),
        ("snli_1.0_train.jsonl", "snli_jsonl"),  # the NLI releases' patterns still win
        ("my_nli_pairs.jsonl", "snli_jsonl"),
        ("pairs.csv", "csv"),
        ("sts-train.csv", "stsb"),
        ("nli_for_simcse.csv", "simcse_nli"),
        ("pairs.tsv", "tsv"),
        ("AllNLI.tsv", "allnli"),
        ("pairs.parquet", "parquet"),
    ],
)
def test_infer_format_keeps_the_specific_formats_first(name: str, fmt: str) -> None:
    assert infer_format(Path("d") / name) == fmt


def test_a_column_mapping_infers_a_table_format_and_fixed_formats_refuse_one(tmp_path: Path) -> None:
    assert infer_format("my_nli_pairs.jsonl", MAPPING) == "jsonl"
    assert infer_format("sts-train.csv", MAPPING) == "csv"
    path = _write_jsonl(tmp_path / "my_nli_pairs.jsonl", _rows())
    assert read_examples(path, columns=MAPPING).columns["anchor"] == QUESTIONS
    text = tmp_path / "corpus.txt"
    text.write_text("a\n", encoding="utf-8")
    with _raises(
        f"{text}: format 'text' has fixed columns (text); a column mapping applies to jsonl, csv, tsv, parquet, hf_dataset"
    ):
        read_examples(text, columns={"text": "sentence"})
    folder = tmp_path / "my-corpus"  # a directory with a mapping: said to be a directory first
    folder.mkdir()
    with _raises(f"corpus file {folder}: a directory; expected one UTF-8 text file, one sentence per line"):
        read_examples(folder, columns={"anchor": "question"})
    assert [n for n, spec in FORMATS.items() if spec.mapped] == [
        "jsonl",
        "csv",
        "tsv",
        "parquet",
        "hf_dataset",
    ]


# --------------------------------------------------------------------------- round trip


@pytest.mark.parametrize("mapped", [True, False])
def test_the_same_rows_in_every_table_format_read_into_identical_examples(
    tmp_path: Path, mapped: bool
) -> None:
    rows = _rows()
    if not mapped:  # columns already named like protoembed's; "id" is ignored
        rows = [{"id": r["id"], "anchor": r["question"], "positive": r["answer"]} for r in rows]
    read = {}
    for fmt, write in WRITERS.items():
        path = write(tmp_path / f"pairs.{fmt}", rows)
        assert infer_format(path) == fmt
        examples = read_examples(path, columns=MAPPING if mapped else None)
        read[fmt] = examples
        source = examples.sources[0]
        assert (source["format"], source["examples"], source["skipped"]) == (fmt, len(rows), {})
        assert source["ignored_columns"] == ["id"]
    expected = {"anchor": QUESTIONS, "positive": ANSWERS} | ({"negative": NEGATIVES} if mapped else {})
    for fmt, examples in read.items():
        assert examples.columns == expected, fmt
        assert list(open_stream(tmp_path / f"pairs.{fmt}", columns=MAPPING if mapped else None)) == [
            dict(zip(expected, values)) for values in zip(*expected.values())
        ], fmt


def test_gzip_tables_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "pairs.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write('{"anchor": "a", "positive": "b"}\n\n{"anchor": "c", "positive": "d"}\n')
    examples = read_examples(path)
    assert examples.columns == {"anchor": ["a", "c"], "positive": ["b", "d"]}
    assert examples.sources[0]["skipped"] == {"empty_line": 1}
    csv_path = tmp_path / "pairs.csv"
    csv_path.write_text(
        '\ufeffanchor,positive\n"multi\nline",b\n\nc,d\n', encoding="utf-8"
    )  # BOM, quoted newline
    examples = read_examples(csv_path)
    assert examples.columns == {"anchor": ["multi\nline", "c"], "positive": ["b", "d"]}
    assert examples.sources[0]["skipped"] == {"empty_line": 1}


def test_scores_and_labels_are_parsed_and_checked(tmp_path: Path) -> None:
    rows = [
        {"sentence1": "a", "sentence2": "b", "score": "4.5", "label": "Entailment"},
        {"sentence1": "c", "sentence2": "d", "score": 1, "label": 0},
        {"sentence1": "e", "sentence2": "f", "score": "0", "label": "-"},  # no gold label: skipped
        {"sentence1": "g", "sentence2": "h", "score": 2.0, "label": "2"},
    ]
    examples = read_examples(_write_jsonl(tmp_path / "pairs.jsonl", rows))
    assert examples.columns == {
        "sentence1": ["a", "c", "g"],
        "sentence2": ["b", "d", "h"],
        "score": [4.5, 1.0, 2.0],
        "label": [NLI_LABELS.index("entailment"), 0, 2],
    }
    assert examples.sources[0]["skipped"] == {"no_gold_label": 1}
    bad = _write_jsonl(tmp_path / "bad.jsonl", [rows[0], {**rows[1], "score": "nan"}])
    with _raises(f"{bad}:2: column 'score': expected a finite number, got 'nan'"):
        read_examples(bad)
    bad = _write_jsonl(tmp_path / "bad.jsonl", [{**rows[0], "label": 3}])
    with _raises(
        f"{bad}:1: column 'label': expected an NLI label (contradiction, entailment, neutral) or its index 0-2, got 3"
    ):
        read_examples(bad)
    bad = _write_jsonl(tmp_path / "bad.jsonl", [{**rows[0], "sentence2": 7}])
    with _raises(f"{bad}:1: column 'sentence2': expected a string, got 7"):
        read_examples(bad)


# --------------------------------------------------------------------------- errors


def test_missing_and_empty_cells_name_file_line_and_the_files_column(tmp_path: Path) -> None:
    rows = _rows()
    jsonl = _write_jsonl(tmp_path / "a.jsonl", [rows[0], {"question": "q"}, rows[2]])
    with _raises(f"{jsonl}:2: column 'answer' is missing"):
        read_examples(jsonl, columns=MAPPING)
    jsonl = _write_jsonl(tmp_path / "a.jsonl", [rows[0], rows[1], {**rows[2], "answer": "  "}])
    with _raises(f"{jsonl}:3: column 'answer' is empty"):
        read_examples(jsonl, columns=MAPPING)
    jsonl = _write_jsonl(tmp_path / "a.jsonl", [rows[0], {**rows[1], "answer": None}])
    with _raises(f"{jsonl}:2: column 'answer' is missing"):
        read_examples(jsonl, columns=MAPPING)
    csv_path = tmp_path / "a.csv"
    csv_path.write_text('question,answer\n"q1",a1\n\n"multi\nline",\n', encoding="utf-8")
    with _raises(f"{csv_path}:4: column 'answer' is empty"):  # the line the record starts on
        read_examples(csv_path, columns={"anchor": "question", "positive": "answer"})
    parquet = _write_parquet(tmp_path / "a.parquet", [rows[0], rows[1], {**rows[2], "answer": None}])
    with _raises(f"{parquet}: row 3: column 'answer' is missing"):
        read_examples(parquet, columns=MAPPING)


def test_malformed_files_are_one_line_errors(tmp_path: Path) -> None:
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_text('{"anchor": "a", "positive": "b"}\n["a", "b"]\n', encoding="utf-8")
    with _raises(f"""{jsonl}:2: expected a JSON object, got an array '["a", "b"]'"""):
        read_examples(jsonl)
    jsonl.write_text('{"anchor": "a", "positive": "b"}\n{"anchor": \n', encoding="utf-8")
    with _raises(f"{jsonl}:2: expected a JSON object (Expecting value)"):
        read_examples(jsonl)
    csv_path = tmp_path / "a.csv"
    csv_path.write_text("question,answer\nq1,a1\nq2,a2,extra\n", encoding="utf-8")
    with _raises(f"{csv_path}:3: expected 2 CSV fields (the header's question, answer), got 3"):
        read_examples(csv_path, columns={"anchor": "question", "positive": "answer"})
    with _raises(
        f"{csv_path}: no column 'hard_negative' (mapped to negative); the file's columns are question, answer"
    ):
        read_examples(csv_path, columns=MAPPING)
    with _raises(
        f"{csv_path}: no usable column (the file has question, answer); expected columns named "
        f"{', '.join(COLUMN_NAMES)}, or a column mapping such as anchor: question"
    ):
        read_examples(csv_path)
    empty = tmp_path / "empty.tsv"
    empty.write_text("", encoding="utf-8")
    with _raises(f"{empty}:1: expected a tab-separated header row naming the columns, got an empty line"):
        read_examples(empty)
    not_parquet = tmp_path / "fake.parquet"
    not_parquet.write_text("anchor,positive\na,b\n", encoding="utf-8")
    with pytest.raises(ProtoembedError, match=rf"^{re.escape(str(not_parquet))}: not a Parquet file \(.*\)$"):
        read_examples(not_parquet)
    blank = _write_jsonl(tmp_path / "blank.jsonl", [])
    with _raises(f"{blank}: no usable example (jsonl format)"):
        read_examples(blank)


# --------------------------------------------------------------------------- mappings


def test_parse_columns_and_its_errors() -> None:
    assert parse_columns(["anchor=question", " positive = answer "]) == {
        "anchor": "question",
        "positive": "answer",
    }
    assert parse_columns([]) == {}
    with _raises("column mapping 'anchor': expected COLUMN=FILE_COLUMN, e.g. anchor=question"):
        parse_columns(["anchor"])
    with _raises("column mapping 'anchor=': expected COLUMN=FILE_COLUMN, e.g. anchor=question"):
        parse_columns(["anchor="])
    with _raises(
        f"column mapping 'anchr=q': unknown column 'anchr'; expected one of {', '.join(COLUMN_NAMES)}"
    ):
        parse_columns(["anchr=q"])
    with _raises("column mapping 'anchor=b': column 'anchor' is mapped twice"):
        parse_columns(["anchor=a", "anchor=b"])
    with _raises("data.columns: column 'anchor' must be mapped to a column name of the file, got ''"):
        check_columns({"anchor": ""}, "data.columns")


def test_a_partial_mapping_keeps_the_columns_already_named(tmp_path: Path) -> None:
    rows = [{"anchor": "a", "positive": "p", "hard_negative": "n", "text": "t"}]
    path = _write_jsonl(tmp_path / "t.jsonl", rows)
    examples = read_examples(path, columns={"negative": "hard_negative", "sentence1": "text"})
    assert examples.columns == {"sentence1": ["t"], "anchor": ["a"], "positive": ["p"], "negative": ["n"]}
    assert examples.sources[0]["columns"] == {
        "sentence1": "text",
        "anchor": "anchor",
        "positive": "positive",
        "negative": "hard_negative",
    }


# --------------------------------------------------------------------------- config and command line


def _train_config(tmp_path: Path, model_dir: Path, data: str, **training: Any) -> Path:
    settings = {"batch_size": 4, "lr": 1.0e-3, "max_steps": 2, "eval_steps": 2, "log_steps": 1}
    settings |= {"eval_batch_size": 256, "test_tasks": ["STSBenchmark"], **training}
    lines = [
        f"model: {model_dir}",
        "head: mean",  # a random tiny BERT's [CLS] states are all alike
        "max_seq_length: 16",
        "objective: {name: simcse_sup}",
        f"data: {data}",
        "training:",
        *[f"  {k}: {json.dumps(v)}" for k, v in settings.items()],
    ]
    path = tmp_path / "tiny.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_config_column_mappings_are_validated_by_the_loader(tmp_path: Path) -> None:
    from protoembed.training.config import load_config

    data = "{corpus: [pairs.jsonl, {path: b.csv, columns: {anchor: q}}], columns: {anchor: question, positive: answer}}"
    cfg = load_config(_train_config(tmp_path, tmp_path, data))
    files = cfg.data.files()
    assert [f.columns for f in files] == [{"anchor": "question", "positive": "answer"}, {"anchor": "q"}]
    config = _train_config(tmp_path, tmp_path, "{corpus: pairs.jsonl, columns: {anchr: question}}")
    with _raises(
        f"{config}: config key 'data.columns': unknown column 'anchr'; expected one of {', '.join(COLUMN_NAMES)}"
    ):
        load_config(config)
    config = _train_config(tmp_path, tmp_path, "{corpus: [{path: a.csv, columns: {anchor: ''}}]}")
    with _raises(
        f"{config}: config key 'data.corpus.0.columns': column 'anchor' must be mapped to a column name of "
        "the file, got ''"
    ):
        load_config(config)


def test_train_reads_a_mapped_jsonl_end_to_end(
    tiny_model_dirs, data_dir: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    from protoembed.cli import main

    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))
    rows = [{**row, "question": f"{row['question']} {i}"} for i in range(2) for row in _rows()]  # 8 rows
    corpus = _write_jsonl(tmp_path / "pairs.jsonl", rows)
    mapping = "{anchor: question, positive: answer, negative: hard_negative}"
    config = _train_config(tmp_path, tiny_model_dirs["bert"], f"{{corpus: {corpus}, columns: {mapping}}}")
    out = tmp_path / "run"
    assert main(["train", "--config", str(config), "--output-dir", str(out)]) == 0
    start = json.loads((out / "training_log.jsonl").read_text().splitlines()[0])
    assert start["data"]["columns"] == ["anchor", "positive", "negative"] and start["data"]["examples"] == 8
    assert start["data"]["files"][0]["ignored_columns"] == ["id"]
    assert (out / "best" / "modules.json").is_file() and (out / "results.json").is_file()
    capsys.readouterr()

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(rows[0]) + "\n" + '"just a string"\n', encoding="utf-8")
    config = _train_config(tmp_path, tiny_model_dirs["bert"], f"{{corpus: {bad}, columns: {mapping}}}")
    assert main(["train", "--config", str(config), "--output-dir", str(tmp_path / "bad_run")]) == 2
    err = capsys.readouterr().err
    assert err == f"protoembed: error: {bad}:2: expected a JSON object, got a string '\"just a string\"'\n"
    assert not (tmp_path / "bad_run").exists()  # nothing half-written, not even the folder and its lock


# --------------------------------------------------------------------------- Hugging Face datasets


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """load_dataset's cache in the test's folder (not the user's)."""
    import datasets

    cache = tmp_path / "hf_cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    return cache


def _nli_dataset():
    import datasets

    features = datasets.Features(
        {
            "premise": datasets.Value("string"),
            "hypothesis": datasets.Value("string"),
            "label": datasets.ClassLabel(names=["entailment", "neutral", "contradiction"]),  # SNLI's order
            "idx": datasets.Value("int32"),
        }
    )
    rows = {"premise": ["a", "b", "c"], "hypothesis": ["d", "e", "f"], "label": [0, 2, -1], "idx": [0, 1, 2]}
    return datasets.Dataset.from_dict(rows, features=features)


def test_a_save_to_disk_folder_is_recognised_and_its_class_labels_read_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets

    _nli_dataset().save_to_disk(str(tmp_path / "data" / "nli_saved"))
    monkeypatch.chdir(tmp_path)
    mapping = {"sentence1": "premise", "sentence2": "hypothesis"}
    examples = read_examples("nli_saved", data_dir=tmp_path / "data", columns=mapping)  # under data_dir
    assert examples.columns == {
        "sentence1": ["a", "b"],
        "sentence2": ["d", "e"],
        "label": [NLI_LABELS.index("entailment"), NLI_LABELS.index("contradiction")],  # by name, not index
    }
    source = examples.sources[0]
    assert (source["format"], source["skipped"], source["ignored_columns"]) == (
        "hf_dataset",
        {"no_gold_label": 1},
        ["idx"],
    )
    assert list(open_stream("data/nli_saved", columns=mapping)) == [
        dict(zip(examples.columns, values)) for values in zip(*examples.columns.values())
    ]
    split_dict = datasets.DatasetDict({"train": _nli_dataset(), "validation": _nli_dataset().select([1])})
    split_dict.save_to_disk(str(tmp_path / "dict"))
    assert read_examples(tmp_path / "dict", columns=mapping, split="validation").columns["sentence1"] == ["b"]
    with _raises(f"{tmp_path / 'dict'}: no split 'test'; the dataset has train, validation"):
        read_examples(tmp_path / "dict", columns=mapping, split="test")


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "tsv", "parquet"])
def test_load_dataset_reads_a_data_file_as_the_table_reader_does(
    tmp_path: Path, hf_cache: Path, fmt: str
) -> None:
    path = WRITERS[fmt](tmp_path / f"pairs.{fmt}", _rows())
    through_datasets = read_examples(path, format="hf_dataset", columns=MAPPING)
    assert through_datasets.columns == read_examples(path, columns=MAPPING).columns
    assert through_datasets.sources[0]["format"] == "hf_dataset" and any(hf_cache.iterdir())


def test_a_hub_id_offline_and_a_missing_package_are_one_line_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ProtoembedError) as caught:
        read_examples("hub:nobody/no-such-dataset")
    message = str(caught.value)
    assert message.startswith(
        "hub:nobody/no-such-dataset: cannot load the Hugging Face dataset 'nobody/no-such-dataset' ("
    )
    assert message.endswith(
        "; HF_HUB_OFFLINE is set: unset it, or run once with the network to fill the cache"
    )
    assert "\n" not in message
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` raises ImportError
    with _raises(
        "reading Hugging Face datasets needs the datasets package: pip install 'protoembed[datasets]'"
    ):
        read_examples("hub:owner/name")
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    path = tmp_path / "x.parquet"
    path.write_bytes(b"PAR1")
    with _raises("reading Parquet files needs the pyarrow package: pip install 'protoembed[datasets]'"):
        read_examples(path)


def test_preflight_names_a_missing_table_file_and_leaves_hub_ids_to_datasets(tmp_path: Path) -> None:
    from protoembed.data.needs import check_present
    from protoembed.training.config import load_config
    from protoembed.training.needs import config_needs

    missing = tmp_path / "gone.parquet"
    config = _train_config(tmp_path, tmp_path, f"{{corpus: [hub:owner/name, {missing}]}}")
    needs = [n for n in config_needs([("", load_config(config))]) if n.what == "training file"]
    assert [n.path for n in needs] == [str(missing)]
    with pytest.raises(ProtoembedError, match=rf"^training file: '{re.escape(str(missing))}' not found"):
        check_present(needs)
