"""Domain adaptation on the short-text clustering sets: the ``clustering`` training format and its configs.

A training corpus built from a clustering file holds its texts only: the label field of every line is
parsed (to check the line) and dropped, so a run adapting a model to the texts never sees the classes
it is later clustered against.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from protoembed.core.errors import ProtoembedError
from protoembed.data.training.formats import FORMATS, infer_format, read_examples
from protoembed.evaluation.tasks import TASKS
from protoembed.training.components import read_training_examples
from protoembed.training.config import config_from_dict, load_config

REPO = Path(__file__).resolve().parents[1]
ADAPT_CONFIGS = sorted((REPO / "configs" / "cpu" / "adapt").glob("*.yaml"))


def _fields(path: Path) -> list[tuple[str, str]]:
    """``(label field, text field)`` of every line, split independently of the library."""
    out = []
    with path.open(encoding="utf-8", newline="") as f:
        for line in f:
            label, _, text = line.rstrip("\r\n").partition("\t")
            out.append((label, " ".join(text.split())))
    return out


def test_fixture_labels_never_reach_the_examples(tmp_path):
    labels = ["7777", "31337", "4242", "90125", "7777"]
    path = tmp_path / "toy_true_text"
    path.write_bytes(
        b"7777\talpha beta\r\n"
        b"31337\tgamma\tdelta\t\r\n"  # a tab inside the text and a trailing empty column
        b"4242\t  \r\n"  # an empty text: skipped and counted
        b"90125\tepsilon 90125 zeta\r\n"  # a number inside the text is text
        b"7777\teta"  # no final newline
    )
    examples = read_examples(path, "clustering")
    assert examples.names == ("text",)
    assert examples.columns == {"text": ["alpha beta", "gamma delta", "epsilon 90125 zeta", "eta"]}
    assert examples.sources[0]["skipped"] == {"empty_text": 1}
    assert examples.sources[0]["dropped_columns"] == ["label"]
    for text in examples.columns["text"]:
        assert not any(text == label or text.startswith(label) for label in labels)
    # the trainer's own reading of a config's data gives the same text-only examples
    cfg = config_from_dict(
        {"objective": {"name": "simcse"}, "data": {"corpus": str(path), "format": "clustering"}}
    )
    assert read_training_examples(cfg).columns == examples.columns


def test_a_malformed_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad_true_text"
    path.write_text("1\tfine\nno label here\n", encoding="utf-8")
    with pytest.raises(ProtoembedError, match=r"bad_true_text:2: expected 'label<TAB>text'"):
        read_examples(path, "clustering")


def _file(task: str) -> str:
    """The file the clustering task ``task`` reads, relative to the data directory (its entry's)."""
    (path,) = TASKS[task].files("senteval", "test")
    return path


def test_staged_file_names_select_the_clustering_format():
    assert FORMATS["clustering"].columns == ("text",)
    for task in ("AgNews", "SearchSnippets", "StackOverflow", "Biomedical", "Tweet"):
        assert infer_format(_file(task)) == "clustering", task
    assert infer_format("corpus.txt") == "text"


def test_stackoverflow_corpus_is_its_text_field_only(data_dir):
    path = data_dir / _file("StackOverflow")
    examples = read_examples(_file("StackOverflow"), "clustering", data_dir)
    texts = examples.columns["text"]
    fields = _fields(path)
    assert len(texts) == len(fields) == 20000
    assert texts == [text for _, text in fields]
    for (label, _), text in zip(fields, texts):
        assert text != label and not text.startswith(label + "\t")
    # the one title that starts with its own class number is a real title ("2 Oracle Question")
    assert [t for (label, _), t in zip(fields, texts) if t.split(" ")[0] == label] == ["2 Oracle Question"]
    # the evaluation reads the same texts, in the same order, with the labels
    assert TASKS["StackOverflow"].load(data_dir).texts == texts


def test_adapt_configs_parse_and_point_at_the_clustering_texts(data_dir):
    names = {p.stem for p in ADAPT_CONFIGS}
    sets = {"stackoverflow": "StackOverflow", "biomedical": "Biomedical", "tweet": "Tweet"}
    assert names == {f"{m}-{s}" for m in ("conpvp", "simcse") for s in sets}
    for path in ADAPT_CONFIGS:
        cfg = load_config(path, [f"data.data_dir={data_dir}"])
        method, name = path.stem.split("-")
        assert cfg.objective.name == method
        assert cfg.data.corpus == _file(sets[name])
        assert cfg.data.format == "clustering"
        assert cfg.training.eval_steps == cfg.training.max_steps  # the final model is kept
        assert cfg.training.test_tasks == ["STSBenchmark"]
        assert cfg.output_dir == f"runs/domain-adaptation/{path.stem}"
        examples = read_training_examples(cfg)  # what the trainer reads
        assert examples.names == ("text",)
        assert examples.columns["text"] == TASKS[sets[name]].load(data_dir).texts
