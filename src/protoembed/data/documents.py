"""Documents (or queries) to search, from a text file or a JSON Lines file in the BEIR corpus layout."""

from __future__ import annotations

import json
import os
from pathlib import Path

from protoembed.data.lines import iter_lines
from protoembed.errors import ProtoembedError

#: The suffix of a JSON Lines file.
JSONL = ".jsonl"


def read_documents(path: str | os.PathLike[str]) -> tuple[list[str | int], list[str]]:
    """The ids and texts of the documents in ``path``.

    Two layouts, by the suffix:

    - ``.jsonl``: the BEIR corpus layout (Thakur et al., "BEIR: A Heterogeneous Benchmark for Zero-shot
      Evaluation of Information Retrieval Models", NeurIPS 2021 Datasets and Benchmarks), one JSON object
      per line with ``text`` and optionally ``_id`` and ``title``: the text is ``title + " " + text`` when
      the title is not empty, the id is ``_id`` (else the 1-based line number); blank lines are skipped.
      BEIR's ``queries.jsonl`` (``_id``, ``text``) reads the same way.
    - anything else: UTF-8 text, one document per line (:func:`protoembed.data.lines.iter_lines`), the id
      its 1-based line number.

    Returns:
        ``(ids, texts)``, in file order.
    Raises:
        ProtoembedError: a missing or unreadable file, an empty line of a text file, a JSONL line that is
            not an object with a string ``text`` (and string ``title``, string or integer ``_id``), a
            repeated ``_id``, or no document at all (each naming the file and line).
    """
    path = Path(path)
    ids: list[str | int] = []
    texts: list[str] = []
    jsonl = path.suffix.lower() == JSONL
    seen: set[str | int] = set()
    for number, line in enumerate(iter_lines(path), start=1):
        if not jsonl:
            if not line.strip():
                raise ProtoembedError(f"{path}:{number}: empty line; expected one document per line")
            ids.append(number)
            texts.append(line)
            continue
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as err:
            raise ProtoembedError(f"{path}:{number}: not JSON ({err})") from None
        if not isinstance(row, dict) or not isinstance(row.get("text"), str):
            raise ProtoembedError(f'{path}:{number}: expected an object with a "text" string')
        title, doc_id = row.get("title") or "", row.get("_id", number)
        if not isinstance(title, str):
            raise ProtoembedError(f'{path}:{number}: "title" must be a string, got {title!r}')
        if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
            raise ProtoembedError(f'{path}:{number}: "_id" must be a string or an integer, got {doc_id!r}')
        if doc_id in seen:
            raise ProtoembedError(f"{path}:{number}: _id {doc_id!r} appears twice")
        seen.add(doc_id)
        ids.append(doc_id)
        texts.append(f"{title} {row['text']}" if title else row["text"])
    if not texts:
        raise ProtoembedError(f"{path}: no documents")
    return ids, texts
