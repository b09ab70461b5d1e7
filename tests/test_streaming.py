"""The streamed training path (data.streaming): the shuffle buffer, the batches each process and worker
gets, the counting pass, and streamed training runs against in-memory and uninterrupted ones."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch

from protoembed.core.errors import ProtoembedError
from protoembed.data.training.corpus import read_corpus
from protoembed.data.training.formats import open_stream
from protoembed.data.training.streaming import StreamedExamples, shuffled
from protoembed.outputs.run_layout import CHECKPOINT_DIR
from protoembed.training.config import config_from_dict
from protoembed.training.streaming import StreamedBatches, stream_loader
from tiny_models import without_dropout
from training_helpers import SENTENCES, Interrupt, stop_after


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test here on one torch thread (see conftest)."""


def _pairs(path: Path, n: int = 24) -> Path:
    rows = [
        {"q": f"{SENTENCES[i % 8]} {i}", "a": f"{SENTENCES[(i + 3) % 8]} #{i}", "id": i} for i in range(n)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


MAPPING = {"anchor": "q", "positive": "a"}


# --------------------------------------------------------------------------- the shuffle buffer


def test_a_buffer_as_large_as_the_input_is_a_plain_seeded_shuffle() -> None:
    items = list(range(50))
    expected = list(items)
    random.Random(7).shuffle(expected)  # the whole input buffered, then shuffled by the same generator
    assert list(shuffled(iter(items), 50, 7)) == expected == list(shuffled(iter(items), 1000, 7))
    assert list(shuffled(iter(items), 1, 7)) == items  # a buffer of one keeps the order
    assert list(shuffled(iter(items), 50, 8)) != expected


def test_a_small_buffer_holds_at_most_its_size_and_moves_items_no_earlier_than_it() -> None:
    taken = 0

    def source():
        nonlocal taken
        for i in range(200):
            taken += 1
            yield i

    out = []
    for item in shuffled(source(), 16, 3):
        out.append(item)
        assert taken - len(out) <= 16  # read but not yet yielded: the buffer
    assert sorted(out) == list(range(200))
    assert all(position >= item - 16 for position, item in enumerate(out))
    assert out != list(range(200))


# --------------------------------------------------------------------------- streamed examples and batches


def _examples(path: Path, max_examples: int | None = None) -> StreamedExamples:
    return StreamedExamples([open_stream(path, columns=MAPPING)], max_examples)


def _collect(items: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, str]]:
    return [(position, example["anchor"]) for position, example in items]


def test_every_epoch_holds_the_files_examples_in_its_own_order(tmp_path: Path) -> None:
    path = _pairs(tmp_path / "pairs.jsonl", 24)
    examples = _examples(path)
    assert len(examples) == 24 and examples.names == ("anchor", "positive")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert list(examples) == [{"anchor": r["q"], "positive": r["a"]} for r in rows]
    batches = StreamedBatches(examples, 6, shuffle_buffer=24, seed=5, collate=_collect)
    epochs = []
    for epoch in range(2):
        batches.set_epoch(epoch)
        got = list(batches)
        assert len(got) == 4 and all(len(b) == 6 for b in got)
        flat = [item for batch in got for item in batch]
        assert sorted(flat) == sorted(enumerate(r["q"] for r in rows))  # the file's examples, each once
        epochs.append(flat)
    assert epochs[0] != epochs[1]  # seed + epoch
    expected = list(enumerate(r["q"] for r in rows))
    random.Random(5 + 1).shuffle(expected)
    assert epochs[1] == expected
    assert len(_examples(path, max_examples=10)) == 10 and len(list(_examples(path, max_examples=10))) == 10


def test_processes_workers_and_resume_see_the_in_memory_shares(tmp_path: Path) -> None:
    path = _pairs(tmp_path / "pairs.jsonl", 26)  # 26 // 4 = 6 batches, 2 examples dropped
    examples = _examples(path)

    def epoch(rank: int = 0, world: int = 1, skip: int = 0, workers: int = 0) -> list[Any]:
        batches = StreamedBatches(
            examples, 4, shuffle_buffer=8, seed=1, collate=_collect, rank=rank, world=world
        )
        batches.set_epoch(3, skip)
        return list(stream_loader(batches, workers))

    whole = epoch()
    assert len(whole) == 6
    halves = [epoch(rank=r, world=2) for r in range(2)]
    assert [a + b for a, b in zip(*halves)] == whole  # rank r: rows r*b/W .. (r+1)*b/W, as split_batches
    assert epoch(skip=4) == whole[4:]
    assert epoch(workers=2) == whole  # worker k collates batches k, k+2, ...; the loader takes them in turn


def test_streaming_errors_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"q": "a", "a": "b"}\n{"q": "c"}\n', encoding="utf-8")
    with pytest.raises(ProtoembedError, match=rf"^{path}:2: column 'a' is missing$"):
        len(_examples(path))  # the counting pass checks every row before training
    sts = tmp_path / "sts-train.csv"
    sts.write_text("g\tf\t2012\t1\t4.0\ta\tb\n", encoding="utf-8")
    with pytest.raises(
        ProtoembedError,
        match=rf"^{sts}: format 'stsb' cannot be streamed \(data.streaming\); streamed formats: text, jsonl, "
        r"csv, tsv, parquet, hf_dataset$",
    ):
        open_stream(sts)


@pytest.mark.parametrize("drop", [True, False])
@pytest.mark.parametrize("ending", ["last one\n", "cut mid-sent", "   "])
def test_a_streamed_text_corpus_keeps_the_sentences_read_corpus_keeps(
    tmp_path: Path, drop: bool, ending: str
) -> None:
    path = tmp_path / "corpus.txt"
    path.write_bytes(f"\ufeff first \r\n\n  second\n\t\nthird\n{ending}".encode())
    corpus = read_corpus(path, drop_unterminated_last_line=drop)
    stream = open_stream(path, drop_unterminated_last_line=drop)
    assert [e["text"] for e in stream] == corpus.sentences
    skipped = stream.source["skipped"]
    assert skipped.get("empty_line", 0) == corpus.empty_lines
    assert skipped.get("unterminated_last_line", 0) == int(corpus.dropped_last_line)


# --------------------------------------------------------------------------- config


def _config(model_dir: Path, corpus: Path, out: Path, data: dict[str, Any] | None = None, **training: Any):
    settings = {"batch_size": 8, "lr": 1e-3, "max_steps": 6, "eval_steps": 2, "log_steps": 1, "seed": 3}
    settings |= {"eval_batch_size": 256, "test_tasks": ["STSBenchmark"], **training}
    return config_from_dict(
        {
            "model": str(model_dir),
            "head": "mean",
            "max_seq_length": 16,
            "objective": {"name": "simcse_sup"},
            "data": {"corpus": str(corpus), "columns": MAPPING, **(data or {})},
            "training": settings,
            "output_dir": str(out),
        }
    )


def test_streaming_refuses_no_duplicates_and_conversions(
    tmp_path: Path, tiny_model_dirs, data_dir, monkeypatch
) -> None:
    with pytest.raises(
        ProtoembedError,
        match=r"^<dict>: config key 'training.batch_sampler': no_duplicates needs the whole corpus in memory; "
        r"with data.streaming: true use batch_sampler: shuffle$",
    ):
        _config(
            tmp_path, tmp_path / "x.jsonl", tmp_path / "o", {"streaming": True}, batch_sampler="no_duplicates"
        )
    from protoembed.training import train

    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))
    nli = tmp_path / "pairs.jsonl"
    nli.write_text(
        "".join(
            json.dumps({"sentence1": f"p{i}", "sentence2": "h", "label": i % 3}) + "\n" for i in range(9)
        ),
        encoding="utf-8",
    )
    cfg = config_from_dict(
        {
            "model": str(tiny_model_dirs["bert"]),
            "objective": "simcse_sup",
            "data": {"corpus": str(nli), "streaming": True},
            "training": {"batch_size": 2, "test_tasks": ["STSBenchmark"]},
            "output_dir": str(tmp_path / "o"),
        }
    )
    with pytest.raises(
        ProtoembedError,
        match=rf"^{nli} has columns sentence1, sentence2, label; objective 'simcse_sup' needs anchor, positive, "
        r"which the conversion 'NLI pairs -> \(premise, entailment, contradiction\) triplets' makes from the "
        r"whole corpus; set data.streaming: false, or give files with those columns$",
    ):
        train(cfg)


# --------------------------------------------------------------------------- streamed training runs


def _losses(out: Path) -> dict[int, float]:
    entries = [json.loads(x) for x in (out / "training_log.jsonl").read_text().splitlines()]
    return {e["step"]: e["loss"] for e in entries if e["event"] == "train"}


def _final_weights(out: Path) -> dict[str, torch.Tensor]:
    [file] = list((out / CHECKPOINT_DIR).glob("pytorch_model*.bin"))
    return torch.load(file, map_location="cpu", weights_only=True)


def test_a_streamed_run_equals_the_in_memory_run_on_whole_batches(
    tiny_model_dirs, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """batch_size = every example: each step's batch is the whole corpus in another order, and the SimCSE
    loss (a mean over the anchors of a row-and-column-permuted logit matrix) does not depend on it."""
    from protoembed.training import train

    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))
    model = without_dropout(tiny_model_dirs["bert"], tmp_path / "bert")
    corpus = _pairs(tmp_path / "pairs.jsonl", 16)
    memory, streamed = tmp_path / "memory", tmp_path / "streamed"
    train(_config(model, corpus, memory, batch_size=16, max_steps=3, eval_steps=3))
    train(
        _config(
            model,
            corpus,
            streamed,
            {"streaming": True, "shuffle_buffer": 5},
            batch_size=16,
            max_steps=3,
            eval_steps=3,
        )
    )
    assert _losses(streamed) == pytest.approx(_losses(memory), rel=1e-5)
    start = json.loads((streamed / "training_log.jsonl").read_text().splitlines()[0])
    assert start["data"]["streamed"] and start["data"]["examples"] == 16 and start["total_steps"] == 3


def test_a_resumed_streamed_run_ends_as_the_uninterrupted_one(
    tiny_model_dirs, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stop after step 3 (checkpoint at step 2), resume: the batches done are skipped, across an epoch."""
    from protoembed.training import train

    monkeypatch.setenv("PROTOEMBED_DATA", str(data_dir))
    corpus = _pairs(tmp_path / "pairs.jsonl", 20)  # 20 // 8 = 2 steps per epoch; 6 steps = 3 epochs
    data = {"streaming": True, "shuffle_buffer": 6, "max_sentences": 18}
    straight, broken = tmp_path / "straight", tmp_path / "broken"

    def config(out: Path):
        return _config(tiny_model_dirs["bert"], corpus, out, data, keep_checkpoint=True, warmup=1)

    train(config(straight))
    with pytest.raises(Interrupt):
        train(config(broken), callback=stop_after(3))
    assert json.loads((broken / CHECKPOINT_DIR / "trainer_state.json").read_text())["step"] == 2
    train(config(broken), resume=True)
    a, b = _final_weights(straight), _final_weights(broken)
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=1e-6, msg=key)
    assert _losses(straight) == pytest.approx(_losses(broken), abs=1e-6)
    start = json.loads((straight / "training_log.jsonl").read_text().splitlines()[0])
    assert (start["total_steps"], start["steps_per_epoch"], start["data"]["examples"]) == (6, 2, 18)
    assert Counter(
        json.loads(x)["epoch"]
        for x in (straight / "training_log.jsonl").read_text().splitlines()
        if '"train"' in x
    ) == {0: 2, 1: 2, 2: 2}


def test_streamed_files_keep_the_columns_they_share(tmp_path: Path) -> None:
    first = tmp_path / "a.jsonl"
    first.write_text('{"anchor": "a", "positive": "b", "negative": "c"}\n', encoding="utf-8")
    second = tmp_path / "b.csv"
    second.write_text("anchor,positive\nd,e\nf,g\n", encoding="utf-8")
    examples = StreamedExamples([open_stream(first), open_stream(second)])
    assert list(examples) == [
        {"anchor": "a", "positive": "b"},
        {"anchor": "d", "positive": "e"},
        {"anchor": "f", "positive": "g"},
    ]
    summary = examples.summary()
    assert (summary["examples"], summary["columns"], summary["streamed"]) == (3, ["anchor", "positive"], True)
    assert [f.get("dropped_columns") for f in summary["files"]] == [["negative"], None]
    assert [f["examples"] for f in summary["files"]] == [1, 2]
