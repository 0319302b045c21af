"""Large results computed in store memory, through a real cluster (bulletin/_runtime/
_result_memory.py): a loop of calls that each return a new array gets its results right, the
released results' files become the executor's spares, and an executor that ends leaves none of
them behind."""

from __future__ import annotations

import time

import numpy as np

from bulletin import _native
from cluster_support import CALL_SECONDS, assert_serves, start_cluster


def shifted(v, k):
    return v + k


def spare_names(store_dir) -> list[str]:
    """The spares executors made of released objects' files, in every staging folder."""
    return sorted(f"{ns.name}/{entry.name}" for ns in store_dir.iterdir() if ns.is_dir()
                  for folder in [ns / ".staging"] if folder.is_dir()
                  for entry in folder.iterdir() if entry.name.startswith(".exec-"))


def test_new_results_in_a_loop_reuse_released_files_and_an_ended_executor_leaves_none(tmp_path):
    if _native.lender() is None:
        import pytest
        pytest.skip(f"the lender cannot be built here: {_native.why_not()}")
    cluster = start_cluster(tmp_path / "home", "--executor-idle-seconds", "3", cpus=1)
    try:
        with cluster.client(set_as_default=False) as client:
            v = np.arange(2 << 20, dtype=np.float32)  # 8 MiB
            for k in range(8):
                out = client.submit(shifted, v, k).result(timeout=CALL_SECONDS)
                assert out.shape == v.shape and out[1] == 1 + k and out[-1] == v[-1] + k
                del out  # released: its file is the agent's to stage for the next result
                time.sleep(0.1)  # the release travels on the session stream
            names = spare_names(cluster.store_dir)
            assert names, "no released result's file became a spare"
            # Idle past --executor-idle-seconds: the executor is retired (killed), and the agent
            # deletes the spares it named.
            deadline = time.monotonic() + 30
            while spare_names(cluster.store_dir) and time.monotonic() < deadline:
                time.sleep(0.5)
            assert spare_names(cluster.store_dir) == [], cluster.log_tail()
            assert_serves(client)
    finally:
        cluster.stop()
