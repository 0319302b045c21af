"""Futures and Refs anywhere inside a call's arguments, resolved on the cluster.

Pickling a call's arguments, a ``bulletin.Future`` or ``bulletin.Ref`` found at any depth
(lists, tuples, dicts, sets, dataclasses, any object pickle reaches) is replaced by a
placeholder that names a store object: ``stored_object(id)``. The call being pickled
(``pickling_call``) decides what each one becomes and takes note of the ids, which travel in
the TaskSpec's refs; the bytes never pass through the client. In the executor, unpickling the
arguments inside ``resolving(...)`` turns each placeholder into the object's value.

This module imports nothing heavy: ``bulletin.Future`` uses it, and ``import bulletin`` stays
cheap.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Callable

# The call whose arguments this thread is pickling (client side).
_pickling: contextvars.ContextVar = contextvars.ContextVar("bulletin_pickling_call",
                                                           default=None)
# How this thread resolves store objects while it unpickles a call's arguments (executor).
_resolver: contextvars.ContextVar = contextvars.ContextVar("bulletin_store_resolver",
                                                          default=None)


@contextlib.contextmanager
def set_within(var: contextvars.ContextVar, value):
    """``var`` is ``value`` within the block (this thread's, or this task's, context)."""
    token = var.set(value)
    try:
        yield value
    finally:
        var.reset(token)


def pickling_call(call):
    """While pickling ``call``'s arguments: ``call.reduce_future(f)`` and
    ``call.reduce_ref(r)`` give the pickle reductions of the Futures and Refs inside them."""
    return set_within(_pickling, call)


def resolving(resolve: Callable[[str], object]):
    """While unpickling a call's arguments: each placeholder becomes ``resolve(id)``."""
    return set_within(_resolver, resolve)


def stored_object(oid: str):
    """The placeholder's reconstructor: the store object's value where a resolver is set
    (the executor), else a StoreRef naming it."""
    resolve = _resolver.get()
    if resolve is not None:
        return resolve(oid)
    from ._data._objects import StoreRef
    return StoreRef(oid)


def inline_value(value):
    """The reconstructor of a finished Future whose (small) value came back to the client."""
    return value


def never_resolved(key: str):
    raise RuntimeError(f"the future of call {key} was pickled before it finished; "
                       "this is a bulletin bug, please report it")


def reduce_future(future):
    call = _pickling.get()
    if call is None:
        raise TypeError(
            f"a bulletin.Future (call {future.key}) cannot be pickled on its own: pass it in a "
            "call's arguments (anywhere inside them), where it resolves on the cluster, or "
            "pass its result()")
    return call.reduce_future(future)


def reduce_ref(ref):
    call = _pickling.get()
    if call is None:
        raise TypeError(
            f"a bulletin.Ref ({ref.id[:12]}) stands for an object in the cluster's store: pass "
            "it in a call's arguments (anywhere inside them), or fetch it with ref.result()")
    return call.reduce_ref(ref)
