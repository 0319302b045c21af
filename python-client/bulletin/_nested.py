"""Futures inside nested lists, tuples (named too), sets and dicts, as gather and cancel take
them: found in order, and replaced by their values in a structure of the same shape."""

from __future__ import annotations

import concurrent.futures as cf
from typing import Callable

from ._ref import Ref


def is_future(value) -> bool:
    return isinstance(value, (cf.Future, Ref))


def futures_in(structure) -> list:
    """The Futures and Refs in ``structure``, depth first, each once."""
    found: dict[int, object] = {}

    def visit(value):
        if is_future(value):
            found.setdefault(id(value), value)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item)
        elif isinstance(value, (list, tuple, set, frozenset)):
            for item in value:
                visit(item)

    visit(structure)
    return list(found.values())


_DROPPED = object()


def replace_futures(structure, value_of: Callable, dropped: Callable = lambda f: False):
    """``structure`` with each Future or Ref replaced by ``value_of(it)``; those for which
    ``dropped(it)`` is true are left out of the container that holds them (Dask's
    errors="skip"). Anything else is kept as it is."""

    def rebuild(value):
        if is_future(value):
            return _DROPPED if dropped(value) else value_of(value)
        if isinstance(value, dict):
            pairs = ((k, rebuild(v)) for k, v in value.items())
            return {k: v for k, v in pairs if v is not _DROPPED}
        if isinstance(value, (list, tuple, set, frozenset)):
            if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple: each
                return type(value)(*(None if v is _DROPPED else v  # field keeps its place
                                     for v in map(rebuild, value)))
            items = [v for v in map(rebuild, value) if v is not _DROPPED]
            for kind in (list, tuple, set, frozenset):  # subclasses come back as their base
                if isinstance(value, kind):
                    return kind(items)
        return value

    result = rebuild(structure)
    return None if result is _DROPPED else result
