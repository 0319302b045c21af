"""Pre-faulted spare files (bulletin._data._arena) and their use by WriteMappings."""

import os
import stat
import threading

import numpy as np
import pytest

from bulletin._data import _arena
from bulletin._data._objects import encode, open_object
from bulletin._data._write_maps import WriteMappings

MIB = 1 << 20

pytestmark = pytest.mark.skipif(not _arena.supported(__import__("pathlib").Path("/dev/shm")),
                                reason="no O_TMPFILE on /dev/shm")


@pytest.fixture
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("arena", numbered=True)
    shm = __import__("pathlib").Path("/dev/shm") / f"bulletin-arena-test-{os.getpid()}-{path.name}"
    shm.mkdir(mode=0o700)
    yield shm
    __import__("shutil").rmtree(shm)


def test_spares_are_filled_in_the_background_and_invisible_until_named(folder):
    spares = _arena.SpareFiles(folder, 8 * MIB, 16 * MIB)
    try:
        assert spares.wait_filled(10)
        assert spares.spare_bytes() == 6 * MIB  # a ladder: 4 MiB + a granule
        assert os.listdir(folder) == [], "a spare has no name: nobody else can open it"
        spare = spares.take(3 * MIB)
        assert spare is not None and spare.size == 6 * MIB
        # Fresh pages from the kernel: zeros, never bytes another writer left.
        assert not np.frombuffer(spare.map, dtype=np.uint8).any()
        spare.close()
        # Taken: made again in the background, the size of what was taken (rounded up), but
        # only once the write into it is done (a fill would compete with the copy).
        __import__("time").sleep(0.3)
        assert spares.spare_bytes() == 0
        spares.written()
        assert spares.wait_filled(10)
        assert spares.largest() == 4 * MIB
    finally:
        spares.close()


def test_a_write_larger_than_every_spare_grows_the_next_one_within_the_limit(folder):
    spares = _arena.SpareFiles(folder, 2 * MIB, 12 * MIB)
    try:
        assert spares.wait_filled(10)
        assert spares.take(10 * MIB) is None
        assert spares.wait_filled(10)
        assert spares.largest() == 10 * MIB
        assert spares.take(20 * MIB) is None  # beyond the limit: never made
        assert spares.wait_filled(10)
        assert spares.largest() == 10 * MIB
    finally:
        spares.close()


def test_spares_are_given_back_when_the_machine_runs_short_of_memory(folder, monkeypatch):
    spares = _arena.SpareFiles(folder, 8 * MIB, 8 * MIB)
    try:
        assert spares.wait_filled(10) and spares.spare_bytes() == 6 * MIB
        monkeypatch.setattr(_arena, "_meminfo", lambda: (1, 100))  # 1 % available
        monkeypatch.setattr(_arena, "_CHECK_SECONDS", 0.05)
        spares.take(7 * MIB)  # wakes the thread (no spare fits)
        deadline = __import__("time").monotonic() + 10
        while spares.spare_bytes() and __import__("time").monotonic() < deadline:
            __import__("time").sleep(0.05)
        assert spares.spare_bytes() == 0 and spares.given_back >= 1
    finally:
        spares.close()


def test_a_large_write_lands_in_a_spare_named_and_cut_to_the_objects_size(folder):
    maps = WriteMappings(64 * MIB, spares=_arena.SpareFiles(folder, 8 * MIB, 8 * MIB))
    try:
        assert maps.spares.wait_filled(10)
        value = np.arange(3 * MIB // 4, dtype=np.float32)
        encoded = encode(value)
        path = folder / ".stage-test-1"
        maps.write_new(path, encoded, encoded.digest())
        assert maps.spare_writes == 1
        st = os.stat(path)
        assert st.st_size == encoded.nbytes and st.st_nlink == 1
        assert stat.S_IMODE(st.st_mode) == 0o600
        np.testing.assert_array_equal(open_object(path), value)
        # The file is now an ordinary kept mapping: overwriting it later reuses it.
        assert encoded.digest() in maps.ids()
    finally:
        maps.close()


def test_a_write_into_another_folder_never_takes_a_spare(folder, tmp_path):
    maps = WriteMappings(64 * MIB, spares=_arena.SpareFiles(folder, 8 * MIB, 8 * MIB))
    try:
        assert maps.spares.wait_filled(10)
        encoded = encode(np.ones(MIB, dtype=np.uint8))
        maps.write_new(tmp_path / ".other", encoded, encoded.digest())
        assert maps.spare_writes == 0
    finally:
        maps.close()


def test_a_budget_off_the_granule_still_fills(folder):
    spares = _arena.SpareFiles(folder, 5 * MIB + 3, 5 * MIB + 3)
    try:
        assert spares.wait_filled(10)
        assert spares.spare_bytes() == 6 * MIB
    finally:
        spares.close()


def test_the_first_fill_is_a_ladder_so_a_write_cuts_little_off_its_spare():
    granule = 2 * MIB
    assert _arena._ladder(3 << 29) == [size * MIB + granule
                                        for size in (1024, 256, 128, 64, 32, 16)]
    assert _arena._ladder(3 * MIB) == []


class _HostArena:
    """A stand-in for the runtime's TakeArenaSpare: pre-faulted files made in a pool folder and
    moved into the writer's folder, as the runtime does; ``later`` answers NotYet first."""

    def __init__(self, pool, folder, later: int = 0):
        self.pool, self.folder, self.later, self.asked = pool, folder, later, []

    def __call__(self, size):
        self.asked.append(size)
        if self.later:
            self.later -= 1
            raise _arena.NotYet()
        if size > 16 * MIB:
            return None  # over this arena's budget: refused, not worth asking again
        src = self.pool / f"f{len(self.asked)}"
        with open(src, "wb") as f:
            f.truncate(size)
        name = self.folder / f".stage-s-spare-{len(self.asked)}"
        os.rename(src, name)
        return _arena.open_spare(name, size)


def test_spares_from_the_host_arena_are_asked_again_while_it_fills_and_named_by_rename(
        folder, tmp_path, monkeypatch):
    monkeypatch.setattr(_arena, "_RETRY_SECONDS", 0.01)
    pool = folder / "pool"
    pool.mkdir()
    host = _HostArena(pool, folder, later=2)
    maps = WriteMappings(64 * MIB, spares=_arena.SpareFiles(folder, 8 * MIB, 8 * MIB,
                                                            source=host))
    try:
        assert maps.spares.wait_filled(10)
        assert host.asked == [6 * MIB] * 3, "asked again while the arena said 'not yet'"
        spare_name = folder / ".stage-s-spare-3"
        assert spare_name.exists(), "an arena spare keeps its name until it holds an object"
        value = np.arange(MIB, dtype=np.float32)
        encoded = encode(value)
        path = folder / ".stage-test-1"
        maps.write_new(path, encoded, encoded.digest())
        assert maps.spare_writes == 1
        assert not spare_name.exists(), "renamed to the write's staged name"
        assert os.stat(path).st_size == encoded.nbytes
        np.testing.assert_array_equal(open_object(path), value)
    finally:
        maps.close()


def test_close_waits_for_a_fill_under_way_and_leaves_no_spare_behind(folder):
    pool = folder / "pool"
    pool.mkdir()
    host = _HostArena(pool, folder)
    asked, release = threading.Event(), threading.Event()

    def slow(size):
        asked.set()
        release.wait(10)  # the arena's answer is on its way when the client closes
        return host(size)

    spares = _arena.SpareFiles(folder, 8 * MIB, 8 * MIB, source=slow)
    assert asked.wait(10)
    threading.Timer(0.3, release.set).start()
    spares.close()
    assert release.is_set(), "close returned before the fill under way ended"
    assert not [n for n in os.listdir(folder) if n.startswith(".stage-s-spare-")], \
        "the spare made during close was deleted before close returned"


def test_a_refused_size_is_not_asked_again_and_an_unused_spare_is_deleted_on_close(folder):
    pool = folder / "pool"
    pool.mkdir()
    host = _HostArena(pool, folder)
    spares = _arena.SpareFiles(folder, 8 * MIB, 64 * MIB, source=host)
    try:
        assert spares.wait_filled(10)
        assert spares.take(20 * MIB) is None  # no spare that large: the next is asked for
        assert spares.wait_filled(10)
        assert host.asked.count(20 * MIB) == 1, "refused once: not asked again"
        assert [n for n in os.listdir(folder) if n.startswith(".stage-s-spare-")]
    finally:
        spares.close()
    # Its memory goes back to the machine: the names go with the spares.
    assert not [n for n in os.listdir(folder) if n.startswith(".stage-s-spare-")]


def test_a_writer_with_a_released_file_to_recycle_leaves_the_spare_for_another_write(folder):
    maps = WriteMappings(64 * MIB)
    encoded = encode(np.arange(MIB, dtype=np.float32))
    oid = encoded.digest()
    maps.write_new(folder / ".stage-test-1", encoded, oid)  # its mapping is kept
    maps.spares = _arena.SpareFiles(folder, 8 * MIB, 8 * MIB)
    try:
        assert maps.spares.wait_filled(10) and maps.spares.largest() >= encoded.nbytes
        # Released: the runtime hands that file back for the next write; the spare stays.
        assert maps.take_spare(encoded.nbytes, held=set()) is None
        assert maps.spares.largest() >= encoded.nbytes and maps.spares.taken == 0
        # Still held: nothing to recycle, so the write takes the spare.
        spare = maps.take_spare(encoded.nbytes, held={oid})
        assert spare is not None and maps.spares.taken == 1
        maps.put_back_spare(spare, encoded.nbytes)
        # Its file deleted (the runtime evicted it): nothing to recycle either.
        os.unlink(folder / ".stage-test-1")
        spare = maps.take_spare(encoded.nbytes, held=set())
        assert spare is not None
        maps.put_back_spare(spare, encoded.nbytes)
    finally:
        maps.close()


def test_a_small_write_leaves_a_far_longer_spare_for_a_large_one(folder):
    maps = WriteMappings(64 * MIB, spares=_arena.SpareFiles(folder, 36 * MIB, 36 * MIB))
    spares = maps.spares
    try:
        assert spares.wait_filled(10) and spares.largest() == 34 * MIB
        # What the writer tells the runtime ("a spare is ready": no arena file for this write)
        # follows the same rule as what it takes.
        assert not maps.has_spare(MIB) and maps.has_spare(20 * MIB)
        # A 1 MiB argument first: cut to it, the 34 MiB spare would be gone for the dataset
        # written next. It goes into a fresh file instead, and the spare stays whole.
        small = encode(np.ones(MIB // 4, dtype=np.float32))
        maps.write_new(folder / ".stage-test-small", small, None)
        assert maps.spare_writes == 0 and spares.taken == 0
        assert spares.largest() == 34 * MIB
        assert open_object(folder / ".stage-test-small").sum() == MIB // 4
        # One of the small write's size is made next: the budget holds it beside the large one.
        assert spares.wait_filled(10) and spares.spare_bytes() == 36 * MIB
        spare = spares.take(small.nbytes)
        assert spare is not None and spare.size == 2 * MIB
        spares.put_back(spare, small.nbytes)
        # A write whose page faults would cost more than cutting the spare's tail takes it,
        # even at under half its size (a tail at most 4 times the write).
        assert spares.take(6 * MIB) is None
        large = spares.take(7 * MIB)
        assert large is not None and large.size == 34 * MIB
        spares.put_back(large, 7 * MIB)
    finally:
        maps.close()


def test_a_size_the_host_arena_refused_is_not_asked_for_each_small_write(folder):
    asked = []

    def one_file_then_none(size):  # a user past its share: one file, then refusals
        asked.append(size)
        if len(asked) > 1:
            return None
        path = folder / f".stage-s-spare-{len(asked)}"
        with open(path, "wb") as f:
            f.truncate(size)
        return _arena.open_spare(path, size)

    # A budget of 40 MiB: a ladder of 34 and 6 MiB, of which the arena gives only the first.
    spares = _arena.SpareFiles(folder, 40 * MIB, 40 * MIB, source=one_file_then_none)
    try:
        assert spares.wait_filled(10) and spares.largest() == 34 * MIB
        assert asked == [34 * MIB, 6 * MIB]
        for _ in range(3):
            # Far too long for 1 MiB: a fresh file, and a 2 MiB spare asked for, once.
            assert spares.take(MIB) is None
            assert spares.wait_filled(10)
        assert asked == [34 * MIB, 6 * MIB, 2 * MIB]
        # A spare taken: the writer holds less, so the arena may say yes again.
        spares.put_back(spares.take(20 * MIB), 20 * MIB)
        assert spares.take(MIB) is None and spares.wait_filled(10)
        assert asked.count(2 * MIB) == 2
    finally:
        spares.close()
