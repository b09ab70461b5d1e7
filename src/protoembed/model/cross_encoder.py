"""A saved cross-encoder, found and loaded: the folder check (:func:`find_cross_encoder`,
:func:`cross_encoder_dir`), sentence-transformers' ``CrossEncoder`` of it (:func:`load_cross_encoder`),
the one-score rule of whatever scores a pair with it (:func:`check_one_output`), and its pair scores
batch by batch (:class:`Reranker`).

A cross-encoder folder is what a ``cross_encoder`` training run writes in ``best/cross_encoder``
(``objectives/cross_encoder.py``'s ``save_cross_encoder``) or any sentence-transformers ``CrossEncoder``
folder: a ``config.json`` naming a ``*ForSequenceClassification`` model and its classifier's weights.
``evaluation/cross_encoder.py`` (STS scored by the pair) reads it from here, and ``serving/`` serves it
as a reranker through :class:`Reranker` (:func:`load_reranker`): pairs made into rows the server's
batcher runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from protoembed.core.errors import ProtoembedError
from protoembed.outputs.run_layout import BEST_DIR, CROSS_ENCODER_DIR


def _candidate(path: Path) -> Path:
    """The folder of ``path`` that should hold the cross-encoder: ``path/best/cross_encoder`` for a
    ``cross_encoder`` run's folder, ``path/cross_encoder`` for its saved model (``best/``), else ``path``."""
    for folder in (path / BEST_DIR / CROSS_ENCODER_DIR, path / CROSS_ENCODER_DIR):
        if folder.is_dir():
            return folder
    return path


def find_cross_encoder(path: str | os.PathLike[str]) -> Path | None:
    """The cross-encoder folder of ``path`` (a run's folder, its ``best/`` or the folder itself), or
    ``None`` when it holds no trained cross-encoder (:func:`_missing_classifier` finds something missing)."""
    folder = _candidate(Path(path).expanduser())
    return folder if folder.is_dir() and _missing_classifier(folder) is None else None


def cross_encoder_dir(path: str | os.PathLike[str]) -> Path:
    """The CrossEncoder folder of ``path``: ``path/best/cross_encoder`` for a ``cross_encoder`` run's
    folder, ``path/cross_encoder`` for a saved run's model (``best/``), else ``path`` itself.

    Raises:
        ProtoembedError: ``path`` is not a folder, or not a trained cross-encoder (what it lacks named).
    """
    path = _candidate(Path(path).expanduser())
    if not path.is_dir():
        raise ProtoembedError(f"cross-encoder {path}: no such folder")
    missing = _missing_classifier(path)
    if missing is not None:
        raise ProtoembedError(
            f"{path} is not a trained cross-encoder ({missing}); pass the best/cross_encoder/ folder of a "
            "cross_encoder training run (or a CrossEncoder folder), or drop --cross-encoder to score "
            "embeddings"
        )
    return path


def _missing_classifier(folder: Path) -> str | None:
    """What ``folder`` lacks to be a trained cross-encoder, or ``None``: a ``config.json`` naming a
    ``*ForSequenceClassification`` model and, in ``model.safetensors`` (read from its header, no torch),
    the weights of its classifier head. A bi-encoder's backbone would otherwise be "converted" by
    sentence-transformers into a CrossEncoder with a freshly initialised head, and score noise."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "no readable config.json"
    names = config.get("architectures") or [] if isinstance(config, dict) else []
    if not any(str(name).endswith("ForSequenceClassification") for name in names):
        shown = ", ".join(map(str, names)) or "no architecture"
        return f"its config.json names {shown}, not a *ForSequenceClassification model"
    weights = folder / "model.safetensors"
    if weights.is_file():
        try:
            with open(weights, "rb") as handle:
                header = json.loads(handle.read(int.from_bytes(handle.read(8), "little")))
        except (OSError, ValueError):
            return None  # unreadable weights: the loader reports them
        if not any("classifier" in key or key.startswith("score.") for key in header):
            return "its weights hold no classifier head"
    return None


def load_cross_encoder(path: str | os.PathLike[str], device: str | None = None) -> Any:
    """``sentence_transformers.CrossEncoder`` of :func:`cross_encoder_dir` ``(path)``, with the activation
    saved in the folder, in eval mode.

    Args:
        path: a cross-encoder folder, or a saved run's model folder holding one in ``cross_encoder/``.
        device: torch device (default: CUDA if available, else CPU).
    Raises:
        ProtoembedError: not a cross-encoder folder, or one that cannot be loaded.
    """
    from sentence_transformers import CrossEncoder

    from protoembed.inputs.checks import resolve_device
    from protoembed.model.backbones import loading_errors, quiet_transformers

    folder = cross_encoder_dir(path)
    with quiet_transformers(), loading_errors(folder):
        model = CrossEncoder(str(folder), device=str(resolve_device(device)))
    return model.eval()


def check_one_output(model: Any, folder: str | os.PathLike[str], needs: str) -> None:
    """Refuse a cross-encoder with other than one output: ``needs`` (what reads its score: ``STS``, ``a
    reranker``) takes one score per pair.

    Raises:
        ProtoembedError: the model's outputs counted (an NLI classifier has 3), and which models have one.
    """
    if model.num_labels != 1:
        raise ProtoembedError(
            f"cross-encoder {folder}: has {model.num_labels} outputs; {needs} needs a model with one score "
            "per pair (train it with task: regression, or loss: bce, on STS-B)"
        )


class Reranker:
    """A cross-encoder's (query, text) scores, rows batched by the caller: what a server's batcher runs.

    Each pair is tokenised as ONE input, exactly as ``CrossEncoder.predict`` tokenises it (the model's
    tokenizer on ``(query, text)``, ``longest_first`` truncation to ``max_seq_length``; token type ids
    where the tokenizer gives them), and scored by the model's forward: its logit, before any activation.
    A row is the pair's token ids; its one extra number (the ``masks`` of :meth:`vectors`) is how many of
    them are the first segment's (token type 0), ``None`` for a tokenizer without token types.

    Attributes, besides the model's (``tokenizer``, ``device``, ``precision``, ``runtime``): ``folder``;
    ``max_length`` (the most tokens of a row, special tokens included); ``dimension`` 1 (one logit per
    pair); ``id2label`` (the model's label names); ``activation`` (the class path of the activation
    ``CrossEncoder.predict`` applies, as saved); ``prompts`` and ``default_prompt_name`` (none: a pair
    takes no prompt).

    Args:
        model: sentence-transformers' ``CrossEncoder`` with one output (:func:`load_reranker`).
        folder: where it was loaded from.
    """

    runtime = "torch"
    dimension = 1
    default_prompt_name: str | None = None

    def __init__(self, model: Any, folder: Path) -> None:
        import copy

        import torch

        from protoembed.model.precision import AUTOCAST_DTYPES

        self.cross_encoder, self.folder = model, folder
        self.model = model.model
        self.tokenizer = model.tokenizer
        self.max_length = int(model.max_seq_length)
        self.device = torch.device(model.device)
        dtype = str(self.model.dtype).removeprefix("torch.")
        self.precision = {"float32": "fp32", **{v: k for k, v in AUTOCAST_DTYPES.items()}}.get(dtype, dtype)
        config = self.model.config
        self.id2label = {str(k): str(v) for k, v in config.id2label.items()}
        activation = model.activation_fn
        self.activation = f"{type(activation).__module__}.{type(activation).__qualname__}"
        self.prompts: dict[str, str] = {}
        # one tokenizer per truncation setting: a fast tokenizer's call sets its truncation on the shared
        # Rust object, so a copy that cuts at the end, one that cuts at the start and one that never cuts
        # run safely on many threads
        self._cut, self._whole = self.tokenizer, copy.deepcopy(self.tokenizer)
        self._cut_start = copy.deepcopy(self.tokenizer)
        self._cut_start.truncation_side = "left"
        self.pad_id = self.tokenizer.pad_token_id or 0

    def eval(self) -> Reranker:
        """Inference mode for the model (no dropout); returns itself."""
        self.model.eval()
        return self

    def tokenize(
        self, query: str, texts: list[str], truncate: bool = True, left: bool = False
    ) -> tuple[list[list[int]], list[int] | None]:
        """The rows of the pairs ``(query, text)`` and each row's first-segment length (``None``: the
        tokenizer gives no token types). ``truncate``: cut as ``CrossEncoder.predict`` cuts (longest side
        first, at its end; with ``left`` at its start: the tokenizer's ``truncation_side="left"``); else
        whole (the caller checks them against :attr:`max_length`)."""
        queries = [query] * len(texts)
        if truncate:
            cut = self._cut_start if left else self._cut
            features = cut(queries, texts, truncation="longest_first", max_length=self.max_length)
        else:
            features = self._whole(queries, texts, truncation=False)
        types = features.get("token_type_ids")
        firsts = None if types is None else [row.count(0) for row in types]
        return [list(row) for row in features["input_ids"]], firsts

    def pad(self, ids: list[list[int]], firsts: list[int] | None = None) -> dict[str, Any]:
        """Rows padded on the right into the model's features (``input_ids``, ``attention_mask`` and,
        with ``firsts``, ``token_type_ids``: 0 for the first segment, 1 after), on the host."""
        import torch

        width = max(map(len, ids))
        input_ids = torch.full((len(ids), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(ids), width), dtype=torch.long)
        for i, row in enumerate(ids):
            input_ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[i, : len(row)] = 1
        features = {"input_ids": input_ids, "attention_mask": mask}
        if firsts is not None:
            types = torch.zeros_like(input_ids)
            for i, (row, first) in enumerate(zip(ids, firsts)):
                types[i, first : len(row)] = 1
            features["token_type_ids"] = types
        return features

    def forward(self, features: dict[str, Any]) -> Any:
        """Padded features on :attr:`device` -> the logits (B, 1)."""
        return self.model(**features).logits

    def extra_normalize(self, normalize: bool | None) -> bool:
        """Scores are never normalised: ``False``."""
        return False

    def vectors(
        self, ids: list[list[int]], masks: list[int] | None = None, extra_normalize: bool = False
    ) -> Any:
        """One batch of rows (from :meth:`tokenize`; ``masks``: their first-segment lengths) -> the logits
        (B, 1), float32 on :attr:`device`, in inference mode."""
        import torch

        features = self.pad(ids, masks)
        with torch.inference_mode():
            return self.forward({k: v.to(self.device) for k, v in features.items()}).float()


def load_reranker(path: str | os.PathLike[str], device: str | None = None) -> Reranker:
    """The :class:`Reranker` of the cross-encoder at ``path`` (:func:`load_cross_encoder`).

    Raises:
        ProtoembedError: not a cross-encoder folder, one that cannot be loaded, or one with other than
            one output (:func:`check_one_output`).
    """
    model = load_cross_encoder(path, device)
    folder = cross_encoder_dir(path)
    check_one_output(model, folder, "a reranker")
    return Reranker(model, folder).eval()
