"""Sentence vectors of one model kept on disk, so that later evaluation commands do not encode again.

The transfer and few-shot suites read the same SentEval sentences, and a study runs both on every model:
with a store, the second suite looks its sentences up instead of encoding them. A store belongs to one
model and one runtime: :func:`store_folder` keys it by the model's digest (weights, head, template,
tokenisation: :func:`protoembed.export.cache.model_digest`) and the runtime's name, under
``$PROTOEMBED_CACHE/embeddings`` (default ``~/.cache/protoembed/embeddings``).

A looked-up vector is the one the encoder returned when the sentence was first encoded, bit for bit;
encoded in another batch it could differ from a fresh encoding by float rounding (about 1e-7), since
length batching pads it with other sentences.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from protoembed.core.errors import ProtoembedError
from protoembed.outputs.io import cache_dir, write_atomic

logger = logging.getLogger(__name__)

#: The file of a store: ``vectors`` (float32, one row per sentence) and ``texts`` (the sentences as
#: UTF-8 JSON, a uint8 array: no pickled objects), written together, atomically.
STORE_FILE = "vectors.npz"


def store_folder(digest: str, runtime: str, root: str | os.PathLike | None = None) -> Path:
    """``root / <digest>-<runtime>``; ``root`` defaults to ``$PROTOEMBED_CACHE/embeddings``."""
    return Path(root or cache_dir("embeddings")) / f"{digest}-{runtime}"


class EmbeddingStore:
    """``encode(sentences) -> (n, d) float32`` that encodes only the sentences its folder lacks.

    In: ``encode``, the model's encoder (a list of sentences in, an ``(n, d)`` array out), and the
    store's folder (created on the first write). Each call reads nothing but memory; new sentences are
    encoded in one call to ``encode`` and the whole store is rewritten (temp file, then rename).
    """

    def __init__(self, encode: Callable[[list[str]], np.ndarray], folder: str | os.PathLike) -> None:
        self._encode = encode
        self.folder = Path(folder)
        self.texts: list[str] = []
        self.vectors = np.zeros((0, 0), dtype=np.float32)
        path = self.folder / STORE_FILE
        if path.is_file():
            try:
                with np.load(path, allow_pickle=False) as saved:
                    self.vectors = saved["vectors"]
                    self.texts = json.loads(saved["texts"].tobytes().decode("utf-8"))
            except (OSError, ValueError, KeyError) as err:
                raise ProtoembedError(
                    f"{path}: not an embedding store ({err}); delete it to start anew"
                ) from None
            if len(self.texts) != len(self.vectors):
                raise ProtoembedError(
                    f"{path}: {len(self.texts)} sentences for {len(self.vectors)} vectors; delete it to start anew"
                )
        self.row = {text: i for i, text in enumerate(self.texts)}
        self.looked_up = 0
        self.encoded = 0

    def __call__(self, sentences: Sequence[str]) -> np.ndarray:
        missing = [s for s in dict.fromkeys(sentences) if s not in self.row]
        if missing:
            new = np.asarray(self._encode(missing), dtype=np.float32)
            if new.ndim != 2 or new.shape[0] != len(missing):
                raise ProtoembedError(
                    f"the encoder returned an array of shape {new.shape} for {len(missing)} sentences"
                )
            self.vectors = new if not self.texts else np.concatenate([self.vectors, new])
            for text in missing:
                self.row[text] = len(self.texts)
                self.texts.append(text)
            self._save()
        self.encoded += len(missing)
        self.looked_up += len(sentences) - len(missing)
        logger.info(
            "%d sentences encoded, %d looked up in %s",
            len(missing),
            len(sentences) - len(missing),
            self.folder,
        )
        return self.vectors[[self.row[s] for s in sentences]]

    def _save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        texts = np.frombuffer(json.dumps(self.texts).encode("utf-8"), dtype=np.uint8)
        write_atomic(
            self.folder / STORE_FILE,
            lambda tmp: np.savez(tmp, vectors=self.vectors, texts=texts),
            suffix=".npz",
        )
