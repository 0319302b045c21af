"""Pickling of functions and arguments, with errors that name what cannot be pickled.

The bytes that travel are the Arrow encoding of ``bulletin._data._objects`` (pickles inside
it), named by their XXH3-128 digest (see docs/internals.md, "Ids and encoding"); this module
caches a function's encoding and explains a failure to pickle.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

import cloudpickle

from ._errors import SerializationError


def type_name(obj: Any) -> str:
    cls = type(obj)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def callable_name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type_name(fn)


def _pickle_problem(obj: Any) -> Exception | None:
    try:
        cloudpickle.dumps(obj)
    except Exception as exc:
        return exc
    return None


def dumps_args(args: tuple, kwargs: dict) -> bytes:
    """Pickles ``(args, kwargs)``; on failure names the first argument that cannot be pickled."""
    try:
        return cloudpickle.dumps((args, kwargs))
    except Exception as exc:
        labelled = [(f"argument {index}", value) for index, value in enumerate(args, 1)]
        labelled += [(f"keyword argument {key!r}", value) for key, value in kwargs.items()]
        for label, value in labelled:
            problem = _pickle_problem(value)
            if problem is not None:
                raise SerializationError(
                    f"{label} (a {type_name(value)}) cannot be pickled: {problem}. "
                    "Pass something picklable instead, e.g. a path or the data it holds."
                ) from problem
        raise SerializationError(f"the arguments cannot be pickled: {exc}") from exc


def _references(fn: Any):
    """The globals and closure values a function uses, which cloudpickle pickles with it."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return
    fn_globals = getattr(fn, "__globals__", {})
    names, stack = set(), [code]
    while stack:  # nested functions and comprehensions keep their names in code constants
        current = stack.pop()
        names.update(current.co_names)
        stack.extend(c for c in current.co_consts if hasattr(c, "co_names"))
    for name in sorted(names):
        if name in fn_globals:
            yield f"global {name!r}", fn_globals[name]
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            yield f"closure variable {name!r}", cell.cell_contents
        except ValueError:  # an empty cell
            continue


def dumps_function(fn: Callable) -> bytes:
    try:
        return cloudpickle.dumps(fn)
    except Exception as exc:
        name = callable_name(fn)
        for what, value in _references(fn):
            problem = _pickle_problem(value)
            if problem is not None:
                raise SerializationError(
                    f"function {name} uses {what} (a {type_name(value)}) which cannot be "
                    f"pickled: {problem}. Create it inside the function instead."
                ) from problem
        raise SerializationError(f"function {name} cannot be pickled: {exc}") from exc


class FunctionPickles:
    """Pickled bytes and ids of functions, computed once per function object.

    A function's globals are captured when it is first pickled (as Ray does), so re-pickling on
    every call is avoided; callables that cannot be weakly referenced are pickled every time.
    """

    def __init__(self) -> None:
        self._cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def get(self, fn: Callable):
        """(id, encoded) of a function, through the data path's encoder."""
        try:
            cached = self._cache.get(fn)
        except TypeError:  # unhashable or not weak-referenceable
            cached = None
            cacheable = False
        else:
            cacheable = True
        if cached is not None:
            return cached
        from ._data._objects import encode
        try:
            encoded = encode(fn)
        except Exception:
            dumps_function(fn)  # raises a SerializationError naming what cannot be pickled
            raise
        entry = (encoded.digest(), encoded)
        if cacheable:
            try:
                self._cache[fn] = entry
            except TypeError:
                pass
        return entry


loads = cloudpickle.loads
dumps = cloudpickle.dumps
