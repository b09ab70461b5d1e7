"""Documents (or queries) to search, from a text file or a JSON Lines file in the BEIR corpus layout."""

from __future__ import annotations

import os
from pathlib import Path

from protoembed.core.errors import ProtoembedError
from protoembed.data.benchmarks.beir import read_jsonl_texts
from protoembed.data.lines import iter_lines

#: The suffix of a JSON Lines file.
JSONL = ".jsonl"


def read_documents(path: str | os.PathLike[str]) -> tuple[list[str | int], list[str]]:
    """The ids and texts of the documents in ``path``.

    Two layouts, by the suffix:

    - ``.jsonl``: the BEIR corpus layout (Thakur et al., "BEIR: A Heterogeneous Benchmark for Zero-shot
      Evaluation of Information Retrieval Models", NeurIPS 2021 Datasets and Benchmarks), one JSON object
      per line with ``_id``, ``text`` and optionally ``title``, read as the retrieval suite reads a corpus
      (:func:`protoembed.data.benchmarks.beir.read_jsonl_texts`: the title joined to the text, the id
      ``_id``); BEIR's ``queries.jsonl`` (``_id``, ``text``) reads the same way.
    - anything else: UTF-8 text, one document per line (:func:`protoembed.data.lines.iter_lines`), the id
      its 1-based line number.

    Returns:
        ``(ids, texts)``, in file order.
    Raises:
        ProtoembedError: a missing or unreadable file, an empty line of a text file, a malformed JSONL
            line or a repeated ``_id`` (each naming the file and line), or no document at all.
    """
    path = Path(path)
    ids: list[str | int] = []
    texts: list[str] = []
    if path.suffix.lower() == JSONL:
        documents = read_jsonl_texts(path, titled=True)
        ids, texts = list(documents), list(documents.values())
    else:
        for number, line in enumerate(iter_lines(path), start=1):
            if not line.strip():
                raise ProtoembedError(f"{path}:{number}: empty line; expected one document per line")
            ids.append(number)
            texts.append(line)
    if not texts:
        raise ProtoembedError(f"{path}: no documents")
    return ids, texts
