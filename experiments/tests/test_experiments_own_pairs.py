"""The own-pairs study (experiments/own_pairs.py): its data (fair split, BEIR layout the library reads),
its page from the records."""

from __future__ import annotations

import json
from pathlib import Path

# SentEval's SNLI copy: premise, hypothesis, label per line; the test split shares one text with dev
DEV = [
    ("A man plays a guitar .", "A man makes music .", "entailment"),
    ("A man plays a guitar .", "A man sleeps .", "contradiction"),
    ("Two dogs run in a field .", "Animals are outside .", "entailment"),
    ("Two dogs run in a field .", "The dogs are brown .", "neutral"),
]
TEST = [
    ("A woman reads a book .", "A person reads .", "entailment"),
    ("A child reads a book .", "A person reads .", "entailment"),  # one query, two relevant premises
    ("A woman reads a book .", "A woman swims .", "contradiction"),
    ("A cat sits on a mat .", "Animals are outside .", "entailment"),  # hypothesis seen in training: dropped
    ("Two dogs run in a field .", "Dogs run .", "entailment"),  # premise seen in training: dropped
]


def _snli(root: Path) -> Path:
    folder = root / "senteval" / "SNLI"
    folder.mkdir(parents=True)
    for split, rows in (("dev", DEV), ("test", TEST)):
        for i, name in enumerate(("s1", "s2", "labels")):
            (folder / f"{name}.{split}").write_text("".join(r[i] + "\n" for r in rows), encoding="utf-8")
    return root


def test_the_retrieval_set_shares_no_text_with_training_and_reads_as_beir(tmp_path):
    from experiments.own_pairs_data import prepare

    from protoembed.data.benchmarks.beir import read_beir

    out = tmp_path / "out"
    stats = prepare("snli", _snli(tmp_path / "data"), out)
    pairs = [json.loads(line) for line in (out / "train_pairs.jsonl").read_text().splitlines()]
    assert pairs == [
        {"hypothesis": "A man makes music .", "premise": "A man plays a guitar ."},
        {"hypothesis": "Animals are outside .", "premise": "Two dogs run in a field ."},
    ]
    train_texts = set((out / "train_texts.txt").read_text().splitlines())
    assert train_texts == {t for p, h, _ in DEV for t in (p, h)}
    assert (out / "train_pool.txt").read_text().splitlines() == [
        "A man plays a guitar .",
        "Two dogs run in a field .",
    ]
    data = read_beir(out / "snli-retrieval", "test", "snli")
    assert not (set(data.corpus_texts) | set(data.query_texts)) & train_texts
    # the entailment pairs left after the drop, by text: one query relevant to two premises
    by_text = {
        data.query_texts[data.query_ids.index(q)]: {data.corpus_texts[data.corpus_ids.index(d)] for d in docs}
        for q, docs in data.qrels.items()
    }
    assert by_text == {"A person reads .": {"A woman reads a book .", "A child reads a book ."}}
    assert sorted(data.corpus_texts) == [
        "A cat sits on a mat .",
        "A child reads a book .",
        "A woman reads a book .",
    ]
    assert stats["test_pairs_dropped_seen_in_training"] == 2 and stats["qrels"] == 2


def test_page_cells_are_seed_means_and_changes_from_untrained(tmp_path):
    from experiments.own_pairs_report import RETRIEVAL_FILE, UNTRAINED, write_report

    records = tmp_path / "records"

    def result(ndcg: float) -> dict:
        return {"tasks": {"t": {"ndcg_at_10": ndcg, "recall_at_10": ndcg + 10, "mrr_at_10": ndcg - 5}}}

    untrained = records / f"{UNTRAINED}-googlenews"
    untrained.mkdir(parents=True)
    (untrained / RETRIEVAL_FILE).write_text(json.dumps(result(70.0)))
    (untrained / "results.json").write_text(json.dumps({"tasks": {"STSBenchmark": {"spearman": 82.0}}}))
    for seed, (ndcg, sts) in enumerate([(74.0, 80.0), (78.0, 81.0)], 1):
        run = records / f"sup-googlenews-seed{seed}"
        run.mkdir()
        (run / RETRIEVAL_FILE).write_text(json.dumps(result(ndcg)))
        (run / "results.json").write_text(json.dumps({"tasks": {"STSBenchmark": {"spearman": sts}}}))
        (run / "study_time.json").write_text(json.dumps({"train_s": 10.0 * seed, "retrieval_s": 5.0}))
    text = write_report(
        tmp_path / "page.md", records, Path("c"), ["--num-negatives", "1"], "`cmd`"
    ).read_text()
    assert "| untrained default (mean head) | – | 70.00 | 80.00 | 65.00 | | 82.00 | | |" in text
    # nDCG 76 ± std(74, 78) = 2.83, +6.00; STS 80.5 ± 0.71, -1.50; 15 s train + 5 s retrieval
    row = (
        "| supervised SimCSE, in-batch negatives | 2 | 76.00 ± 2.83 | 86.00 ± 2.83 | 71.00 ± 2.83 | +6.00 "
        "| 80.50 ± 0.71 | -1.50 | 20 s (15 + 5) |"
    )
    assert row in text
    news = text[text.index("## GoogleNews") :]
    assert row in news and row not in text[: text.index("## GoogleNews")]  # the set's own section
    assert "| sup-googlenews-seed2 | 78.00 | 88.00 | 73.00 | 81.00 | 20 | 5 |" in text
    assert "Runs recorded: 2 of 24" in text and "`protoembed mine --num-negatives 1`" in text


def test_googlenews_is_split_by_story_and_keeps_only_aligned_articles(tmp_path):
    from experiments.own_pairs_data import GSDMM, prepare

    folder = tmp_path / "data" / GSDMM
    folder.mkdir(parents=True)
    # (title, snippet, story); the third article's TS line is not its title and snippet: not aligned, left out
    articles = [
        ("t one", "s one", 1),
        ("t two", "s two", 4),
        ("t three", "s three", 8),
        ("t four", "s four", 5),
    ]
    ts = ["t one s one", "t two s two", "something else", "t four s four"]
    for name, texts in (("T", [a[0] for a in articles]), ("S", [a[1] for a in articles]), ("TS", ts)):
        rows = [json.dumps({"text": t, "cluster": a[2]}) for t, a in zip(texts, articles)]
        (folder / f"{name}.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    stats = prepare("googlenews", tmp_path / "data", out)
    pairs = [json.loads(line) for line in (out / "train_pairs.jsonl").read_text().splitlines()]
    assert pairs == [{"title": "t one", "snippet": "s one"}, {"title": "t four", "snippet": "s four"}]
    queries = [
        json.loads(line)["text"]
        for line in (out / "googlenews-retrieval" / "queries.jsonl").read_text().splitlines()
    ]
    assert (
        queries == ["t two"] and stats["corpus"] == 1 and stats["qrels"] == 1
    )  # story 4 held out, 8 unaligned


def test_the_docs_table_is_the_records_summary():
    """The own-pairs table of docs/training/your-data.md is :func:`summary_table` of the committed records."""
    from experiments.own_pairs_report import summary_table

    root = Path(__file__).resolve().parents[2]
    table = "\n".join(summary_table(root / "docs" / "results" / "own-pairs"))
    assert table.count("\n") >= 3  # both sets recorded
    assert f"\n{table}\n" in (root / "docs" / "training" / "your-data.md").read_text(encoding="utf-8")
