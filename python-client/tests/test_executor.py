import os
import sys
import threading

import cloudpickle
import pytest

import bulletin
from bulletin._envelope import exception_from_envelope
from bulletin._runtime._executor import Executor
from bulletin._data._objects import StoreRef, encode, open_object


class Store:
    """A store folder as the agent lays it out: encoded objects named by their content id."""

    def __init__(self, path):
        self.path = path

    def put(self, obj) -> str:
        encoded = encode(obj)
        oid = encoded.digest()
        (self.path / oid).write_bytes(encoded.to_bytes())
        return oid

    def get(self, oid):
        return open_object(self.path / oid)


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path)


def run(executor, store, fn, *args, refs="", **kwargs):
    staged = store.path / ".result-t-1"
    line = executor.run("t-1", str(store.path / store.put(fn)),
                        str(store.path / store.put((args, kwargs))), refs, str(staged))
    kind, result_id, size, seconds = line.split()
    assert int(size) == os.path.getsize(staged)
    assert float(seconds) >= 0
    os.replace(staged, store.path / result_id)  # what the agent does: publish under the id
    return kind, store.get(result_id)


def test_ok_call_writes_the_result_under_its_content_id(store):
    kind, value = run(Executor(store.path), store, lambda a, b=0: a + b, 2, b=3)
    assert (kind, value) == ("ok", 5)
    assert encode(5).digest() in os.listdir(store.path)


def test_store_refs_in_the_arguments_are_mapped_zero_copy(store):
    import numpy as np
    big = np.arange(1 << 20, dtype=np.float32)
    ref = store.put(big)

    def inspect(a, scale, b=None):
        return float(a.sum() * scale), a.flags.writeable, b is a

    kind, value = run(Executor(store.path), store, inspect, StoreRef(ref), 2.0, b=StoreRef(ref),
                      refs=f"{ref} {store.path / ref}\n")
    assert kind == "ok"
    # read-only: the array is a view on the mapped store file, not a copy; one object, one value
    assert value == (float(big.sum() * 2.0), False, True)


def test_store_refs_anywhere_inside_the_arguments_are_resolved(store):
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Pair:
        left: object
        right: object

    a, b = store.put([1, 2, 3]), store.put("text")
    nested = {"list": [StoreRef(a), (StoreRef(b), {StoreRef(b)})], "pair": Pair(StoreRef(a), 1)}

    def shape(value, *, extra):
        return (value["list"][0], value["list"][1][0], value["list"][1][1],
                value["pair"].left, value["pair"].left is value["list"][0], extra)

    kind, value = run(Executor(store.path), store, shape, nested, extra=[StoreRef(b)],
                      refs=f"{a} {store.path / a}\n{b} {store.path / b}\n")
    assert kind == "ok", value
    assert value == ([1, 2, 3], "text", {"text"}, [1, 2, 3], True, ["text"])


def test_an_argument_returned_as_is_keeps_its_id_and_is_not_written_again(store):
    import numpy as np
    big = np.arange(1 << 20, dtype=np.float32)
    ref = store.put(big)
    staged = store.path / ".result-t-1"
    executor = Executor(store.path)

    def call(fn):
        return executor.run("t-1", str(store.path / store.put(fn)),
                            str(store.path / store.put(((StoreRef(ref),), {}))),
                            f"{ref} {store.path / ref}\n", str(staged)).split()

    kind, result_id, size, _ = call(lambda a: a)
    assert (kind, result_id, int(size)) == ("ok", ref, os.path.getsize(store.path / ref))
    assert not staged.exists()  # nothing written: the store holds those bytes under that id
    # A new array is a new result, written and named by its content.
    kind, result_id, size, _ = call(lambda a: a * 2)
    assert kind == "ok" and result_id != ref and int(size) == os.path.getsize(staged)
    os.replace(staged, store.path / result_id)
    assert np.array_equal(store.get(result_id), big * 2)


def test_raising_call_returns_an_envelope_with_the_user_traceback(store):
    def fails():
        raise KeyError("missing")

    kind, envelope = run(Executor(store.path), store, fails)
    assert kind == "raised"
    assert envelope["type"] == "KeyError" and envelope["message"] == "'missing'"
    assert "in fails" in envelope["traceback"]
    assert "_runtime/_executor.py" not in envelope["traceback"]
    assert isinstance(cloudpickle.loads(envelope["exception"]), KeyError)


def test_unpicklable_result_is_reported_as_result_serialization_error(store):
    kind, envelope = run(Executor(store.path), store, threading.Lock)
    assert kind == "raised"
    assert envelope["type"] == "bulletin._errors.ResultSerializationError"
    assert "_thread.lock" in envelope["message"]
    assert isinstance(exception_from_envelope(envelope), bulletin.ResultSerializationError)


def test_exception_that_cannot_be_pickled_still_travels_as_text(store):
    class Holder(Exception):
        def __init__(self):
            super().__init__("holds a lock")
            self.lock = threading.Lock()

    def fails():
        raise Holder()

    kind, envelope = run(Executor(store.path), store, fails)
    assert kind == "raised" and envelope["exception"] is None
    assert envelope["message"] == "holds a lock"


def test_system_exit_is_reported_and_the_executor_keeps_serving(store):
    executor = Executor(store.path)
    kind, envelope = run(executor, store, sys.exit, 3)
    assert kind == "raised" and envelope["type"] == "SystemExit"
    assert run(executor, store, abs, -1) == ("ok", 1)


def test_warm_executor_unpickles_a_function_once(store):
    LOADS.clear()
    fid = store.put(_CountsLoads())
    executor = Executor(store.path)
    for _ in range(3):
        line = executor.run("t", str(store.path / fid), str(store.path / store.put(((-1,), {}))),
                            "", str(store.path / ".result-t"))
        assert line.startswith("ok ")
    assert len(LOADS) == 1


def test_function_cache_evicts_the_least_recently_used(store):
    executor = Executor(store.path, cache_size=2)
    ids = [store.put(lambda i=i: i) for i in range(3)]
    args = store.put(((), {}))
    for fid in ids:
        executor.run("t", str(store.path / fid), str(store.path / args), "",
                      str(store.path / ".result-t"))
    assert list(executor._functions) == ids[1:]


def test_missing_function_object_is_reported_as_raised(store, capsys):
    staged = store.path / ".result-t-9"
    line = Executor(store.path).run("t-9", str(store.path / ("0" * 32)),
                                    str(store.path / store.put(((), {}))), "", str(staged))
    kind, result_id, *_ = line.split()
    assert kind == "raised"
    assert "could not load" in open_object(staged)["message"]
    assert "[bulletin executor] task t-9" in capsys.readouterr().err


LOADS = []


def _record_load():
    LOADS.append(1)
    return abs


class _CountsLoads:
    """Unpickles as ``abs`` and counts how often it is unpickled (the module is importable)."""

    def __reduce__(self):
        return (_record_load, ())


def test_call_failing_before_entering_the_function_shows_no_executor_frames(store):
    kind, envelope = run(Executor(store.path), store, abs, 1, 2)
    assert kind == "raised" and "_runtime/_executor.py" not in envelope["traceback"]
    assert envelope["traceback"].startswith("TypeError")


def test_a_result_already_in_the_store_is_not_written_again(store):
    import numpy as np
    data = np.arange(1 << 16, dtype=np.float32)
    ref = store.put(data)
    staged = store.path / ".result-t-echo"
    line = Executor(store.path).run("t-echo", str(store.path / store.put(lambda x: x)),
                                    str(store.path / store.put(((StoreRef(ref),), {}))),
                                    f"{ref} {store.path / ref}\n", str(staged))
    kind, result_id, size, _ = line.split()
    assert (kind, result_id) == ("ok", ref)  # same bytes, same id: the arguments' object
    assert not staged.exists()
