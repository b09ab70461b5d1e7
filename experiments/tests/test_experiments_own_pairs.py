"""The own-pairs study (experiments/own_pairs.py): its data (the dev and test splits held apart, BEIR layout
the library reads), its plan (learning-rate grid, choice, run names), the driver's run logic, the
sentence-transformers anchor, and its page from the records."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

# SentEval's SNLI copy: premise, hypothesis, label per line. Five premises: the fifth (every
# DEV_PREMISE_EVERY-th) is the dev split; the test split shares texts with both.
DEV = [
    ("A man plays a guitar .", "A man makes music .", "entailment"),
    ("A man plays a guitar .", "A man sleeps .", "contradiction"),
    ("Two dogs run in a field .", "Animals are outside .", "entailment"),
    ("Two dogs run in a field .", "The dogs are brown .", "neutral"),
    ("A girl jumps .", "A child moves .", "entailment"),
    ("A boy eats .", "Someone eats .", "entailment"),
    ("A cook stirs a pot .", "A person cooks .", "entailment"),  # the dev premise
    ("A cook stirs a pot .", "Animals are outside .", "neutral"),  # its text seen in training
    ("A cook stirs a pot .", "A cook is busy .", "entailment"),
]
TEST = [
    ("A woman reads a book .", "A person reads .", "entailment"),
    ("A child reads a book .", "A person reads .", "entailment"),  # one query, two relevant premises
    ("A woman reads a book .", "A woman swims .", "contradiction"),
    ("A cat sits on a mat .", "Animals are outside .", "entailment"),  # hypothesis seen in training: dropped
    ("Two dogs run in a field .", "Dogs run .", "entailment"),  # premise seen in training: dropped
    ("A chef works .", "A cook is busy .", "entailment"),  # hypothesis seen in dev: dropped
]


def _snli(root: Path) -> Path:
    folder = root / "senteval" / "SNLI"
    folder.mkdir(parents=True)
    for split, rows in (("dev", DEV), ("test", TEST)):
        for i, name in enumerate(("s1", "s2", "labels")):
            (folder / f"{name}.{split}").write_text("".join(r[i] + "\n" for r in rows), encoding="utf-8")
    return root


def _by_text(data) -> dict[str, set[str]]:
    return {
        data.query_texts[data.query_ids.index(q)]: {data.corpus_texts[data.corpus_ids.index(d)] for d in docs}
        for q, docs in data.qrels.items()
    }


def test_snli_dev_and_test_splits_share_no_text_with_training_and_read_as_beir(tmp_path):
    from experiments.own_pairs_data import DEV_PREMISE_EVERY, dev_dir, prepare, test_dir

    from protoembed.data.benchmarks.beir import read_beir

    assert DEV_PREMISE_EVERY == 5  # the fixture's fifth premise is the dev split
    out = tmp_path / "out" / "snli"
    stats = prepare("snli", _snli(tmp_path / "data"), out)
    pairs = [json.loads(line) for line in (out / "train_pairs.jsonl").read_text().splitlines()]
    assert pairs == [
        {"hypothesis": "A man makes music .", "premise": "A man plays a guitar ."},
        {"hypothesis": "Animals are outside .", "premise": "Two dogs run in a field ."},
        {"hypothesis": "A child moves .", "premise": "A girl jumps ."},
        {"hypothesis": "Someone eats .", "premise": "A boy eats ."},
    ]
    train_texts = set((out / "train_texts.txt").read_text().splitlines())
    assert train_texts == {t for p, h, _ in DEV if p != "A cook stirs a pot ." for t in (p, h)}
    assert "A cook stirs a pot ." not in (out / "train_pool.txt").read_text()
    test = read_beir(test_dir(out, "snli"), "test", "snli")
    assert not (set(test.corpus_texts) | set(test.query_texts)) & train_texts
    assert _by_text(test) == {"A person reads .": {"A woman reads a book .", "A child reads a book ."}}
    # the dev split's own folder beside the set's: its premise and entailment; the other entailment's
    # hypothesis is a test text, so that pair is dropped (and the test pair, whose text is a dev text)
    assert dev_dir(out, "snli") == tmp_path / "out" / "snli-dev"
    dev = read_beir(dev_dir(out, "snli"), "dev", "snli-dev")
    assert _by_text(dev) == {"A person cooks .": {"A cook stirs a pot ."}}
    assert not (set(dev.query_texts) | set(dev.corpus_texts)) & (train_texts | set(test.query_texts))
    assert stats["test_pairs_dropped_seen_in_training_or_dev"] == 3 and stats["qrels"] == 2
    assert stats["dev_pairs"] == 2 and stats["dev_pairs_dropped_seen_in_training_or_test"] == 1
    assert stats["dev_qrels"] == 1 and stats["train_pairs"] == 4


def test_googlenews_is_split_by_story_and_keeps_only_aligned_articles(tmp_path):
    from experiments.own_pairs_data import (
        DEV_STORY_EVERY,
        DEV_STORY_OFFSET,
        GSDMM,
        dev_dir,
        prepare,
        test_dir,
    )

    assert (DEV_STORY_EVERY, DEV_STORY_OFFSET) == (8, 3)  # of the non-test stories 1, 2, 3, 5, 6: story 5
    folder = tmp_path / "data" / GSDMM
    folder.mkdir(parents=True)
    # (title, snippet, story); the third article's TS line is not its title and snippet: not aligned, left out
    articles = [
        ("t one", "s one", 1),
        ("t two", "s two", 4),
        ("t three", "s three", 8),
        ("t four", "s four", 2),
        ("t five", "s five", 5),
        ("t six", "s six", 3),
        ("t seven", "s seven", 6),
    ]
    ts = [f"{t} {s}" for t, s, _ in articles]
    ts[2] = "something else"
    for name, texts in (("T", [a[0] for a in articles]), ("S", [a[1] for a in articles]), ("TS", ts)):
        rows = [json.dumps({"text": t, "cluster": a[2]}) for t, a in zip(texts, articles)]
        (folder / f"{name}.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "out" / "googlenews"
    stats = prepare("googlenews", tmp_path / "data", out)
    pairs = [json.loads(line) for line in (out / "train_pairs.jsonl").read_text().splitlines()]
    assert [p["title"] for p in pairs] == ["t one", "t four", "t six", "t seven"]

    def queries(folder: Path) -> list[str]:
        return [json.loads(line)["text"] for line in (folder / "queries.jsonl").read_text().splitlines()]

    assert queries(test_dir(out, "googlenews")) == ["t two"]  # story 4; story 8's article unaligned
    assert queries(dev_dir(out, "googlenews")) == ["t five"]  # story 5
    assert (dev_dir(out, "googlenews") / "qrels" / "dev.tsv").read_text().splitlines() == [
        "query-id\tcorpus-id\tscore",
        "q0\td0\t1",
    ]
    assert stats["corpus"] == 1 and stats["dev_corpus"] == 1 and stats["train_pool"] == 4


def test_the_lr_is_the_best_dev_score_of_the_grid_ties_to_the_smaller():
    from experiments.own_pairs_plan import LR_GRID, SEEDS, SELECTION_SEED, choose_lr, planned_runs

    low, mid, high = LR_GRID
    assert choose_lr({low: 30.0, mid: 31.5, high: 31.0}) == mid
    assert choose_lr({low: 31.5, mid: 31.5, high: 31.0}) == low  # a tie: the smaller change
    assert choose_lr({low: 30.0, mid: None, high: 31.0}) is None  # a selection run missing
    assert choose_lr({low: 30.0, high: 31.0}) is None
    assert planned_runs(None) == [(lr, SELECTION_SEED) for lr in LR_GRID]
    runs = planned_runs(high)
    assert len(runs) == len(LR_GRID) + len(SEEDS) - 1 == 5
    assert runs[3:] == [(high, seed) for seed in SEEDS if seed != SELECTION_SEED]


def test_run_names_round_trip_and_the_budget_counts():
    from experiments.own_pairs_plan import (
        ANCHORS,
        LR_GRID,
        TRAINED,
        epoch_steps,
        eval_steps,
        parse_run_name,
        run_name,
    )

    for method in TRAINED:
        for lr in LR_GRID:
            assert parse_run_name(run_name(method, "googlenews", lr, 2)) == (method, "googlenews", lr, 2)
    assert run_name("sup-mined", "snli", 1e-4, 3) == "sup-mined-snli-lr0.0001-seed3"
    assert parse_run_name("sup-mined-snli-seed1") is None  # the 30-step study's
    assert epoch_steps(7822, 64) == 122 and epoch_steps(2662, 64) == 41  # the last partial batch dropped
    assert eval_steps(122) == 16 and eval_steps(41) == 6 and eval_steps(3) == 1
    assert ANCHORS == {"sup": "st-mnrl", "sup-mined": "st-mnrl-mined"}


def _fake_study(
    tmp_path: Path,
    monkeypatch,
    dev_by_lr: dict[float, float],
    more: tuple[str, ...] = ("--methods", "st-mnrl"),
) -> tuple[list[list[str]], Path]:
    """Run the driver's run logic with every command faked (``more``: further command-line arguments): a
    training writes results.json and best/, an evaluation writes its scores (dev: ``dev_by_lr[lr]``);
    returns the commands run and the records."""
    import experiments.own_pairs as driver

    commands: list[list[str]] = []
    lrs: dict[str, float] = {}

    def fake(cmd: list[str], folder: Path, key: str = "seconds", file: str = "", quiet: bool = False) -> int:
        commands.append(cmd)
        folder.mkdir(parents=True, exist_ok=True)
        if "--output-dir" in cmd:  # a training
            lr = float(next(a for a in cmd if a.startswith("training.lr=")).split("=")[1])
            lrs[folder.name] = lr
            (folder / "best").mkdir(exist_ok=True)
            (folder / "results.json").write_text(json.dumps({"best_step": 1, "total_steps": 2}))
            (folder / "config.yaml").write_text("training: {}\n")
            (folder / "training_log.jsonl").write_text("")
            return 0
        out = Path(cmd[cmd.index("--output") + 1])
        if "sts" in cmd:
            out.write_text(json.dumps({"tasks": {"STSBenchmark": {"spearman": 80.0}}}))
            return 0
        split = cmd[cmd.index("--split") + 1]
        score = dev_by_lr[lrs[folder.name]] if split == "dev" else 40.0
        task = {"ndcg_at_10": score, "recall_at_10": score, "mrr_at_10": score}
        out.write_text(json.dumps({"tasks": {"t": task}}))
        return 0

    monkeypatch.setattr(driver, "timed_call", fake)
    monkeypatch.setattr(driver, "run_eval_steps", lambda config, cap: 2)
    args = driver.parse_args(
        ["--sets", "googlenews", *more, "--runs-dir", str(tmp_path / "runs")]
        + ["--records-dir", str(tmp_path / "records")]
    )
    failed = driver._runs(args, {"googlenews": tmp_path / "runs" / "data" / "googlenews"})
    assert failed == []
    return commands, tmp_path / "records"


def test_the_driver_tries_the_grid_then_trains_and_tests_the_other_seeds_at_the_best_lr(
    tmp_path, monkeypatch
):
    from experiments.own_pairs import ANCHOR_SCRIPT, chosen_lr
    from experiments.own_pairs_plan import LR_GRID, run_name

    low, mid, high = LR_GRID
    commands, records = _fake_study(tmp_path, monkeypatch, {low: 30.0, mid: 32.0, high: 31.0})
    trainings = [c for c in commands if "--output-dir" in c]
    assert all(c[1] == str(ANCHOR_SCRIPT) for c in trainings)  # st-mnrl: the anchor's script
    names = [Path(c[c.index("--output-dir") + 1]).name for c in trainings]
    assert names == [run_name("st-mnrl", "googlenews", lr, 1) for lr in LR_GRID] + [
        run_name("st-mnrl", "googlenews", mid, seed) for seed in (2, 3)
    ]
    first = trainings[0]
    sets = [first[k + 1] for k, arg in enumerate(first) if arg == "--set"]
    assert sets[:3] == [f"training.lr={low}", "training.seed=1", "training.eval_steps=2"]
    assert chosen_lr(records, "st-mnrl", "googlenews") == mid
    tested = sorted(p.parent.name for p in records.glob("*/retrieval.json"))
    assert tested == [run_name("st-mnrl", "googlenews", mid, seed) for seed in (1, 2, 3)]
    assert not (records / run_name("st-mnrl", "googlenews", low, 1) / "retrieval.json").exists()
    assert all((records / n / "sts.json").is_file() for n in tested)
    # a second pass finds every run recorded: nothing runs again
    again, _ = _fake_study(tmp_path, monkeypatch, {low: 0.0, mid: 0.0, high: 99.0})
    assert again == []


def test_the_study_overrides_reach_protoembed_runs_after_their_own_and_not_the_anchor(tmp_path, monkeypatch):
    from experiments.own_pairs import ANCHOR_SCRIPT

    pins = ["--set", "training.padding=joint", "--set", "training.dropout=torch"]
    commands, _ = _fake_study(
        tmp_path, monkeypatch, {2e-5: 30.0, 5e-5: 32.0, 1e-4: 31.0}, ("--methods", "sup", "st-mnrl", *pins)
    )
    trainings = [c for c in commands if "--output-dir" in c]
    anchor = [c for c in trainings if c[1] == str(ANCHOR_SCRIPT)]
    ours = [c for c in trainings if c[1:4] == ["-m", "protoembed", "train"]]
    assert len(anchor) == len(ours) == 5  # 3 learning rates on seed 1, then seeds 2 and 3
    assert all(c[-4:] == pins for c in ours)
    assert not any("training.padding=joint" in c for c in anchor)


def test_protoembed_runs_resume_through_protoembed_train(tmp_path):
    from experiments.own_pairs import train_command

    cmd = train_command("sup", Path("c.yaml"), tmp_path / "run", ["training.lr=5e-05"])
    assert cmd[:4] == [sys.executable, "-m", "protoembed", "train"] and "--resume" in cmd
    assert cmd[-2:] == ["--set", "training.lr=5e-05"]


def _study_config(tmp_path: Path, model: str, mined: bool = False) -> Path:
    """A supervised config as the study writes them, on tiny pairs and a tiny dev folder."""
    from experiments.own_pairs_data import write_beir

    topics = ["cat", "dog", "car", "sun", "tea", "map", "pen", "cup", "box", "hat", "bus", "ink"]
    rows = [
        {"q": f"the {t} query", "d": f"a document about the {t}", "n": f"a note on the {t}s"} for t in topics
    ]
    tmp_path.mkdir(parents=True, exist_ok=True)
    pairs = tmp_path / "pairs.jsonl"
    if mined:
        pairs.write_text(
            "".join(
                json.dumps({"anchor": r["q"], "positive": r["d"], "negative": r["n"]}) + "\n" for r in rows
            )
        )
    else:
        pairs.write_text("".join(json.dumps({"title": r["q"], "snippet": r["d"]}) + "\n" for r in rows))
    dev = [(f"which {t} is it", f"the {t} document") for t in topics[:6]]
    write_beir(tmp_path / "dev", "dev", dev, [d for _, d in dev], lambda t: True)
    config = {
        "model": model,
        "max_seq_length": 16,
        "head": "mean",
        "objective": {"name": "simcse_sup", "temperature": 0.05, "mlp": "none"},
        "data": {
            "corpus": str(pairs),
            **({} if mined else {"columns": {"anchor": "title", "positive": "snippet"}}),
        },
        "tasks": [
            {
                "name": "tiny-dev",
                "kind": "retrieval",
                "files": {"all": str(tmp_path / "dev")},
                "splits": ["dev"],
            }
        ],
        "training": {
            "batch_size": 4,
            "epochs": 1,
            "max_steps": None,
            "lr": 1e-3,
            "warmup": 0,
            "weight_decay": 0.0,
            "seed": 1,
            "eval_steps": 2,
            "eval_batch_size": 8,
            "log_steps": 1,
            "precision": "fp32",
            "batch_sampler": "no_duplicates",
            "selection": {"tasks": ["tiny-dev"], "metric": "ndcg_at_10", "split": "dev"},
            "test_tasks": [],
        },
    }
    path = tmp_path / "sup-tiny.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def test_the_anchor_reads_the_study_config_and_refuses_what_it_does_not_reproduce(tmp_path):
    from experiments.own_pairs_st import anchor_config, epoch_batches, read_config, read_pairs

    path = _study_config(tmp_path, "unused")
    cfg = anchor_config(read_config(path, ["training.lr=5e-5", "training.seed=3"]))
    assert (cfg.lr, cfg.seed, cfg.temperature, cfg.dev_task, cfg.dev_split) == (
        5e-5,
        3,
        0.05,
        "tiny-dev",
        "dev",
    )
    columns = read_pairs(cfg)
    assert list(columns) == ["anchor", "positive"] and columns["anchor"][0] == "the cat query"
    assert epoch_batches(columns, cfg) == 3  # 12 pairs, batch 4, no text repeated
    mined = anchor_config(read_config(_study_config(tmp_path / "m", "unused", mined=True), []))
    assert list(read_pairs(mined)) == ["anchor", "positive", "negative"]
    for override in ("objective.mlp=keep", "head=cls", "training.selection.metric=mrr_at_10"):
        with pytest.raises(ValueError):
            anchor_config(read_config(path, [override]))


def test_the_anchor_wraps_its_loss_in_matryoshka_loss_as_the_config_says(tmp_path, tiny_model_dirs):
    """``objective.matryoshka`` (the override protoembed reads) -> ``MatryoshkaLoss`` around MNRL with the
    same sizes and weights, largest first; without it, plain MNRL."""
    from experiments.own_pairs_st import anchor_config, anchor_loss, read_config
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MatryoshkaLoss, MultipleNegativesRankingLoss

    path = _study_config(tmp_path, "unused")
    model = SentenceTransformer(str(tiny_model_dirs["bert"]), device="cpu")
    plain, text = anchor_loss(model, anchor_config(read_config(path, [])))
    assert type(plain) is MultipleNegativesRankingLoss and plain.scale == 20.0
    assert text == "MultipleNegativesRankingLoss(scale=20, cos_sim)"
    override = "objective.matryoshka={dims: [8, 32, 16], weights: [1, 2, 3]}"
    cfg = anchor_config(read_config(path, [override]))
    assert (cfg.matryoshka_dims, cfg.matryoshka_weights) == ((8, 32, 16), (1.0, 2.0, 3.0))
    wrapped, text = anchor_loss(model, cfg)
    assert isinstance(wrapped, MatryoshkaLoss) and isinstance(wrapped.loss, MultipleNegativesRankingLoss)
    assert (wrapped.matryoshka_dims, wrapped.matryoshka_weights) == ((32, 16, 8), (2.0, 3.0, 1.0))
    assert wrapped.n_dims_per_step == -1
    assert text.startswith("MatryoshkaLoss(MultipleNegativesRankingLoss(scale=20, cos_sim), dims=[32, 16, 8]")


def test_the_anchor_trains_keeps_the_best_dev_checkpoint_and_saves_what_protoembed_reads(
    tmp_path, tiny_model_dirs, one_thread
):
    """sentence-transformers' trainer on tiny pairs: 3 steps (evaluated at 2 and, after the last step, at
    3), best/ is the checkpoint of the best evaluation, and protoembed loads it."""
    from experiments.own_pairs_st import train

    import protoembed

    config = _study_config(tmp_path, str(tiny_model_dirs["bert"]))
    results = train(config, [], tmp_path / "run")
    log = [json.loads(line) for line in (tmp_path / "run" / "training_log.jsonl").read_text().splitlines()]
    evals = {e["step"]: e["eval_tiny-dev_cosine_ndcg@10"] for e in log if "eval_tiny-dev_cosine_ndcg@10" in e}
    assert sorted(evals) == [2, 3] and results["total_steps"] == 3
    assert results["best_step"] == max(evals, key=lambda s: (evals[s], -s))
    assert results["best_dev_score"] == pytest.approx(100 * evals[results["best_step"]])
    assert all("elapsed_s" in e for e in log)
    assert not (tmp_path / "run" / "st-checkpoints").exists()
    vectors = protoembed.load(str(tmp_path / "run" / "best")).encode(["the cat query"])
    assert vectors.shape == (1, 32)


def _write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def _scores(ndcg: float) -> dict:
    return {"tasks": {"t": {"ndcg_at_10": ndcg, "recall_at_10": ndcg + 10, "mrr_at_10": ndcg - 5}}}


def _records(tmp_path: Path) -> Path:
    """Records of one set: untrained, sup (grid + seeds), st-mnrl (grid + seeds), one 30-step run."""
    from experiments.own_pairs_plan import LR_GRID, run_name
    from experiments.own_pairs_report import DEV_FILE, RETRIEVAL_FILE, STS_FILE, UNTRAINED

    records = tmp_path / "records"
    untrained = records / f"{UNTRAINED}-googlenews"
    _write(untrained / RETRIEVAL_FILE, _scores(30.0))
    _write(untrained / DEV_FILE, _scores(29.0))
    _write(untrained / "results.json", {"tasks": {"STSBenchmark": {"spearman": 82.0}}})
    low, mid, high = LR_GRID
    # sup: dev 31 / 33 / 32 -> mid; test 34, 36, 35 over seeds 1-3; st-mnrl: dev best at high, test 35
    plan = {
        "sup": {"dev": {low: 31.0, mid: 33.0, high: 32.0}, "test": {1: 34.0, 2: 36.0, 3: 35.0}},
        "st-mnrl": {"dev": {low: 30.0, mid: 31.0, high: 32.0}, "test": {1: 35.0, 2: 35.0, 3: 35.0}},
    }
    chosen = {"sup": mid, "st-mnrl": high}
    for method, p in plan.items():
        runs = [(lr, 1) for lr in LR_GRID] + [(chosen[method], 2), (chosen[method], 3)]
        for lr, seed in runs:
            run = records / run_name(method, "googlenews", lr, seed)
            _write(run / DEV_FILE, _scores(p["dev"][lr] if seed == 1 else 33.0))
            _write(run / "results.json", {"best_step": 2, "total_steps": 16})
            (run / "config.yaml").write_text("training: {eval_steps: 4}\n")
            _write(run / "study_time.json", {"train_s": 100.0, "dev_s": 10.0})
            if lr == chosen[method]:
                _write(run / RETRIEVAL_FILE, _scores(p["test"][seed]))
                _write(run / STS_FILE, {"tasks": {"STSBenchmark": {"spearman": 81.0}}})
                _write(
                    run / "study_time.json",
                    {"train_s": 100.0, "dev_s": 10.0, "retrieval_s": 5.0, "sts_s": 5.0},
                )
    old = records / "simcse-googlenews-seed1"
    _write(old / RETRIEVAL_FILE, _scores(28.0))
    _write(old / "results.json", {"tasks": {"STSBenchmark": {"spearman": 76.0}}})
    return records


def test_page_rows_are_the_chosen_lrs_seed_means_and_changes_from_untrained(tmp_path):
    from experiments.own_pairs_report import write_report

    records = _records(tmp_path)
    _write(records / "mining-googlenews" / "mined.json", {"pairs": 100, "rows": 40})
    text = write_report(
        tmp_path / "page.md", records, Path("c"), ["--num-negatives", "1"], "`cmd`"
    ).read_text()
    assert "at least 5% below their own document): googlenews 40 of 100 pairs;" in text
    news = text[text.index("## GoogleNews") :]
    assert (
        "| untrained default (mean head) | – | – | – | 29.00 | 30.00 | 40.00 | 25.00 | | 82.00 | | |" in news
    )
    # sup: lr 5e-05 chosen (dev 31 / 33 / 32); dev of the kept models 33 (seed 1) and 33, 33; test 35 ± 1
    row = (
        "| supervised SimCSE, in-batch negatives | 16 (4) | 5e-05 (31.00 / 33.00 / 32.00) | 3 | 33.00 ± 0.00 | 35.00 ± 1.00 "
        "| 45.00 ± 1.00 | 30.00 ± 1.00 | +5.00 | 81.00 ± 0.00 | -1.00 | 120 s (100 + 20) |"
    )
    assert row in news
    assert (
        "| sentence-transformers MNRL, in-batch negatives | 16 (4) | 0.0001 (30.00 / 31.00 / 32.00) | 3 |"
        in news
    )
    assert "| unsupervised SimCSE on the texts (30 steps) | n/a | 3e-05 (fixed) | 1 | n/a | 28.00 |" in news
    assert "| supervised SimCSE, + 1 mined hard negative | n/a | ? (– / – / –) | 0 |" in news
    # protoembed 35.00 against sentence-transformers 35.00: 0.00, the aim (>= -0.5) met; mined: not yet
    assert "`sup` − `st-mnrl` +0.00 (aim met); `sup-mined` − `st-mnrl-mined` n/a (not measured yet)" in news
    assert "supervised SimCSE, in-batch negatives (`sup`) raises test nDCG@10 by +5.00" in text
    assert "Supervised runs recorded: 10 of 40" in text
    assert "| sup-googlenews-lr2e-05-seed1 | 2 / 16 | 31.00 | – | – | – | – | 100 | 10 |" in text


def test_page_says_why_when_nothing_helps(tmp_path):
    """No method beyond its seed spread: the finding names the dev measurement (untrained against the kept
    checkpoints) and where in the epoch they were kept."""
    from experiments.own_pairs_plan import LR_GRID, run_name
    from experiments.own_pairs_report import RETRIEVAL_FILE, write_report

    records = _records(tmp_path)
    for method, lr in (("sup", LR_GRID[1]), ("st-mnrl", LR_GRID[2])):
        for seed, ndcg in ((1, 29.5), (2, 30.5), (3, 30.0)):
            _write(records / run_name(method, "googlenews", lr, seed) / RETRIEVAL_FILE, _scores(ndcg))
    text = write_report(tmp_path / "page.md", records, Path("c"), [], "`cmd`").read_text()
    assert (
        "no supervised method raises test nDCG@10 beyond its seed spread: the best, supervised SimCSE, "
        "in-batch negatives (`sup`), changes it by +0.00 (seed std 0.50). The dev split shows the same: "
        "untrained 29.00, the kept checkpoints 32.00 to 33.00, 6 of 6 of them kept within the first quarter"
    ) in text


def test_the_docs_table_is_the_records_summary():
    """The own-pairs table of docs/training/your-data.md is :func:`study_summary_table` of the committed
    records."""
    from experiments.own_pairs_report import SET_LABELS, collect, study_summary_table

    records = Path(__file__).resolve().parents[2] / "docs" / "results" / "own-pairs"
    table = "\n".join(study_summary_table({name: collect(records, name) for name in SET_LABELS}))
    assert table.count("\n") >= 3  # both sets recorded
    root = records.parents[2]
    assert f"\n{table}\n" in (root / "docs" / "training" / "your-data.md").read_text(encoding="utf-8")


def test_story_measures_separate_the_story_from_the_article_within_it():
    """Five documents of stories A, A, B, B, C; three queries: a same-story miss, an exact hit and a
    miss into another story. Counted by hand: rank 1 from the query's story 2 of 3, exact 1 of 3, 2 of
    the 5 ranked documents from each query's story, chance 1/2 (two snippets a story)."""
    from experiments.own_pairs_story import story_measures

    documents = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9], [-1.0, 0.0]])
    queries = np.array([[1.0, 0.05], [0.0, 1.0], [1.0, 0.2]])
    measures = story_measures(queries, documents, [0, 1, 1], [0, 0, 1, 1, 2], [1, 2, 3])
    assert measures == {
        "queries": 3,
        "top1_same_story": pytest.approx(2 / 3),
        "top10_same_story": pytest.approx(2 / 5),
        "exact_top1": pytest.approx(1 / 3),
        "chance_top1": pytest.approx(1 / 2),
        "story_documents_median": 2.0,
    }


def test_story_measures_of_a_model_read_the_stories_and_qrels_of_the_folder(tiny_model_dirs, tmp_path):
    """measure(): the stories from GSDMM's title and snippet files, the relevant document from the qrels,
    a query without one left out; equal to story_measures on the model's own vectors."""
    from experiments.own_pairs_data import GSDMM
    from experiments.own_pairs_story import measure, story_measures

    import protoembed

    titles = ["storm hits coast", "storm warning issued", "team wins final"]
    snippets = ["heavy rain on the coast", "officials warn of storm", "the final ended two nil"]
    stories = [7, 7, 9]
    gsdmm = tmp_path / "data" / GSDMM
    gsdmm.mkdir(parents=True)
    for part, texts in (("T", titles), ("S", snippets)):
        rows = [json.dumps({"text": t, "cluster": s}) for t, s in zip(texts, stories, strict=True)]
        (gsdmm / f"{part}.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    corpus = [{"_id": f"d{i}", "title": "", "text": t} for i, t in enumerate(snippets)]
    queries = [{"_id": f"q{i}", "text": t} for i, t in enumerate(titles)] + [
        {"_id": "qx", "text": "no qrels"}
    ]
    for name, rows in (("corpus", corpus), ("queries", queries)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq0\td0\t1\nq1\td1\t1\nq2\td2\t1\n"
    )
    tiny_model_dir = tiny_model_dirs["bert"]
    got = measure(str(tiny_model_dir), folder, "test", tmp_path / "data")
    vectors = protoembed.load(str(tiny_model_dir)).encode(titles + snippets)
    assert got == {
        "model": str(tiny_model_dir),
        "split": "test",
        **story_measures(vectors[:3], vectors[3:], stories, stories, [0, 1, 2]),
    }


def test_story_line_counts_the_misses_within_the_story():
    """Rank 1 from the own story for 90% and exact for 20%: of the 80% missed, 70 points (88%) are
    within the story; a run's cells follow the untrained model's."""
    from experiments.own_pairs_report import story_line

    def measures(same: float, exact: float) -> dict:
        return {
            "queries": 10,
            "top1_same_story": same,
            "top10_same_story": 0.5,
            "exact_top1": exact,
            "chance_top1": 0.04,
            "story_documents_median": 25.0,
        }

    line = story_line(
        {"untrained-default": measures(0.9, 0.2), "sup-googlenews-lr5e-05-seed1": measures(0.95, 0.3)}
    )
    assert "untrained, rank 1 of the query's own story for 90.0% of queries" in line
    assert "the exact snippet at rank 1 for 20.0%, against 4.0% for a ranking" in line
    assert "(median 25 snippets a story); `sup` (seed 1): rank 1 of the query's own story for 95.0%" in line
    assert line.endswith(
        "misses, 88% are another snippet of the query's own story: what is left to learn is the order within a story."
    )


def test_the_headline_numbers_a_rerun_is_compared_on_are_the_rows_means():
    """``headline`` of the committed records: the mined-negative GoogleNews row's test nDCG@10 is the mean
    of its three tested seeds' record files, read here directly; the sentence-transformers rows (which the
    training step does not touch), the unsupervised 30-step rows (not rerun) and wall times (which depend
    on the session's CPU) are left out."""
    from experiments.own_pairs_report import SET_LABELS, collect, headline

    records = Path(__file__).resolve().parents[2] / "docs" / "results" / "own-pairs"
    numbers = headline({name: collect(records, name) for name in SET_LABELS})
    # the tested runs: those at the chosen lr (a run at another lr has no test result)
    runs = [
        r for r in sorted(records.glob("sup-mined-googlenews-lr*-seed*")) if (r / "retrieval.json").is_file()
    ]
    assert len(runs) == 3
    ndcg = [
        json.loads((r / "retrieval.json").read_text())["tasks"]["googlenews-retrieval"]["ndcg_at_10"]
        for r in runs
    ]
    row = "GoogleNews, title -> snippet, supervised SimCSE, + 1 mined hard negative"
    assert numbers[f"{row}: test nDCG@10"] == pytest.approx(sum(ndcg) / 3, abs=1e-9)
    assert not [name for name in numbers if "sentence-transformers" in name or name.endswith(" s")]
    assert len(numbers) == 2 * 2 * 2  # 2 sets x protoembed's 2 supervised methods x 2 numbers
