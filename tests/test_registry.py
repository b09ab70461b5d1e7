"""The one registry shape (:class:`protoembed.core.registry.Registry`) and the package's tables built on it."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from protoembed.core.errors import ProtoembedError
from protoembed.core.registry import Registry


@dataclass(frozen=True)
class Entry:
    name: str
    value: int = 0


def test_entries_in_registration_order_by_their_name_or_a_given_one():
    named = Registry("thing", [Entry("b"), Entry("a")])
    assert list(named) == ["b", "a"] and named["a"] == Entry("a") and len(named) == 2
    keyed = Registry("thing", {"x": 1, "y": 2})
    assert list(keyed.items()) == [("x", 1), ("y", 2)]
    assert keyed.register(3, name="z") == 3 and list(keyed) == ["x", "y", "z"]
    with pytest.raises(TypeError, match="int entry has no name: register it with name="):
        keyed.register(4)


def test_a_name_registered_twice_is_one_message_unless_replaced():
    registry = Registry("thing", [Entry("a", 1), Entry("b")])
    message = "thing 'a' is already registered; give another name (or, from Python, replace=True)"
    with pytest.raises(ProtoembedError, match=rf"^{re.escape(message)}$"):
        registry.register(Entry("a", 2))
    assert registry.duplicate("a") == message
    registry.register(Entry("a", 2), replace=True)
    assert list(registry) == ["a", "b"] and registry["a"].value == 2  # replaced in place
    with pytest.raises(ProtoembedError, match="thing 'c' is already registered"):
        Registry("thing", [Entry("c"), Entry("c")])


def test_an_unknown_name_is_one_message_listing_the_choices():
    registry = Registry("data format", [Entry("text"), Entry("csv")])
    with pytest.raises(ProtoembedError, match=r"^unknown data format 'tsv': expected one of text, csv$"):
        registry.lookup("tsv")
    assert registry.lookup("csv") == Entry("csv")
    assert (
        registry.unknown("x", ["auto", *registry])
        == "unknown data format 'x': expected one of auto, text, csv"
    )
    assert (
        registry.unknown("x", scope=" of suite sts")
        == "unknown data format 'x' of suite sts: expected one of text, csv"
    )
    with pytest.raises(KeyError):  # the mapping itself is a plain one
        registry["tsv"]
    with pytest.raises(ProtoembedError, match="unknown data format"):
        registry.lookup(["unhashable"])  # type: ignore[arg-type]


def test_built_in_entries_are_made_on_first_use_once():
    made = []

    def builtin():
        made.append(1)
        return [Entry("late")]

    registry = Registry("thing", [Entry("early")], builtin=builtin)
    assert made == [] and "pending" in repr(registry)
    assert list(registry) == ["early", "late"] and made == [1]
    registry.register(Entry("more"))
    assert list(registry) == ["early", "late", "more"] and made == [1]
    lazy = Registry("thing", builtin=builtin)
    lazy.register(Entry("first"))  # registering makes the built-in entries first
    assert list(lazy) == ["late", "first"]


def test_monkeypatch_sets_and_restores_an_entry(monkeypatch):
    registry = Registry("thing", [Entry("a")])
    with monkeypatch.context() as patch:
        patch.setitem(registry, "b", Entry("b"))
        patch.setitem(registry, "a", Entry("a", 9))
        assert list(registry) == ["a", "b"] and registry["a"].value == 9
    assert list(registry) == ["a"] and registry["a"].value == 0
