"""A large result computed straight into store memory (bulletin/_runtime/_result_memory.py,
bulletin/_native): an executor lends its largest spare file to the function's first large
array, and names the spare as the result when the function returns that array alone."""

import os
import subprocess
import sys

import numpy as np
import pytest

from bulletin import _native
from bulletin._data import _arena
from bulletin._data._objects import encode, open_object
from bulletin._runtime._executor import Executor, Finished, Stage
from test_executor import Store, call

BIG = np.arange(1 << 20, dtype=np.float32)  # 4 MiB
KEPT = []  # what a function keeps between calls (a module global of the user's)


@pytest.fixture
def store(tmp_path):
    if not _arena.supported(tmp_path):
        pytest.skip("no O_TMPFILE in this file system")
    return Store(tmp_path)


@pytest.fixture
def lending(store):
    """An executor whose spares exist and whose lender is loaded: its next call may lend."""
    if _native.lender() is None:
        pytest.skip(f"the lender cannot be built here: {_native.why_not()}")
    assert not _native.lender().lent(), "an earlier test left an array in lent memory"
    executor = Executor(store.path, keep_mapped_bytes=64 << 20)
    first = executor.run(call(store, store.put(lambda: BIG + 1), store.put(((), {}))))
    assert isinstance(first, Stage)  # no spare yet: copied, and the spares start
    publish(store, executor.commit(False), "t-1")
    assert executor._maps.spares.wait_filled(10)
    executor.run(call(store, store.put(lambda: 1), store.put(((), {})), task="t-2"))
    executor._result_memory._loading.join(60)  # the call above started it
    os.unlink(store.staging / ".result-t-2")
    KEPT.clear()
    yield executor
    KEPT.clear()
    executor._maps.close()


def publish(store, reply, task):
    os.replace(store.staging / f".result-{task}", store.path / reply.result)
    return store.get(reply.result)


def run_call(executor, store, fn, task):
    return executor.run(call(store, store.put(fn), store.put(((), {})), task=task))


def test_a_new_large_result_is_named_where_the_function_computed_it(store, lending):
    spares = lending._maps.spares
    taken_before = spares.taken
    reply = run_call(lending, store, lambda: BIG * 3, "t-3")
    assert isinstance(reply, Stage)  # for a released file to replace the spare: none here
    reply = lending.commit(False)
    assert isinstance(reply, Finished) and not reply.raised
    assert lending._result_memory.adopted == 1
    assert lending._maps.spare_writes == 1  # the spare became the object
    assert spares.taken == taken_before + 1
    # Named as any copy of the same value is: the store's content id of those bytes.
    expected = encode(BIG * 3)
    assert (reply.result, reply.size) == (expected.digest(), expected.nbytes)
    assert os.path.getsize(store.staging / ".result-t-3") == expected.nbytes
    assert np.array_equal(publish(store, reply, "t-3"), BIG * 3)


def keep():
    """Module-level, so that the executor (this process) shares ``KEPT`` with the test."""
    KEPT.append(BIG * 5)
    return KEPT[-1]


def keep_base_return_view():
    KEPT.append(BIG * 5)
    return KEPT[-1].reshape(2, -1)  # starts where the lent memory does; its base is kept


@pytest.mark.parametrize("function", [keep, keep_base_return_view])
def test_a_result_the_function_keeps_is_copied_and_the_object_does_not_change_with_it(
        store, lending, function):
    spare_bytes = lending._maps.spares.spare_bytes()
    reply = run_call(lending, store, function, "t-3")
    assert isinstance(reply, Stage)  # not adopted: something else refers to the array
    done = lending.commit(False)
    assert lending._result_memory.adopted == 0
    KEPT[0][:] = 0  # the function's array changes; the stored object must not
    assert np.array_equal(publish(store, done, "t-3").reshape(-1), BIG * 5)
    # The kept array still holds the lent spare, and the spares are made again meanwhile;
    # once it goes, the spare is a spare again (within the budget).
    assert lending._maps.spares.wait_filled(10)
    assert lending._maps.spares.spare_bytes() == spare_bytes  # one made in its place
    KEPT.clear()
    assert isinstance(run_call(lending, store, lambda: 2, "t-4"), Finished)
    assert lending._maps.spares.spare_bytes() == spare_bytes


def test_a_large_temporary_gives_the_spare_back_and_a_view_result_is_copied(store, lending):
    spare_bytes = lending._maps.spares.spare_bytes()
    reply = run_call(lending, store, lambda: float((BIG * 2).sum()), "t-3")
    assert isinstance(reply, Finished) and publish(store, reply, "t-3") == float((BIG * 2).sum())
    assert lending._maps.spares.spare_bytes() == spare_bytes  # freed in the call: back at once
    # A view that starts past the lent memory's start cannot be named in place.
    reply = run_call(lending, store, lambda: (BIG * 7)[1:], "t-4")
    assert isinstance(reply, Stage)
    assert np.array_equal(publish(store, lending.commit(False), "t-4"), (BIG * 7)[1:])
    assert lending._result_memory.adopted == 0


def test_a_result_equal_to_a_stored_object_is_linked_and_the_spare_stays(store, lending):
    held = store.put(BIG * 4)
    spare_bytes = lending._maps.spares.spare_bytes()
    reply = run_call(lending, store, lambda: BIG * 4, "t-3")
    assert isinstance(reply, Finished) and reply.result == held
    assert os.path.samefile(store.staging / ".result-t-3", store.path / held)
    assert lending._maps.spares.spare_bytes() == spare_bytes


def test_a_function_that_raises_after_taking_the_spare_leaves_it_a_spare(store, lending):
    def fails():
        scratch = BIG * 2
        raise ValueError(f"no good: {scratch[1]}")

    spare_bytes = lending._maps.spares.spare_bytes()
    reply = run_call(lending, store, fails, "t-3")
    assert isinstance(reply, Finished) and reply.raised
    assert lending._maps.spares.spare_bytes() == spare_bytes
    # And the next call still lends.
    assert isinstance(run_call(lending, store, lambda: BIG * 6, "t-4"), Stage)
    reply = lending.commit(False)
    assert lending._result_memory.adopted == 1
    assert np.array_equal(publish(store, reply, "t-4"), BIG * 6)


def test_small_arrays_are_left_to_numpy(store, lending):
    def allocators():
        from numpy._core.multiarray import get_handler_name
        return get_handler_name(np.ones(10)), get_handler_name(BIG * 2)

    reply = run_call(lending, store, allocators, "t-3")
    small, large = publish(store, reply, "t-3")
    # Both went through the lender; only the large one was given the spare.
    assert small == large == "bulletin_store_lender"
    assert lending._result_memory.adopted == 0


def test_without_a_compiler_results_are_copied_and_say_why(tmp_path):
    """No C compiler: the lender is None, with the reason, and nothing else changes."""
    code = ("from bulletin import _native; l = _native.lender(); "
            "print(l is None, _native.why_not())")
    env = dict(os.environ, CC=str(tmp_path / "no-such-cc"), XDG_CACHE_HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("True") and "no-such-cc" in out.stdout


def test_under_a_memory_limit_only_a_library_compiled_before_is_used(tmp_path):
    """The compiler's memory would count against the calls of an executor under a limit."""
    code = ("from bulletin import _native; print(_native.lender(False) is None, "
            "_native.why_not()); _native._WHY_NOT = None; print(_native.lender() is None); "
            "_native._LENDER = _native._WHY_NOT = None; print(_native.lender(False) is None)")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    first, compiled, cached = out.stdout.splitlines()
    assert first.startswith("True") and "memory limit" in first
    if compiled == "False":  # a compiler here: what it built is used without compiling
        assert cached == "False"


def test_a_cache_folder_others_can_write_is_not_used(tmp_path, monkeypatch):
    """A library another user could replace would run as this one: compiled privately."""
    (tmp_path / "bulletin").mkdir(mode=0o777)
    os.chmod(tmp_path / "bulletin", 0o777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _native._private_cache() is None
    os.chmod(tmp_path / "bulletin", 0o700)
    assert _native._private_cache() == tmp_path / "bulletin"


def test_the_stream_of_a_large_array_starts_its_data_on_a_page():
    encoded = encode(BIG)
    assert encoded.payload_offset(BIG.ctypes.data) == 4096
    small = np.arange(10, dtype=np.float32)
    assert encode(small).payload_offset(small.ctypes.data) is None  # joined with its header
    assert np.array_equal(open_object_bytes(encoded.to_bytes()), BIG)


def open_object_bytes(data: bytes):
    from bulletin._codec import decode
    import pyarrow as pa
    return decode(pa.py_buffer(data))


def test_a_released_file_the_agent_stages_becomes_the_next_spare(store, lending):
    """The result takes the spare; the released object's file the agent stages for it (as it
    would for a copy) becomes the spare instead of fresh memory, under a name the agent deletes
    when the executor ends, and the next large result is computed in it."""
    spares = lending._maps.spares
    assert isinstance(run_call(lending, store, lambda: BIG * 3, "t-3"), Stage)
    first = lending.commit(False)
    publish(store, first, "t-3")  # its file is the spare it was computed in, still mapped here
    assert spares.wait_filled(10)
    spare_bytes = spares.spare_bytes()
    assert isinstance(run_call(lending, store, lambda: BIG * 5, "t-4"), Stage)
    # The agent: the released first result's file, staged at the result path.
    os.rename(store.path / first.result, store.staging / ".result-t-4")
    done = lending.commit(True)
    assert np.array_equal(publish(store, done, "t-4"), BIG * 5)
    named = [n for n in os.listdir(store.staging) if "-spare-" in n]
    assert named == [f".exec-pid{os.getpid()}-spare-1"]
    assert spares.wait_filled(10) and spares.spare_bytes() == spare_bytes  # none made anew
    # The next result is computed in it and takes its name away.
    assert isinstance(run_call(lending, store, lambda: BIG * 7, "t-5"), Stage)
    assert np.array_equal(publish(store, lending.commit(False), "t-5"), BIG * 7)
    assert lending._result_memory.adopted == 3
    assert not [n for n in os.listdir(store.staging) if "-spare-" in n]


def test_an_executor_that_closes_leaves_no_named_spare(store, lending):
    assert isinstance(run_call(lending, store, lambda: BIG * 3, "t-3"), Stage)
    first = lending.commit(False)
    publish(store, first, "t-3")
    assert lending._maps.spares.wait_filled(10)
    run_call(lending, store, lambda: 1, "t-4")  # nothing lent: the new spare stays
    os.unlink(store.staging / ".result-t-4")
    assert isinstance(run_call(lending, store, lambda: BIG * 5, "t-5"), Stage)
    os.rename(store.path / first.result, store.staging / ".result-t-5")
    lending.commit(True)
    assert [n for n in os.listdir(store.staging) if "-spare-" in n]
    lending._maps.close()
    assert not [n for n in os.listdir(store.staging) if "-spare-" in n]


def test_spare_names_spell_the_executor_id_as_the_agent_does():
    """worker/src/test/.../ExecutorSparePrefixTest checks the agent's side with these ids."""
    from bulletin._runtime._executor import _file_name_part
    assert _file_name_part("local-e2") == "local-e2"
    assert _file_name_part("node_7.lab-e31") == "node_7.lab-e31"
    assert _file_name_part("héad/x:1-e3") == "h_ad_x_1-e3"


def written_by_a_forked_child():
    """The lent array, then a child (multiprocessing's fork) that writes into what it inherited."""
    x = BIG * 2
    pid = os.fork()
    if pid == 0:
        x[:] = 0  # the child's own copy, as with memory of its own
        os._exit(0)
    os.waitpid(pid, 0)
    return x


def test_a_forked_child_writes_its_own_copy_of_a_lent_array(store, lending):
    assert isinstance(run_call(lending, store, written_by_a_forked_child, "t-3"), Stage)
    assert np.array_equal(publish(store, lending.commit(False), "t-3"), BIG * 2)
    assert lending._result_memory.adopted == 1
