"""The shared encode loop (batching.BatchEncoder): identical rows run once, batches longest first, input
order restored; the torch embedder and the ONNX export both encode through it, by composition."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest
import torch

import protoembed
from protoembed.core.errors import EmptySentenceError, ProtoembedError
from protoembed.model.batching import BatchEncoder
from protoembed.model.embedder import Embedder
from protoembed.model.export import export_embedder
from protoembed.model.export.onnx import OnnxEmbedder
from tiny_models import CORPUS

SENTENCES = [
    "hello",
    "a man is playing a guitar .",
    "HELLO",  # same rows as "hello" for the uncased tiny BERT
    "two dogs are running through a field of grass .",
    "a man is playing a guitar .",
    "the cat sat .",
]


def _id_stats(features: dict[str, torch.Tensor]) -> torch.Tensor:
    """A forward an independent computation can check: (sum of the row's ids, its token count) per row."""
    mask = features["attention_mask"]
    return torch.stack([(features["input_ids"] * mask).sum(1), mask.sum(1)], dim=1).float()


def test_rows_run_once_longest_first_and_come_back_in_order(tiny_model_dirs) -> None:
    encoder = protoembed.load(str(tiny_model_dirs["bert"]), head="mean", device="cpu").encoder
    seen: list[torch.Tensor] = []

    def forward(features: dict[str, torch.Tensor]) -> torch.Tensor:
        seen.append(features["attention_mask"].sum(1))
        return _id_stats(features)

    loop = BatchEncoder(encoder, forward, dimension=2, device=torch.device("cpu"))
    vectors = loop.encode(SENTENCES, batch_size=2)
    rows = [encoder.tokenizer(s)["input_ids"] for s in SENTENCES]  # [CLS] ... [SEP], independently
    np.testing.assert_array_equal(vectors, [[sum(r), len(r)] for r in rows])
    lengths = torch.cat(seen).tolist()
    distinct = {tuple(r) for r in rows}
    assert len(lengths) == len(distinct) == 4  # "HELLO" and the repeated sentence run once
    assert lengths == sorted((len(r) for r in distinct), reverse=True)  # longest first
    assert [len(b) for b in seen] == [2, 2]
    single = loop.encode("the cat sat .")
    np.testing.assert_array_equal(single, vectors[-1])
    assert loop.encode([]).shape == (0, 2)


def test_torch_and_onnx_embedders_share_the_loop(tiny_model_dirs, tmp_path) -> None:
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="mean", device="cpu")
    exported = protoembed.load(str(export_embedder(model, tmp_path / "onnx")), runtime="onnx")
    assert isinstance(exported, OnnxEmbedder) and not isinstance(exported, (Embedder, torch.nn.Module))
    assert not model.training  # exporting left the model in its eval mode
    # the mean head by hand: each sentence alone through the Hugging Face model, its token states averaged
    expected = []
    for sentence in SENTENCES:
        ids = torch.tensor([model.tokenizer(sentence)["input_ids"]])
        with torch.no_grad():
            expected.append(model.encoder.auto_model(input_ids=ids).last_hidden_state[0].mean(0).numpy())
    assert not model.normalize
    for embedder, atol in ((model, 1e-6), (exported, 1e-5)):
        loop = embedder.batch_encoder()
        assert isinstance(loop, BatchEncoder) and loop.encoder is embedder.encoder
        np.testing.assert_allclose(embedder.encode(SENTENCES, batch_size=2), expected, rtol=0, atol=atol)


# --------------------------------------------------------------------------- the pipeline
#: Sixty inputs of mixed lengths with exact repeats, case variants (one row for the uncased tiny BERT), a
#: sentence beyond the tiny backbone's 128 positions (truncated) and padding-like whitespace.
PIPELINE_SENTENCES = [
    *(f"{s} {i}" if i % 3 else s for i, s in enumerate(CORPUS[:11] * 4)),
    *SENTENCES,
    "stocks fell sharply after the report on monday . " * 20,
    "  A MAN IS PLAYING A GUITAR .  ",
]


def _reference(model, sentences: list[str]) -> np.ndarray:
    """Each sentence alone: its row by the tokenizer ([CLS] ... [SEP], cut to the position budget) through
    the model's own forward, with no batching, dedup or pipeline (today's vectors, one at a time)."""
    encoder = model.encoder
    budget = encoder.position_budget
    out = []
    for sentence in sentences:
        ids = encoder.tokenizer(sentence.strip(), truncation=True, max_length=budget)["input_ids"]
        features = {
            "input_ids": torch.tensor([ids]),
            "attention_mask": torch.ones(1, len(ids), dtype=torch.long),
        }
        with torch.inference_mode():
            out.append(model.inference_forward(features)[0].numpy())
    return np.stack(out)


@pytest.fixture(scope="module")
def mean_model(tiny_model_dirs):
    return protoembed.load(str(tiny_model_dirs["bert"]), head="mean", device="cpu")


@pytest.mark.parametrize("workers", [1, 2, 3, 4])
def test_vectors_equal_one_by_one_whatever_the_pool_queue_and_budget(mean_model, workers, one_thread) -> None:
    expected = _reference(mean_model, PIPELINE_SENTENCES)
    shapes: list[tuple[int, int]] = []
    threads: set[str] = set()

    def forward(features: dict[str, torch.Tensor]) -> torch.Tensor:
        shapes.append(tuple(features["input_ids"].shape))
        threads.add(threading.current_thread().name)
        return mean_model.inference_forward(features)

    raw_ids = mean_model.encoder.raw_ids
    tokenized_on: set[str] = set()

    def recording_raw_ids(texts):
        tokenized_on.add(threading.current_thread().name)
        return raw_ids(texts)

    mean_model.encoder.raw_ids = recording_raw_ids
    try:
        for prefetch, chunk_rows, budget in ((1, 7, None), (3, 5, 300), (2, 16, 130)):
            shapes.clear()
            loop = BatchEncoder(
                mean_model.encoder,
                forward,
                mean_model.dimension,
                torch.device("cpu"),
                chunk_rows=chunk_rows,
                prefetch=prefetch,
            )
            vectors = loop.encode(
                PIPELINE_SENTENCES, batch_size=4, tokenizer_workers=workers, max_tokens_per_batch=budget
            )
            np.testing.assert_allclose(vectors, expected, rtol=0, atol=1e-6)
            assert all(rows <= 4 and (budget is None or rows * width <= budget) for rows, width in shapes)
            assert sum(rows for rows, _ in shapes) <= len(set(PIPELINE_SENTENCES))  # repeats run once
    finally:
        del mean_model.encoder.raw_ids
    assert threads == {threading.current_thread().name}  # the forward on the calling thread
    assert tokenized_on and all(name.startswith("protoembed-tokenize") for name in tokenized_on)
    assert len(tokenized_on) <= workers


def test_input_order_and_repeats_by_an_exact_forward(mean_model) -> None:
    """The id-sum forward: every vector is its own sentence's (sum of ids, tokens), whatever the chunks."""
    seen: list[int] = []

    def forward(features: dict[str, torch.Tensor]) -> torch.Tensor:
        seen.append(len(features["input_ids"]))
        return _id_stats(features)

    encoder = mean_model.encoder
    rows = [
        encoder.tokenizer(s.strip(), truncation=True, max_length=encoder.position_budget)["input_ids"]
        for s in PIPELINE_SENTENCES
    ]
    for chunk_rows in (3, 11, 1000):
        seen.clear()
        loop = BatchEncoder(encoder, forward, 2, torch.device("cpu"), chunk_rows=chunk_rows)
        vectors = loop.encode(PIPELINE_SENTENCES, batch_size=5, tokenizer_workers=2)
        np.testing.assert_array_equal(vectors, [[sum(r), len(r)] for r in rows])
        assert len({tuple(r) for r in rows}) <= sum(seen) <= len(set(PIPELINE_SENTENCES))
    assert sum(seen) == len({tuple(r) for r in rows})  # one chunk: identical rows run once


def test_each_batch_moves_to_the_host_once_and_the_call_gathers_there(mean_model, monkeypatch) -> None:
    """The device holds a batch's vectors, not the call's: every forward's output is moved to the host
    once, as it is (no gathered copy on the device, none for the repeated texts), and the call's
    vectors are put together in a numpy array; ``convert_to_tensor`` moves that to the device once."""
    outputs: list[torch.Tensor] = []
    moved: list[torch.Tensor] = []

    def forward(features: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs.append(_id_stats(features))
        return outputs[-1]

    to_host = BatchEncoder.to_host
    monkeypatch.setattr(BatchEncoder, "to_host", lambda self, v: moved.append(v) or to_host(self, v))
    texts = PIPELINE_SENTENCES * 2  # every text repeated: the copies are made on the host
    loop = BatchEncoder(mean_model.encoder, forward, 2, torch.device("cpu"), chunk_rows=7)
    vectors = loop.encode(texts, batch_size=3, tokenizer_workers=2)
    assert isinstance(vectors, np.ndarray) and len(outputs) > 3
    assert [id(v) for v in moved] == [id(v) for v in outputs]  # each batch once, nothing else
    assert all(len(v) <= 3 for v in moved) and sum(map(len, moved)) <= len(set(texts)) < len(texts)
    np.testing.assert_array_equal(vectors[: len(texts) // 2], vectors[len(texts) // 2 :])
    np.testing.assert_array_equal(
        vectors, loop.encode(texts, batch_size=len(texts), tokenizer_workers=1)
    )  # one batch: the same
    moved.clear()
    tensor = loop.encode(texts, batch_size=3, convert_to_tensor=True)
    assert isinstance(tensor, torch.Tensor) and tensor.device == loop.device and len(moved) > 3
    np.testing.assert_array_equal(tensor.numpy(), vectors)


def test_the_prefetch_is_bounded_in_bytes(mean_model) -> None:
    """The pool tokenises ahead of the chunk handed out at most ``prefetch_bytes`` of padded features
    (each chunk at rows x position budget x 16 bytes), at most ``prefetch`` chunks, and one chunk
    whatever its size; the 256 MiB default holds 1/4 of what 2 chunks per worker held at batch 128 x 512
    tokens on 16 cores (8 workers)."""
    import time

    from protoembed.model.batching import CHUNK_BATCHES, PREFETCH_BYTES

    assert PREFETCH_BYTES == 2**30 // 4 == 2 * 8 * (CHUNK_BATCHES * 128 * 512 * 16) // 4
    chunks = [np.arange(k, k + 4) for k in range(0, 80, 4)]  # 20 chunks of 4 rows
    size = 4 * mean_model.encoder.position_budget * 16
    for prefetch, budget, most in (
        (None, 3 * size, 3),
        (2, 3 * size, 2),
        (None, size // 2, 1),
        (None, 10**9, 8),
    ):
        loop = BatchEncoder(mean_model.encoder, _id_stats, 2, torch.device("cpu"), prefetch=prefetch)
        loop.prefetch_bytes = budget
        assert loop.chunk_bytes(4) == size
        started: list[int] = []
        ahead = []
        pipeline = loop._pipeline(
            chunks, lambda rows, started=started: started.append(1) or rows, 4, [], np.arange(80), False
        )
        for number, rows in enumerate(pipeline):
            time.sleep(0.03)  # the pool fills what the bounds allow
            ahead.append(len(started) - number - 1)
            np.testing.assert_array_equal(rows, chunks[number])
        assert max(ahead) == most, (prefetch, budget)


def test_progress_counts_sentences_and_truncation_is_logged_once(mean_model, caplog) -> None:
    done: list[int] = []
    loop = BatchEncoder(
        mean_model.encoder,
        mean_model.inference_forward,
        mean_model.dimension,
        torch.device("cpu"),
        chunk_rows=6,
    )
    sentences = PIPELINE_SENTENCES + ["stocks fell sharply after the report on monday . " * 30]
    with caplog.at_level("WARNING", logger="protoembed.model.encoder"):
        loop.encode(sentences, batch_size=3, tokenizer_workers=2, progress=done.append)
    assert sum(done) == len(sentences) and all(n > 0 for n in done)
    warnings = [r.getMessage() for r in caplog.records if "truncated" in r.getMessage()]
    lengths = [len(ids) for ids in mean_model.tokenizer(sentences, add_special_tokens=False)["input_ids"]]
    budget = mean_model.encoder.position_budget - 2  # [CLS] and [SEP]
    cut = [n for n in lengths if n > budget]
    assert len(cut) == 2 and warnings == [
        f"2 of {len(sentences)} input(s) truncated to {budget} sentence tokens (the backbone's limit; the "
        f"longest had {max(cut)})"
    ]


def test_a_failing_tokenizer_worker_is_one_line_naming_the_chunk(mean_model) -> None:
    raw_ids = mean_model.encoder.raw_ids

    def failing(texts):
        if any(t.startswith("the quick brown fox") for t in texts):
            raise RuntimeError("the tokenizer broke\non two lines")
        return raw_ids(texts)

    mean_model.encoder.raw_ids = failing
    try:
        loop = BatchEncoder(
            mean_model.encoder,
            mean_model.inference_forward,
            mean_model.dimension,
            torch.device("cpu"),
            chunk_rows=8,
        )
        with pytest.raises(ProtoembedError) as caught:
            loop.encode(PIPELINE_SENTENCES, batch_size=4, tokenizer_workers=3)
    finally:
        del mean_model.encoder.raw_ids
    message = str(caught.value)
    chunks = -(-len(set(PIPELINE_SENTENCES)) // 8)
    match = re.fullmatch(
        rf"tokenizing chunk \d+ of {chunks} failed \(sentences (\d+) to (\d+) of the input, \d+ in the chunk\): "
        r"RuntimeError: the tokenizer broke on two lines",
        message,
    )
    assert match, message
    fox = [i for i, s in enumerate(PIPELINE_SENTENCES) if s.startswith("the quick brown fox")]
    assert any(int(match[1]) <= i <= int(match[2]) for i in fox)


def test_empty_sentences_are_named_before_and_after_tokenising(mean_model) -> None:
    loop = BatchEncoder(
        mean_model.encoder,
        mean_model.inference_forward,
        mean_model.dimension,
        torch.device("cpu"),
        chunk_rows=4,
    )
    with pytest.raises(EmptySentenceError) as blank:
        loop.encode([*PIPELINE_SENTENCES[:9], "   ", *PIPELINE_SENTENCES[9:20], ""], tokenizer_workers=2)
    assert blank.value.indexes == [9, 21] and "\n" not in str(blank.value)
    # not blank, yet no token: the tokenizer drops control characters; found by a worker, named by index
    with pytest.raises(EmptySentenceError) as tokenless:
        loop.encode([*PIPELINE_SENTENCES[:13], "\x00", *PIPELINE_SENTENCES[13:20]], tokenizer_workers=2)
    assert tokenless.value.indexes == [13]
    vectors = loop.encode([*PIPELINE_SENTENCES[:13], "\x00", "  "], allow_empty=True, tokenizer_workers=2)
    np.testing.assert_allclose(vectors[13], vectors[14], atol=1e-6)  # both the bare [CLS] [SEP]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tokenizer_workers": 0}, "tokenizer_workers must be an integer of at least 1, got 0"),
        ({"tokenizer_workers": -2}, "tokenizer_workers must be an integer of at least 1, got -2"),
        ({"tokenizer_workers": 1.5}, "tokenizer_workers must be an integer of at least 1, got 1.5"),
        ({"tokenizer_workers": True}, "tokenizer_workers must be an integer of at least 1, got True"),
        ({"max_tokens_per_batch": 0}, "max_tokens_per_batch must be an integer of at least 1, got 0"),
        ({"max_tokens_per_batch": -64}, "max_tokens_per_batch must be an integer of at least 1, got -64"),
    ],
)
def test_bad_pipeline_values_are_one_line_errors(mean_model, options, message) -> None:
    with pytest.raises(ProtoembedError, match=f"^{re.escape(message)}$"):
        mean_model.encode(["a man is playing a guitar ."], **options)


def test_a_budget_below_the_longest_row_names_both(mean_model) -> None:
    sentence = "two dogs are running through a field of grass ."
    length = len(mean_model.tokenizer(sentence)["input_ids"])
    with pytest.raises(ProtoembedError) as caught:
        mean_model.encode(["the cat", sentence], max_tokens_per_batch=length - 1)
    assert str(caught.value) == (
        f"max_tokens_per_batch {length - 1} is below the length of text {sentence[:40]!r} ({length} tokens after "
        f"truncation): a batch must hold one row; pass at least {length}"
    )
    np.testing.assert_allclose(
        mean_model.encode(["the cat", sentence], max_tokens_per_batch=length),
        mean_model.encode(["the cat", sentence]),
        atol=1e-6,
    )


def test_default_workers_follow_the_usable_cores(monkeypatch) -> None:
    import os

    from protoembed.model import batching

    for cores, cpu, cuda in ((1, 1, 1), (2, 1, 1), (16, 1, 8), (32, 2, 8), (64, 4, 8), (4, 1, 3)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, n=cores: set(range(n)), raising=False)
        assert (batching.default_tokenizer_workers("cpu"), batching.default_tokenizer_workers("cuda")) == (
            cpu,
            cuda,
        )


def test_a_prompt_template_model_encodes_alike_through_the_pool(tiny_model_dirs, one_thread) -> None:
    """Rows with a mask index (the template) and soft-prompt slots: pool and chunking change nothing."""
    for head in ("mask", "soft_prompt"):
        model = protoembed.load(str(tiny_model_dirs["bert"]), head=head, device="cpu")
        expected = np.stack([model.encode(s) for s in PIPELINE_SENTENCES[:24]])
        loop = BatchEncoder(
            model.encoder, model.inference_forward, model.dimension, torch.device("cpu"), chunk_rows=5
        )
        vectors = loop.encode(
            PIPELINE_SENTENCES[:24], batch_size=3, tokenizer_workers=3, max_tokens_per_batch=200
        )
        np.testing.assert_allclose(vectors, expected, rtol=0, atol=1e-6)


def test_the_raw_ids_equal_the_tokenizer_call_for_every_kind(tiny_model_dirs) -> None:
    texts = [s.strip() for s in PIPELINE_SENTENCES]
    for kind, folder in tiny_model_dirs.items():
        encoder = protoembed.load(str(folder), head="mean", device="cpu").encoder
        assert encoder.raw_ids(texts) == encoder.tokenizer(texts, add_special_tokens=False)["input_ids"], kind
        encoder.tokenizer(texts[:2], truncation=True, max_length=4)  # leaves truncation set on the backend
        assert encoder.raw_ids(texts) == encoder.tokenizer(texts, add_special_tokens=False)["input_ids"], kind


def test_the_default_model_attends_through_sdpa(tiny_model_dirs, one_thread) -> None:
    """transformers' default attention for BERT is PyTorch's SDPA; the soft prompt (inputs_embeds) runs
    under it and equals the eager attention's vectors."""
    model = protoembed.load(str(tiny_model_dirs["bert"]), head="soft_prompt", device="cpu")
    assert model.encoder.auto_model.config._attn_implementation == "sdpa"
    sdpa = model.encode(PIPELINE_SENTENCES[:12], batch_size=4)
    model.encoder.auto_model.set_attn_implementation("eager")
    np.testing.assert_allclose(model.encode(PIPELINE_SENTENCES[:12], batch_size=4), sdpa, atol=1e-5)


def test_the_packaged_default_model_attends_through_sdpa():
    model = protoembed.load("default", device="cpu")
    assert model.encoder.auto_model.config._attn_implementation == "sdpa"


def test_the_python_api_turns_the_tokenizers_own_threads_off(tiny_model_dirs, tmp_path) -> None:
    """Through the Python API (no command line), ``encode`` sets ``TOKENIZERS_PARALLELISM=false`` before
    it tokenises, so the tokenizer threads are the only ones; a value the user set is kept."""
    import os
    import subprocess
    import sys

    code = (
        "import os, protoembed\n"
        f"model = protoembed.load({str(tiny_model_dirs['bert'])!r}, head='mean')\n"
        "before = os.environ.get('TOKENIZERS_PARALLELISM')\n"
        "model.encode(['a man is playing a guitar .'] * 3, tokenizer_workers=1)\n"
        "print(before, os.environ.get('TOKENIZERS_PARALLELISM'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TOKENIZERS_PARALLELISM"}
    for setting, expected in ((None, "None false"), ("true", "true true")):
        run_env = env if setting is None else {**env, "TOKENIZERS_PARALLELISM": setting}
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=run_env, timeout=300
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split("\n")[-2] == expected


def test_more_tokenizer_workers_than_cores_are_capped_with_one_warning(
    mean_model, monkeypatch, caplog
) -> None:
    """``tokenizer_workers=1000`` on 2 usable cores: 2 tokenizer threads, one warning naming both numbers
    (logged once per process), the same vectors; the command line's and the server's value (through
    :func:`check_pipeline_options`) alike."""
    import os

    from protoembed.model.batching import check_pipeline_options

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    raw_ids = mean_model.encoder.raw_ids
    tokenized_on: set[str] = set()
    monkeypatch.setattr(
        mean_model.encoder,
        "raw_ids",
        lambda texts: tokenized_on.add(threading.current_thread().name) or raw_ids(texts),
    )
    loop = BatchEncoder(mean_model.encoder, _id_stats, 2, torch.device("cpu"), chunk_rows=3)
    with caplog.at_level("WARNING", logger="protoembed.model.batching"):
        vectors = loop.encode(PIPELINE_SENTENCES, batch_size=2, tokenizer_workers=1000)
        again = loop.encode(PIPELINE_SENTENCES, batch_size=2, tokenizer_workers=1000)
    assert [r.getMessage() for r in caplog.records if "tokenizer_workers" in r.getMessage()] == [
        "tokenizer_workers 1000 is more than the 2 usable cores: 2 tokenizer threads run"
    ]
    assert len(tokenized_on) == 2 and all(name.startswith("protoembed-tokenize") for name in tokenized_on)
    np.testing.assert_array_equal(vectors, again)
    np.testing.assert_array_equal(vectors, loop.encode(PIPELINE_SENTENCES, batch_size=2, tokenizer_workers=1))
    assert check_pipeline_options(1000, None) == (2, None) and check_pipeline_options(2, 5) == (2, 5)
