"""The encode loop shared by every runtime: tokenise once, run identical rows once, batch by length.

:class:`BatchEncoder` holds what the loop needs from a model (its :class:`~protoembed.encoder.PromptEncoder`
for tokenisation and padding, and a *forward* callable from padded features to vectors), so the torch
:class:`~protoembed.embedder.Embedder` and the ONNX Runtime
:class:`~protoembed.export.runtime.OnnxEmbedder` encode alike by composition: same input rows, same
batches, same order.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from protoembed.encoder import PromptEncoder
from protoembed.errors import EmptySentenceError, ProtoembedError
from protoembed.inputs import check_batch_size, check_sentences

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
        if normalize is False and self.normalized:
            raise ProtoembedError("this model normalises its vectors; normalize=False cannot undo it")
        check_batch_size(batch_size)
        extra_normalize = bool(normalize) and not self.normalized
        single = isinstance(sentences, str)
        texts = [sentences] if single else check_sentences(sentences)
        if not texts:
            out = torch.zeros((0, self.dimension), dtype=torch.float32, device=self.device)
            return out if convert_to_tensor else out.cpu().numpy()
        try:
            ids, masks = self.encoder.tokenize_ids(texts, allow_empty)
        except ProtoembedError:
            self._raise_empty(texts)
            raise
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
        if show_progress_bar is None:  # never into a log file
            show_progress_bar = len(texts) > 1000 and sys.stderr.isatty()
        with torch.inference_mode():
            for start in tqdm(
                range(0, len(ids), batch_size),
                desc="Encoding",
                disable=not show_progress_bar,
                unit="batch",
                file=sys.stderr,
            ):
                index = order[start : start + batch_size]
                batch = self.encoder.collate(
                    [ids[i] for i in index], None if masks is None else [masks[i] for i in index]
                )
                vectors = self.forward({k: v.to(self.device) for k, v in batch.items()}).float()
                if extra_normalize:  # forward already normalises when the model itself does
                    vectors = torch.nn.functional.normalize(vectors, dim=-1)
                out[torch.as_tensor(index, device=self.device)] = vectors
        if len(first) < len(texts):
            out = out[torch.as_tensor(inverse, device=self.device)]
        result = out if convert_to_tensor else out.cpu().numpy()
        return result[0] if single else result

    def _raise_empty(self, texts: list[str]) -> None:
        """Raise :class:`EmptySentenceError` (with their indexes) if some of ``texts`` have no token."""
        empty = [i for i, ids in enumerate(self.encoder.sentence_ids(texts, allow_empty=True)) if not ids]
        if empty:
            raise EmptySentenceError(empty)
