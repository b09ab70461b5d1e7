"""A BERT-style cross-encoder fine-tuned as GLUE fine-tunes STS-B and MNLI: the pair in one input.

The "[CLS]" and "Avg." rows of the BERT/ALBERT sentence-embedding paper's Table I ("fine-tuned using
GLUE") and its Table II (the fine-tuned model itself scored on STS-B test) come from this objective: the
two sentences go through the encoder TOGETHER, a head on ``[CLS]`` scores the pair, and afterwards the
fine-tuned encoder is used on single sentences with the ``cls`` or ``mean`` head (cosine similarity).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from protoembed.core.errors import ProtoembedError
from protoembed.data.training.examples import NLI_LABELS
from protoembed.model.backbones import quiet_transformers
from protoembed.model.embedder import Embedder
from protoembed.objectives.base import Objective
from protoembed.objectives.fp32_losses import fp32_loss
from protoembed.objectives.registry import GOLD_COLUMNS, CrossEncoderOptions
from protoembed.outputs.io import replace_dir
from protoembed.outputs.run_layout import CROSS_ENCODER_DIR

logger = logging.getLogger(__name__)

#: The tasks: GLUE STS-B (one output, MSE on the raw 0-5 score) and MNLI (3 labels, cross-entropy).
#: What a cross-encoder is trained for (its ``task`` option, besides ``auto``).
PROBLEMS = ("regression", "classification")
#: Hugging Face ``problem_type`` of each task (selects the loss of ``*ForSequenceClassification``).
PROBLEM_TYPES = {"regression": "regression", "classification": "single_label_classification"}
#: ``CrossEncoder.predict`` applies no activation: a regression model returns the raw 0-5 score.
IDENTITY = "torch.nn.modules.linear.Identity"
#: ``CrossEncoder.predict`` of a model trained with ``loss: bce``: the sigmoid, i.e. the predicted score / 5.
SIGMOID = "torch.nn.modules.activation.Sigmoid"
#: The top of the 0-5 STS scale: ``loss: bce`` regresses ``score / MAX_SCORE`` in [0, 1].
MAX_SCORE = 5.0


def sequence_classifier(backbone: torch.nn.Module, num_labels: int, problem_type: str) -> torch.nn.Module:
    """A Hugging Face ``AutoModelForSequenceClassification`` whose base model IS ``backbone``.

    The model is built from a copy of the backbone's config with ``num_labels`` and ``problem_type``;
    its freshly initialised base model is then replaced by ``backbone`` itself, so the two share every
    weight and a training step of one is a step of the other. Parts of the fresh base model that
    ``backbone`` lacks (a BERT or ALBERT checkpoint loaded without its pooler) are moved onto
    ``backbone``; a pooler that came with the checkpoint is kept. The pooler, dropout, classifier and
    loss are Hugging Face's own for the architecture (BERT/ALBERT: ``tanh(W h_[CLS])``, dropout, linear;
    RoBERTa: dense + tanh + linear on ``<s>``).
    """
    from transformers import AutoModelForSequenceClassification

    config = copy.deepcopy(backbone.config)
    config.num_labels = num_labels
    config.problem_type = problem_type
    if num_labels == len(NLI_LABELS):
        config.id2label = dict(enumerate(NLI_LABELS))
        config.label2id = {name: i for i, name in enumerate(NLI_LABELS)}
    try:
        with quiet_transformers():
            model = AutoModelForSequenceClassification.from_config(config)
    except ValueError:  # no *ForSequenceClassification for this architecture
        raise ProtoembedError(
            f"objective 'cross_encoder': transformers has no sequence-classification model for "
            f"{config.model_type!r} backbones"
        ) from None
    fresh = getattr(model, model.base_model_prefix)
    if type(fresh) is not type(backbone):
        raise ProtoembedError(
            f"objective 'cross_encoder': the backbone {type(backbone).__name__} is not the base model "
            f"{type(fresh).__name__} of {type(model).__name__}"
        )
    for name, child in fresh.named_children():
        if getattr(backbone, name, None) is None and hasattr(backbone, name):
            setattr(backbone, name, child)  # e.g. BERT's pooler, absent from a pooler-less checkpoint
    setattr(model, model.base_model_prefix, backbone)
    return model


class CrossEncoderObjective(Objective):
    """Cross-encoder fine-tuning on sentence pairs, as BERT fine-tunes GLUE's STS-B and MNLI.

    The pair is ONE input, ``[CLS] a [SEP] b [SEP]`` (RoBERTa: ``<s> a </s></s> b </s>``), built by the
    tokenizer's own pair encoding with its segment ids; Hugging Face's sequence-classification model of
    the backbone's architecture (:func:`sequence_classifier`, sharing the embedder's backbone) maps the
    ``[CLS]`` state through its pooler and a linear layer to

    - regression (GLUE STS-B): one output ``s``, loss ``mean (s - y)^2`` with ``y`` the raw gold score in
      [0, 5] (``num_labels = 1``, no rescaling); with ``loss: bce`` (sentence-transformers' STS-B
      cross-encoder recipe, ``training_stsbenchmark.py``) the output is a logit and the loss
      ``mean BCE(sigmoid(s), y / 5)``, computed with logits;
    - classification (GLUE MNLI): 3 logits over :data:`~protoembed.data.training.examples.NLI_LABELS`, loss the
      mean cross-entropy with the gold label.

    Truncation: ``max_seq_length`` counts every token of the pair, special tokens included (the pair
    input has no template); a longer pair loses tokens from its longer sentence first (the tokenizer's
    ``longest_first``). ``None`` = what the backbone's position embeddings allow. Sentences go to the
    tokenizer as they are (its own normalisation, e.g. lower-casing for uncased BERT), as
    ``sentence_transformers.CrossEncoder`` feeds them.

    After training, :meth:`eval_embedder` is the embedder with the fine-tuned backbone, read one sentence
    at a time with its own head (``cls`` by default; ``protoembed.load(best, head="mean")`` gives the
    mean head over the same weights): the paper's Table I "[CLS]" and "Avg." rows. The cross-encoder
    itself, saved in ``best/cross_encoder``, is Table II
    (:func:`protoembed.evaluation.cross_encoder.evaluate_cross_encoder_sts`).

    Inputs:
        a batch ``{"sentence1": [...], "sentence2": [...], "score": [...]}`` (floats) or
        ``{..., "label": [...]}`` (ints, indexes into ``NLI_LABELS``); N >= 1.

    Requirements:
        a backbone with a Hugging Face ``*ForSequenceClassification`` class (BERT, ALBERT, RoBERTa,
        MiniLM, ...); the embedder's head is not used by the loss (any head; ``cls`` by default).

    Task and loss: ``task: auto`` picks the task from the batch: regression when it has a ``score``
    column (also when it has a ``label`` too, as SICK does), else classification; the first batch fixes
    it for the run (it is kept in the state dict, so a resumed run continues with it). ``auto`` builds
    both heads (one stays untrained); an explicit task builds one and requires its column before step 1.
    A model trained with ``loss: bce`` is saved with the sigmoid as its ``CrossEncoder`` activation, so
    ``predict`` returns the predicted score / 5. Classification always uses cross-entropy.

    Example::

        import protoembed
        from protoembed.objectives import build_objective

        embedder = protoembed.load("default", head="cls")
        objective = build_objective("cross_encoder", embedder, task="regression").train()
        loss = objective({"sentence1": ["a man plays a guitar ."], "sentence2": ["a man plays music ."],
                          "score": [3.8]})
        loss.backward()
        objective.save("out/cross")   # out/cross = embedder, out/cross/cross_encoder = CrossEncoder

    Citation: Jacob Devlin, Ming-Wei Chang, Kenton Lee, Kristina Toutanova. "BERT: Pre-training of Deep
    Bidirectional Transformers for Language Understanding." NAACL 2019, Sec. 4.1 (GLUE fine-tuning).
    https://arxiv.org/abs/1810.04805
    """

    options: CrossEncoderOptions

    def __init__(
        self,
        embedder: Embedder,
        options: CrossEncoderOptions | None = None,
        *,
        max_seq_length: int | None = None,
    ) -> None:
        super().__init__(embedder, options, max_seq_length=max_seq_length)
        task = self.options.task
        tasks = PROBLEMS if task == "auto" else (task,)
        backbone = embedder.encoder.auto_model
        self.classifiers = torch.nn.ModuleDict(
            {
                t: sequence_classifier(
                    backbone, 1 if t == "regression" else len(NLI_LABELS), PROBLEM_TYPES[t]
                )
                for t in tasks
            }
        ).to(embedder.device)
        #: 0 = not yet known (``auto`` before the first batch), else 1 + index in :data:`PROBLEMS`.
        self.register_buffer("task_code", torch.tensor(0 if task == "auto" else 1 + PROBLEMS.index(task)))

    # ------------------------------------------------------------ the task
    @property
    def task(self) -> str | None:
        """``regression`` or ``classification``; ``None`` while ``auto`` has seen no batch."""
        code = int(self.task_code)
        return PROBLEMS[code - 1] if code else None

    def task_of(self, batch: Mapping[str, Sequence[Any]]) -> str:
        """The task of ``batch`` (fixing it on the first batch under ``auto``).

        Raises:
            ProtoembedError: the batch lacks a sentence column, or the gold column of the task.
        """
        names = ", ".join(batch) or "none"
        for column in ("sentence1", "sentence2"):
            if column not in batch:
                raise ProtoembedError(
                    f"objective 'cross_encoder': a batch needs a {column!r} column (got: {names})"
                )
        task = self.task
        if task is None:
            if "score" not in batch and "label" not in batch:
                raise ProtoembedError(
                    f"objective 'cross_encoder': a batch needs a 'score' or a 'label' column (got: {names})"
                )
            task = "regression" if "score" in batch else "classification"
            self.task_code.fill_(1 + PROBLEMS.index(task))
            logger.info("cross_encoder: task %s (from the batch's columns %s)", task, names)
        gold = GOLD_COLUMNS[task]
        if gold not in batch:
            other = "classification" if task == "regression" else "regression"
            raise ProtoembedError(
                f"objective 'cross_encoder': task {task!r} needs a {gold!r} column (got: {names}); "
                f"for {'NLI labels' if gold == 'score' else 'gold scores'} use task {other!r}"
            )
        return task

    def gold(self, task: str, values: Sequence[Any]) -> torch.Tensor:
        """The gold column as HF's loss wants it: float scores (N,) or int labels (N,), on the device.

        Raises:
            ProtoembedError: a label outside ``0..2`` or a score that is not a finite number.
        """
        if task == "regression":
            target = torch.tensor([float(v) for v in values], dtype=torch.float32)
            if not torch.isfinite(target).all():
                raise ProtoembedError("objective 'cross_encoder': a gold score is not a finite number")
        else:
            bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 3]
            if bad:
                raise ProtoembedError(
                    f"objective 'cross_encoder': NLI label {bad[0]!r}: expected an index 0-2 into "
                    f"{', '.join(NLI_LABELS)}"
                )
            target = torch.tensor(list(values), dtype=torch.long)
        return target.to(self.embedder.device)

    # ------------------------------------------------------------ forward
    @property
    def pair_budget(self) -> int:
        """Most tokens of a training pair: ``max_seq_length``, else the position embeddings' limit."""
        budget = self.embedder.encoder.position_budget
        return budget if self.max_seq_length is None else min(self.max_seq_length, budget)

    def pair_features(
        self, sentences1: Sequence[str], sentences2: Sequence[str], max_length: int | None = None
    ) -> dict[str, torch.Tensor]:
        """``tokenizer(a, b)`` padded into one batch on the device (``[CLS] a [SEP] b [SEP]``, segment
        ids), truncated to ``max_length`` tokens (default :attr:`pair_budget`), longer sentence first."""
        features = self.embedder.tokenizer(
            [str(s) for s in sentences1],
            [str(s) for s in sentences2],
            truncation=True,
            max_length=max_length or self.pair_budget,
            padding=True,
            return_tensors="pt",
        )
        return {k: v.to(self.embedder.device) for k, v in features.items()}

    def scores(self, sentences1: Sequence[str], sentences2: Sequence[str]) -> torch.Tensor:
        """The cross-encoder's outputs for the pairs: (N,) regression scores or (N, 3) NLI logits.

        Whole pairs, as the saved cross-encoder reads them (truncated only at the position embeddings'
        limit, not at the training ``max_seq_length``). Runs in the module's current mode (``eval()``
        for deterministic scores), with gradients if enabled.
        """
        task = self.task or "regression"
        features = self.pair_features(sentences1, sentences2, self.embedder.encoder.position_budget)
        logits = self.classifiers[task](**features).logits
        return logits.squeeze(-1) if task == "regression" else logits

    def forward(self, batch: Mapping[str, Sequence[Any]]) -> torch.Tensor:
        """Loss of one batch: Hugging Face's MSE (regression) or cross-entropy (classification); with
        ``loss: bce`` a regression batch's loss is ``BCEWithLogits(s, score / 5)`` (mean over the batch)."""
        task = self.task_of(batch)
        labels = self.gold(task, batch[GOLD_COLUMNS[task]])
        features = self.pair_features(batch["sentence1"], batch["sentence2"])
        model = self.classifiers[task]
        logits = model(**features).logits
        if task == "regression" and self.options.loss == "bce":
            return scaled_score_bce(labels, logits)
        return sequence_classification_loss(labels, logits, model.config)

    # ---------------------------------------------------------- evaluation
    def dev_pair_scores(
        self, sentences1: Sequence[str], sentences2: Sequence[str], batch_size: int = 64
    ) -> np.ndarray | None:
        """The cross-encoder's own score of each pair (``sentences1[i]``, ``sentences2[i]``), each pair
        one input (:meth:`scores` in eval mode, no gradients), ``batch_size`` pairs per forward; ``None``
        for a classification run (an NLI classifier scores no similarity). The trainer correlates them
        with STS-B dev's gold scores to select ``best/`` of a regression run, so the kept model is the
        best cross-encoder (GLUE judges an STS-B fine-tune by its own dev score), not the checkpoint
        whose encoder reads single sentences best; the trainer then scores the encoder's sentence
        embeddings only for a classification run."""
        if self.task != "regression":
            return None
        was_training = self.training
        self.eval()
        try:
            with torch.no_grad():
                scores = [
                    self.scores(sentences1[i : i + batch_size], sentences2[i : i + batch_size]).cpu()
                    for i in range(0, len(sentences1), batch_size)
                ]
        finally:
            self.train(was_training)
        return torch.cat(scores).double().numpy()

    def save(self, path: str | os.PathLike[str]) -> None:
        """Save ``path`` = :meth:`eval_embedder` (sentence-transformers layout) and
        ``path/cross_encoder`` = the cross-encoder (see :func:`save_cross_encoder`), in one atomic swap.

        Raises:
            ProtoembedError: ``auto`` has not seen a batch yet, so the task (and head) is unknown.
        """
        task = self.task
        if task is None:
            raise ProtoembedError(
                "objective 'cross_encoder': nothing to save before the first batch (task auto)"
            )
        model = self.classifiers[task]

        def build(tmp: Path) -> None:
            self.eval_embedder().save(tmp)
            save_cross_encoder(
                model,
                self.embedder.tokenizer,
                tmp / CROSS_ENCODER_DIR,
                self.embedder.encoder.position_budget,
                sigmoid=task == "regression" and self.options.loss == "bce",
            )

        replace_dir(path, build)


@fp32_loss
def sequence_classification_loss(labels: torch.Tensor, logits: torch.Tensor, config: Any) -> torch.Tensor:
    """Hugging Face's loss of ``*ForSequenceClassification`` (``config.problem_type``: MSE or
    cross-entropy) on the (N, num_labels) ``logits``, in fp32 whatever the training precision."""
    from transformers.loss.loss_utils import ForSequenceClassificationLoss

    return ForSequenceClassificationLoss(labels, logits, config)


@fp32_loss
def scaled_score_bce(scores: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """``loss: bce``: binary cross-entropy with logits between the (N, 1) ``logits`` and the gold 0-5
    ``scores`` / 5, averaged over the batch (sentence-transformers' ``CrossEncoder`` STS-B recipe), in fp32."""
    return torch.nn.functional.binary_cross_entropy_with_logits(logits.squeeze(-1), scores / MAX_SCORE)


def save_cross_encoder(
    model: torch.nn.Module, tokenizer: Any, path: Path, max_length: int, sigmoid: bool = False
) -> Path:
    """Write ``model`` (a ``*ForSequenceClassification``) and ``tokenizer`` as a sentence-transformers
    ``CrossEncoder`` folder.

    The Hugging Face files are written first, then loaded by ``CrossEncoder`` with the identity as its
    activation and ``max_length`` (the backbone's position budget: a saved model reads whole pairs) and
    saved by it, so ``CrossEncoder(path).predict`` returns the raw outputs: the 0-5 score of a
    regression model (sentence-transformers' default for one output would be a sigmoid) or the 3 NLI
    logits. ``sigmoid=True`` (a model trained with ``loss: bce``) saves the sigmoid instead: ``predict``
    returns the predicted score / 5. Returns ``path``.
    """
    from sentence_transformers import CrossEncoder as STCrossEncoder

    staging = path.with_name(path.name + ".hf")
    was_training = model.training
    with quiet_transformers():
        model.save_pretrained(str(staging))
        tokenizer.save_pretrained(str(staging))
        activation = torch.nn.Sigmoid() if sigmoid else torch.nn.Identity()
        loaded = STCrossEncoder(str(staging), device="cpu", activation_fn=activation, max_length=max_length)
        loaded.save(str(path))
    model.train(was_training)
    shutil.rmtree(staging)
    config = json.loads((path / "config_sentence_transformers.json").read_text(encoding="utf-8"))
    expected = SIGMOID if sigmoid else IDENTITY
    if config.get("activation_fn") != expected:  # guard against a change of sentence-transformers' layout
        raise RuntimeError(f"{path}: the saved CrossEncoder's activation is {config.get('activation_fn')!r}")
    return path
