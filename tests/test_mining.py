"""Hard-negative mining (``protoembed.mine_hard_negatives``, ``protoembed mine``) against a brute-force
numpy computation of its rules, sentence-transformers' own ``mine_hard_negatives``, and on a planted false
negative."""

from __future__ import annotations

import itertools
import json
import re
import zlib

import numpy as np
import pytest

from protoembed.core.errors import ProtoembedError
from protoembed.retrieval.mining import RULES, MineOptions, mine_hard_negatives

DIM = 8
#: The stub model's prompts: the vectors are stored under the prompted texts, so an input without its
#: role's prompt is a KeyError.
PROMPTS = {"query": "q: ", "document": "d: "}


class StubModel:
    """``encode`` returns the vector stored for each (prompted) text; ``prompts`` as a saved model has."""

    prompts = PROMPTS

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors
        self.calls: list[list[str]] = []

    def encode(self, sentences, batch_size: int = 64):
        self.calls.append(list(sentences))
        return np.stack([self.vectors[s] for s in sentences])


class StubCrossEncoder:
    """``predict`` of a pair: a fixed pseudo-random score per (anchor, text), as a cross-encoder gives."""

    def __init__(self, seed: int = 7) -> None:
        self.seed = seed

    def score(self, anchor: str, text: str) -> float:
        return float(
            np.random.default_rng([self.seed, zlib.crc32(f"{anchor}\t{text}".encode())]).uniform(-1, 1)
        )

    def predict(self, pairs, batch_size: int = 32):
        return np.array([self.score(a, t) for a, t in pairs], dtype=np.float32)


def toy(seed: int = 0, anchors: int = 6, corpus: int = 14):
    """Pairs (an anchor repeated with a second positive, an anchor that is also a corpus text), a corpus
    (sharing one text with the positives) and a stub model with random vectors for every text and role."""
    rng = np.random.default_rng(seed)
    a = [f"anchor {i}" for i in range(anchors)]
    p = [f"positive {i}" for i in range(anchors)]
    a.append(a[0])
    p.append("positive extra")  # anchor 0 has two positives
    a.append(a[1])
    p.append(p[1])  # a duplicate pair
    c = [f"text {i}" for i in range(corpus)] + [p[2], a[3]]  # a positive and an anchor in the corpus
    texts = set(a) | set(p) | set(c)
    vectors = {}
    for t in sorted(texts):
        base = rng.normal(size=DIM).astype(np.float32)
        vectors[PROMPTS["query"] + t] = base
        vectors[PROMPTS["document"] + t] = base + 0.3 * rng.normal(size=DIM).astype(np.float32)
    return a, p, c, StubModel(vectors)


def cosine(u: np.ndarray, v: np.ndarray) -> float:
    u, v = u.astype(np.float64), v.astype(np.float64)
    return float(u @ v / np.linalg.norm(u) / np.linalg.norm(v))


def brute_force(model, anchors, positives, corpus, opts: MineOptions, cross=None):
    """Per distinct anchor: every allowed negative, best first, by the rules written out (numpy,
    float64, whole pool scored); returns {anchor: (allowed, positives)}."""
    pool = list(dict.fromkeys([*corpus, *positives]))
    out = {}
    for a in dict.fromkeys(anchors):
        own = list(dict.fromkeys(p for x, p in zip(anchors, positives) if x == a))
        q = model.vectors["q: " + a]
        emb = {t: cosine(q, model.vectors["d: " + t]) for t in pool}
        ranked = sorted((t for t in pool if t not in own and t != a), key=lambda t: -emb[t])
        end = opts.window_end(cross is not None)
        window = ranked[opts.range_min : end]
        score = emb if cross is None else {t: cross.score(a, t) for t in [*window, *own]}
        window = sorted(window, key=lambda t: -score[t])
        pos = min(score[t] for t in own)
        allowed = [
            t
            for t in window
            if (opts.margin is None or score[t] <= pos - opts.margin)
            and (opts.relative_margin is None or score[t] <= pos - abs(pos) * opts.relative_margin)
            and (opts.max_score is None or score[t] <= opts.max_score)
            and (opts.min_score is None or score[t] >= opts.min_score)
        ]
        out[a] = (allowed, own)
    return out


def by_anchor(examples) -> dict[str, list[str]]:
    """{anchor: its negatives in order} from triplets (checked equal for each of its positives)."""
    rows: dict[tuple[str, str], list[str]] = {}
    for a, p, n in zip(*(examples.columns[c] for c in ("anchor", "positive", "negative"))):
        rows.setdefault((a, p), []).append(n)
    out: dict[str, list[str]] = {}
    for (a, _), negatives in rows.items():
        assert out.setdefault(a, negatives) == negatives  # every positive of an anchor, same negatives
    return out


OPTION_CASES = [
    {},
    {"num_negatives": 1},
    {"num_negatives": 4, "range_min": 2},
    {"range_min": 1, "range_max": 7},
    {"num_negatives": 2, "range_max": 30},
    {"margin": 0.0},
    {"margin": 0.1, "range_max": 12},
    {"relative_margin": 0.05},
    {"relative_margin": 0.2, "num_negatives": 5},
    {"max_score": 0.3},
    {"min_score": -0.2, "range_max": 20, "num_negatives": 20},
    {"margin": -0.1, "max_score": 0.5, "min_score": -0.5, "range_min": 1},
]


@pytest.mark.parametrize("options", OPTION_CASES, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.parametrize("rescore", [False, True], ids=["embedding", "cross_encoder"])
def test_top_negatives_equal_brute_force(options, rescore):
    anchors, positives, corpus, model = toy()
    cross = StubCrossEncoder() if rescore else None
    examples, summary = mine_hard_negatives(model, anchors, positives, corpus, cross_encoder=cross, **options)
    opts = MineOptions(**options)
    expected = brute_force(model, anchors, positives, corpus, opts, cross)
    got = by_anchor(examples)
    for a, (allowed, _) in expected.items():
        assert got.get(a, []) == allowed[: opts.num_negatives], a
    pairs = set(zip(examples.columns["anchor"], examples.columns["positive"]))
    assert pairs == {(a, p) for a, (allowed, own) in expected.items() if allowed for p in own}
    # one row per (distinct pair, negative); the counts the summary gives
    assert (
        summary.rows
        == len(examples)
        == sum(len(own) * len(got.get(a, [])) for a, (_, own) in expected.items())
    )
    assert summary.anchors == 6 and summary.pairs == 7 and summary.pool == 22
    assert summary.negatives == sum(map(len, got.values()))
    assert summary.short == sum(len(al) < opts.num_negatives for al, _ in expected.values())
    assert set(summary.skipped) == {r for r in RULES if options.get(r) is not None}
    assert examples.names == ("anchor", "positive", "negative")


@pytest.mark.parametrize(
    "options", OPTION_CASES[:8], ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items())
)
def test_random_sampling_draws_from_the_allowed_set_and_repeats_with_its_seed(options):
    anchors, positives, corpus, model = toy(seed=1)
    opts = MineOptions(**options)
    expected = brute_force(model, anchors, positives, corpus, opts)
    runs = {
        seed: by_anchor(
            mine_hard_negatives(model, anchors, positives, corpus, sampling="random", seed=seed, **options)[0]
        )
        for seed in (0, 0, 1, 2, 3)
    }
    assert runs[0] == by_anchor(
        mine_hard_negatives(model, anchors, positives, corpus, sampling="random", seed=0, **options)[0]
    )
    for got in runs.values():
        for a, (allowed, _) in expected.items():
            drawn = got.get(a, [])
            assert len(drawn) == min(opts.num_negatives, len(allowed)) == len(set(drawn))
            assert set(drawn) <= set(allowed)
            assert drawn == [t for t in allowed if t in drawn]  # listed best first
    if any(len(allowed) > opts.num_negatives for allowed, _ in expected.values()):
        assert len({json.dumps(g, sort_keys=True) for g in runs.values()}) > 1  # the seed matters


def test_the_anchor_and_its_positives_are_never_negatives():
    anchors, positives, corpus, model = toy(seed=2)
    for options in ({"range_max": 40, "num_negatives": 40}, {"sampling": "random", "num_negatives": 30}):
        examples, _ = mine_hard_negatives(model, anchors, positives, corpus, **options)
        own = {a: {p for x, p in zip(anchors, positives) if x == a} for a in anchors}
        for a, n in zip(examples.columns["anchor"], examples.columns["negative"]):
            assert n != a and n not in own[a]
        # every other text of the pool is a negative of every anchor: nothing else is left out
        pool = set(corpus) | set(positives)
        assert (
            by_anchor(examples)["anchor 3"] and set(by_anchor(examples)["anchor 1"]) == pool - own["anchor 1"]
        )


def test_a_planted_false_negative_is_removed_by_the_margins():
    """A corpus text nearly equal to the anchor scores above the positive: the best negative without a
    margin, and removed by margin 0 and by a relative margin, leaving the next candidates."""
    anchors, positives, corpus, model = toy(seed=3)
    q = model.vectors["q: anchor 4"]
    model.vectors["d: planted"] = q + 0.01
    model.vectors["q: planted"] = q
    corpus = [*corpus, "planted"]
    assert cosine(q, q + 0.01) > cosine(q, model.vectors["d: positive 4"])
    plain = by_anchor(mine_hard_negatives(model, anchors, positives, corpus)[0])["anchor 4"]
    assert plain[0] == "planted"
    for rule in ({"margin": 0.0}, {"relative_margin": 0.0}, {"relative_margin": 0.05}):
        examples, summary = mine_hard_negatives(model, anchors, positives, corpus, **rule)
        negatives = by_anchor(examples)["anchor 4"]
        assert "planted" not in negatives
        assert summary.skipped[next(iter(rule))] >= 1
        expected = brute_force(model, anchors, positives, corpus, MineOptions(**rule))["anchor 4"][0]
        assert negatives == expected[:3]


def test_n_tuple_output_keeps_the_anchors_with_every_negative():
    anchors, positives, corpus, model = toy(seed=4)
    options = {"num_negatives": 3, "max_score": 0.3, "range_max": 6}
    triplets = by_anchor(mine_hard_negatives(model, anchors, positives, corpus, **options)[0])
    tuples, summary = mine_hard_negatives(
        model, anchors, positives, corpus, output_format="n-tuple", **options
    )
    assert tuples.names == ("anchor", "positive", "negative_1", "negative_2", "negative_3")
    full = {a for a, n in triplets.items() if len(n) == 3}
    assert set(tuples.columns["anchor"]) == full and 0 < len(full) < 6  # some anchors are short
    for row in range(len(tuples)):
        a = tuples.columns["anchor"][row]
        assert [tuples.columns[f"negative_{j}"][row] for j in (1, 2, 3)] == triplets[a]
    dropped = [(a, p) for a, p in dict.fromkeys(zip(anchors, positives)) if a not in full]
    assert summary.dropped_pairs == len(dropped) and summary.rows == len(tuples) == 7 - len(dropped)


def test_prompts_are_applied_by_role_and_texts_encoded_once():
    anchors, positives, corpus, model = toy()
    mine_hard_negatives(model, anchors, positives, corpus)
    queries, documents = model.calls
    assert queries == [f"q: anchor {i}" for i in range(6)]
    assert len(documents) == len(set(documents)) == 22 and all(d.startswith("d: ") for d in documents)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"num_negatives": 0}, "num_negatives must be at least 1, got 0"),
        (
            {"range_min": 3, "range_max": 4},
            "range_min 3 and range_max 4 leave 1 candidate(s), fewer than num_negatives 3",
        ),
        ({"sampling": "best"}, "sampling expected top or random, got 'best'"),
        ({"score_function": "l2"}, "unknown score function 'l2'"),
        ({"relative_margin": -0.1}, "relative_margin must be at least 0"),
        ({"output_format": "pairs"}, "output_format expected"),
    ],
)
def test_bad_options_are_one_line_errors(options, message):
    anchors, positives, corpus, model = toy()
    with pytest.raises(ProtoembedError) as err:
        mine_hard_negatives(model, anchors, positives, corpus, **options)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert model.calls == []  # refused before any encoding


def test_bad_pairs_are_one_line_errors():
    _, _, _, model = toy()
    cases = [
        (([], []), "no (anchor, positive) pairs to mine negatives for"),
        ((["a"], []), "1 anchors but 0 positives; expected one each"),
        ((["a", "b"], ["x", ""]), "positive of row 1: expected a non-empty text, got ''"),
        ((["a", None], ["x", "y"]), "anchor of row 1: expected a non-empty text, got None"),
    ]
    for (a, p), message in cases:
        with pytest.raises(ProtoembedError, match="^" + re.escape(message) + "$"):
            mine_hard_negatives(model, a, p)


def test_a_cross_encoder_must_give_one_score_per_pair():
    anchors, positives, corpus, model = toy()

    class ThreeWay(StubCrossEncoder):
        def predict(self, pairs, batch_size=32):
            return np.zeros((len(pairs), 3))

    with pytest.raises(ProtoembedError, match="shape .* mining needs one score per pair"):
        mine_hard_negatives(model, anchors, positives, corpus, cross_encoder=ThreeWay())


def test_options_model_combinations_are_all_checked():
    """Every combination of rules, with and without a cross-encoder, sizes its window as documented."""
    for flags in itertools.product([None, 0.1], repeat=4):
        opts = MineOptions(**dict(zip(RULES, flags)), num_negatives=2, range_min=1)
        widened = any(f is not None for f in flags[:3])
        assert opts.window_end() == 1 + 2 * (10 if widened else 1)
        assert opts.window_end(cross_encoder=True) == 1 + 2 * (10 if widened or flags[3] else 1)


QUESTIONS = [
    "how do cats sleep",
    "what do dogs eat",
    "why is the sky blue",
    "how tall is mount everest",
    "who wrote hamlet",
    "what is the capital of france",
    "how do cats sleep",
]
ANSWERS = [
    "cats sleep for twelve to sixteen hours a day, often in short naps.",
    "dogs eat meat, grains and vegetables; most pet dogs eat kibble.",
    "sunlight is scattered by air molecules, and blue light scatters the most.",
    "mount everest is 8,849 metres above sea level.",
    "hamlet was written by william shakespeare around 1600.",
    "paris is the capital and largest city of france.",
    "a cat curls up in a warm spot and dozes through the afternoon.",
]
CORPUS = [
    "kittens sleep even more than adult cats.",
    "wolves hunt in packs and eat large animals.",
    "sunsets look red because light travels through more air.",
    "k2 is the second highest mountain on earth.",
    "macbeth is another tragedy by shakespeare.",
    "lyon is a large city in the south-east of france.",
    "berlin is the capital of germany.",
    "the ocean looks blue partly because water absorbs red light.",
    "puppies need food rich in protein.",
    "the eiffel tower is in paris.",
    "how do cats sleep",
    "the alps are a mountain range in europe.",
    "romeo and juliet is a play about two young lovers.",
    "cats are crepuscular, most active at dawn and dusk.",
]


def test_agrees_with_sentence_transformers_on_the_default_model(tmp_path):
    """sentence-transformers' ``mine_hard_negatives`` with the same backbone gives the same triplets
    where the semantics are equal (module docstring): no rule, ``range_min`` > 0 included; and rules with
    ``range_min`` 0 and a window covering the pool."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import mine_hard_negatives as st_mine

    import protoembed
    from protoembed.model.backbones import default_model_path

    embedder = protoembed.load("default", device="cpu")
    encoded: dict[tuple[str, ...], np.ndarray] = {}  # each text list encoded once, as theirs are cached

    class Once:
        def encode(self, texts, batch_size=64):
            if tuple(texts) not in encoded:
                encoded[tuple(texts)] = embedder.encode(texts, batch_size=batch_size)
            return encoded[tuple(texts)]

    theirs = SentenceTransformer(default_model_path(), device="cpu")
    pairs = Dataset.from_dict({"anchor": QUESTIONS, "positive": ANSWERS})
    cases = [
        {},
        {"num_negatives": 2, "range_min": 3},
        {"num_negatives": 4, "range_min": 1, "range_max": 9},
        {"margin": 0.0, "range_max": 30},
        {"relative_margin": 0.3, "max_score": 0.3, "range_max": 30},
        {"min_score": 0.1, "num_negatives": 5},
    ]
    for options in cases:
        renamed = {"absolute_margin" if name == "margin" else name: v for name, v in options.items()}
        expected = st_mine(
            pairs, theirs, corpus=CORPUS, verbose=False, batch_size=8, cache_folder=str(tmp_path), **renamed
        )
        got, _ = mine_hard_negatives(Once(), QUESTIONS, ANSWERS, CORPUS, batch_size=8, **options)
        assert got.columns == {name: expected[name] for name in ("anchor", "positive", "negative")}, options
        assert len(got) > 6


def _jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def _tiny_cross_encoder(model_dir, folder):
    """A tiny regression cross-encoder saved as a ``cross_encoder`` run saves it (``best/cross_encoder``)."""
    import torch

    import protoembed
    from protoembed.objectives.cross_encoder import save_cross_encoder, sequence_classifier
    from protoembed.outputs.run_layout import BEST_DIR, CROSS_ENCODER_DIR

    torch.manual_seed(0)
    embedder = protoembed.load(str(model_dir), head="cls", device="cpu")
    model = sequence_classifier(embedder.encoder.auto_model, 1, "regression")
    save_cross_encoder(model, embedder.tokenizer, folder / BEST_DIR / CROSS_ENCODER_DIR, 64)
    return folder


def test_cli_writes_jsonl_that_simcse_sup_reads(tiny_model_dirs, tmp_path, one_thread, capsys):
    """``protoembed mine`` with a column mapping and a corpus file writes what the Python call returns,
    as JSON lines that ``read_examples`` reads as anchor, positive, negative and simcse_sup trains on."""
    import protoembed
    from protoembed.cli import main
    from protoembed.data.training.examples import satisfies
    from protoembed.data.training.formats import read_examples
    from protoembed.objectives import build_objective
    from protoembed.objectives.registry import SupervisedSimCSEOptions

    data = _jsonl(
        tmp_path / "pairs.jsonl",
        [{"question": q, "answer": a, "id": i} for i, (q, a) in enumerate(zip(QUESTIONS, ANSWERS))],
    )
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    out = tmp_path / "mined" / "triplets.jsonl"
    model = str(tiny_model_dirs["bert"])
    argv = [
        "mine",
        "--model",
        model,
        "--head",
        "mean",
        "--data",
        data,
        "--columns",
        "anchor=question",
        "positive=answer",
    ]
    argv += ["--corpus", str(corpus), "-o", str(out), "--num-negatives", "2", "--margin", "0"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"wrote {out}: mined ") and printed.count("\n") == 1
    embedder = protoembed.load(model, head="mean")
    expected, summary = mine_hard_negatives(embedder, QUESTIONS, ANSWERS, CORPUS, num_negatives=2, margin=0)
    assert printed == f"wrote {out}: {summary.line()}\n"
    assert [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] == [
        dict(zip(expected.names, row)) for row in zip(*expected.columns.values())
    ]
    back = read_examples(out)
    assert back.columns == expected.columns and satisfies(set(back.names), SupervisedSimCSEOptions.columns)
    objective = build_objective("simcse_sup", protoembed.load(model, head="cls", device="cpu"))
    assert objective(back.select(range(4))).item() > 0
    assert sorted(p.name for p in out.parent.iterdir()) == ["triplets.jsonl"]  # no temp file left
    # no negative left at all: an error, and no file
    none = out.parent / "none.jsonl"
    assert main([str(none) if a == str(out) else a for a in argv] + ["--max-score", "-2"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"protoembed: error: {data}: mined 0 negatives for 6 anchors") and err.count("\n") == 1
    )
    assert "6 anchors short of negatives (6 with none)" in err and err.endswith(
        f"; nothing written to {none}\n"
    )
    assert sorted(p.name for p in out.parent.iterdir()) == ["triplets.jsonl"]


def test_cli_rescores_with_a_saved_cross_encoder(tiny_model_dirs, tmp_path, one_thread):
    """``--cross-encoder RUN``: the run's saved CrossEncoder (loaded by sentence-transformers) decides; the
    negatives are those of the Python call with it, best first by its scores, each under the margin."""
    from sentence_transformers import CrossEncoder

    import protoembed
    from protoembed.cli import main
    from protoembed.model.cross_encoder import load_cross_encoder

    run = _tiny_cross_encoder(tiny_model_dirs["bert"], tmp_path / "run")
    data = _jsonl(
        tmp_path / "pairs.jsonl", [{"anchor": q, "positive": a} for q, a in zip(QUESTIONS, ANSWERS)]
    )
    corpus = _jsonl(tmp_path / "corpus.jsonl", [{"passage": t} for t in CORPUS])
    out = tmp_path / "n.jsonl"
    argv = ["mine", "--model", str(tiny_model_dirs["bert"]), "--data", data, "--corpus", corpus]
    argv += ["--corpus-column", "passage", "--cross-encoder", str(run), "-o", str(out), "--margin", "0"]
    argv += ["--range-max", "12", "--device", "cpu"]
    assert main(argv) == 0
    cross = CrossEncoder(str(run / "best" / "cross_encoder"), device="cpu")
    assert type(load_cross_encoder(run / "best")) is CrossEncoder
    model = protoembed.load(str(tiny_model_dirs["bert"]))
    expected, _ = mine_hard_negatives(
        model, QUESTIONS, ANSWERS, CORPUS, cross_encoder=cross, margin=0, range_max=12
    )
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows == [dict(zip(expected.names, row)) for row in zip(*expected.columns.values())] and rows
    for anchor, negatives in by_anchor(expected).items():
        scores = cross.predict([(anchor, n) for n in negatives])
        positive = min(cross.predict([(anchor, p) for q, p in zip(QUESTIONS, ANSWERS) if q == anchor]))
        assert list(scores) == sorted(scores, reverse=True) and max(scores) <= positive + 1e-6


def test_cli_refuses_data_without_positives(tmp_path, capsys):
    """Data without a positive column: one line naming the file, exit 2, nothing written (before any
    model is loaded)."""
    from protoembed.cli import main

    data = _jsonl(tmp_path / "questions.jsonl", [{"question": q} for q in QUESTIONS])
    out = tmp_path / "out.jsonl"
    code = main(
        [
            "mine",
            "--model",
            str(tmp_path / "no-model"),
            "--data",
            data,
            "--columns",
            "anchor=question",
            "-o",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        f"protoembed: error: {data}: no positive column to mine from (the examples have anchor); map the "
        "file's columns with --columns anchor=COLUMN positive=COLUMN\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["questions.jsonl"]


def test_cli_option_errors_are_one_line(tmp_path, capsys):
    from protoembed.cli import main

    data = _jsonl(tmp_path / "pairs.jsonl", [{"anchor": "a", "positive": "b"}])
    base = ["mine", "--data", data, "-o", str(tmp_path / "o.jsonl")]
    cases = [
        (["--num-negatives", "0"], "num_negatives must be at least 1, got 0"),
        (["--range-min", "2", "--range-max", "3"], "range_min 2 and range_max 3 leave 1 candidate(s)"),
        (
            ["--cross-encoder", str(tmp_path)],
            f"{tmp_path} is not a trained cross-encoder (no readable config.json)",
        ),
        (["--columns", "anchor"], "column mapping 'anchor': expected COLUMN=FILE_COLUMN"),
    ]
    for extra, message in cases:
        try:
            code = main([*base, *extra])
        except SystemExit as exit_:
            code = exit_.code
        err = capsys.readouterr().err
        assert code == 2 and message in err and "Traceback" not in err, err
        assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("score_function", ["cosine", "dot"])
def test_pairwise_scores_are_the_diagonal_of_the_similarity_matrix(score_function):
    from protoembed.retrieval.semantic_search import pairwise, similarity

    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(7, 4)), rng.normal(size=(7, 4))
    np.testing.assert_allclose(
        pairwise(a, b, score_function), np.diag(similarity(a, b, score_function)), rtol=1e-6
    )
    with pytest.raises(ProtoembedError, match=r"different shapes: \(7, 4\) and \(6, 4\)"):
        pairwise(a, b[:6], score_function)
