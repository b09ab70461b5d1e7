"""The BEIR-layout reader: what it reads (title joined to text as BEIR does, only the judged queries) and
each bad input's exact one-line message, naming the file and the line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beir_toy import CORPUS, QUERIES, write_beir
from protoembed.cli import main
from protoembed.core.errors import ProtoembedError
from protoembed.data.benchmarks.beir import join_title, read_beir
from protoembed.evaluation.tasks import TASKS, TaskDeclaration, beir_folder_task, declared_tasks


def test_reads_the_corpus_the_judged_queries_and_the_graded_judgments(tmp_path: Path):
    data = read_beir(write_beir(tmp_path), "test", "toy")
    assert data.corpus_ids == list(CORPUS)
    # BEIR: (title + " " + text).strip(); no title: the text stripped
    assert data.corpus_texts[0] == "Cats cats purr and sleep"
    assert data.corpus_texts[2] == "birds sing in the morning"
    assert data.query_ids == ["q1", "q2", "q3"] and data.query_texts == [
        QUERIES[q] for q in ("q1", "q2", "q3")
    ]
    assert data.qrels == {"q1": {"d1": 2, "d5": 1}, "q2": {"q2": 1, "d3": 0}, "q3": {"d2": 0}}
    assert join_title("", " x ") == "x" and join_title("T", "x") == "T x"


def test_integer_ids_are_read_as_text_and_blank_lines_skipped(tmp_path: Path):
    write_beir(tmp_path, corpus={"1": ("", "one")}, queries={"7": "seven"}, qrels=[("7", "1", 1)])
    (tmp_path / "corpus.jsonl").write_text('{"_id": 1, "text": "one"}\n\n', encoding="utf-8")
    assert read_beir(tmp_path, "test", "toy").corpus_ids == ["1"]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _jsonl(*records: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


BAD = {
    "no judged query in the queries file": (
        lambda d: _write(d / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nqX\td1\t1\nqY\td1\t1\n"),
        "{d}/qrels/test.tsv: none of its 2 judged queries is in {d}/queries.jsonl",
    ),
    "duplicate document": (
        lambda d: _write(d / "corpus.jsonl", _jsonl({"_id": "d1", "text": "a"}, {"_id": "d1", "text": "b"})),
        "{d}/corpus.jsonl:2: duplicate _id 'd1' (first on line 1)",
    ),
    "duplicate query": (
        lambda d: _write(d / "queries.jsonl", _jsonl({"_id": "q1", "text": "a"}, {"_id": "q1", "text": "b"})),
        "{d}/queries.jsonl:2: duplicate _id 'q1' (first on line 1)",
    ),
    "duplicate judgment": (
        lambda d: _write(d / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td1\t2\n"),
        "{d}/qrels/test.tsv:3: query-id 'q1' and corpus-id 'd1' are judged twice (first on line 2)",
    ),
    "qrels without a header": (
        lambda d: _write(d / "qrels" / "test.tsv", "q1\td1\t1\n"),
        "{d}/qrels/test.tsv:1: expected the header 'query-id\\tcorpus-id\\tscore', got 'q1\\td1\\t1'",
    ),
    "empty qrels": (
        lambda d: _write(d / "qrels" / "test.tsv", ""),
        "{d}/qrels/test.tsv: empty; expected the header 'query-id\\tcorpus-id\\tscore', then judgments",
    ),
    "header only": (
        lambda d: _write(d / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\n"),
        "{d}/qrels/test.tsv: no judgments after the header",
    ),
    "empty corpus": (lambda d: _write(d / "corpus.jsonl", "\n"), "{d}/corpus.jsonl: no documents"),
    "two columns": (
        lambda d: _write(d / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\n"),
        "{d}/qrels/test.tsv:2: expected 3 tab-separated columns (query-id, corpus-id, score), got 2",
    ),
    "score not an integer": (
        lambda d: _write(d / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t0.5\n"),
        "{d}/qrels/test.tsv:2: score must be an integer, got '0.5'",
    ),
    "not JSON": (
        lambda d: _write(d / "queries.jsonl", '{"_id": "q1", "text": "a"}\n{"_id": \n'),
        "{d}/queries.jsonl:2: expected a JSON object (Expecting value)",
    ),
    "not an object": (
        lambda d: _write(d / "corpus.jsonl", "[1, 2]\n"),
        "{d}/corpus.jsonl:1: expected a JSON object, got an array '[1, 2]'",
    ),
    "no text": (
        lambda d: _write(d / "corpus.jsonl", _jsonl({"_id": "d1", "title": "t", "body": "b"})),
        '{d}/corpus.jsonl:1: no "text" key (the line has "_id", "title", "body"); a line of corpus.jsonl is '
        'an object with "_id", "title" (optional), "text"',
    ),
    "no id": (
        lambda d: _write(d / "queries.jsonl", _jsonl({"id": "q1", "text": "a"})),
        '{d}/queries.jsonl:1: no "_id" key (the line has "id", "text"); a line of queries.jsonl is an object '
        'with "_id", "text"',
    ),
    "empty id": (
        lambda d: _write(d / "queries.jsonl", _jsonl({"_id": "", "text": "a"})),
        '{d}/queries.jsonl:1: "_id" must be a non-empty string, got an empty string ""',
    ),
    "null text": (
        lambda d: _write(d / "queries.jsonl", _jsonl({"_id": "q1", "text": None})),
        '{d}/queries.jsonl:1: "text" must be a string, got null',
    ),
    "title a number": (
        lambda d: _write(d / "corpus.jsonl", _jsonl({"_id": "d1", "title": 3, "text": "x"})),
        '{d}/corpus.jsonl:1: "title" must be a string, got a number 3',
    ),
    "text a list": (
        lambda d: _write(d / "corpus.jsonl", _jsonl({"_id": "d1", "text": ["a", "b"]})),
        '{d}/corpus.jsonl:1: "text" must be a string, got an array ["a", "b"]',
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_naming_file_and_line(case: str, tmp_path: Path, capsys):
    folder = write_beir(tmp_path / "toy")
    spoil, message = BAD[case]
    spoil(folder)
    expected = message.format(d=folder)
    with pytest.raises(ProtoembedError) as caught:
        read_beir(folder, "test", "toy")
    assert str(caught.value) == expected
    # the command: exit 2, the same one line, nothing written
    out = tmp_path / "r.json"
    assert main(["eval", "retrieval", "--task-dir", str(folder), "--output", str(out)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"protoembed: error: {expected}"]
    assert not out.exists() and list(tmp_path.iterdir()) == [folder]


def test_a_folder_without_qrels_and_a_split_it_lacks(tmp_path: Path, capsys):
    folder = write_beir(tmp_path / "toy")
    (folder / "qrels" / "test.tsv").rename(folder / "qrels" / "other.tsv")
    with pytest.raises(ProtoembedError) as caught:
        beir_folder_task(folder)
    assert str(caught.value) == (
        f"{folder}/qrels: no qrels file (train.tsv, dev.tsv, test.tsv); a BEIR folder holds corpus.jsonl, "
        "queries.jsonl and qrels/<split>.tsv"
    )
    write_beir(folder)
    assert beir_folder_task(folder).splits == ("test",)
    assert main(["eval", "retrieval", "--task-dir", str(folder), "--split", "dev"]) == 2
    assert capsys.readouterr().err.strip() == "protoembed: error: toy has only a test split (asked for 'dev')"
    with pytest.raises(ProtoembedError, match="not a folder"):
        beir_folder_task(tmp_path / "missing")


def test_a_retrieval_task_declared_in_a_config(tmp_path: Path):
    write_beir(tmp_path / "toy", split="dev")
    declared = TaskDeclaration(
        name="MyRetrieval", kind="retrieval", files={"all": str(tmp_path / "toy")}, splits=("dev",)
    )
    (entry,) = declared_tasks([declared])
    assert entry.suites == ("retrieval",) and entry.splits == ("dev",) and entry.main_score == "ndcg_at_10"
    assert entry.load(split="dev").qrels["q1"] == {"d1": 2, "d5": 1}
    assert "MyRetrieval" not in TASKS  # the run's own, never registered
    bad = TaskDeclaration(name="X", kind="retrieval", files={"test": "toy"})
    with pytest.raises(
        ProtoembedError, match=r"^task 'X': a retrieval task reads one folder: files: \{all: FOLDER\}$"
    ):
        bad.build()
    with pytest.raises(ProtoembedError, match="^task 'Y': splits is for retrieval tasks"):
        TaskDeclaration(name="Y", kind="clustering", files={"all": "f"}, splits=("test",)).build()


def test_unknown_ids_are_counted_and_scored_as_beir_scores_them(tmp_path: Path, caplog):
    """ArguAna's qrels name a document its corpus lacks, NFCorpus's name queries its queries file lacks:
    the document stays a relevant one no run retrieves, the query is left out; both are counted, logged
    once, and the metrics equal beir's ``EvaluateRetrieval.evaluate`` on the same qrels and run (to its
    rounding: 5 decimals), while beir's own loader stops on the missing query."""
    from beir.datasets.data_loader import GenericDataLoader
    from beir.retrieval.evaluation import EvaluateRetrieval

    from protoembed.evaluation.retrieval import evaluate_retrieval, search
    from protoembed.evaluation.retrieval_metrics import K_VALUES, metric_key, retrieval_scores
    from test_retrieval_suite import _toy

    folder = tmp_path / "shipped"
    encode, corpus, queries, qrels = _toy(folder)
    extra = [("q0", "d-gone", 2), ("q1", "d-gone", 1), ("q-gone", "d001", 1), ("q-gone2", "d002", 2)]
    rows = ["query-id\tcorpus-id\tscore", *(f"{q}\t{d}\t{r}" for q, d, r in [*qrels, *extra])]
    (folder / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="protoembed"):
        data = read_beir(folder, "test", "shipped")
    assert (data.missing_documents, data.missing_queries) == (1, 2)
    assert [r.getMessage() for r in caplog.records] == [
        "shipped: the test qrels name 1 document(s) missing from corpus.jsonl (relevant, never retrieved) "
        "and 2 query id(s) missing from queries.jsonl (left out), as BEIR scores them"
    ]
    assert "q-gone" not in data.qrels and data.qrels["q0"]["d-gone"] == 2
    with pytest.raises(KeyError, match="q-gone"):
        GenericDataLoader(str(folder)).load(split="test")
    run, _ = search(encode, data, "cosine", corpus_chunk_size=50)
    ours = retrieval_scores(data.qrels, run, K_VALUES)
    loader = GenericDataLoader(str(folder))
    loader.qrels_file = str(folder / "qrels" / "test.tsv")
    loader._load_qrels()
    beir_qrels = {q: docs for q, docs in loader.qrels.items() if q in queries}  # as a BEIR user must
    assert beir_qrels == data.qrels
    ndcg, map_, recall, precision = EvaluateRetrieval.evaluate(
        beir_qrels, {q: dict(docs) for q, docs in run.items()}, list(K_VALUES)
    )
    for k in K_VALUES:
        for metric, theirs in (("ndcg", ndcg[f"NDCG@{k}"]), ("map", map_[f"MAP@{k}"])):
            assert ours[metric_key(metric, k)] == pytest.approx(theirs, abs=5e-6), (metric, k)
        assert ours[metric_key("recall", k)] == pytest.approx(recall[f"Recall@{k}"], abs=5e-6)
        assert ours[metric_key("precision", k)] == pytest.approx(precision[f"P@{k}"], abs=5e-6)
    # the missing document lowers q0's recall: a relevant document no run can retrieve
    assert ours[metric_key("recall", 100)] < 1.0
    result = evaluate_retrieval(encode, None, tasks=[beir_folder_task(str(folder))])
    task = result["tasks"]["shipped"]
    assert (task["missing_documents"], task["missing_queries"]) == (1, 2)
    assert task["ndcg_at_10"] == pytest.approx(100 * ours["ndcg_at_10"], abs=1e-9)
