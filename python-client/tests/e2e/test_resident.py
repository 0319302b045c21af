"""Values left on the GPU between calls (issue 29): ``bulletin.Resident`` handles, on a real
cluster of two users and one simulated GPU (torch CPU tensors stand in for device memory, as
``bulletin._runtime._resident`` says).

alice keeps a tensor on the GPU; her next call finds the very object there (no copy). bob's call
takes the GPU: alice's executor spills her tensor to the store and ends before bob's starts, so
bob's executor never has her bytes and her process is gone; bob cannot use her handle. alice's
next call finds her tensor restored.
"""

from __future__ import annotations

import operator
import os
import textwrap
import time

import nbformat
import pytest
from nbclient import NotebookClient

import bulletin
from bulletin._launch import pid_alive
from cluster_support import (ALICE, BOB, cli_env, referenced_objects, start_cluster,
                             start_configured_cluster, start_two_user_cluster, wait_until)
from durability_support import crash, restart, start_worker, stop_worker
from link_proxy import LinkProxy

pytestmark = pytest.mark.timeout(240)
FILL = 7.25  # alice's bytes: bob's executor looks for tensors holding this


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    home = tmp_path_factory.mktemp("bulletin-resident")
    c = start_two_user_cluster(home)
    try:
        yield c
    finally:
        c.stop()


def make(n: int):
    import torch
    return torch.full((n,), FILL)


def where_and_what(t, add: float = 0.0):
    """(pid, id of the value, its sum): the same pid and id mean the same object, not moved."""
    t += add  # in place: the resident object itself changes
    return os.getpid(), id(t), float(t.sum())


def identity(t):
    return os.getpid(), id(t)


def kept_bytes() -> int:
    """The bytes of resident values the executor this runs on keeps (for its user)."""
    from bulletin._runtime import _resident
    return _resident.keeps()


def kept_on_the_gpu(client: bulletin.Client) -> int:
    """What the user's executor on the one GPU keeps (a gpus=1 call lands on it)."""
    return client.submit(kept_bytes, gpus=1).result(timeout=60)


def alice_bytes_here() -> int:
    """Tensors in this (bob's) executor that hold alice's fill value."""
    import gc
    import torch
    return sum(1 for o in gc.get_objects() if isinstance(o, torch.Tensor) and o.numel()
               and bool((o == FILL).all()))


def test_a_kept_value_stays_spills_for_another_user_and_comes_back(cluster):
    with bulletin.Client(cluster.address, token=ALICE, set_as_default=False) as alice, \
            bulletin.Client(cluster.address, token=BOB, set_as_default=False) as bob:
        keep = bulletin.gpu(keep=True)(make)
        handle = alice.submit(keep, 1024).result()
        assert isinstance(handle, bulletin.Resident)
        assert handle.shape == (1024,) and handle.dtype == "float32" and handle.nbytes == 4096
        assert "simulated GPU" in handle.device and "Resident make" in repr(handle)
        use = bulletin.gpu(where_and_what)
        pid, first_id, total = alice.submit(use, handle, 1.0).result()
        assert total == 1024 * (FILL + 1)
        again_pid, again_id = alice.submit(bulletin.gpu(identity), handle).result()
        assert (again_pid, again_id) == (pid, first_id)  # the same object: nothing moved

        # bob takes the GPU: alice's state is spilled, her executor ended first.
        assert bob.submit(bulletin.gpu(alice_bytes_here)).result() == 0
        wait_until(lambda: not pid_alive(pid), 30, what="alice's executor to end")
        with pytest.raises(bulletin.ResidentLostError):
            bob.submit(bulletin.gpu(identity), handle).result()

        # alice's next call restores it (on a new executor), with what her call changed.
        new_pid, _, total = alice.submit(use, handle, 0.0).result()
        assert new_pid != pid and total == 1024 * (FILL + 1)
        assert alice.submit(bulletin.gpu(identity), handle).result()[0] == new_pid


def gpu_and_pid():
    return os.environ["CUDA_VISIBLE_DEVICES"], os.getpid()


def test_other_calls_go_to_the_gpu_without_state_and_the_session_finds_its_own(tmp_path):
    """Two GPUs, alice's value kept on one: bob's calls take the other while it is free (her
    state is not spilled), and her next call gets her GPU back, the value still there."""
    (tmp_path / "home").mkdir()
    two = start_two_user_cluster(tmp_path / "home", cpus=2, gpus=2)
    try:
        with bulletin.Client(two.address, token=ALICE, set_as_default=False) as alice, \
                bulletin.Client(two.address, token=BOB, set_as_default=False) as bob:
            for _ in range(2):  # wherever her value is, bob's call goes to the other GPU
                kept = alice.submit(bulletin.gpu(keep=True)(make), 1024)
                handle = kept.result(timeout=120)
                mine = kept.placement.gpu_ids[0]
                pid, first_id = alice.submit(bulletin.gpu(identity), handle).result(timeout=60)
                for _ in range(3):
                    used = bob.submit(bulletin.gpu(gpu_and_pid))
                    used.result(timeout=120)
                    assert used.placement.gpu_ids[0] != mine, (mine, used.placement)
                again = alice.submit(bulletin.gpu(identity), handle)
                assert again.result(timeout=60) == (pid, first_id)  # not spilled, not moved
                assert again.placement.gpu_ids[0] == mine
                del handle
                # The next round keeps hers on the GPU bob used: he moves over.
                alice.submit(bulletin.gpu(lambda: None), gpus=1).result(timeout=60)
    finally:
        two.stop()


def nap(seconds: float):
    time.sleep(seconds)
    return gpu_and_pid()


def test_a_call_whose_value_is_live_in_a_busy_executor_waits_for_it_instead_of_failing(
        tmp_path):
    """Two GPUs. alice's own call from another session holds one; her value is then kept live
    on the other; a second call of that other session can only take the value's GPU, and runs
    in the very executor that keeps it (a call of the same user runs beside the values). The
    first GPU comes free. Her next call reading the value cannot run there: the value does not
    move while its executor is busy (before, the call went there and failed with
    ResidentLostError). It waits, saying why, and runs once that call ends, the value as it
    was."""
    (tmp_path / "home").mkdir()
    two = start_two_user_cluster(tmp_path / "home", cpus=2, gpus=2)
    try:
        with bulletin.Client(two.address, token=ALICE, set_as_default=False) as cell, \
                bulletin.Client(two.address, token=ALICE, set_as_default=False) as other:
            # Started before the value exists: a call starting later would spill it (the
            # agent spills what the user's other idle executors keep, for the call to restore).
            short = other.submit(bulletin.gpu(nap), 8.0)
            wait_until(lambda: short.status == "running", 60, what="the short call to start")
            kept = cell.submit(bulletin.gpu(keep=True)(make), 1024)
            handle = kept.result(timeout=120)
            mine = kept.placement.gpu_ids[0]
            assert mine != short.placement.gpu_ids[0]
            keeper_pid, _ = cell.submit(bulletin.gpu(identity), handle).result(timeout=60)
            long = other.submit(bulletin.gpu(nap), 20.0)  # only the value's GPU is free
            wait_until(lambda: long.status == "running", 60, what="the long call to start")
            assert long.placement.gpu_ids[0] == mine
            short.result(timeout=60)
            reading = cell.submit(bulletin.gpu(where_and_what), handle, 0.0)
            wait_until(lambda: reading.wait_info is not None, 30, what="the call's wait reason")
            assert reading.wait_info.code == "STATE_ON_GPU", reading.wait_info
            assert f"GPU {mine} of worker" in reading.wait_info.reason, reading.wait_info
            assert reading.status == "queued"
            assert long.result(timeout=60)[1] == keeper_pid  # it ran in the value's executor
            assert reading.result(timeout=60)[2] == 1024 * FILL  # found, as it was
    finally:
        two.stop()


def test_fetch_copies_the_value_here(cluster):
    with bulletin.Client(cluster.address, token=ALICE) as alice:
        handle = alice.submit(bulletin.gpu(keep=True)(make), 8).result()
        assert handle.fetch().tolist() == [FILL] * 8
        assert float(handle.sum()) == 8 * FILL  # any other use fetches it too
        del alice


def test_a_large_handle_passed_as_an_argument_travels_with_the_call_not_through_the_store(
        cluster):
    """A handle's nbytes is the size of the value it names (here 2 MiB, above the size at
    which an argument becomes an object of its own); the handle itself goes with the call, so
    the call still names its worker and its spill, and no call pays a store round trip."""
    with bulletin.Client(cluster.address, token=ALICE) as alice:
        handle = alice.submit(bulletin.gpu(keep=True)(make), 1 << 19).result(timeout=60)
        assert handle.nbytes == 2 << 20
        kept_where = alice.submit(identity, handle, gpus=1).result(timeout=60)
        stored, acquire = [], alice._transfer.acquire
        alice._transfer.acquire = lambda encoded: stored.append(encoded) or acquire(encoded)
        for _ in range(3):
            future = alice.submit(identity, handle, gpus=1)
            assert future.result(timeout=60) == kept_where  # the very object, not a copy
        assert stored == []  # nothing went through the store (each would be a HasObjects)
        del alice


def test_a_cells_gpu_values_stay_between_cells_and_come_back_as_handles(cluster):
    cells = [f"""
        import bulletin, os
        client = bulletin.Client({cluster.address!r}, token={ALICE!r})
        """, """
        %%bulletin gpus=1
        import os, torch
        w = torch.ones(256, 256)
        w_id, pid = id(w), os.getpid()
        """, """
        print(type(w).__name__, w.shape, w.nbytes, "simulated GPU" in repr(w))
        """, """
        w  # shown as its handle: showing it does not fetch it
        """, """
        print(w._cached is None)
        """, """
        %%bulletin gpus=1 -q
        same = (id(w) == w_id, os.getpid() == pid)
        w += 1
        """, """
        print(same, float(w.fetch().sum()))
        """, """
        %%bulletin gpus=1 -q
        del w
        """, """
        print("w" in dir())
        """, """
        %%bulletin gpus=1 -q
        a, b = torch.zeros(4), torch.ones(4)
        """, """
        %%bulletin gpus=1 -q
        keeps_now = __import__("bulletin._runtime._resident", fromlist=["x"]).keeps()
        """, """
        %bulletin --release
        """, """
        import time
        def kept():
            return __import__("bulletin._runtime._resident", fromlist=["x"]).keeps()
        deadline = time.monotonic() + 30  # the release reaches the executor in the background
        while (keeps_after := client.submit(kept, gpus=1).result()) and time.monotonic() < deadline:
            time.sleep(0.1)
        """, """
        print(keeps_now > 0, keeps_after, "a" in dir(), "b" in dir())
        """, """
        %bulletin --release
        """]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(cell)) for cell in cells]
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    printed = ["".join(o.get("text", "") for o in cell.outputs if o["output_type"] == "stream")
               for cell in nb.cells]
    assert printed[1].endswith(" · 256.0 KiB kept on the GPU\n")  # the summary line
    assert printed[2] == "Resident (256, 256) 262144 True\n"
    shown = [o["data"]["text/plain"] for o in nb.cells[3].outputs
             if o["output_type"] == "execute_result"]
    assert shown and shown[0].startswith("<bulletin.Resident w: tensor [256, 256] float32")
    assert printed[4] == "True\n"
    assert printed[6] == f"(True, True) {2.0 * 256 * 256}\n"  # the same object, not moved
    assert printed[8] == "False\n"
    # %bulletin --release frees what the notebook keeps there, and the names here.
    assert printed[11] == "[bulletin] released 2 value(s) kept on the cluster: a, b\n"
    assert printed[13] == "True 0 False False\n"  # freed on the executor that kept them
    assert printed[14] == "[bulletin] this notebook keeps nothing on the cluster\n"


def test_a_spilled_value_unused_past_its_idle_time_is_dropped_and_the_next_call_says_so(
        tmp_path):
    cluster = start_cluster(tmp_path / "home", "--executor-idle-seconds", "0.5",
                            "--resident-idle-seconds", "0.5")
    try:
        with cluster.client() as client:
            handle = client.submit(bulletin.gpu(keep=True)(make), 8).result()
            pid = client.submit(bulletin.gpu(identity), handle).result()[0]
            wait_until(lambda: not pid_alive(pid), 30, what="the idle executor to end")
            log = cluster.home / "runtime.log"
            wait_until(lambda: "dropped 1 spilled resident value" in log.read_text(), 30,
                       what="the spill to be dropped")
            with pytest.raises(bulletin.ResidentLostError, match="--resident-idle-seconds"):
                client.submit(bulletin.gpu(identity), handle).result()
    finally:
        cluster.stop()


def test_the_byte_caps_keep_a_large_value_by_value_and_drop_spills_past_them(tmp_path):
    cluster = start_cluster(tmp_path / "home", "--resident-user-bytes", "8KiB",
                            "--spilled-user-bytes", "100", "--executor-idle-seconds", "0.5")
    try:
        with cluster.client() as client:
            keep = bulletin.gpu(keep=True)(make)
            small = client.submit(keep, 16).result()
            assert isinstance(small, bulletin.Resident)
            large = client.submit(keep, 4096).result()  # 16 KiB: past the cap, by value
            assert not isinstance(large, bulletin.Resident) and large.shape == (4096,)
            # Its spill (64 bytes of values, more with the pickle around them) passes 100 bytes.
            log = cluster.home / "runtime.log"
            wait_until(lambda: "dropped 1 spilled resident value" in log.read_text(), 30,
                       what="the spill past the cap to be dropped")
            with pytest.raises(bulletin.ResidentLostError, match="--spilled-user-bytes"):
                client.submit(bulletin.gpu(identity), small).result()
    finally:
        cluster.stop()


def test_spilled_values_on_a_remote_worker_survive_a_runtime_restart(tmp_path):
    home = tmp_path / "home"
    # The embedded worker has no GPU: the calls run on the remote worker, which outlives the
    # runtime; its executors end after half a second idle, spilling what they keep.
    cluster = start_cluster(home, gpus=0, cpus=1)
    worker, worker_log = start_worker(home, cluster.address, "far", "--reconnect-timeout", "120",
                                      "--executor-idle-seconds", "0.5", cpus=1, gpus=1)
    try:
        client = cluster.client(set_as_default=False, reconnect_timeout=120)
        wait_until(lambda: any(w.worker_id == "far" for w in client.status().workers),
                   timeout=60, what="the worker to attach")
        handle = client.submit(bulletin.gpu(keep=True)(make), 64).result()
        assert handle.worker == "far"
        pid = client.submit(bulletin.gpu(where_and_what), handle, 1.0).result()[0]
        wait_until(lambda: "spilled 1 resident value" in worker_log.read_text(), 30,
                   what="the idle executor to spill")
        wait_until(lambda: not pid_alive(pid), 30, what="the idle executor to end")
        crash(cluster)
        cluster = restart(cluster, gpus=0, cpus=1)
        new_pid, _, total = client.submit(bulletin.gpu(where_and_what), handle, 0.0).result(
            timeout=60)
        assert new_pid != pid and total == 64 * (FILL + 1)
        client.close()
    finally:
        stop_worker(worker)
        cluster.stop()


def test_closing_a_client_frees_what_its_session_kept_and_nothing_of_other_sessions(cluster):
    keep = bulletin.gpu(keep=True)(make)
    with bulletin.Client(cluster.address, token=ALICE, set_as_default=False) as alice2:
        alice1 = bulletin.Client(cluster.address, token=ALICE, set_as_default=False)
        first = alice1.submit(keep, 1024).result()  # 4 KiB
        mine = alice2.submit(keep, 256).result()  # 1 KiB, in the same executor of alice's
        assert kept_on_the_gpu(alice2) == 4096 + 1024
        pid = alice2.submit(bulletin.gpu(identity), first).result()[0]  # another session's

        # bob's session ends: not a byte of alice's goes (it names only bob's values).
        with bulletin.Client(cluster.address, token=BOB, set_as_default=False) as bob:
            assert bob.submit(operator.add, 1, 2).result() == 3
        time.sleep(1)
        assert kept_on_the_gpu(alice2) == 4096 + 1024

        alice1.close()
        wait_until(lambda: kept_on_the_gpu(alice2) == 1024, 30, interval=0.2,
                   what="the closed session's values to be freed in the executor")
        # Another session's values stay, in the same process (no executor was restarted)...
        assert alice2.submit(bulletin.gpu(where_and_what), mine, 0.0).result()[::2] == (
            pid, 256 * FILL)
        # ...and a handle of the ended session names nothing any more.
        with pytest.raises(bulletin.ResidentLostError, match="session"):
            alice2.submit(bulletin.gpu(identity), first).result()


def test_closing_a_client_drops_its_spilled_values_from_the_store(tmp_path):
    cluster = start_cluster(tmp_path / "home", "--executor-idle-seconds", "0.5")
    try:
        with cluster.client(set_as_default=False) as other:
            baseline = referenced_objects(other)
            client = cluster.client(set_as_default=False)
            handle = client.submit(bulletin.gpu(keep=True)(make), 64).result()
            pid = client.submit(bulletin.gpu(identity), handle).result()[0]
            log = cluster.home / "runtime.log"
            wait_until(lambda: "spilled 1 resident value" in log.read_text(), 30,
                       what="the idle executor to spill")
            wait_until(lambda: not pid_alive(pid), 30, what="the idle executor to end")
            client.close()
            wait_until(lambda: "released the spill object" in log.read_text(), 30,
                       what="the closed session's spill to be released")
            # Nothing of the closed session is held in the store: not its spill either.
            wait_until(lambda: referenced_objects(other) == baseline, 30, interval=0.2,
                       what="the store's references to come back to where they were")
            with pytest.raises(bulletin.ResidentLostError, match="session that kept it ended"):
                other.submit(bulletin.gpu(identity), handle).result()
    finally:
        cluster.stop()


def test_a_session_whose_resume_window_passed_has_its_values_freed(tmp_path):
    home = tmp_path / "home"
    cluster = start_cluster(home, env={**cli_env(home), "BULLETIN_RECONNECT_WINDOW": "2"})
    try:
        with LinkProxy(cluster.address) as proxy, cluster.client(set_as_default=False) as other:
            client = bulletin.Client(proxy.address, token=cluster.token, set_as_default=False,
                                     reconnect_timeout=60)
            client.submit(bulletin.gpu(keep=True)(make), 512).result()
            assert kept_on_the_gpu(other) == 2048
            proxy.cut()
            wait_until(lambda: kept_on_the_gpu(other) == 0, 30, interval=0.2,
                       what="the values of the session whose window passed to be freed")
            assert "did not resume it within 2 s" in (home / "runtime.log").read_text()
            proxy.restore()
            client.close()
    finally:
        cluster.stop()


def test_release_frees_the_values_on_the_executor_that_keeps_them_even_while_it_is_busy(
        tmp_path):
    # Two GPUs: while the executor that keeps the notebook's values runs another call of the
    # notebook's, a call (the old --release ran `del` as one) would land on the other GPU.
    cluster = start_cluster(tmp_path / "home", gpus=2)
    started = tmp_path / "started"
    try:
        cells = [f"""
            import bulletin, os, time
            client = bulletin.Client({cluster.address!r}, token={cluster.token!r})
            def hold(t, marker):
                open(marker, "w").close()
                time.sleep(3)
                return os.getpid()
            def kept():
                return os.getpid(), __import__("bulletin._runtime._resident",
                                               fromlist=["x"]).keeps()
            """, """
            %%bulletin gpus=1 -q
            import os, torch
            a = torch.ones(64)
            pid = os.getpid()
            """, f"""
            busy = client.submit(hold, a, {str(started)!r}, gpus=1)  # on a's executor
            while not os.path.exists({str(started)!r}):
                time.sleep(0.05)
            """, """
            %bulletin --release
            """, """
            print(busy.result() == pid, "a" in dir())
            deadline = time.monotonic() + 30
            while (after := client.submit(kept, gpus=1).result())[1] and \\
                    time.monotonic() < deadline:
                time.sleep(0.1)
            print(after == (pid, 0))
            """]
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(cell)) for cell in cells]
        NotebookClient(nb, timeout=120, kernel_name="python3").execute()
        printed = ["".join(o.get("text", "") for o in cell.outputs
                           if o["output_type"] == "stream") for cell in nb.cells]
        assert printed[3] == "[bulletin] released 1 value(s) kept on the cluster: a\n"
        assert printed[4] == "True False\nTrue\n"
    finally:
        cluster.stop()


def test_a_remote_worker_frees_what_a_closed_session_kept_there(tmp_path):
    home = tmp_path / "home"
    # The embedded worker has no GPU: the calls run on the remote one, told over its link.
    cluster = start_cluster(home, gpus=0, cpus=1)
    worker, worker_log = start_worker(home, cluster.address, "far", cpus=1, gpus=1)
    try:
        with cluster.client(set_as_default=False) as other:
            wait_until(lambda: any(w.worker_id == "far" for w in other.status().workers),
                       timeout=60, what="the worker to attach")
            client = cluster.client(set_as_default=False)
            handle = client.submit(bulletin.gpu(keep=True)(make), 512).result()
            assert handle.worker == "far" and kept_on_the_gpu(other) == 2048
            client.close()
            wait_until(lambda: kept_on_the_gpu(other) == 0, 30, interval=0.2,
                       what="the remote executor to free the closed session's values")
            wait_until(lambda: "dropped 1 resident value(s)" in worker_log.read_text(), 10,
                       what="the worker to log the drop")  # logged once the executor answered
    finally:
        stop_worker(worker)
        cluster.stop()


def make_slowly(n: int):
    time.sleep(2)  # long enough for both calls to run at once, on both GPUs
    return make(n)


def test_past_the_host_cap_the_executor_idle_longest_spills_and_its_value_comes_back(tmp_path):
    # Two GPUs of one host, a cap of 24 KiB: two values of 16 KiB, one on each GPU's executor,
    # are 32 KiB together.
    cluster = start_cluster(tmp_path / "home", "--resident-host-bytes", "24KiB", gpus=2)
    try:
        with cluster.client() as client:
            keep = bulletin.gpu(keep=True)(make_slowly)
            first = client.submit(keep, 4096)
            time.sleep(0.5)  # the first ends first: it is the one idle longest afterwards
            second = client.submit(keep, 4096)
            kept = [first.result(timeout=60), second.result(timeout=60)]
            assert all(isinstance(value, bulletin.Resident) for value in kept)
            log = cluster.home / "runtime.log"
            wait_until(lambda: "past --resident-host-bytes 24576" in log.read_text(), 30,
                       what="the executor idle longest to spill past the host's cap")
            assert log.read_text().count("past --resident-host-bytes") == 1
            # Both values are still the user's: the spilled one is restored where it is used.
            for value in kept:
                assert client.submit(bulletin.gpu(operator.itemgetter(0)), value).result(
                    timeout=60) == pytest.approx(FILL)
    finally:
        cluster.stop()


def change_then_hang(t, marker: str):
    """A cell that changes the kept value in place, then never ends: the user interrupts it."""
    t += 1.0
    open(marker, "w").close()
    time.sleep(600)


def total_of(t):
    return os.getpid(), float(t.sum())


def test_a_cancelled_call_spills_what_its_executor_keeps_instead_of_losing_it(cluster,
                                                                            tmp_path):
    """Interrupting a cell stops its executor; the session's values are spilled first, with
    what the cell changed before the stop, as a kernel interrupted locally keeps them."""
    with bulletin.Client(cluster.address, token=ALICE, set_as_default=False) as alice:
        handle = alice.submit(bulletin.gpu(keep=True)(make), 1024).result()
        pid, total = alice.submit(bulletin.gpu(total_of), handle).result()
        assert total == 1024 * FILL
        marker = tmp_path / "changed"
        hung = alice.submit(bulletin.gpu(change_then_hang), handle, str(marker))
        wait_until(marker.exists, 60, what="the call to change the value")
        hung.cancel()
        wait_until(lambda: not pid_alive(pid), 30, what="the stopped call's executor to end")
        new_pid, total = alice.submit(bulletin.gpu(total_of), handle).result(timeout=60)
        assert new_pid != pid and total == 1024 * (FILL + 1)


def where_it_runs(t, add: float = 0.0):
    """(worker, pid, sum) of a resident value, changed in place by ``add``."""
    t += add
    return os.environ["BULLETIN_EXECUTOR_ID"].rpartition("-e")[0], os.getpid(), float(t.sum())


def hold_until(marker: str):
    """bob's call: it holds its worker's GPU until the test lets it go."""
    while not os.path.exists(marker):
        time.sleep(0.05)
    return os.environ["BULLETIN_EXECUTOR_ID"].rpartition("-e")[0]


def attached(client: bulletin.Client, worker: str) -> bool:
    return any(w.worker_id == worker for w in client.status().workers)


def test_a_value_spilled_on_one_host_is_restored_on_another_and_never_for_another_user(
        tmp_path):
    """alice keeps a value on w1; bob's call takes w1's GPU, so her executor there spills it;
    her next call lands on w2 (another `bulletin worker`, its own store), which fetches the
    spill from w1 and restores it, equal. w1 forgets its copy; bob naming her handle gets a
    ResidentLostError on either worker, never her bytes."""
    home = tmp_path / "home"
    home.mkdir()
    cluster = start_configured_cluster(home, f"""
users:
  - {{name: alice, group: vision, token: "{ALICE}"}}
  - {{name: bob, group: nlp, token: "{BOB}"}}
""", gpus=0, cpus=1)  # the embedded worker has no GPU: the calls run on w1 and w2
    w1, w1_log = start_worker(home, cluster.address, "w1", cpus=1, gpus=1)
    w2 = None
    marker = tmp_path / "let-bob-go"
    try:
        with bulletin.Client(cluster.address, token=ALICE, set_as_default=False) as alice, \
                bulletin.Client(cluster.address, token=BOB, set_as_default=False) as bob:
            wait_until(lambda: attached(alice, "w1"), 60, what="w1 to attach")
            handle = alice.submit(bulletin.gpu(keep=True)(make), 1024).result(timeout=60)
            assert handle.worker == "w1"
            where, pid, total = alice.submit(bulletin.gpu(where_it_runs), handle, 1.0).result(
                timeout=60)
            assert (where, total) == ("w1", 1024 * (FILL + 1))

            # bob's call takes w1's only GPU and holds it: alice's executor spills there.
            held = bob.submit(bulletin.gpu(hold_until), str(marker))
            wait_until(lambda: "spilled 1 resident value" in w1_log.read_text(), 60,
                       what="alice's executor on w1 to spill")
            w2, w2_log = start_worker(home, cluster.address, "w2", cpus=1, gpus=1)
            wait_until(lambda: attached(alice, "w2"), 60, what="w2 to attach")

            # Her next call runs on w2: the spill comes from w1's store and is restored there,
            # with what her call on w1 changed.
            where, new_pid, total = alice.submit(bulletin.gpu(where_it_runs), handle, 0.0).result(
                timeout=60)
            assert (where, total) == ("w2", 1024 * (FILL + 1)) and new_pid != pid
            wait_until(lambda: "forgot 1 spilled resident value" in w1_log.read_text(), 30,
                       what="w1 to forget the spill restored elsewhere")

            # bob names her handle: nothing of his namespace resolves it, on w2...
            with pytest.raises(bulletin.ResidentLostError):
                bob.submit(bulletin.gpu(identity), handle).result(timeout=60)
            assert bob.submit(bulletin.gpu(alice_bytes_here)).result(timeout=60) == 0
            marker.touch()
            assert held.result(timeout=60) == "w1"
            # ...nor on w1, where her spill was.
            with pytest.raises(bulletin.ResidentLostError):
                bob.submit(bulletin.gpu(identity), handle).result(timeout=60)

            # bob's calls on w2 spilled it there: the runtime prefers w2 for it now (the
            # handle still names w1), and it comes back from w2's own spill.
            where, _, total = alice.submit(bulletin.gpu(where_it_runs), handle, 0.0).result(
                timeout=60)
            assert (where, total) == ("w2", 1024 * (FILL + 1))
    finally:
        marker.touch()
        stop_worker(w1)
        if w2 is not None:
            stop_worker(w2)
        cluster.stop()
