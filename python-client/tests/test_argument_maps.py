"""The executor keeps a large argument's mapping once two consecutive calls named its object, and
lets it go (off the call's path) when a call does not, or when the store deletes the file. A
mapping only one call named goes when that call ends, so that its file can be recycled for the
writer's next batch."""

import os
import time

import numpy as np
import pytest

from bulletin._data._objects import StoreRef
from bulletin._data._write_maps import _exclusive
from bulletin._runtime._argument_maps import KEEP_MIN
from bulletin._runtime._executor import Executor

from test_executor import run


@pytest.fixture
def store(tmp_path):
    from test_executor import Store
    return Store(tmp_path)


def big_dict():
    return {"rows": [1, 2, 3], "data": np.arange(KEEP_MIN // 4 * 2, dtype=np.float32)}


def named(store, oid):
    return StoreRef(oid), {oid: str(store.path / oid)}


def until(condition, seconds=5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def lease_free(path) -> bool:
    fd = os.open(path, os.O_WRONLY)
    try:
        return _exclusive(fd)
    finally:
        os.close(fd)


def open_on(path) -> bool:
    """Whether this process has a descriptor open on ``path`` (deleted or not)."""
    target = str(path)
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").removesuffix(" (deleted)") == target:
                return True
        except OSError:
            pass
    return False


def appended(d):
    d["rows"].append(4)
    return len(d["rows"]), float(d["data"][-1])


def test_consecutive_calls_reuse_the_mapping_and_still_decode_values_of_their_own(store):
    executor = Executor(store.path)
    oid = store.put(big_dict())
    ref, refs = named(store, oid)
    last = float(KEEP_MIN // 4 * 2 - 1)
    for _ in range(3):
        # No call sees an earlier one's append: the mapping is shared, the decoded dict is not.
        assert run(executor, store, appended, ref, refs=refs) == ("ok", (4, last))
    # The second call mapped it again (one call had named it) and kept it; the third reused it.
    assert executor._argument_maps.reused == 1


def test_a_mapping_only_its_call_named_goes_when_the_call_ends(store):
    """A loop passing a new batch each call: the batch's file is free for the writer's next
    batch once the call is over, not only once the next call starts."""
    executor = Executor(store.path)
    oid = store.put(np.ones(KEEP_MIN, dtype=np.uint8))
    path = store.path / oid
    if not lease_free(path):
        pytest.skip("this file system grants no write leases")
    ref, refs = named(store, oid)
    assert run(executor, store, lambda a: int(a.sum()), ref, refs=refs) == ("ok", KEEP_MIN)
    assert until(lambda: not open_on(path) and lease_free(path))
    assert executor._argument_maps.kept_bytes() == 0


def test_a_mapping_the_next_call_does_not_name_is_let_go_so_its_file_can_be_recycled(store):
    executor = Executor(store.path)
    first, other = store.put(big_dict()), store.put(np.ones(KEEP_MIN, dtype=np.uint8))
    path = store.path / first
    ref, refs = named(store, first)
    for _ in range(2):
        assert run(executor, store, lambda d: len(d["rows"]), ref, refs=refs) == ("ok", 3)
    if not lease_free(store.path / other):
        pytest.skip("this file system grants no write leases")
    assert open_on(path) and not lease_free(path)  # kept between the calls
    ref, refs = named(store, other)
    assert run(executor, store, lambda a: int(a.sum()), ref, refs=refs) == ("ok", KEEP_MIN)
    assert until(lambda: not open_on(path) and lease_free(path))
    assert executor._argument_maps.reused == 0


def test_the_mapping_of_a_file_the_store_deleted_is_let_go_without_another_call(store):
    executor = Executor(store.path)
    oid = store.put(big_dict())
    path = store.path / oid
    ref, refs = named(store, oid)
    for _ in range(2):
        assert run(executor, store, lambda d: len(d["rows"]), ref, refs=refs) == ("ok", 3)
    assert executor._argument_maps.kept_bytes() == os.path.getsize(path)
    os.unlink(path)  # the store evicted it: its memory must not stay held by the executor
    assert until(lambda: executor._argument_maps.kept_bytes() == 0 and not open_on(path))


def test_a_deleted_and_rewritten_object_is_mapped_again(store):
    executor = Executor(store.path)
    oid = store.put(big_dict())
    ref, refs = named(store, oid)
    executor._argument_maps._sweep_seconds = 3600  # only the call itself may notice
    assert run(executor, store, lambda d: len(d["rows"]), ref, refs=refs) == ("ok", 3)
    os.unlink(store.path / oid)
    assert store.put(big_dict()) == oid
    assert run(executor, store, lambda d: len(d["rows"]), ref, refs=refs) == ("ok", 3)
    assert executor._argument_maps.reused == 0


def test_small_objects_are_not_kept(store):
    executor = Executor(store.path)
    oid = store.put(list(range(100)))
    ref, refs = named(store, oid)
    assert run(executor, store, len, ref, refs=refs) == ("ok", 100)
    assert executor._argument_maps.kept_bytes() == 0
    assert not open_on(store.path / oid)


def resident_bytes_at(address: int) -> int:
    """Rss of this process's mapping that holds ``address`` (``/proc/self/smaps``)."""
    mine = False
    for line in open("/proc/self/smaps"):
        head = line.split()
        if head and "-" in head[0] and ":" not in head[0]:
            low, high = (int(x, 16) for x in head[0].split("-"))
            mine = low <= address < high
        elif mine and head[0] == "Rss:":
            return int(head[1]) << 10
    return 0


def waits_for_its_pages(a):
    """Touches nothing of ``a``; says how much of it the kernel mapped meanwhile."""
    deadline = time.monotonic() + 10
    while resident_bytes_at(a.ctypes.data) < a.nbytes and time.monotonic() < deadline:
        time.sleep(0.01)
    return resident_bytes_at(a.ctypes.data) >= a.nbytes


def test_a_large_argument_is_populated_ahead_of_the_functions_reads(store):
    from bulletin._runtime._argument_maps import POPULATE_MIN
    executor = Executor(store.path)
    oid = store.put(np.ones(POPULATE_MIN, dtype=np.uint8))
    ref, refs = named(store, oid)
    assert run(executor, store, waits_for_its_pages, ref, refs=refs) == ("ok", True)
