"""Futures inside nested containers, as gather and cancel take them (no cluster)."""

import collections

from bulletin._future import Future
from bulletin._nested import futures_in, replace_futures

Pair = collections.namedtuple("Pair", "left right")


def finished(key, value):
    f = Future(key, key, lambda k: None)
    f._set_finished(value)
    return f


def test_futures_are_found_depth_first_once_each():
    a, b = finished("a", 1), finished("b", 2)
    structure = {"x": [a, (b, {a})], "y": Pair(b, 3), "z": "text"}
    assert futures_in(structure) == [a, b]
    assert futures_in(a) == [a] and futures_in([1, "two"]) == []


def test_replacing_keeps_the_shape_and_other_values():
    a, b = finished("a", 1), finished("b", 2)
    structure = {"x": [a, (b, frozenset([a]))], "y": Pair(b, 3), "z": "text"}
    assert replace_futures(structure, lambda f: f.result()) == \
        {"x": [1, (2, frozenset([1]))], "y": Pair(2, 3), "z": "text"}


def test_dropped_futures_leave_their_containers():
    a, b = finished("a", 1), finished("b", 2)
    dropped = lambda f: f is b  # noqa: E731
    assert replace_futures([a, b, 5], lambda f: f.result(), dropped) == [1, 5]
    assert replace_futures({"a": a, "b": b}, lambda f: f.result(), dropped) == {"a": 1}
    assert replace_futures(Pair(a, b), lambda f: f.result(), dropped) == Pair(1, None)
    assert replace_futures(b, lambda f: f.result(), dropped) is None
