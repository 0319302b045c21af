"""A write into a full store folder is an error that says whose share is full, never a SIGBUS
(issue 26): the file's memory is reserved with posix_fallocate before any byte is written
through a mapping. The folder is a small tmpfs of its own, as a user's share is on a cluster
whose users run as their own accounts; mounting it needs root."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from bulletin import StoreFullError
from bulletin._data._objects import encode, write_file

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")


@pytest.fixture
def small_share(tmp_path):
    folder = tmp_path / "share"
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=True)


def test_a_write_larger_than_the_share_raises_store_full_and_leaves_the_room_free(small_share):
    with pytest.raises(StoreFullError, match=r"your share .* MiB of 4\.0 MiB"):
        write_file(small_share / ".stage-big", encode(np.zeros(2 << 20, dtype=np.float32)))
    write_file(small_share / ".stage-small", encode(np.ones(1 << 18, dtype=np.float32)))


def test_the_same_write_through_ftruncate_and_a_mapping_would_have_killed_the_process(
        small_share):
    """What the reserve prevents, shown: the old way of sizing a file dies of SIGBUS."""
    code = ("import mmap, os, sys\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
            "os.ftruncate(fd, 8 << 20)\n"
            "m = mmap.mmap(fd, 8 << 20)\n"
            "m[:] = b'x' * (8 << 20)\n")
    died = subprocess.run([sys.executable, "-c", code, str(small_share / "victim")])
    assert died.returncode == -7  # SIGBUS
