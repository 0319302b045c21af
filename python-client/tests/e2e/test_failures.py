"""Calls that go wrong, against the session's real cluster, and the cluster serving on after each."""

from __future__ import annotations

import concurrent.futures as cf
import ctypes
import os
import signal
import socket
import threading
import time

import pytest

import bulletin
from cluster_support import (CALL_SECONDS, assert_serves, free_port, gpu_executor_pid,
                             nothing_running, start_cluster, wait_for_file, wait_until)

pytestmark = pytest.mark.timeout(90)


def add(a, b=0):
    return a + b


def sleeper(seconds):
    time.sleep(seconds)
    return seconds


def write_pid_and_sleep(path, seconds):
    with open(path, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(seconds)


def touch(path):
    open(path, "w").close()


def die(how):
    if how == "exit":
        os._exit(3)
    os.kill(os.getpid(), getattr(signal, how))
    time.sleep(10)


# -- what the client refuses to send --------------------------------------------------------


def test_unpicklable_argument_fails_at_submit_naming_it(client):
    with pytest.raises(bulletin.SerializationError, match=r"argument 2 \(a _thread.lock\)"):
        client.submit(add, 1, threading.Lock())
    with pytest.raises(bulletin.SerializationError, match=r"keyword argument 'b'"):
        client.submit(add, 1, b=threading.Lock())
    assert not client.status().queue
    assert_serves(client)


def test_unpicklable_function_fails_at_submit_naming_what_it_captures(client):
    lock = threading.Lock()

    def uses_lock():
        with lock:
            return 1

    with pytest.raises(bulletin.SerializationError, match=r"closure variable 'lock'.*_thread.lock"):
        client.submit(uses_lock)
    assert_serves(client)


# -- what the runtime refuses or stops ------------------------------------------------------


@pytest.mark.parametrize("resources, asked", [
    ({"gpus": 4}, "4 GPUs"), ({"memory": "10TiB"}, "10.0 TiB"), ({"cpus": 64}, "64 CPUs")])
def test_infeasible_call_fails_at_once_saying_what_the_cluster_has(client, resources, asked):
    start = time.monotonic()
    f = client.submit(add, 1, **resources)
    with pytest.raises(bulletin.InfeasibleError) as info:
        f.result(timeout=10)
    assert time.monotonic() - start < 2
    message = str(info.value)
    assert asked in message and "1 GPU (simulated)" in message and "2 CPUs" in message
    assert_serves(client)


def test_unpicklable_result_fails_naming_its_type(client):
    with pytest.raises(bulletin.ResultSerializationError, match=r"returned a _thread.lock"):
        client.submit(threading.Lock).result(timeout=CALL_SECONDS)
    assert_serves(client)


class ExitsWhenPickled:
    def __reduce__(self):
        raise SystemExit(3)


def misbehave(how):
    """Whatever a function does after it returns must not leave its call running (issue 27)."""
    if how == "exit-while-pickled":
        return ExitsWhenPickled()
    if how == "close-pipes":
        os.close(1)
        os.close(2)
    elif how == "block-signals":
        signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals) - {signal.SIGKILL,
                                                                       signal.SIGSTOP})
    return how


def refuse_to_unpickle(payload):
    raise ValueError("this type does not unpickle in the client")


class UnpicklesOnlyRemotely:
    def __init__(self, payload):
        self.payload = payload

    def __reduce__(self):
        return refuse_to_unpickle, (self.payload,)


def result_unpicklable_here(size):
    return UnpicklesOnlyRemotely(b"x" * size)


@pytest.mark.parametrize("size", [10, 8 << 20], ids=["inline", "fetched-from-the-store"])
def test_a_result_that_cannot_be_unpickled_here_fails_its_call(client, size):
    future = client.submit(result_unpicklable_here, size)
    for _ in range(2):  # a large one stays in the store: asked again, it fails again
        with pytest.raises(bulletin.BulletinError,
                           match="cannot be unpickled here: ValueError.*does not unpickle"):
            future.result(timeout=CALL_SECONDS)
    del future  # what it holds in the store goes with it
    assert_serves(client)


@pytest.mark.parametrize("how", ["exit-while-pickled", "close-pipes", "block-signals"])
def test_a_call_ends_whatever_its_function_does_after_returning(client, how):
    future = client.submit(misbehave, how)
    if how == "exit-while-pickled":
        with pytest.raises(bulletin.ResultSerializationError, match="ExitsWhenPickled"):
            future.result(timeout=CALL_SECONDS)
    else:
        assert future.result(timeout=CALL_SECONDS) == how
    assert_serves(client)
    wait_until(lambda: nothing_running(client), timeout=CALL_SECONDS,
               what="the call's slot to be free again")


class BlocksWhenPickled:
    def __reduce__(self):
        # Native code that never returns and holds the interpreter: nothing inside can stop it.
        ctypes.PyDLL(None).sleep(3600)


def returns_what_blocks_when_pickled():
    print("returning")
    return BlocksWhenPickled()


def test_a_result_that_never_finishes_pickling_fails_the_call_and_frees_its_slot(tmp_path):
    cluster = start_cluster(tmp_path / "home", "--result-timeout-seconds", "2", gpus=0, cpus=1)
    try:
        with cluster.client(set_as_default=False) as client:
            future = client.submit(returns_what_blocks_when_pickled)
            with pytest.raises(bulletin.WorkerDiedError,
                               match=r"its function returned, but encoding and storing its result"
                                     r" did not end within 2\.0 s") as info:
                future.result(timeout=CALL_SECONDS)
            assert "--result-timeout-seconds" in str(info.value)
            assert future.output.strip() == "returning"
            # One CPU slot: the next call runs only if the hung call's slot came back.
            assert client.submit(add, 1, 2).result(timeout=CALL_SECONDS) == 3
            wait_until(lambda: nothing_running(client), timeout=CALL_SECONDS,
                       what="the hung call's slot to be free again")
    finally:
        cluster.stop()


@pytest.mark.parametrize("how, says", [
    ("exit", "exited with status 3"), ("SIGSEGV", "SIGSEGV"), ("SIGKILL", "SIGKILL")])
def test_executor_death_fails_the_call_and_the_executor_is_replaced(client, how, says):
    before = gpu_executor_pid(client)
    with pytest.raises(bulletin.WorkerDiedError, match=says) as info:
        client.submit(die, how, gpus=1).result(timeout=CALL_SECONDS)
    assert "die()" in str(info.value)
    assert gpu_executor_pid(client) != before
    assert_serves(client)


def test_executor_deaths_do_not_grow_the_executor_pool(client):
    wait_until(lambda: client.status().workers[0].idle_executors
               == client.status().workers[0].executors, timeout=10, what="idle executors")
    before = client.status().workers[0].executors
    for _ in range(3):
        with pytest.raises(bulletin.WorkerDiedError):
            client.submit(die, "exit", gpus=1).result(timeout=CALL_SECONDS)
        gpu_executor_pid(client)
    # Replacements start in the background, and on a busy machine one may still be on its way
    # while its dead predecessor is counted (the count passed through `before` and left it
    # again once, under a full test run): the pool must settle back at its size and stay there.
    since: list[float] = []
    seen: list[tuple[float, int, int]] = []  # (s, executors, idle) each time the count changed
    start = time.monotonic()

    def settled() -> bool:
        worker = client.status().workers[0]
        if not seen or seen[-1][1:] != (worker.executors, worker.idle_executors):
            seen.append((round(time.monotonic() - start, 1), worker.executors,
                         worker.idle_executors))
        if worker.executors != before:
            since.clear()
            return False
        since[:] = since or [time.monotonic()]
        return time.monotonic() - since[0] >= 2.0

    try:
        wait_until(settled, timeout=30,
                   what=f"the executor pool to settle at {before} (for 2 s) after three deaths")
    except AssertionError as e:  # the counts as they went: a pool that grew, or one that churns
        raise AssertionError(f"{e}; (seconds, executors, idle) as they changed: {seen}") from None


def test_timeout_stops_the_call(client):
    start = time.monotonic()
    f = client.submit(sleeper, 30, timeout=1)
    with pytest.raises(bulletin.CallTimeoutError, match="timeout of 1.0 s"):
        f.result(timeout=CALL_SECONDS)
    assert time.monotonic() - start < 5
    assert_serves(client)


def hang_in_native_code(path):
    """Blocks every signal it can, then sleeps in C holding the interpreter: deaf to all but
    SIGKILL, as a stuck C extension is."""
    signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals) - {signal.SIGKILL,
                                                                   signal.SIGSTOP})
    with open(path, "w") as f:
        f.write(str(os.getpid()))
    ctypes.PyDLL(None).sleep(60)


@pytest.mark.parametrize("function", [write_pid_and_sleep, hang_in_native_code])
def test_cancelling_a_running_call_kills_its_executor(client, tmp_path, function):
    pid_file = tmp_path / "pid"
    args = (str(pid_file), 60) if function is write_pid_and_sleep else (str(pid_file),)
    f = client.submit(function, *args, gpus=1)
    wait_until(lambda: f.status == "running" and pid_file.exists() and pid_file.read_text(),
               timeout=10, what="the call to start")
    running_pid = int(pid_file.read_text())
    assert f.cancel() is True
    assert f.cancelled() and f.status == "cancelled"
    with pytest.raises(cf.CancelledError):
        f.result(timeout=1)
    assert gpu_executor_pid(client) != running_pid
    wait_until(lambda: nothing_running(client), timeout=5, what="the cluster to be idle")
    assert_serves(client)


def test_cancelling_a_queued_call_means_it_never_runs(client, tmp_path):
    gate, ran = tmp_path / "release", tmp_path / "ran"
    holder = client.submit(wait_for_file, str(gate), gpus=1)
    try:
        wait_until(lambda: holder.status == "running", timeout=10, what="the first call to run")
        queued = client.submit(touch, str(ran), gpus=1)
        wait_until(lambda: client.status().queue, timeout=5, what="the second call to queue")
        assert queued.cancel() is True
        assert queued.cancelled() and queued.status == "cancelled"
        wait_until(lambda: not client.status().queue, timeout=5, what="the queue to empty")
    finally:
        gate.touch()
    assert holder.result(timeout=CALL_SECONDS) is True
    # A GPU call submitted later runs after anything still queued would have.
    assert_serves(client)
    assert not ran.exists()


@pytest.mark.timeout(30)
def test_ctrl_c_during_a_blocking_call_cancels_it_remotely(client):
    @bulletin.gpu
    def long_training():
        time.sleep(60)

    # Python raises KeyboardInterrupt only where SIGINT has its default handler, and a process
    # started with SIGINT ignored (nohup, many CI runners) keeps it ignored. A notebook kernel
    # handles it; this test does the same for itself.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            long_training()
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - start < 5
    wait_until(lambda: nothing_running(client), timeout=5, what="the remote call to stop")
    assert_serves(client)


# -- connecting -----------------------------------------------------------------------------


def test_unreachable_runtime_fails_fast_naming_the_address(cluster):
    port = free_port()  # nothing listens there once the probe socket is closed
    start = time.monotonic()
    with pytest.raises(bulletin.RuntimeUnreachableError,
                       match=rf"127\.0\.0\.1:{port} .*bulletin up"):
        bulletin.Client(f"127.0.0.1:{port}", token=cluster.token, set_as_default=False)
    assert time.monotonic() - start < 5


def test_something_else_on_the_port_is_not_taken_for_a_runtime():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = "127.0.0.1:%d" % server.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(bulletin.RuntimeUnreachableError, match=address):
            bulletin.Client(address, token="t", connect_timeout=1.0, set_as_default=False)
        assert time.monotonic() - start < 5


def test_wrong_token_is_refused(client, cluster):
    with pytest.raises(bulletin.AuthenticationError, match="does not accept the token"):
        bulletin.Client(cluster.address, token="made-up-token", set_as_default=False)
    assert_serves(client)


def test_wrong_token_names_the_token_file_of_this_bulletin_home_once(cluster, tmp_path,
                                                                    monkeypatch):
    monkeypatch.setenv("BULLETIN_HOME", str(tmp_path))
    (tmp_path / "token").write_text("made-up-token\n")
    with pytest.raises(bulletin.AuthenticationError) as raised:
        bulletin.Client(cluster.address, set_as_default=False)
    message = str(raised.value)
    assert str(tmp_path / "token") in message and "~/.bulletin" not in message
    assert message.count("bulletin up` wrote") == 1, message


def test_missing_token_says_where_it_looked(client, cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("BULLETIN_HOME", str(tmp_path))  # no token file there
    with pytest.raises(bulletin.AuthenticationError, match=r"BULLETIN_TOKEN.*token"):
        bulletin.Client(cluster.address, set_as_default=False)


def test_closed_client_fails_its_pending_calls_and_is_no_longer_the_default(client, cluster,
                                                                             tmp_path):
    gate = tmp_path / "release"
    other = cluster.client()
    try:
        f = other.submit(wait_for_file, str(gate))
        wait_until(lambda: f.status == "running", timeout=10, what="the call to run")
        other.close()
        with pytest.raises(bulletin.BulletinError, match="closed"):
            f.result(timeout=5)
        with pytest.raises(bulletin.BulletinError, match="closed"):
            other.submit(add, 1)
        from bulletin._client import _default
        assert _default is not other
    finally:
        gate.touch()
    wait_until(lambda: nothing_running(client), timeout=10, what="the call to end")
    assert_serves(client)


def test_closing_a_client_stops_its_running_calls(client, cluster, tmp_path):
    gate = tmp_path / "release"
    other = cluster.client(set_as_default=False)
    f = other.submit(wait_for_file, str(gate), gpus=1)
    wait_until(lambda: f.status == "running", timeout=10, what="the call to run")
    other.close()
    try:
        wait_until(lambda: nothing_running(client), timeout=5, what="the call to be stopped")
    finally:
        gate.touch()
        wait_until(lambda: nothing_running(client), timeout=10, what="the call to end")


# -- the object store -----------------------------------------------------------------------


def store_objects(cluster) -> set[str]:
    """Objects someone references (cached, unreferenced ones may linger until evicted)."""
    with cluster.client(set_as_default=False) as probe:
        return probe.status().store["referenced"]


def big_result(n):
    return os.urandom(n)


def fails(x):
    raise RuntimeError(f"failing on {len(x)} bytes")


def test_store_holds_nothing_after_calls_end(client, cluster):
    big = os.urandom(3 * 2**20)
    # The session keeps the functions it sent: send them once before counting.
    for f in (client.submit(len, b""), client.submit(big_result, 1), client.submit(fails, b"")):
        f.exception(timeout=CALL_SECONDS)
    assert client.submit(os.getpid, gpus=1).result(timeout=CALL_SECONDS)
    before = store_objects(cluster)

    futures = [client.submit(len, big), client.submit(len, big + b"x"),
               client.submit(big_result, 2 * 2**20), client.submit(big_result, 10),
               client.submit(fails, big), client.submit(fails, b"small")]
    results = [f.exception(timeout=CALL_SECONDS) or f.result() for f in futures]
    assert results[:2] == [len(big), len(big) + 1] and len(results[2]) == 2 * 2**20
    assert isinstance(results[4], RuntimeError)
    with pytest.raises(bulletin.WorkerDiedError):
        client.submit(die, "exit", gpus=1).result(timeout=CALL_SECONDS)
    with pytest.raises(bulletin.InfeasibleError):
        client.submit(len, big, gpus=4).result(timeout=CALL_SECONDS)
    with pytest.raises(bulletin.CallTimeoutError):
        client.submit(sleeper, 30, timeout=0.5).result(timeout=CALL_SECONDS)

    wait_until(lambda: store_objects(cluster) == before, timeout=5,
               what=f"the store to hold only {before} referenced objects again")


def test_closing_a_client_releases_its_functions(client, cluster):
    before = store_objects(cluster)
    other = cluster.client(set_as_default=False)

    def only_this_client_sends_me(x):
        return x * 3

    assert other.submit(only_this_client_sends_me, 2).result(timeout=CALL_SECONDS) == 6
    assert store_objects(cluster) != before
    other.close()
    wait_until(lambda: store_objects(cluster) == before, timeout=5,
               what="the closed client's function to leave the store")
