import threading

import pytest

import bulletin
from bulletin._serialize import FunctionPickles, dumps_args, dumps_function, loads

LOCK = threading.Lock()


def test_unpicklable_positional_argument_is_named_by_position_and_type():
    with pytest.raises(bulletin.SerializationError, match=r"argument 2 \(a _thread.lock\) cannot be pickled"):
        dumps_args((1, threading.Lock()), {})


def test_unpicklable_keyword_argument_is_named():
    with pytest.raises(bulletin.SerializationError, match=r"keyword argument 'lock' \(a _thread.lock\)"):
        dumps_args((), {"lock": threading.Lock()})


def test_function_using_an_unpicklable_global_names_the_global():
    def uses_lock():
        with LOCK:
            return 1

    with pytest.raises(bulletin.SerializationError, match=r"uses_lock uses global 'LOCK' \(a _thread.lock\)"):
        dumps_function(uses_lock)


def test_function_closing_over_an_unpicklable_value_names_the_variable():
    lock = threading.Lock()

    def uses_closure():
        return lock.locked()

    with pytest.raises(bulletin.SerializationError, match=r"closure variable 'lock'"):
        dumps_function(uses_closure)


def test_functions_defined_locally_round_trip_by_value():
    factor = 3
    data = dumps_function(lambda x: x * factor)
    assert loads(data)(2) == 6


def test_function_pickles_are_cached_per_function_object():
    pickles = FunctionPickles()

    def f(x):
        return x

    first = pickles.get(f)
    assert pickles.get(f) is first
    assert first[0] == first[1].digest()


def test_unhashable_callables_are_pickled_without_cache():
    class Unhashable:
        __hash__ = None

        def __call__(self):
            return 1

    pickles = FunctionPickles()
    fid, _ = pickles.get(Unhashable())
    assert pickles.get(Unhashable())[0] == fid
