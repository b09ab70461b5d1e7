"""The evaluator (protoembed.Evaluator): one object for eval, protoembed.evaluate and training's selection.

Its score is the mean of its tasks' metric, checked against pytrec_eval / scipy on the model's own
vectors; its run equals protoembed.evaluate's; (query, document) pairs score as the BEIR folder holding
the same judgments; a run on one's own pairs selects best/ on a dev split of them with an empty data
directory (nothing downloaded), and a run without selection keeps the last step's model; a bad selection
is one line naming the key and the choices, before torch is imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

import protoembed
from beir_toy import write_beir
from protoembed.cli import main
from protoembed.core.errors import ProtoembedError
from protoembed.evaluation.evaluator import Evaluator
from protoembed.evaluation.tasks import beir_folder_task, pair_retrieval_task
from protoembed.training import train
from protoembed.training.config import config_from_dict
from test_retrieval_metrics import reference

#: (query, relevant document, distractor) rows: "a cat" is asked twice (two relevant documents).
PAIRS = [
    ("a cat", "cats purr and sleep", "dogs bark at night"),
    ("a dog", "dogs bark at night", "fish swim in the sea"),
    ("a cat", "a cat chases mice", "birds sing in the morning"),
    ("a bird", "birds sing in the morning", "cats purr and sleep"),
    ("a fish", "fish swim in the sea", "a cat chases mice"),
]


def _write_pairs(path: Path, rows=PAIRS, names=("anchor", "positive", "negative")) -> Path:
    path.write_text(
        "".join(json.dumps(dict(zip(names, row, strict=True))) + "\n" for row in rows), encoding="utf-8"
    )
    return path


def _cosine_run(model, query_ids, queries, doc_ids, docs) -> dict[str, dict[str, float]]:
    """Every document's cosine to every query, as pytrec_eval takes a run."""
    q = np.asarray(model.encode(queries), dtype=np.float64)
    d = np.asarray(model.encode(docs), dtype=np.float64)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    scores = q @ d.T
    return {
        qid: {did: float(scores[i, j]) for j, did in enumerate(doc_ids)} for i, qid in enumerate(query_ids)
    }


# --------------------------------------------------------------------------- scores


def test_the_score_is_the_mean_of_the_tasks_metric_computed_independently(tiny_model_dirs, data_dir):
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean")
    evaluator = Evaluator(["STS-B", "SICK-R"], split="dev", data_dir=data_dir)
    results = evaluator.run(model)
    expected = []
    for task in ("STSBenchmark", "SICKRelatedness"):
        pairs = protoembed.get_task(task).load(data_dir, "senteval", "dev")
        u, v = model.encode(pairs.sentences1), model.encode(pairs.sentences2)
        cosine = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
        expected.append(spearmanr(cosine, pairs.scores).statistic * 100)
    assert list(results) == ["sts"] and results["sts"]["split"] == "dev"
    # The random tiny model's cosines lie close together: the float32 noise of another batch composition
    # (the suite encodes each distinct sentence of both tasks once, ~2e-7 per element) reorders near-ties
    # and moves Spearman x100 by up to a few 1e-3; another metric, split or pairing moves it by points.
    assert [
        results["sts"]["tasks"][t]["spearman"] for t in ("STSBenchmark", "SICKRelatedness")
    ] == pytest.approx(expected, abs=1e-2)
    assert evaluator.score(results) == pytest.approx(np.mean(expected), abs=1e-2)
    assert evaluator.describe() == {
        "tasks": ["STSBenchmark", "SICKRelatedness"],
        "metric": "spearman",
        "split": "dev",
    }
    assert evaluator(model) == evaluator.score(results)  # the trainer's embedder -> float


def test_run_equals_protoembed_evaluate_across_suites(tiny_model_dirs, data_dir, tmp_path):
    folder = write_beir(tmp_path / "toy")
    task = beir_folder_task(folder)
    named = ["STS-B", task]
    by_evaluate = protoembed.evaluate(str(tiny_model_dirs["bert"]), named, head="mean", data_dir=data_dir)
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean")
    by_evaluator = Evaluator(named, data_dir=data_dir).run(model, label=str(tiny_model_dirs["bert"]))
    assert list(by_evaluate) == list(by_evaluator) == ["sts", "retrieval"]
    assert json.dumps(by_evaluator) == json.dumps(by_evaluate)


def test_pairs_score_as_the_beir_folder_of_the_same_judgments(tiny_model_dirs, tmp_path):
    """The pairs file's queries, corpus and judgments are the distinct anchors, the distinct positives
    and negatives, anchor -> its positives; scored, they equal the hand-written BEIR folder and
    pytrec_eval on the model's cosine run."""
    pairs = _write_pairs(tmp_path / "dev.jsonl")
    queries = {"q0": "a cat", "q1": "a dog", "q2": "a bird", "q3": "a fish"}
    docs = {
        "d0": "cats purr and sleep",
        "d1": "dogs bark at night",
        "d2": "fish swim in the sea",
        "d3": "a cat chases mice",
        "d4": "birds sing in the morning",
    }
    qrels = {"q0": {"d0": 1, "d3": 1}, "q1": {"d1": 1}, "q2": {"d4": 1}, "q3": {"d2": 1}}
    data = pair_retrieval_task("own-dev", None, {"dev": str(pairs)}).load(split="dev")
    assert dict(zip(data.query_ids, data.query_texts, strict=True)) == queries
    assert dict(zip(data.corpus_ids, data.corpus_texts, strict=True)) == docs
    assert data.qrels == qrels
    folder = write_beir(
        tmp_path / "beir",
        {d: ("", t) for d, t in docs.items()},
        queries,
        [(q, d, s) for q, row in qrels.items() for d, s in row.items()],
        split="dev",
    )
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean")
    own = Evaluator(pair_retrieval_task("own-dev", None, {"dev": str(pairs)}), split="dev").run(model)
    beir = Evaluator(beir_folder_task(folder), split="dev").run(model)
    mine, theirs = own["retrieval"]["tasks"]["own-dev"], beir["retrieval"]["tasks"]["beir"]
    assert {k: v for k, v in mine.items()} == {k: v for k, v in theirs.items()}
    want = reference(
        qrels, _cosine_run(model, list(queries), list(queries.values()), list(docs), list(docs.values()))
    )
    assert mine["ndcg_at_10"] == pytest.approx(want["ndcg_at_10"] * 100, abs=1e-4)


def test_a_pairs_file_without_a_query_column_names_its_columns(tmp_path):
    pairs = _write_pairs(tmp_path / "dev.jsonl", names=("question", "positive", "negative"))
    with pytest.raises(ProtoembedError, match=r"columns anchor and positive .* it has positive, negative$"):
        pair_retrieval_task("own-dev", None, {"dev": str(pairs)}).load(split="dev")
    mapped = pair_retrieval_task("own-dev", None, {"dev": str(pairs)}, columns={"anchor": "question"})
    assert mapped.load(split="dev").query_texts[0] == "a cat"


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"tasks": ["STS-B"], "metric": "ndcg_at_10"},
            "metric 'ndcg_at_10' is not computed by suite sts: expected one of spearman, pearson",
        ),
        (
            {"tasks": ["MR"], "split": "dev"},
            "split 'dev': suite transfer scores its tasks by its own protocol, not a split (suites that take one: sts, retrieval)",
        ),
        ({"tasks": ["STS12"], "split": "dev"}, "STS12 has only a test split (asked for 'dev')"),
        ({"tasks": ["STS-Z"]}, "unknown task 'STS-Z': expected one of STS12"),
        (
            {"tasks": ["STS-B"], "folds": 3},
            "unknown option 'folds' for the suites run (sts: variant, split, cross_encoder)",
        ),
    ],
)
def test_a_bad_evaluator_is_one_line_naming_the_value_and_the_choices(arguments, message):
    with pytest.raises(ProtoembedError) as caught:
        Evaluator(**arguments)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def _own_config(model_dir: Path, tmp_path: Path, **training) -> dict:
    """A run on one's own pairs (train.jsonl) selecting on the dev pairs (dev.jsonl), no test tasks."""
    train_rows = [(q, p) for q, p, _ in PAIRS] * 8
    (tmp_path / "train.jsonl").write_text(
        "".join(json.dumps({"question": q, "answer": p}) + "\n" for q, p in train_rows), encoding="utf-8"
    )
    _write_pairs(tmp_path / "dev.jsonl")
    settings = {
        "batch_size": 4,
        "lr": 1e-3,
        "max_steps": 6,
        "eval_steps": 2,
        "log_steps": 1,
        "seed": 1,
        **training,
    }
    return {
        "model": str(model_dir),
        "head": "mean",
        "max_seq_length": 16,
        "objective": {"name": "simcse_sup"},
        "data": {
            "corpus": str(tmp_path / "train.jsonl"),
            "columns": {"anchor": "question", "positive": "answer"},
        },
        "tasks": [
            {"name": "own-dev", "kind": "retrieval_pairs", "files": {"dev": str(tmp_path / "dev.jsonl")}}
        ],
        "training": settings,
        "output_dir": str(tmp_path / "run"),
    }


@pytest.mark.parametrize(
    ("selection", "key", "message"),
    [
        (
            {"task": "own-dev", "metric": "spearman"},
            "training.selection.metric",
            "metric 'spearman' is not computed by suite retrieval: expected one of ndcg_at_1",
        ),
        (
            {"task": "own-dev", "split": "test"},
            "training.selection.split",
            "own-dev has only a dev split (asked for 'test')",
        ),
        ({"task": "own-test"}, "training.selection.tasks", "unknown task 'own-test': expected one of"),
    ],
)
def test_a_bad_selection_names_its_key_before_torch(tiny_model_dirs, tmp_path, selection, key, message):
    config = _own_config(tiny_model_dirs["bert"], tmp_path, selection=selection)
    probe = (
        "import json, sys\nfrom protoembed.training.config import config_from_dict\n"
        f"try:\n    config_from_dict(json.loads({json.dumps(json.dumps(config))}), 'own.yaml')\n"
        "except Exception as err:\n    print(json.dumps([str(err), 'torch' in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    said, torch_loaded = json.loads(done.stdout)
    assert said.startswith(f"own.yaml: config key {key!r}: ") and message in said and "\n" not in said
    assert torch_loaded is False


@pytest.mark.parametrize("qrels", ["query-id\tcorpus-id\tscore\n", ""], ids=["header only", "0 bytes"])
def test_check_reads_the_selection_files_as_the_run_reads_them(tiny_model_dirs, tmp_path, capsys, qrels):
    """``train --check`` reads a selection task's files by its reader, before training: a dev qrels file
    with no judgments fails there with the reader's own one-line error, where the run would fail at its
    first evaluation; a good one is named as read."""
    from protoembed.data.benchmarks.beir import read_beir

    folder = write_beir(tmp_path / "toy", split="dev")
    config = _own_config(
        tiny_model_dirs["bert"], tmp_path, selection={"task": "toy-dev", "metric": "ndcg_at_10"}
    )
    config["tasks"] = [
        {"name": "toy-dev", "kind": "retrieval", "files": {"all": str(folder)}, "splits": ["dev"]}
    ]
    path = tmp_path / "own.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")  # YAML reads JSON
    assert main(["train", "--config", str(path), "--check"]) == 0
    assert "protoembed train --check: model selection on toy-dev (dev split): its files read" in (
        capsys.readouterr().out.splitlines()
    )
    (folder / "qrels" / "dev.tsv").write_text(qrels, encoding="utf-8")
    with pytest.raises(ProtoembedError) as caught:  # the run's own reader, the run's own error
        read_beir(folder, "dev", "toy-dev")
    assert main(["train", "--config", str(path), "--check"]) == 2
    assert capsys.readouterr().err == f"protoembed: error: {caught.value}\n"
    assert str(folder / "qrels" / "dev.tsv") in str(caught.value) and not (tmp_path / "run").exists()


# --------------------------------------------------------------------------- training


def test_own_pairs_select_on_their_dev_split_with_an_empty_data_directory(
    tiny_model_dirs, tmp_path, monkeypatch, capsys
):
    """``train --check`` passes and training runs with $PROTOEMBED_DATA an empty folder: the selection
    reads the dev pairs only, named relative to the working directory as the training pairs are; best/ is the step of the best logged dev nDCG@10, which pytrec_eval
    computes again from best/'s own vectors."""
    empty = tmp_path / "no-data"
    empty.mkdir()
    monkeypatch.setenv("PROTOEMBED_DATA", str(empty))
    config = _own_config(
        tiny_model_dirs["bert"], tmp_path, selection={"task": "own-dev", "metric": "ndcg_at_10"}
    )
    # the files named as a user names them, relative to the working directory (not to the data directory)
    monkeypatch.chdir(tmp_path)
    config["data"]["corpus"] = "train.jsonl"
    config["tasks"][0]["files"] = {"dev": "dev.jsonl"}
    path = tmp_path / "own.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")  # YAML reads JSON
    assert main(["train", "--config", str(path), "--check"]) == 0
    said = capsys.readouterr().out.splitlines()
    assert "protoembed train --check: 2 file(s) the run reads are present" in said
    results = train(config_from_dict(config))
    assert list(empty.iterdir()) == []  # nothing downloaded, nothing written there
    log = [json.loads(line) for line in (tmp_path / "run" / "training_log.jsonl").read_text().splitlines()]
    evals = {e["step"]: e["dev_score"] for e in log if e["event"] == "eval"}
    assert list(evals) == [2, 4, 6]
    assert results["best_step"] == max(evals, key=lambda s: (evals[s], -s))
    assert results["selection"] == {"tasks": ["own-dev"], "metric": "ndcg_at_10", "split": "dev"}
    assert results["suite"] is None and results["tasks"] == {}  # no test tasks
    best = protoembed.load(str(tmp_path / "run" / "best"))
    data = pair_retrieval_task("own-dev", None, {"dev": str(tmp_path / "dev.jsonl")}).load(split="dev")
    run = _cosine_run(best, data.query_ids, data.query_texts, data.corpus_ids, data.corpus_texts)
    assert results["best_dev_score"] == pytest.approx(
        reference(data.qrels, run)["ndcg_at_10"] * 100, abs=1e-3
    )
    card = (tmp_path / "run" / "best" / "README.md").read_text(encoding="utf-8")
    assert "(ndcg_at_10 x100 on own-dev (dev split), scored by the embeddings) |" in card


def test_without_selection_best_is_the_last_steps_model(tiny_model_dirs, tmp_path, monkeypatch):
    """No selection: only the last step is 'evaluated' (scorer ``last``, no score), and best/ equals the
    best/ of the same run whose evaluator scores every later step higher (so it keeps the last one)."""
    monkeypatch.setenv("PROTOEMBED_DATA", str(tmp_path))
    config = _own_config(tiny_model_dirs["bert"], tmp_path)
    results = train(config_from_dict(config))
    log = [json.loads(line) for line in (tmp_path / "run" / "training_log.jsonl").read_text().splitlines()]
    assert [(e["step"], e["dev_score"], e["dev_scorer"]) for e in log if e["event"] == "eval"] == [
        (6, None, "last")
    ]
    assert (results["best_step"], results["best_dev_score"], results["selection"]) == (6, None, None)
    rising = iter(range(100))
    config["output_dir"] = str(tmp_path / "rising")
    train(config_from_dict(config), evaluator=lambda embedder: float(next(rising)))
    texts = [q for q, _, _ in PAIRS]
    last, kept = (protoembed.load(str(tmp_path / run / "best")) for run in ("run", "rising"))
    np.testing.assert_array_equal(last.encode(texts), kept.encode(texts))
