"""The client against LoopbackRuntime: a real gRPC server on loopback running the real Executor."""

import _thread
import concurrent.futures as cf
import statistics
import threading
import time

import numpy as np
import pytest

import bulletin
from loopback_runtime import emit

RELEASE = threading.Event()


def add(a, b=0):
    return a + b


def chatty(n):
    for i in range(n):
        emit("stdout", f"step {i}\n")
    emit("stderr", "done\n")
    return n


def blocks_until_released():
    RELEASE.wait(10)
    return "released"


def divide(a, b):
    return a / b


@bulletin.gpu(gpus=2, memory="1GiB", timeout="1m")
def decorated(x):
    return x * 2


def test_call_round_trips_value(client):
    assert client.submit(add, 2, b=3).result(timeout=5) == 5


def test_hello_details_are_exposed(client):
    assert (client.user, client.group, client.cluster_id) == ("alice", "lab", "loopback")


def test_decorated_function_uses_the_latest_client_and_its_options(client, loopback):
    assert decorated(21) == 42
    spec = loopback.submitted[-1]
    assert (spec.resources.gpus, spec.resources.memory_bytes, spec.timeout_seconds) == (2, 2**30, 60)
    assert decorated.local(1) == 2


def test_submit_keywords_override_decorator_options(client, loopback):
    client.submit(decorated, 1, gpus=1, qos="batch").result(timeout=5)
    spec = loopback.submitted[-1]
    assert (spec.resources.gpus, spec.qos, spec.resources.memory_bytes) == (1, "batch", 2**30)


def test_function_bytes_travel_only_with_the_first_call(client, loopback):
    fs = [client.submit(add, i) for i in range(5)]
    assert client.gather(fs) == [0, 1, 2, 3, 4]
    assert len(loopback.inline_functions) == 1
    assert [bool(s.function.inline_data) for s in loopback.submitted] == [True] + [False] * 4


def test_blocking_call_prints_remote_output_in_the_calling_thread(client, capsys):
    assert bulletin.cpu(chatty)(3) == 3
    captured = capsys.readouterr()
    assert captured.out == "step 0\nstep 1\nstep 2\n" and captured.err == "done\n"


def test_submitted_call_output_is_printed_and_kept_on_the_future(client, capsys):
    f = client.submit(chatty, 2)
    f.result(timeout=5)
    time.sleep(0.05)
    assert "step 1\n" in capsys.readouterr().out
    assert f.output == "step 0\nstep 1\ndone\n"


def test_remote_exception_is_reraised_with_type_and_remote_traceback(client):
    with pytest.raises(ZeroDivisionError) as info:
        bulletin.cpu(divide)(1, 0)
    assert isinstance(info.value.__cause__, bulletin.RemoteTraceback)
    assert "in divide" in str(info.value.__cause__)


def test_large_arguments_are_uploaded_and_large_results_downloaded(client, loopback):
    big = np.arange(300_000, dtype=np.float64)  # 2.4 MB: over the 64 KiB inline limit
    f = client.submit(np.multiply, big, 2)
    assert np.array_equal(f.result(timeout=10), big * 2)
    spec = loopback.submitted[-1]
    assert not spec.args.inline_data and spec.args.id in loopback.uploads
    assert len(loopback.downloads) == 1
    assert set(f.timings) >= {"serialize", "upload", "run", "download"}


def test_function_over_the_inline_limit_is_uploaded_once(client, loopback):
    blob = bytes(range(256)) * 400  # 100 KB captured by value: over the 64 KiB inline limit

    def size():
        return len(blob)

    assert client.gather([client.submit(size), client.submit(size)]) == [102400, 102400]
    fid = loopback.submitted[0].function.id
    assert loopback.uploads.count(fid) == 1
    assert not any(spec.function.inline_data for spec in loopback.submitted)


def test_unpicklable_argument_fails_at_submit_and_sends_nothing(client, loopback):
    with pytest.raises(bulletin.SerializationError, match="argument 1"):
        client.submit(add, threading.Lock())
    assert loopback.submitted == []


def test_infeasible_call_fails_with_infeasible_error(client):
    with pytest.raises(bulletin.InfeasibleError, match="asks for 8 GPUs"):
        client.submit(add, 1, gpus=8).result(timeout=5)


def test_cancel_sends_cancel_task_and_cancels_the_future(client, loopback):
    RELEASE.clear()
    f = client.submit(blocks_until_released)
    assert f.cancel()
    with pytest.raises(cf.CancelledError):
        f.result(timeout=1)
    RELEASE.set()
    deadline = time.monotonic() + 5
    while f.key not in loopback.cancels and time.monotonic() < deadline:
        time.sleep(0.01)
    assert loopback.cancels == [f.key]


def test_interrupting_a_blocking_call_cancels_it_remotely(client, loopback):
    RELEASE.clear()
    threading.Timer(0.2, _thread.interrupt_main).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            bulletin.cpu(blocks_until_released)()
    finally:
        RELEASE.set()
    assert len(loopback.cancels) == 1 and loopback.cancels[0].startswith("blocks_until_released-")


def test_map_zips_iterables_and_gather_keeps_order(client):
    assert client.gather(client.map(add, [1, 2, 3], [10, 20, 30])) == [11, 22, 33]
    assert client.gather(bulletin.cpu(abs).map([-1, -2])) == [1, 2]


def test_gather_raises_the_first_error(client):
    with pytest.raises(ZeroDivisionError):
        client.gather([client.submit(divide, 1, 1), client.submit(divide, 1, 0)])


def test_status_reports_slots_workers_and_queue(client):
    status = client.status()
    assert (status.gpus.total, status.gpus.reserved, status.gpus.busy) == (2, 1, 1)
    text = str(status)
    assert "GPUs: 2 total, 1 reserved, 1 busy (simulated)" in text and "gpus busy" in text


def test_wrong_token_raises_authentication_error(loopback):
    with pytest.raises(bulletin.AuthenticationError, match="does not accept the token"):
        bulletin.Client(loopback.address, token="wrong")


def test_missing_token_raises_authentication_error_saying_where_it_looked(loopback):
    with pytest.raises(bulletin.AuthenticationError, match=r"BULLETIN_TOKEN"):
        bulletin.Client(loopback.address)


def test_unreachable_runtime_fails_fast_naming_the_address(bulletin_env):
    start = time.monotonic()
    with pytest.raises(bulletin.RuntimeUnreachableError, match=r"127.0.0.1:1 .*bulletin up"):
        bulletin.Client("127.0.0.1:1", token="t", connect_timeout=0.5)
    assert time.monotonic() - start < 3


def test_runtime_death_fails_pending_futures_and_later_submits(client, loopback):
    RELEASE.clear()
    f = client.submit(blocks_until_released)
    loopback.stop()
    try:
        with pytest.raises(bulletin.RuntimeUnreachableError):
            f.result(timeout=5)
        with pytest.raises(bulletin.RuntimeUnreachableError):
            client.submit(add, 1)
    finally:
        RELEASE.set()


def test_closed_client_fails_pending_futures_and_is_no_longer_default(client, loopback):
    RELEASE.clear()
    f = client.submit(blocks_until_released)
    client.close()
    RELEASE.set()
    with pytest.raises(bulletin.BulletinError, match="closed"):
        f.result(timeout=5)
    from bulletin._client import _default
    assert _default is not client


def test_no_op_round_trip_is_fast(client):
    client.submit(add, 0).result(timeout=5)
    samples = []
    for _ in range(200):
        start = time.perf_counter()
        client.submit(add, 1).result(timeout=5)
        samples.append(time.perf_counter() - start)
    p50 = statistics.median(samples)
    print(f"no-op round trip over loopback: p50 {p50 * 1e3:.2f} ms")
    assert p50 < 0.02  # generous: the Python stand-in runtime and 2 shared cores dominate
