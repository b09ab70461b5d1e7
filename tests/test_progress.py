"""Progress on stderr (:mod:`protoembed.core.progress`): a bar with sentences/s on a terminal, a line every
LINE_EVERY seconds elsewhere, and the encode loops (``Embedder.encode``, the commands) using it."""

from __future__ import annotations

import io

import pytest

import protoembed
from protoembed.cli import main
from protoembed.core import progress
from protoembed.core.progress import Progress


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_lines_every_few_seconds_when_not_a_terminal():
    """18,850 sentences at 1,000/s: a line once 10 s passed (not before), a last line with the total
    time; a loop shorter than 10 s writes nothing."""
    clock, log = Clock(), io.StringIO()
    with Progress(18_850, stream=log, clock=clock) as bar:
        for _ in range(36):  # 512 sentences every 0.512 s
            clock.now += 0.512
            bar.update(512)
        clock.now += 0.418
        bar.update(418)
    assert log.getvalue().splitlines() == [
        "Encoding: 10,240/18,850 sentences (1,000/s, 9 s left)",
        "Encoding: 18,850/18,850 sentences (1,000/s, 19 s in all)",
    ]
    short, quiet = Clock(), io.StringIO()
    with Progress(100, stream=quiet, clock=short) as bar:
        short.now += 9.0
        bar.update(100)
    assert quiet.getvalue() == ""


def test_no_last_line_after_an_error_and_nothing_when_hidden():
    clock, log = Clock(), io.StringIO()
    with pytest.raises(KeyboardInterrupt), Progress(1000, stream=log, clock=clock) as bar:
        clock.now += 20
        bar.update(400)
        raise KeyboardInterrupt
    assert log.getvalue() == "Encoding: 400/1,000 sentences (20/s, 30 s left)\n"
    hidden = io.StringIO()
    with Progress(1000, stream=hidden, clock=clock, show=False) as bar:
        clock.now += 20
        bar.update(1000)
    assert hidden.getvalue() == ""


def test_a_terminal_gets_the_bar_with_sentences_per_second():
    screen = Terminal()
    with Progress(50, stream=screen, initial=10) as bar:
        bar.update(40)
    shown = screen.getvalue()
    assert "50/50" in shown and " sentences/s]" in shown and "Encoding" in shown


def test_encode_and_the_eval_encoder_report_progress_into_a_log(tiny_model_dirs, capsys, monkeypatch):
    """``Embedder.encode`` (here via ``protoembed encode -o FILE.npy``, stderr not a terminal) writes
    progress lines, counting every sentence (a repeat when its text's batch is done); --no-progress writes
    none."""
    monkeypatch.setattr(progress, "LINE_EVERY", 0)
    model = protoembed.load(str(tiny_model_dirs["bert"]))
    model.encode(
        ["a man is playing", "the cat sat", "a man is playing", "two dogs"],
        batch_size=2,
        show_progress_bar=True,
    )
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        "Encoding: 3/4 sentences",  # the longest two texts, one of them given twice: run once, counted twice
        "Encoding: 4/4 sentences",
        "Encoding: 4/4 sentences",  # the last line
    ]
    model.encode(["a", "b"], show_progress_bar=None)  # the default: only beyond 1000 sentences
    assert capsys.readouterr().err == ""


def test_the_encode_command_reports_progress_unless_told_not(tiny_model_dirs, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(progress, "LINE_EVERY", 0)
    text = tmp_path / "in.txt"
    text.write_text("a man\nthe cat\nthe dog\n", encoding="utf-8")
    argv = ["encode", str(text), "-o", str(tmp_path / "v.npy"), "--model", str(tiny_model_dirs["bert"])]
    assert main([*argv, "--batch-size", "2"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [line.split(" (")[0] for line in err] == [
        "Encoding: 2/3 sentences",
        "Encoding: 3/3 sentences",
        "Encoding: 3/3 sentences",
    ]
    assert main([*argv, "--no-progress"]) == 0
    assert capsys.readouterr().err == ""


def test_bytes_with_and_without_a_total():
    clock, log = Clock(), io.StringIO()
    with Progress(120_000_000, "wiki.txt", progress.BYTES, initial=1_000_000, stream=log, clock=clock) as bar:
        clock.now += 12
        bar.update(48_000_000)
    assert (
        log.getvalue().splitlines()
        == [  # the sizes as `protoembed data list` writes them (powers of 1000)
            "wiki.txt: 49.0 MB/120.0 MB (4.0 MB/s, 18 s left)",
            "wiki.txt: 49.0 MB/120.0 MB (4.0 MB/s, 12 s in all)",
        ]
    )
    unknown = io.StringIO()
    with Progress(None, "f.bin", progress.BYTES, stream=unknown, clock=clock) as bar:
        clock.now += 10
        bar.update(999)
    assert unknown.getvalue().splitlines() == [
        "f.bin: 999 B (100 B/s)",
        "f.bin: 999 B (100 B/s, 10 s in all)",
    ]
