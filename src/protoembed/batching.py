"""The encode loop shared by every runtime: tokenise once, run identical rows once, batch by length.

:class:`BatchEncoder` holds what the loop needs from a model (its :class:`~protoembed.encoder.PromptEncoder`
for tokenisation and padding, and a *forward* callable from padded features to vectors), so the torch
:class:`~protoembed.embedder.Embedder` and the ONNX Runtime
:class:`~protoembed.export.runtime.OnnxEmbedder` encode alike by composition: same input rows, same
batches, same order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from protoembed.encoder import PromptEncoder
from protoembed.errors import EmptySentenceError, ProtoembedError
from protoembed.inputs import check_batch_size, check_sentences
from protoembed.progress import Progress

#: Padded batch features (``input_ids``, ``attention_mask`` [, ``mask_index``]) -> vectors (B, D).
Forward = Callable[[dict[str, torch.Tensor]], torch.Tensor]


@dataclass
class BatchEncoder:
    """Sentences -> vectors through ``forward``, batch by batch.

    Args:
        encoder: tokenisation (template, truncation, soft-prompt slots) and padding.
        forward: padded features on ``device`` -> vectors (B, ``dimension``), called in inference mode.
        dimension: width of the vectors.
        device: where the features are moved and the output is gathered.
        normalized: ``forward`` already L2-normalises (then ``normalize=False`` is refused).
    """

    encoder: PromptEncoder
    forward: Forward
    dimension: int
    device: torch.device
    normalized: bool = False

    def encode(
        self,
        sentences: Sequence[str] | str,
        batch_size: int = 64,
        normalize: bool | None = None,
        show_progress_bar: bool | None = None,
        convert_to_tensor: bool = False,
        allow_empty: bool = False,
    ) -> np.ndarray | torch.Tensor:
        """Encode sentences to vectors (arguments and result as :meth:`protoembed.Embedder.encode`).

        Every sentence is tokenised once up front; identical input rows run once; batches are formed
        from rows of similar token length (longest first) and padded to the batch's own length; the
        vectors come back in the input order.
        """
        extra_normalize = self.extra_normalize(normalize)
        check_batch_size(batch_size)
        single = isinstance(sentences, str)
        texts = [sentences] if single else check_sentences(sentences)
        if not texts:
            out = torch.zeros((0, self.dimension), dtype=torch.float32, device=self.device)
            return out if convert_to_tensor else out.cpu().numpy()
        ids, masks = self.tokenize(texts, allow_empty)
        # Identical input rows (e.g. sentences that differ only in case for an uncased tokenizer) are
        # run once: ``first`` holds a row per distinct input, ``inverse`` maps every sentence to it.
        distinct: dict[tuple[int, ...], int] = {}
        first: list[int] = []
        inverse = np.empty(len(ids), dtype=np.int64)
        for i, row in enumerate(ids):
            key = (*row, -1 if masks is None else masks[i])
            inverse[i] = distinct.setdefault(key, len(first))
            if inverse[i] == len(first):
                first.append(i)
        ids = [ids[i] for i in first]
        masks = None if masks is None else [masks[i] for i in first]
        order = np.argsort([-len(x) for x in ids], kind="stable")
        out = torch.empty((len(ids), self.dimension), dtype=torch.float32, device=self.device)
        if show_progress_bar is None:
            show_progress_bar = len(texts) > 1000
        # every sentence counted (repeats are run once: counted when done)
        with Progress(len(texts), show=show_progress_bar) as progress, torch.inference_mode():
            for start in range(0, len(ids), batch_size):
                index = order[start : start + batch_size]
                rows = [ids[i] for i in index]
                vectors = self.vectors(
                    rows, None if masks is None else [masks[i] for i in index], extra_normalize
                )
                out[torch.as_tensor(index, device=self.device)] = vectors
                progress.update(len(index))
            progress.update(len(texts) - len(ids))
        if len(first) < len(texts):
            out = out[torch.as_tensor(inverse, device=self.device)]
        result = out if convert_to_tensor else out.cpu().numpy()
        return result[0] if single else result

    def extra_normalize(self, normalize: bool | None) -> bool:
        """Whether :meth:`encode` L2-normalises ``forward``'s vectors for its ``normalize`` argument: only
        for ``True`` on a model whose forward does not already (``None``: the model's own setting).

        Raises:
            ProtoembedError: ``normalize=False`` on a model whose forward normalises.
        """
        if normalize is False and self.normalized:
            raise ProtoembedError("this model normalises its vectors; normalize=False cannot undo it")
        return bool(normalize) and not self.normalized

    def tokenize(
        self, texts: list[str], allow_empty: bool = False
    ) -> tuple[list[list[int]], list[int] | None]:
        """The encoder's input rows of ``texts`` (:meth:`~protoembed.encoder.PromptEncoder.tokenize_ids`:
        template, truncation to ``max_seq_length``), unpadded.

        Raises:
            EmptySentenceError: sentences with no token (their indexes), unless ``allow_empty``.
        """
        try:
            return self.encoder.tokenize_ids(texts, allow_empty)
        except ProtoembedError:
            self._raise_empty(texts)
            raise

    def vectors(
        self, ids: list[list[int]], masks: list[int] | None = None, extra_normalize: bool = False
    ) -> torch.Tensor:
        """One batch of input rows (from :meth:`tokenize`) -> their vectors (len(ids), D), fp32 on
        :attr:`device`: padded to the longest row (:meth:`~protoembed.encoder.PromptEncoder.collate`),
        run through ``forward`` in inference mode, L2-normalised if ``extra_normalize``
        (:meth:`extra_normalize`)."""
        batch = self.encoder.collate(ids, masks)
        with torch.inference_mode():
            vectors = self.forward({k: v.to(self.device) for k, v in batch.items()}).float()
            if extra_normalize:  # forward already normalises when the model itself does
                vectors = torch.nn.functional.normalize(vectors, dim=-1)
        return vectors

    def _raise_empty(self, texts: list[str]) -> None:
        """Raise :class:`EmptySentenceError` (with their indexes) if some of ``texts`` have no token."""
        empty = [i for i, ids in enumerate(self.encoder.sentence_ids(texts, allow_empty=True)) if not ids]
        if empty:
            raise EmptySentenceError(empty)
