"""bulletin._data._later: freeing memory off a call's path."""

import mmap
import os

from bulletin._data import _later


def test_a_mapping_and_a_deleted_files_descriptor_are_freed_on_the_background_thread(tmp_path):
    path = tmp_path / "object"
    path.write_bytes(b"x" * mmap.PAGESIZE)
    fd = os.open(path, os.O_RDWR)
    mapped = mmap.mmap(fd, mmap.PAGESIZE)
    os.unlink(path)
    _later.close_later(mapped)
    _later.close_fd_later(fd)
    assert _later.drain()
    assert mapped.closed
    try:
        os.fstat(fd)
    except OSError:
        pass
    else:
        raise AssertionError("the descriptor is still open")


def test_a_failing_close_does_not_stop_the_thread():
    class Broken:
        def close(self):
            raise OSError("already closed")

    _later.close_later(Broken())
    assert _later.drain()
