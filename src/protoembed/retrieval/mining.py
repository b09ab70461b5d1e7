"""Hard-negative mining: (anchor, positive) pairs -> (anchor, positive, negative) training examples.

For each distinct anchor, the candidates are the texts of the pool (the given corpus plus every positive,
deduplicated, first occurrence first) ranked by the embedding model's score with the anchor (the anchor
encoded with the model's ``query`` prompt, the pool with its ``document`` prompt:
:mod:`protoembed.inputs.prompts`). The anchor's own text and every positive of the anchor (all rows with
the same anchor text) are never candidates. Then, per anchor:

1. the window: ranks ``range_min`` .. ``range_max - 1`` (0-based) of that ranking;
2. with a cross-encoder, the window's candidates and the anchor's positives are scored again by it (on
   the raw texts, without prompts), and from here on its scores replace the embedding scores: the
   candidates are re-sorted by them and the rules below compare them;
3. the rules, against false negatives (``pos`` is the lowest score of the anchor's positives, the harder
   one, as sentence-transformers takes it): ``margin`` keeps ``neg <= pos - margin``;
   ``relative_margin`` keeps ``neg <= pos - |pos| * relative_margin`` (``pos * (1 - relative_margin)``
   for a positive ``pos``); ``max_score`` keeps ``neg <= max_score``; ``min_score`` keeps
   ``neg >= min_score``;
4. sampling ``num_negatives`` of what is left: ``top`` takes the best, ``random`` draws uniformly without
   replacement (one ``numpy`` generator seeded with ``seed``, anchors in order); either way the chosen
   negatives are listed best first. An anchor with fewer candidates left gets fewer negatives.

Output (:class:`~protoembed.data.training.examples.Examples`), anchors in order of first appearance, each
anchor's distinct positives in order: ``triplet`` has one row ``anchor, positive, negative`` per positive
and negative (the columns ``simcse_sup`` reads); ``n-tuple`` one row ``anchor, positive, negative_1 ..
negative_n`` per positive, only for anchors with all ``num_negatives`` negatives.

Against sentence-transformers' ``mine_hard_negatives`` (the options it names ``absolute_margin`` and
``sampling_strategy`` are ``margin`` and ``sampling`` here), the mined negatives are the same when no
rule is set and no cross-encoder is used, or when ``range_min`` is 0 and the window covers the whole pool;
otherwise two documented differences: (a) sentence-transformers applies the rules first and the window
after, to a pool of ``range_max`` plus (the most positives of any anchor + 1) retrieved texts, so its
``range_min`` skips candidates that passed the rules (and with a cross-encoder, the best by the
cross-encoder), where here the window is taken from the embedding ranking before the rules; (b)
``random`` draws from numpy's generator, not Python's ``random``. Ties in score are ordered by pool
position here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Literal, Protocol

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from protoembed.core.errors import ProtoembedError
from protoembed.core.pydantic_util import Flag, WholeMessage, check_options, checked
from protoembed.data.training.examples import Examples
from protoembed.inputs.prompts import DOCUMENT, QUERY
from protoembed.model.protocol import SCORE_FUNCTIONS, check_score_function
from protoembed.retrieval.semantic_search import encode_as, pairwise, top_k

logger = logging.getLogger(__name__)

#: The rules against false negatives, in the order they are applied (the names of their options).
RULES = ("margin", "relative_margin", "max_score", "min_score")
#: Without ``range_max``, the window holds ``num_negatives`` candidates, or this many times as many when a
#: rule may remove candidates from its top (as sentence-transformers sizes it).
WINDOW_FACTOR = 10


class MineOptions(BaseModel):
    """The options of :func:`mine_hard_negatives` and ``protoembed mine`` (one flag each): the field's
    default, type and description are the option's default, check and help."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    num_negatives: int = Field(3, ge=1, description="negatives per anchor")
    range_min: int = Field(
        0, ge=0, description="skip the first RANGE_MIN candidates of the ranking (0-based)"
    )
    range_max: int | None = Field(
        None,
        ge=1,
        description="consider ranks below RANGE_MAX only (default: range_min + num_negatives, or range_min "
        f"+ {WINDOW_FACTOR} x num_negatives when a margin or max score is set)",
    )
    margin: float | None = Field(
        None, description="keep a negative only if its score <= the positive's - MARGIN"
    )
    relative_margin: float | None = Field(
        None, ge=0, description="keep a negative only if its score <= the positive's - |positive's| * this"
    )
    max_score: float | None = Field(None, description="keep a negative only if its score <= MAX_SCORE")
    min_score: float | None = Field(None, description="keep a negative only if its score >= MIN_SCORE")
    sampling: Literal["top", "random"] = Field(
        "top", description="take the best candidates or draw at random"
    )
    seed: int = Field(0, ge=0, description="seed of the random sampling")
    score_function: Annotated[
        str, AfterValidator(checked(check_score_function)), Flag(choices=lambda: SCORE_FUNCTIONS)
    ] = Field("cosine", description="the embedding model's score")
    output_format: Literal["triplet", "n-tuple"] = Field(
        "triplet", description="one row per negative, or one row with negative_1..negative_N"
    )

    @model_validator(mode="after")
    def _window(self) -> MineOptions:
        if self.range_max is not None and self.num_negatives > self.range_max - self.range_min:
            raise WholeMessage(
                f"range_min {self.range_min} and range_max {self.range_max} leave "
                f"{max(self.range_max - self.range_min, 0)} candidate(s), fewer than num_negatives "
                f"{self.num_negatives}"
            )
        return self

    def window_end(self, cross_encoder: bool = False) -> int:
        """``range_max``, or its default (see the field): ``range_min + num_negatives``, with
        ``num_negatives`` times :data:`WINDOW_FACTOR` when ``margin``, ``relative_margin`` or ``max_score`` is set (or ``min_score``
        with a cross-encoder, whose order is not the window's)."""
        if self.range_max is not None:
            return self.range_max
        widen = (
            self.margin is not None
            or self.relative_margin is not None
            or self.max_score is not None
            or (cross_encoder and self.min_score is not None)
        )
        return self.range_min + self.num_negatives * (WINDOW_FACTOR if widen else 1)


#: The defaults (the keyword arguments of :func:`mine_hard_negatives` default to them).
DEFAULT = MineOptions()


class Encoder(Protocol):
    """What mining needs of an embedding model: ``encode(texts, batch_size=...) -> (N, D) array``, told
    each role's prompt by ``prompt_name`` when it takes one (else given the prompted texts:
    :func:`protoembed.inputs.prompts.encode_with_role`)."""

    def encode(self, sentences: Sequence[str], batch_size: int = ...) -> Any: ...


class PairScorer(Protocol):
    """A cross-encoder: ``predict([(anchor, text), ...], batch_size=...) -> (N,) scores``
    (sentence-transformers' ``CrossEncoder``)."""

    def predict(self, sentences: Sequence[tuple[str, str]], batch_size: int = ...) -> Any: ...


@dataclass
class MiningSummary:
    """What a mining run found (logged, returned, and the CLI's printed line).

    ``anchors``: distinct anchors; ``pairs``: distinct (anchor, positive) pairs; ``pool``: candidate texts
    (corpus and positives, deduplicated); ``range_max``: the window's end used; ``negatives``: negatives
    chosen over all anchors; ``short``: anchors with fewer than ``num_negatives`` (``without``: with
    none); ``skipped``: window candidates each rule removed (a candidate counts for the first rule that
    removes it); ``rows``: output rows; ``dropped_pairs``: pairs left out of an ``n-tuple`` output
    (their anchor is short).
    """

    anchors: int
    pairs: int
    pool: int
    range_max: int
    negatives: int = 0
    short: int = 0
    without: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    rows: int = 0
    dropped_pairs: int = 0

    def line(self) -> str:
        """One line: ``mined 12 negatives for 4 anchors (6 pairs, pool 20): 12 rows; ...``."""
        text = (
            f"mined {self.negatives} negatives for {self.anchors} anchors ({self.pairs} pairs, pool "
            f"{self.pool}, ranks below {self.range_max}): {self.rows} rows"
        )
        if self.short:
            text += f"; {self.short} anchors short of negatives ({self.without} with none)"
        if self.dropped_pairs:
            text += f"; {self.dropped_pairs} pairs dropped (n-tuple needs every negative)"
        skipped = [f"{rule} {n}" for rule, n in self.skipped.items() if n]
        if skipped:
            text += f"; candidates removed by {', '.join(skipped)}"
        return text

    def as_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return asdict(self)


def _texts(values: Sequence[Any], column: str) -> list[str]:
    for i, value in enumerate(values):
        if not isinstance(value, str) or not value.strip():
            raise ProtoembedError(f"{column} of row {i}: expected a non-empty text, got {value!r}")
    return list(values)


def _one_score_each(raw: Any, pairs: int) -> np.ndarray:
    """A cross-encoder's ``predict`` output as one float per pair (a (N, 1) output is squeezed)."""
    scores = np.asarray(raw.detach().cpu() if hasattr(raw, "detach") else raw, dtype=np.float64)
    if scores.ndim == 2 and scores.shape[1] == 1:
        scores = scores[:, 0]
    if scores.shape != (pairs,):
        raise ProtoembedError(
            f"the cross-encoder gives scores of shape {tuple(scores.shape)} for {pairs} pairs; mining needs "
            "one score per pair (a regression or binary cross-encoder, not a 3-way NLI classifier)"
        )
    return scores


def _rule_keeps(opts: MineOptions, scores: np.ndarray, positive: float) -> list[tuple[str, np.ndarray]]:
    """Per rule set in ``opts`` (in :data:`RULES` order), which of ``scores`` it keeps."""
    kept = []
    if opts.margin is not None:
        kept.append(("margin", scores <= positive - opts.margin))
    if opts.relative_margin is not None:
        kept.append(("relative_margin", scores <= positive - abs(positive) * opts.relative_margin))
    if opts.max_score is not None:
        kept.append(("max_score", scores <= opts.max_score))
    if opts.min_score is not None:
        kept.append(("min_score", scores >= opts.min_score))
    return kept


def mine_hard_negatives(
    model: Encoder,
    anchors: Sequence[str],
    positives: Sequence[str],
    corpus: Sequence[str] | None = None,
    *,
    num_negatives: int = DEFAULT.num_negatives,
    range_min: int = DEFAULT.range_min,
    range_max: int | None = DEFAULT.range_max,
    margin: float | None = DEFAULT.margin,
    relative_margin: float | None = DEFAULT.relative_margin,
    max_score: float | None = DEFAULT.max_score,
    min_score: float | None = DEFAULT.min_score,
    sampling: str = DEFAULT.sampling,
    seed: int = DEFAULT.seed,
    score_function: str = DEFAULT.score_function,
    output_format: str = DEFAULT.output_format,
    cross_encoder: PairScorer | None = None,
    batch_size: int | None = None,
) -> tuple[Examples, MiningSummary]:
    """Mine hard negatives for (anchor, positive) pairs (the rules: the module docstring).

    ``num_negatives``, ``range_min``, ``range_max``, ``margin``, ``relative_margin``, ``max_score``,
    ``min_score``, ``sampling``, ``seed``, ``score_function`` and ``output_format`` are the fields of
    :class:`MineOptions`.

    Args:
        model: the embedding model (a protoembed ``Embedder``, an exported one, or anything with
            ``encode`` and optionally ``prompts``).
        anchors: the pairs' first texts, row by row (an anchor may repeat with other positives).
        positives: the pairs' second texts, row by row with ``anchors``.
        corpus: further candidate texts (the positives are always candidates of the other anchors).
        cross_encoder: rescores the window's candidates and the positives (``predict`` of text pairs,
            one score each), e.g. ``sentence_transformers.CrossEncoder`` of a protoembed
            ``cross_encoder`` run's ``cross_encoder/`` folder.
        batch_size: texts (pairs) per forward pass (default: the model's own).
    Returns:
        the examples (columns ``anchor, positive, negative`` or ``anchor, positive, negative_1..N``;
        their one ``sources`` record holds the summary under ``mining``) and the :class:`MiningSummary`.
    Raises:
        ProtoembedError: bad options (one line, e.g. ``num_negatives must be at least 1, got 0``), no
            pairs, anchors and positives of different lengths, an empty or non-text entry (named by row),
            or a cross-encoder that does not give one score per pair.
    """
    opts = check_options(
        MineOptions,
        dict(
            num_negatives=num_negatives,
            range_min=range_min,
            range_max=range_max,
            margin=margin,
            relative_margin=relative_margin,
            max_score=max_score,
            min_score=min_score,
            sampling=sampling,
            seed=seed,
            score_function=score_function,
            output_format=output_format,
        ),
    )
    if len(anchors) != len(positives):
        raise ProtoembedError(f"{len(anchors)} anchors but {len(positives)} positives; expected one each")
    if not anchors:
        raise ProtoembedError("no (anchor, positive) pairs to mine negatives for")
    anchor_rows, positive_rows = _texts(anchors, "anchor"), _texts(positives, "positive")
    extra = _texts(corpus, "corpus text") if corpus is not None else []

    pool = list(dict.fromkeys([*extra, *positive_rows]))
    where = {text: i for i, text in enumerate(pool)}
    positives_of: dict[str, list[int]] = {}
    for anchor, positive in zip(anchor_rows, positive_rows):
        own = positives_of.setdefault(anchor, [])
        if where[positive] not in own:
            own.append(where[positive])
    unique = list(positives_of)
    end = opts.window_end(cross_encoder is not None)
    summary = MiningSummary(
        anchors=len(unique),
        pairs=sum(map(len, positives_of.values())),
        pool=len(pool),
        range_max=end,
        skipped=dict.fromkeys((r for r in RULES if getattr(opts, r) is not None), 0),
    )

    anchor_vectors = encode_as(model, unique, QUERY, batch_size)
    pool_vectors = encode_as(model, pool, DOCUMENT, batch_size)
    exclude = [positives_of[a] + ([where[a]] if a in where else []) for a in unique]
    rankings = top_k(anchor_vectors, pool_vectors, end, opts.score_function, exclude)
    windows = [ranking[opts.range_min : end] for ranking in rankings]
    owners = [i for i, a in enumerate(unique) for _ in positives_of[a]]
    flat = pairwise(
        anchor_vectors[owners],
        pool_vectors[[p for a in unique for p in positives_of[a]]],
        opts.score_function,
    ).astype(np.float64)
    positive_scores = np.split(flat, np.cumsum([len(positives_of[a]) for a in unique])[:-1])
    candidate_scores = [np.array([s for _, s in w], dtype=np.float64) for w in windows]
    if cross_encoder is not None:
        candidate_scores, positive_scores = _rescore(
            cross_encoder, unique, pool, positives_of, windows, batch_size
        )

    rng = np.random.default_rng(opts.seed)
    chosen: list[list[int]] = []
    for window, scores, pos in zip(windows, candidate_scores, positive_scores):
        order = np.argsort(-scores, kind="stable")  # a no-op without a cross-encoder
        indices, scores = np.array([window[j][0] for j in order], dtype=np.int64), scores[order]
        keep = np.ones(len(scores), dtype=bool)
        for rule, kept in _rule_keeps(opts, scores, float(np.min(pos))):
            summary.skipped[rule] += int((keep & ~kept).sum())
            keep &= kept
        left = np.flatnonzero(keep)
        if opts.sampling == "random" and len(left) > opts.num_negatives:
            left = np.sort(rng.choice(left, size=opts.num_negatives, replace=False))
        picked = indices[left[: opts.num_negatives]].tolist()
        chosen.append(picked)
        summary.negatives += len(picked)
        summary.short += len(picked) < opts.num_negatives
        summary.without += not picked

    columns = _rows(opts, unique, positives_of, chosen, pool, summary)
    examples = Examples(columns, [{"path": "<mined>", "format": "mined", "examples": summary.rows}])
    examples.sources[0]["mining"] = summary.as_dict()
    logger.info("%s", summary.line())
    if summary.short:
        logger.info(
            "a larger range_max, a smaller range_min or looser margins / max_score give more negatives"
        )
    return examples, summary


def _rescore(
    cross_encoder: PairScorer,
    unique: list[str],
    pool: list[str],
    positives_of: dict[str, list[int]],
    windows: list[list[tuple[int, float]]],
    batch_size: int | None,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The cross-encoder's scores of each anchor's window candidates and of its positives (one call)."""
    pairs = [(a, pool[i]) for a, w in zip(unique, windows) for i, _ in w]
    pairs += [(a, pool[i]) for a in unique for i in positives_of[a]]
    kwargs = {} if batch_size is None else {"batch_size": batch_size}
    scores = _one_score_each(cross_encoder.predict(pairs, **kwargs), len(pairs)) if pairs else np.zeros(0)
    split = np.cumsum([len(w) for w in windows] + [len(positives_of[a]) for a in unique])[:-1]
    parts = np.split(scores, split) if len(split) else [scores]
    return parts[: len(unique)], parts[len(unique) :]


def _rows(
    opts: MineOptions,
    unique: list[str],
    positives_of: dict[str, list[int]],
    chosen: list[list[int]],
    pool: list[str],
    summary: MiningSummary,
) -> dict[str, list[str]]:
    """The output columns (``triplet`` or ``n-tuple``, see the module docstring); counts the rows."""
    if opts.output_format == "triplet":
        columns: dict[str, list[str]] = {"anchor": [], "positive": [], "negative": []}
        for a, picked in zip(unique, chosen):
            for p in positives_of[a]:
                for n in picked:
                    columns["anchor"].append(a)
                    columns["positive"].append(pool[p])
                    columns["negative"].append(pool[n])
    else:
        negatives = [f"negative_{j + 1}" for j in range(opts.num_negatives)]
        columns = {name: [] for name in ("anchor", "positive", *negatives)}
        for a, picked in zip(unique, chosen):
            if len(picked) < opts.num_negatives:
                summary.dropped_pairs += len(positives_of[a])
                continue
            for p in positives_of[a]:
                columns["anchor"].append(a)
                columns["positive"].append(pool[p])
                for name, n in zip(negatives, picked):
                    columns[name].append(pool[n])
    summary.rows = len(columns["anchor"])
    return columns
