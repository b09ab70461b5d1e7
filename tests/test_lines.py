"""The streamed line reader equals decoding the whole file and splitting on ``\\n`` (its rules), and the
streamed corpus reader keeps the corpus rules (empty lines counted, an unterminated last line dropped)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from protoembed.core.errors import ProtoembedError
from protoembed.data.lines import iter_lines, read_lines
from protoembed.data.training.corpus import read_corpus


def whole_file(data: bytes, encoding: str) -> list[str]:
    """The rules on the whole decoded text: BOM dropped, split on \\n only, one \\r before it removed."""
    text = data.decode(encoding)
    text = text[1:] if text.startswith("\ufeff") else text
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


EDGE_CASES = [
    b"",
    b"\xef\xbb\xbf",
    b"\xef\xbb\xbf\n",
    b"\xef\xbb\xbfa\r\nb",
    b"a\r\nb",
    b"x\r",
    b"a\n\nb\n",
    b"\n",
    b"\r\n\r",
    "é\u2028x\x0by\n".encode(),  # U+2028 and \x0b are not line breaks
    b"a\rb\n",
]


def test_streamed_lines_equal_whole_file_split(tmp_path: Path) -> None:
    pieces = [b"a", b"\n", b"\r", "é".encode(), b" ", b"\xef\xbb\xbf"]
    generator = random.Random(0)
    cases = EDGE_CASES + [
        b"".join(generator.choice(pieces) for _ in range(generator.randint(0, 12))) for _ in range(300)
    ]
    path = tmp_path / "f.txt"
    for data in cases:
        path.write_bytes(data)
        for encoding in ("utf-8", "latin-1"):
            assert read_lines(path, encoding) == whole_file(data, encoding), (data, encoding)
            assert list(iter_lines(path, encoding)) == read_lines(path, encoding)


def test_decoding_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok\nfine\nbad \xff here\n")
    with pytest.raises(
        ProtoembedError, match=r"bad\.txt:3: expected UTF-8 text \(invalid start byte at byte 12\)"
    ):
        read_lines(path)


@pytest.mark.parametrize(
    ("data", "sentences", "empty", "dropped"),
    [
        (b"a\n\nb\n", ["a", "b"], 1, False),
        (b"a\n\nb", ["a"], 1, True),  # an unterminated last line is a fragment
        (b"a\n  \nb\n   ", ["a", "b"], 1, False),  # a blank unterminated last line is not counted
        (b"\xef\xbb\xbf a \r\n\r\nb\r\n", ["a", "b"], 1, False),
    ],
)
def test_streamed_corpus_rules(tmp_path: Path, data: bytes, sentences, empty: int, dropped: bool) -> None:
    path = tmp_path / "corpus.txt"
    path.write_bytes(data)
    corpus = read_corpus(path)
    assert (corpus.sentences, corpus.empty_lines, corpus.dropped_last_line) == (sentences, empty, dropped)
    kept = read_corpus(path, drop_unterminated_last_line=False)
    assert kept.sentences == [line.strip() for line in whole_file(data, "utf-8") if line.strip()]
