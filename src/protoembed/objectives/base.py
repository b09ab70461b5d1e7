"""What an objective is: an embedder plus training-only parts, mapping a batch of examples to a loss.

An :class:`Objective` is a ``torch.nn.Module`` holding the :class:`~protoembed.model.embedder.Embedder` being
trained (``self.embedder``, a submodule, so ``objective.parameters()`` covers the backbone, the head and
every training-only part) and returns a scalar loss from :meth:`Objective.forward` for one batch of
examples: a dict of named columns (``{"text": [...]}``, ``{"sentence1": [...], "sentence2": [...],
"score": [...]}``, ...; see :mod:`protoembed.data.training.examples`). Each objective's options model
(:mod:`protoembed.objectives.registry`) declares the columns it needs (:attr:`Objective.columns`, checked
against the data before step 1) and its natural head; a run plans both from its options before the
objective exists (:mod:`protoembed.objectives.plan`), and the objective is built from the parsed options. What is
evaluated and saved is :meth:`Objective.eval_embedder`. :func:`check_batch` checks a batch's columns.

Sentences become the embedder's inputs through :class:`~protoembed.objectives.views.ViewBuilder` (the
embedder's own template, training truncation). :class:`ContrastiveObjective` adds what the unsupervised
contrastive objectives share: the training MLP and the InfoNCE core :func:`contrastive_loss` (cosine
similarity over a temperature, cross-entropy with target ``i`` for anchor ``i``, over the batch gathered
from every process, :mod:`protoembed.objectives.distributed`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from protoembed.core.errors import ProtoembedError
from protoembed.data.training.examples import ColumnSpec, describe_columns
from protoembed.model.embedder import Embedder
from protoembed.model.heads.mlp import MLP, MLPPooling
from protoembed.objectives.distributed import gather_with_grad, scale_for_ddp_average
from protoembed.objectives.fp32_losses import fp32_loss
from protoembed.objectives.matryoshka import cut, cut_padded, matryoshka_loss
from protoembed.objectives.registry import (
    MATRYOSHKA,
    REGISTRY,
    ContrastiveOptions,
    MatryoshkaOptions,
    ObjectiveOptions,
    options_doc,
)
from protoembed.objectives.views import Rows, ViewBatch, ViewBuilder


@fp32_loss
def contrastive_loss(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    negatives: torch.Tensor | None = None,
    temperature: float = 0.05,
) -> torch.Tensor:
    """InfoNCE with in-batch (and cross-process) negatives.

    ``logits = [cos(a, P) | cos(a, Q)] / temperature`` ((N, N) or (N, 2N)), target ``i`` for row ``i``,
    mean cross-entropy, in fp32 whatever the training precision (inputs cast, autocast off:
    :func:`~protoembed.objectives.fp32_losses.fp32_loss`). Inputs are gathered over processes first (global
    batch ``N·W``); the gradient is scaled so that DDP's averaging reproduces the one-process gradient on
    the concatenated batch.

    Args:
        anchors: (N, D) anchor vectors ``v``.
        positives: (N, D) positive of each anchor (row ``i`` pairs with anchor ``i``).
        negatives: optional (N, D) extra candidates (ConPVP's negative prototypes).
        temperature: ``tau``.
    Returns:
        the scalar loss.
    """
    anchors = F.normalize(gather_with_grad(anchors), dim=-1)
    candidates = [gather_with_grad(positives)] + ([] if negatives is None else [gather_with_grad(negatives)])
    logits = anchors @ F.normalize(torch.cat(candidates), dim=-1).T / temperature
    target = torch.arange(anchors.size(0), device=anchors.device)
    return scale_for_ddp_average(F.cross_entropy(logits, target))


class Objective(torch.nn.Module):
    """Base class: an embedder, its training-only parts, and a loss over a batch of examples.

    Subclasses implement :meth:`forward`. A registered objective's :attr:`name` and :attr:`Options` (the
    pydantic model of its options, which also declares its default head and its columns) come from its
    line of :data:`~protoembed.objectives.registry.REGISTRY`; an objective outside the registry sets both
    itself.

    Args:
        embedder: the model being trained (kept as ``self.embedder``).
        options: the parsed options, an instance of :attr:`Options` (from
            :func:`~protoembed.objectives.plan.plan_objective`); ``None``: every option's default.
        max_seq_length: truncation of the training inputs (sentence tokens with a template, all tokens
            without); ``None`` = the embedder's own ``max_seq_length``. The embedder itself is not
            changed, so evaluation may read longer inputs than training.
    Raises:
        TypeError: ``options`` is not an instance of :attr:`Options` (raw options go through
            :func:`~protoembed.objectives.build_objective`).
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type[ObjectiveOptions]] = ObjectiveOptions
    #: the columns of a batch with these options (checked against the data before step 1)
    columns: ColumnSpec

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A registered class (named by an entry of :data:`~protoembed.objectives.registry.REGISTRY`)
        takes its :attr:`name` and :attr:`Options` from its entry, and its docstring gets the "Options:"
        section generated from them."""
        super().__init_subclass__(**kwargs)
        target = f"{cls.__module__}:{cls.__qualname__}"
        name = next((key for key, entry in REGISTRY.items() if entry.target == target), None)
        if name is None:
            return
        if "Options" in cls.__dict__ or "name" in cls.__dict__:
            raise TypeError(
                f"{cls.__name__}: a registered objective takes its name and Options from the registry"
            )
        entry = REGISTRY[name]
        cls.name, cls.Options = name, entry.options
        if cls.__doc__:  # indented as the docstring's own lines (Python 3.13 strips their indent)
            lines = [line for line in cls.__doc__.splitlines()[1:] if line.strip()]
            indent = "\n" + " " * min((len(line) - len(line.lstrip()) for line in lines), default=0)
            cls.__doc__ = (
                cls.__doc__.rstrip() + "\n" + indent + options_doc(entry.options).replace("\n", indent)
            )

    def __init__(
        self,
        embedder: Embedder,
        options: ObjectiveOptions | None = None,
        *,
        max_seq_length: int | None = None,
    ) -> None:
        super().__init__()
        if options is None:
            options = self.Options()
        elif not isinstance(options, self.Options):
            raise TypeError(
                f"objective {self.name!r} takes its parsed options ({self.Options.__name__}), got "
                f"{type(options).__name__}; pass raw options to protoembed.objectives.build_objective"
            )
        self.options = options
        self.columns = options.needed_columns()
        self.embedder = embedder
        if max_seq_length is None:
            max_seq_length = embedder.encoder.max_seq_length
        self.views = ViewBuilder(embedder.encoder, max_seq_length)
        if self.matryoshka is not None:
            size = embedder.dimension
            self.matryoshka.check_dims(size, f"the embedder (head {embedder.head!r}, dimension {size})")
            embedder.matryoshka_dims = list(self.matryoshka.dims)  # saved with the model

    @property
    def matryoshka(self) -> MatryoshkaOptions | None:
        """The ``matryoshka`` option (``None``: off, or an objective that compares no embeddings)."""
        return getattr(self.options, MATRYOSHKA, None)

    def config(self) -> dict[str, Any]:
        """``{"objective": name, **options}`` (JSON-serialisable; what a run log records); ``matryoshka``
        only where it is set."""
        options = self.options.model_dump()
        if options.get(MATRYOSHKA, False) is None:
            del options[MATRYOSHKA]
        return {"objective": self.name, **options}

    # ------------------------------------------------------------- forward
    def forward(self, batch: Mapping[str, Sequence[Any]]) -> torch.Tensor:  # pragma: no cover - abstract
        """The training loss of one batch of examples (scalar)."""
        raise NotImplementedError

    @property
    def max_seq_length(self) -> int | None:
        """Truncation of the training inputs."""
        return self.views.max_seq_length

    def embed_features(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Encoder + head on padded features -> (B, H) pooled vectors (no normalisation).

        The embedder's own ``normalize`` is skipped on purpose: losses use cosine similarity, and a
        training MLP must see the raw head output, as at evaluation with ``mlp: keep``.
        """
        return self.embedder.embed(features, normalize=False)["sentence_embedding"]

    def embed_views(self, views: ViewBatch) -> torch.Tensor:
        """The (R, H) vectors of all ``R`` rows of ``views`` (on the embedder's device), one forward of the
        backbone per :meth:`~protoembed.objectives.views.ViewBatch.forwards` entry, each padded to its own
        longest row (``training.padding``, :mod:`protoembed.objectives.views`), in the step's row order."""
        parts = [self.embed_features(views.rows(start, end)) for start, end in views.forwards()]
        return views.in_step_order(parts[0] if len(parts) == 1 else torch.cat(parts))

    def embed(self, *groups: Sequence[str]) -> list[torch.Tensor]:
        """Embed groups of sentences of one batch (the same number each: its columns) as the embedder
        reads them (its template, training truncation), the groups going through the backbone as
        ``training.padding`` says (:meth:`embed_views`); returns one (len(group), H) tensor per group.
        """
        rows = Rows()
        soft = self.embedder.encoder.soft_prompt is not None
        for group in groups:
            rows.extend(
                self.views.wrap(self.views.anchor_template, self.views.sentence_ids(group), soft=soft)
            )
        views = self.views.batch(rows, len(groups[0])).to(self.embedder.device)
        return list(self.embed_views(views).split([len(g) for g in groups]))

    # ---------------------------------------------------------- evaluation
    def eval_embedder(self) -> Embedder:
        """The model to evaluate and save (sharing this objective's modules)."""
        return self.embedder

    def save(self, path: str | os.PathLike[str]) -> None:
        """Save what a run keeps as ``best/``: :meth:`eval_embedder` in the sentence-transformers layout."""
        self.eval_embedder().save(path)


def batch_sentences(batch: Mapping[str, Sequence[Any]] | Sequence[str]) -> Sequence[str]:
    """The ``text`` column of a batch; a plain list of sentences is taken as that column."""
    return batch["text"] if isinstance(batch, Mapping) else batch


def check_batch(name: str, batch: Mapping[str, Sequence[Any]], needed: ColumnSpec) -> int:
    """The number of examples in ``batch`` after checking that it has the ``needed`` columns.

    Raises:
        ProtoembedError: ``objective 'cosine_regression': the batch has no column 'score' (it has
            sentence1, sentence2); it needs sentence1, sentence2, score``; or columns of different
            lengths, or an empty batch.
    """
    if not isinstance(batch, Mapping):
        raise ProtoembedError(
            f"objective {name!r}: a batch is a mapping of columns ({describe_columns(needed)}), "
            f"got {type(batch).__name__}"
        )
    for column in needed:
        options = column if isinstance(column, tuple) else (column,)
        if not any(c in batch for c in options):
            raise ProtoembedError(
                f"objective {name!r}: the batch has no column {' or '.join(map(repr, options))} "
                f"(it has {', '.join(batch) or 'none'}); it needs {describe_columns(needed)}"
            )
    lengths = {column: len(values) for column, values in batch.items()}
    if len(set(lengths.values())) != 1 or not next(iter(lengths.values())):
        shown = ", ".join(f"{column} {n}" for column, n in lengths.items())
        raise ProtoembedError(
            f"objective {name!r}: the batch's columns must have the same length > 0 ({shown})"
        )
    return next(iter(lengths.values()))


class ContrastiveObjective(Objective):
    """A contrastive objective over sentences (SimCSE, PromptBERT, ConPVP, supervised SimCSE): InfoNCE
    (:func:`contrastive_loss`) and SimCSE's training MLP on the pooled vectors.

    A step is split in three, so that a large batch can go through GradCache
    (:mod:`protoembed.objectives.cache`) with the same code as a plain step:

    - :meth:`collate` (``batch -> ViewBatch``): every row of the step (all views, denoising rows),
      tokenised and padded on CPU; the training DataLoader runs it (``training.num_workers``);
    - :meth:`embed_features` (features of any subset of rows -> their (rows, H) vectors): the backbone
      and head, row by row independent;
    - :meth:`loss` (the vectors of ALL rows -> scalar): denoising subtraction, training MLP, InfoNCE.

    ``forward(batch)`` is ``loss(embed_views(rows), batch)``; ``batch`` may be a
    :class:`ViewBatch`, a dict of columns or, for the ``text`` column alone, a plain list of sentences.
    """

    Options: ClassVar[type[ContrastiveOptions]] = ContrastiveOptions
    options: ContrastiveOptions

    def __init__(
        self,
        embedder: Embedder,
        options: ContrastiveOptions | None = None,
        *,
        max_seq_length: int | None = None,
    ) -> None:
        super().__init__(embedder, options, max_seq_length=max_seq_length)
        hidden = int(embedder.pooler.get_embedding_dimension())
        backbone = embedder.encoder.auto_model  # the MLP starts as the backbone's own layers do
        self.mlp = MLP(hidden, backbone).to(embedder.device) if self.options.mlp != "none" else None

    def project(self, x: torch.Tensor, dim: int | None = None) -> torch.Tensor:
        """The vectors the loss compares: ``x`` (the pooled vectors, denoised) through the training MLP
        if there is one; with ``dim``, the evaluated embedding cut to ``dim`` (Matryoshka,
        :mod:`protoembed.objectives.matryoshka`): cut after the MLP with ``mlp: keep`` (evaluation
        reads its output), before it with ``mlp: train`` (the MLP reads the cut padded with zeros)."""
        if self.mlp is None:
            return cut(x, dim)
        if self.options.mlp == "keep":
            return cut(self.mlp(x), dim)
        return self.mlp(cut_padded(x, dim))

    def infonce(self, views: torch.Tensor, n: int) -> torch.Tensor:
        """InfoNCE (:func:`contrastive_loss`) of the ``n`` anchors (rows ``:n`` of ``views``) against
        their positives (rows ``n:2n``) and, with ``3n`` rows, the negatives, on :meth:`project` of the
        (denoised) view vectors; the weighted sum over the Matryoshka sizes when the option is set."""

        def at(dim: int | None) -> torch.Tensor:
            z = self.project(views, dim)
            negatives = z[2 * n :] if z.size(0) == 3 * n else None
            return contrastive_loss(z[:n], z[n : 2 * n], negatives, temperature=self.options.temperature)

        return matryoshka_loss(self.matryoshka, at)

    # ----------------------------------------------------------- one step
    def build_rows(
        self, batch: Mapping[str, Sequence[Any]] | Sequence[str]
    ) -> tuple[Rows, int, dict[str, torch.Tensor]]:  # pragma: no cover - abstract
        """``(rows, n, index)``: every row of one step, the number of examples and what :meth:`loss`
        needs to read the rows back (see :class:`~protoembed.objectives.views.ViewBatch`)."""
        raise NotImplementedError

    def loss(self, states: torch.Tensor, batch: ViewBatch) -> torch.Tensor:  # pragma: no cover - abstract
        """The loss of one step from the (R, H) vectors of all ``R`` rows of ``batch``, in row order."""
        raise NotImplementedError

    def collate(self, batch: Mapping[str, Sequence[Any]] | Sequence[str]) -> ViewBatch:
        """Tokenise and pad every row of one step (CPU tensors; see :meth:`build_rows`)."""
        rows, n, index = self.build_rows(batch)
        return self.views.batch(rows, n, index)

    def forward(self, batch: ViewBatch | Mapping[str, Sequence[Any]] | Sequence[str]) -> torch.Tensor:
        """The loss of one batch, its rows through the backbone as ``training.padding`` says
        (:meth:`Objective.embed_views`)."""
        views = batch if isinstance(batch, ViewBatch) else self.collate(batch)
        views = views.to(self.embedder.device)
        return self.loss(self.embed_views(views), views)

    def eval_embedder(self) -> Embedder:
        """The embedder, with the MLP appended only for ``mlp: keep``.

        With ``keep`` the returned embedder shares its modules (backbone, soft prompt, MLP) with this
        objective, so it always reflects the current weights.
        """
        if self.options.mlp != "keep":
            return self.embedder
        e = self.embedder
        pooler = MLPPooling(e.pooler, self.mlp)
        kept = Embedder(
            e.encoder, pooler, e.head, e.normalize, prompts=e.prompts, similarity_fn_name=e.similarity_fn_name
        )
        kept.matryoshka_dims = e.matryoshka_dims
        return kept
