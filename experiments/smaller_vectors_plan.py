"""What the smaller-vector study runs: its methods, the vector widths and types it measures, where each
method's learning rate comes from, the record files. Each is defined here once; the driver
(:mod:`experiments.smaller_vectors`) and the page (:mod:`experiments.smaller_vectors_report`) read them.

Every method is an own-pairs method (:mod:`experiments.own_pairs_plan`: its library, its config
``configs/cpu/own-pairs/<config>-<set>.yaml``, its learning-rate grid, seeds and selection), trained as it is
or with :data:`MATRYOSHKA_OVERRIDE` added: ``objective.matryoshka`` with the sizes :data:`DIMS`, which
protoembed's ``train`` reads as its Matryoshka objective and the sentence-transformers anchor
(:mod:`experiments.own_pairs_st`) as ``MatryoshkaLoss`` around ``MultipleNegativesRankingLoss``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from experiments.own_pairs_plan import METHODS as OWN_PAIRS_METHODS
from experiments.own_pairs_plan import PROTOEMBED, SENTENCE_TRANSFORMERS
from experiments.own_pairs_report import RETRIEVAL_FILE

#: The widths every kept model is evaluated at (``protoembed eval retrieval --dims``), largest first:
#: also the Matryoshka methods' trained sizes (equal weights). The first is the model's full width.
DIMS = (384, 256, 128, 64, 32)
#: The weighted Matryoshka method's weight per width of :data:`DIMS`: the full width's loss counted twice,
#: the question being whether a larger share for it lowers the full-width cost of training for the
#: small widths (``objective.matryoshka.weights``; AdamW makes only the ratios matter).
FULL_WIDTH_WEIGHTS = (2.0, 1.0, 1.0, 1.0, 1.0)


def matryoshka_override(weights: tuple[float, ...] | None = None) -> str:
    """The ``--set`` override of ``objective.matryoshka`` at :data:`DIMS` (both libraries read it from the
    config), with ``weights`` when given."""
    fields = ["dims: [" + ", ".join(str(d) for d in DIMS) + "]"]
    if weights is not None:
        fields.append("weights: [" + ", ".join(f"{w:g}" for w in weights) + "]")
    return "objective.matryoshka={" + ", ".join(fields) + "}"


#: The ``--set`` override that makes a method Matryoshka with equal weights.
MATRYOSHKA_OVERRIDE = matryoshka_override()

#: The widths the second aim is judged at (the Matryoshka run against the untrained model cut to them).
SMALL_DIMS = (64, 32)
#: The quantised vector types measured at full width (``eval retrieval --vectors``), each rescored: the
#: best ``100 x`` :data:`RESCORE_MULTIPLIER` documents scored again with the float query.
QUANTISED = ("int8", "binary")
RESCORE_MULTIPLIER = 4
#: The share of float32's test nDCG@10 each quantised type is to keep (the aims, in %).
QUANTISED_AIMS = {"int8": 97.0, "binary": 95.0}
#: protoembed's Matryoshka run against sentence-transformers' at each width: at most this far below.
AIM = -0.5


@dataclass(frozen=True)
class Method:
    """A row of the study: the own-pairs method it trains as (library, config, lr grid), and whether
    the Matryoshka override is added."""

    base: str
    matryoshka: bool
    #: the Matryoshka loss's weight per width (``None``: equal weights)
    weights: tuple[float, ...] | None = None

    @property
    def library(self) -> str:
        """The library that trains it (the base method's)."""
        return OWN_PAIRS_METHODS[self.base].library

    @property
    def label(self) -> str:
        """Its label on the page: the base method's, with the Matryoshka sizes when it has them."""
        sizes = "/".join(str(d) for d in DIMS)
        base = OWN_PAIRS_METHODS[self.base].label
        if not self.matryoshka:
            return base
        return f"{base}, Matryoshka {sizes}" + (f", {self.weights_text}" if self.weights else "")

    @property
    def weights_text(self) -> str:
        """How it weights its widths, for the page: ``equal weights`` or ``weights 2/1/1/1/1``."""
        return f"weights {'/'.join(f'{w:g}' for w in self.weights)}" if self.weights else "equal weights"

    @property
    def overrides(self) -> tuple[str, ...]:
        """The ``--set`` overrides after the study's own (lr, seed, eval steps)."""
        return (matryoshka_override(self.weights),) if self.matryoshka else ()


#: Method (run-name prefix) -> its definition, in the page's order.
METHODS: dict[str, Method] = {
    "sup-mined": Method("sup-mined", matryoshka=False),
    "sup-mined-mrl": Method("sup-mined", matryoshka=True),
    "st-mnrl-mined": Method("st-mnrl-mined", matryoshka=False),
    "st-mrl-mined": Method("st-mnrl-mined", matryoshka=True),
    "sup-mined-mrl-w": Method("sup-mined", matryoshka=True, weights=FULL_WIDTH_WEIGHTS),
}
#: Library -> (its plain method, its Matryoshka method).
BY_LIBRARY = {
    library: tuple(
        next(
            name
            for name, m in METHODS.items()
            if m.library == library and m.matryoshka == mrl and not m.weights
        )
        for mrl in (False, True)
    )
    for library in (PROTOEMBED, SENTENCE_TRANSFORMERS)
}
#: The two equal-weight Matryoshka methods: (protoembed's, sentence-transformers').
MATRYOSHKA_PAIR = (BY_LIBRARY[PROTOEMBED][1], BY_LIBRARY[SENTENCE_TRANSFORMERS][1])
#: protoembed's Matryoshka methods, each judged by the aims against sentence-transformers'.
PROTOEMBED_MATRYOSHKA = tuple(n for n, m in METHODS.items() if m.library == PROTOEMBED and m.matryoshka)

#: Record files of a tested model: the test split at every width of :data:`DIMS` (``{"suite", "dims"}``),
#: and at full width with each quantised type (``<type>.json``).
DIMS_FILE = RETRIEVAL_FILE


def quantised_file(vectors: str) -> str:
    """The record file of the full-width test evaluation with ``vectors``."""
    return f"{vectors}.json"


#: Where a row's learning rate comes from: chosen on dev from the own-pairs grid by this study's own seed-1
#: runs (``dev``), or the own-pairs study's choice for the base method (``own-pairs``).
LR_DEV, LR_OWN_PAIRS = "dev", "own-pairs"
PROTOCOLS = (LR_DEV, LR_OWN_PAIRS)


def row_lr(records_dir: Path, own_pairs_records: Path, method: str, name: str) -> tuple[float | None, str]:
    """``(lr, protocol)`` of ``method``'s row on set ``name``: the lr chosen on dev by this study's seed-1
    runs of the whole grid when they are all recorded in ``records_dir`` (:data:`LR_DEV`), else the lr the
    own-pairs study chose for its base method (records ``own_pairs_records``: :data:`LR_OWN_PAIRS`; ``None``
    when that is not recorded either)."""
    from experiments.own_pairs import chosen_lr

    lr = chosen_lr(records_dir, method, name)
    if lr is not None:
        return lr, LR_DEV
    return own_pairs_lr(own_pairs_records, method, name), LR_OWN_PAIRS


def own_pairs_lr(own_pairs_records: Path, method: str, name: str) -> float | None:
    """The lr the own-pairs study chose for ``method``'s base on set ``name`` (from its records)."""
    from experiments.own_pairs import chosen_lr

    return chosen_lr(own_pairs_records, METHODS[method].base, name)
