import os
import sys
import threading

import cloudpickle
import pytest

import bulletin
from bulletin._envelope import exception_from_envelope
from bulletin._runtime._executor import Call, Executor, Finished
from bulletin._data._objects import StoreRef, encode, open_object


class Store:
    """A store folder as the agent lays it out: encoded objects named by their content id, and
    a staging folder inside it where results are written."""

    def __init__(self, path):
        self.path = path
        self.staging = path / ".staging"
        self.staging.mkdir()

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


def call(store, function_id, args_id, refs=None, task="t-1") -> Call:
    return Call(task, str(store.path / function_id), str(store.path / args_id), refs or {},
                str(store.staging / f".result-{task}"))


def run(executor, store, fn, *args, refs=None, **kwargs):
    staged = store.staging / ".result-t-1"
    reply = executor.run(call(store, store.put(fn), store.put((args, kwargs)), refs))
    assert isinstance(reply, Finished) and not reply.retire
    assert reply.size == os.path.getsize(staged)
    assert reply.run_seconds >= 0
    os.replace(staged, store.path / reply.result)  # what the agent does: publish under the id
    return ("raised" if reply.raised else "ok"), store.get(reply.result)


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
                      refs={ref: str(store.path / ref)})
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
                      refs={a: str(store.path / a), b: str(store.path / b)})
    assert kind == "ok", value
    assert value == ([1, 2, 3], "text", {"text"}, [1, 2, 3], True, ["text"])


def test_an_argument_returned_as_is_keeps_its_id_and_is_not_written_again(store):
    import numpy as np
    big = np.arange(1 << 20, dtype=np.float32)
    ref = store.put(big)
    staged = store.staging / ".result-t-1"
    executor = Executor(store.path)

    def run_on(fn):
        return executor.run(call(store, store.put(fn), store.put(((StoreRef(ref),), {})),
                                 {ref: str(store.path / ref)}))

    reply = run_on(lambda a: a)
    assert (reply.raised, reply.result, reply.size) == (False, ref, os.path.getsize(store.path / ref))
    assert not staged.exists()  # nothing written: the store holds those bytes under that id
    # A new array is a new result, written and named by its content.
    reply = run_on(lambda a: a * 2)
    assert not reply.raised and reply.result != ref and reply.size == os.path.getsize(staged)
    os.replace(staged, store.path / reply.result)
    assert np.array_equal(store.get(reply.result), big * 2)


def test_raising_call_returns_an_envelope_with_the_user_traceback(store):
    def fails():
        raise KeyError("missing")

    kind, envelope = run(Executor(store.path), store, fails)
    assert kind == "raised"
    assert envelope["type"] == "KeyError" and envelope["message"] == "'missing'"
    assert "in fails" in envelope["traceback"] and "bulletin/_executor.py" not in envelope["traceback"]
    assert isinstance(cloudpickle.loads(envelope["exception"]), KeyError)


def test_unpicklable_result_is_reported_as_result_serialization_error(store):
    kind, envelope = run(Executor(store.path), store, threading.Lock)
    assert kind == "raised"
    assert envelope["type"] == "bulletin._errors.ResultSerializationError"
    assert "_thread.lock" in envelope["message"]
    assert isinstance(exception_from_envelope(envelope), bulletin.ResultSerializationError)


class _ExitsWhenPickled:
    def __reduce__(self):
        raise SystemExit(3)


def test_a_result_whose_pickling_calls_sys_exit_ends_the_call_with_an_error(store):
    """Issue 27: it once escaped the executor's handler, py4j's thread died unanswered, and the
    call stayed running for good."""
    kind, envelope = run(Executor(store.path), store, _ExitsWhenPickled)
    assert kind == "raised"
    assert envelope["type"] == "bulletin._errors.ResultSerializationError"
    assert "SystemExit" in envelope["message"] or "3" in envelope["message"]


def test_the_py4j_entry_points_turn_exits_into_errors_py4j_answers():
    from bulletin._runtime._executor import _for_py4j
    assert isinstance(_for_py4j(SystemExit(1)), RuntimeError)
    assert isinstance(_for_py4j(KeyboardInterrupt()), RuntimeError)
    error = ValueError("x")
    assert _for_py4j(error) is error


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small share needs root")
def test_a_result_larger_than_the_users_share_ends_the_call_with_store_full(tmp_path):
    import subprocess
    import numpy as np
    folder = tmp_path / "share"
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)], check=True)
    try:
        share = Store(folder)
        kind, envelope = run(Executor(share.path), share,
                             lambda: np.ones(2 << 20, dtype=np.float32))  # 8 MiB
        assert kind == "raised"
        assert envelope["type"] == "bulletin._errors.StoreFullError"
        assert "do not fit in your share" in envelope["message"]
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=True)


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
        assert not executor.run(call(store, fid, store.put(((-1,), {})), task="t")).raised
    assert len(LOADS) == 1


def test_function_cache_evicts_the_least_recently_used(store):
    executor = Executor(store.path, cache_size=2)
    ids = [store.put(lambda i=i: i) for i in range(3)]
    args = store.put(((), {}))
    for fid in ids:
        executor.run(call(store, fid, args, task="t"))
    assert list(executor._functions) == ids[1:]


def test_missing_function_object_is_reported_as_raised(store, capsys):
    staged = store.staging / ".result-t-9"
    reply = Executor(store.path).run(call(store, "0" * 32, store.put(((), {})), task="t-9"))
    assert reply.raised
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
    assert kind == "raised" and "bulletin/_executor.py" not in envelope["traceback"]
    assert envelope["traceback"].startswith("TypeError")


def test_a_result_already_in_the_store_is_not_written_again(store):
    import numpy as np
    data = np.arange(1 << 16, dtype=np.float32)
    ref = store.put(data)
    staged = store.staging / ".result-t-echo"
    reply = Executor(store.path).run(call(store, store.put(lambda x: x),
                                          store.put(((StoreRef(ref),), {})),
                                          {ref: str(store.path / ref)}, task="t-echo"))
    assert (reply.raised, reply.result) == (False, ref)  # same bytes, same id: the arguments' object
    assert not staged.exists()


def test_the_agents_call_is_read_from_its_json_and_malformed_ones_are_named():
    text = ('{"task": "t-1", "function": "/s/f", "args": "/s/a", "refs": {"ab": "/s/ab"},'
            ' "result": "/s/.result-t-1"}')
    assert Call.from_wire(text) == Call("t-1", "/s/f", "/s/a", {"ab": "/s/ab"}, "/s/.result-t-1")
    with pytest.raises(ValueError, match="not JSON"):
        Call.from_wire("t-1 /s/f /s/a")
    with pytest.raises(ValueError, match="no valid 'args'"):
        Call.from_wire('{"task": "t", "function": "/f", "result": "/r"}')
    with pytest.raises(ValueError, match="malformed 'refs'"):
        Call.from_wire('{"task": "t", "function": "/f", "args": "/a", "refs": ["x"], "result": "/r"}')


def test_replies_are_written_in_one_json_form():
    import json
    from bulletin._runtime._executor import Stage, Unfit, to_wire
    assert json.loads(to_wire(Finished("ab", 3, True, 0.5))) == {
        "kind": "finished", "result": "ab", "size": 3, "raised": True, "run_seconds": 0.5}
    assert json.loads(to_wire(Finished("ab", 3, False, 0.5, retire="why")))["retire"] == "why"
    assert json.loads(to_wire(Stage(1 << 20, ("ab",)))) == {
        "kind": "stage", "size": 1 << 20, "mapped": ["ab"], "spare_ready": False}
    assert json.loads(to_wire(Stage(1 << 20, (), True)))["spare_ready"] is True
    assert json.loads(to_wire(Unfit("OSError(12)"))) == {"kind": "unfit", "reason": "OSError(12)"}


def test_a_large_result_waits_for_the_agent_to_stage_its_file_then_commit_writes_it(store):
    import numpy as np
    from bulletin._runtime._executor import Stage
    executor = Executor(store.path, keep_mapped_bytes=64 << 20, lend_results=False)
    big = np.ones(1 << 20, dtype=np.float32)
    reply = executor.run(call(store, store.put(lambda: big), store.put(((), {}))))
    assert isinstance(reply, Stage) and reply.size > 1 << 20 and reply.mapped == ()
    staged = store.staging / ".result-t-1"
    assert not staged.exists()  # nothing written before the agent answers
    done = executor.commit(False)  # no recycled file: a new one
    assert isinstance(done, Finished) and done.size == os.path.getsize(staged)
    os.replace(staged, store.path / done.result)
    assert np.array_equal(store.get(done.result), big)
    # The next large result: the agent stages the file it just published (released, say).
    reply = executor.run(call(store, store.put(lambda: big * 2), store.put(((), {}))))
    assert reply.mapped == (done.result,)
    os.replace(store.path / done.result, staged)
    again = executor.commit(True)
    assert np.array_equal(open_object(staged), big * 2) and again.size == reply.size
    with pytest.raises(bulletin.BulletinError, match="commit without a staged result"):
        executor.commit(True)


def test_a_large_result_is_named_as_it_is_copied_even_when_the_store_holds_it_already(store):
    import numpy as np
    from bulletin._runtime._executor import Stage
    executor = Executor(store.path, keep_mapped_bytes=64 << 20, lend_results=False)
    big = np.arange(1 << 20, dtype=np.float32)
    held = store.put(big)  # the same bytes, stored before (not the call's argument)
    reply = executor.run(call(store, store.put(lambda: big.copy()), store.put(((), {}))))
    # No lookup before the copy: the id comes out of the copy's own pass over the bytes.
    assert isinstance(reply, Stage)
    done = executor.commit(False)
    assert (done.result, done.size) == (held, os.path.getsize(store.path / held))
    assert np.array_equal(open_object(store.staging / ".result-t-1"), big)


def test_an_executor_grows_a_spare_after_its_first_large_result_and_writes_the_next_into_it(
        store):
    import numpy as np
    from bulletin._data import _arena
    if not _arena.supported(store.path):
        pytest.skip("no O_TMPFILE in this file system")
    executor = Executor(store.path, keep_mapped_bytes=64 << 20, lend_results=False)
    big = np.ones(1 << 20, dtype=np.float32)
    executor.run(call(store, store.put(lambda: big), store.put(((), {}))))
    first = executor.commit(False)
    spares = executor._maps.spares
    assert spares is not None and spares.folder == store.staging  # where results go
    assert spares.wait_filled(10) and spares.largest() >= first.size
    os.replace(store.staging / ".result-t-1", store.path / first.result)
    executor.run(call(store, store.put(lambda: big * 3), store.put(((), {})), task="t-2"))
    second = executor.commit(False)
    assert executor._maps.spare_writes == 1
    assert np.array_equal(open_object(store.staging / ".result-t-2"), big * 3)
    assert os.path.getsize(store.staging / ".result-t-2") == second.size


def test_a_large_result_equal_to_a_stored_object_is_linked_and_its_spare_stays_a_spare(store):
    """``v + 0`` of a stored argument: the copy into the spare names the bytes, the store has
    them, so the result is a link to the stored file and the spare goes back to the spares,
    its memory not made again (on /dev/shm, 1 GiB of zeroed pages per call)."""
    import numpy as np
    from bulletin._data import _arena
    if not _arena.supported(store.path):
        pytest.skip("no O_TMPFILE in this file system")
    executor = Executor(store.path, keep_mapped_bytes=64 << 20, lend_results=False)
    big = np.ones(1 << 20, dtype=np.float32)
    executor.run(call(store, store.put(lambda: big), store.put(((), {}))))
    os.replace(store.staging / ".result-t-1", store.path / executor.commit(False).result)
    spares = executor._maps.spares
    assert spares.wait_filled(10)
    spare_bytes = spares.spare_bytes()
    held = store.put(big * 2)
    executor.run(call(store, store.put(lambda: big * 2), store.put(((), {})), task="t-2"))
    done = executor.commit(False)
    result = store.staging / ".result-t-2"
    assert done.result == held and os.path.samefile(result, store.path / held)
    assert np.array_equal(open_object(result), big * 2)
    assert (spares.taken, executor._maps.spare_writes) == (1, 0)
    assert spares.spare_bytes() == spare_bytes  # the same spare, ready for the next result
    # A new value goes into it.
    executor.run(call(store, store.put(lambda: big * 3), store.put(((), {})), task="t-3"))
    done = executor.commit(False)
    assert executor._maps.spare_writes == 1
    assert np.array_equal(open_object(store.staging / ".result-t-3"), big * 3)


def test_the_ids_a_writer_says_it_maps_leave_out_files_the_store_deleted(store):
    """Under a deleted file's id the store may hold another process's file (the store kept the
    first of two equal copies): staged for this writer, it could only be refused."""
    import numpy as np
    from bulletin._runtime._executor import Stage
    executor = Executor(store.path, keep_mapped_bytes=64 << 20, lend_results=False)
    big = np.full(1 << 20, 7, dtype=np.float32)
    executor.run(call(store, store.put(lambda: big), store.put(((), {}))))
    first = executor.commit(False)
    os.replace(store.staging / ".result-t-1", store.path / first.result)
    reply = executor.run(call(store, store.put(lambda: big + 1), store.put(((), {})),
                              task="t-2"))
    assert isinstance(reply, Stage) and reply.mapped == (first.result,)
    executor.commit(False)
    os.unlink(store.path / first.result)  # deleted (evicted, or the adopt kept an equal file)
    reply = executor.run(call(store, store.put(lambda: big + 2), store.put(((), {})),
                              task="t-3"))
    assert isinstance(reply, Stage) and first.result not in reply.mapped


def test_a_call_an_earlier_call_may_have_broken_is_not_run_and_the_executor_asks_to_go(store):
    from bulletin._runtime._executor import Unfit
    executor = Executor(store.path)
    args = store.put(((), {}))
    assert not executor.run(call(store, store.put(lambda: 1), args)).raised
    # The function cannot be loaded: on a fresh executor that is the call's fault (raised, see
    # above); after another call it may be this process's, and a fresh executor decides.
    reply = executor.run(call(store, "0" * 32, args))
    assert isinstance(reply, Unfit) and "FileNotFoundError" in reply.reason


def test_a_limit_a_call_lowers_is_set_back_after_it(store):
    import resource
    start = resource.getrlimit(resource.RLIMIT_NOFILE)

    def lower():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, start[1]))
        return resource.getrlimit(resource.RLIMIT_NOFILE)[0]

    executor = Executor(store.path)
    assert run(executor, store, lower) == ("ok", 64)
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == start


LOWERS_A_HARD_LIMIT = """
import os, resource, sys, tempfile
from pathlib import Path
from bulletin._runtime._executor import Call, Executor
from bulletin._data._objects import encode
store = Path(tempfile.mkdtemp())
if os.geteuid() == 0:  # root may raise any limit again: be an ordinary user, as executors are
    os.chown(store, 65534, 65534)
    os.setgid(65534)
    os.setuid(65534)
def put(obj):
    encoded = encode(obj)
    (store / encoded.digest()).write_bytes(encoded.to_bytes())
    return str(store / encoded.digest())
def lower():
    resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
reply = Executor(store).run(Call("t", put(lower), put(((), {})), {}, str(store / ".result-t")))
print(reply.raised, resource.getrlimit(resource.RLIMIT_NOFILE), reply.retire)
"""


def test_a_call_that_lowers_a_hard_limit_retires_its_executor(tmp_path):
    import subprocess
    proc = subprocess.run([sys.executable, "-c", LOWERS_A_HARD_LIMIT], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    raised, limits, retire = proc.stdout.strip().split(" ", 2)
    assert raised == "False"
    assert "RLIMIT_NOFILE" in retire and "cannot be set back" in retire, retire
