"""Calls that work, against the session's real cluster: values, output, executors, status, data."""

from __future__ import annotations

import dataclasses
import getpass
import hashlib
import operator
import os
import statistics
import sys
import time
import traceback

import numpy as np
import pytest

import bulletin
from cluster_support import CALL_SECONDS, gpu_executor_pid, nothing_running, wait_for_file, wait_until

pytestmark = pytest.mark.timeout(60)


def add(a, b=0):
    return a + b


def divide(a, b):
    return a / b


def chatty(n):
    for i in range(n):
        print(f"step {i}")
    print("done", file=sys.stderr)
    return n


def environment():
    return {name: os.environ.get(name) for name in ("CUDA_VISIBLE_DEVICES",
                                                     "BULLETIN_SIMULATED_GPUS")}


@bulletin.gpu(gpus=2, memory="1GiB", timeout="1m")
def doubled(x):
    return x * 2


def test_quickstart_runs_remotely_prints_here_and_returns(client, capsys):
    @bulletin.gpu
    def train(n):
        print("training on", os.environ.get("CUDA_VISIBLE_DEVICES"))
        return sum(i * i for i in range(n))

    assert train(10) == 285
    assert capsys.readouterr().out == "training on 0\n"
    assert train.submit(10).result(timeout=CALL_SECONDS) == 285
    assert client.submit(lambda x: x + 1, 41).result(timeout=CALL_SECONDS) == 42

    @dataclasses.dataclass
    class Point:
        x: int
        y: int

        def moved(self, dx):
            return Point(self.x + dx, self.y)

    moved = client.submit(Point.moved, Point(1, 2), 10).result(timeout=CALL_SECONDS)
    assert isinstance(moved, Point) and moved == Point(11, 2)
    assert [f.result(timeout=CALL_SECONDS) for f in client.map(pow, [2, 3], [5, 2])] == [32, 9]


def test_hello_reports_the_user_and_the_cluster(client, cluster):
    assert client.user == getpass.getuser()
    assert client.cluster_id == cluster.info["cluster_id"]
    assert client.runtime_version == cluster.info["version"]
    assert client.address == cluster.address


def test_output_is_visible_while_the_call_still_runs(client):
    def slow():
        print("halfway there", flush=True)
        time.sleep(2)
        return "done"

    f = client.submit(slow)
    wait_until(lambda: "halfway there" in f.output, timeout=10, what="the first line of output")
    assert not f.done() and f.status == "running"
    assert f.result(timeout=CALL_SECONDS) == "done"


def test_blocking_call_prints_stdout_and_stderr_to_the_callers_streams(client, capsys):
    assert bulletin.cpu(chatty)(3) == 3
    captured = capsys.readouterr()
    assert captured.out == "step 0\nstep 1\nstep 2\n"
    assert captured.err == "done\n"


def test_submitted_call_output_is_printed_and_kept_on_the_future(client, capsys):
    f = client.submit(chatty, 2)
    assert f.result(timeout=CALL_SECONDS) == 2
    # stdout and stderr arrive on separate pipes: their relative order is not kept.
    assert "done" in f.output
    assert f.output.replace("done", "", 1).replace("\n", "") == "step 0step 1"
    captured = capsys.readouterr()  # printed by the dispatcher thread as the output arrived
    assert captured.out == "step 0\nstep 1\n" and captured.err == "done\n"


def test_executors_stay_warm_between_calls(client):
    before = client.status().workers[0]
    first, second = gpu_executor_pid(client), gpu_executor_pid(client)
    after = client.status().workers[0]
    assert first == second != os.getpid()
    assert after.executors == before.executors


def test_gpu_call_is_pinned_to_its_gpu_and_cpu_call_sees_none(client):
    assert client.submit(environment, gpus=1).result(timeout=CALL_SECONDS) == {
        "CUDA_VISIBLE_DEVICES": "0", "BULLETIN_SIMULATED_GPUS": "1"}
    assert client.submit(environment).result(timeout=CALL_SECONDS)["CUDA_VISIBLE_DEVICES"] == ""


def test_status_shows_the_busy_gpu_and_why_the_next_call_waits(client, tmp_path):
    gate = tmp_path / "release"
    holder = client.submit(wait_for_file, str(gate), gpus=1)
    try:
        wait_until(lambda: holder.status == "running", timeout=10, what="the first call to run")
        waiting = client.submit(add, 1, 2, gpus=1)
        status = wait_until(lambda: (s := client.status()).queue and s, timeout=5,
                            what="the second call to be queued")
        assert (status.gpus.total, status.gpus.reserved, status.gpus.busy) == (1, 1, 1)
        assert status.simulated_gpus and "simulated" in str(status)
        assert status.running == 1
        [queued] = status.queue
        assert queued.task_id == waiting.key and queued.gpus == 1
        assert "GPU" in queued.reason
        assert waiting.status == "queued"
    finally:
        gate.touch()
    assert holder.result(timeout=CALL_SECONDS) is True
    assert waiting.result(timeout=CALL_SECONDS) == 3
    wait_until(lambda: nothing_running(client), timeout=5, what="the GPU to be free")


def test_remote_exception_keeps_its_type_and_the_remote_frames_in_its_traceback(client):
    class BadLuck(Exception):
        pass

    def unlucky_function():
        raise BadLuck("the dice said no")

    with pytest.raises(BadLuck, match="the dice said no") as info:
        client.submit(unlucky_function).result(timeout=CALL_SECONDS)
    remote = traceback.extract_tb(info.value.__traceback__)[-1]
    assert remote.name == "unlucky_function" and 'raise BadLuck("the dice said no")' in remote.line

    with pytest.raises(ValueError, match="invalid literal") as info:
        client.submit(int, "not a number").result(timeout=CALL_SECONDS)
    assert type(info.value) is ValueError

    with pytest.raises(ZeroDivisionError) as info:
        bulletin.cpu(divide)(1, 0)
    assert traceback.extract_tb(info.value.__traceback__)[-1].name == "divide"


def test_decorator_options_reach_the_runtime_and_submit_keywords_override_them(client):
    with pytest.raises(bulletin.InfeasibleError, match="asks for 2 GPUs"):
        doubled(21)
    assert client.submit(doubled, 21, gpus=1).result(timeout=CALL_SECONDS) == 42
    assert doubled.local(1) == 2


def test_map_zips_iterables_and_gather_keeps_order(client):
    assert client.gather(client.map(add, [1, 2, 3], [10, 20, 30])) == [11, 22, 33]
    assert client.gather(bulletin.cpu(abs).map([-1, -2])) == [1, 2]
    # The same function many times: after the first call only its id travels.
    assert client.gather([client.submit(add, i) for i in range(8)]) == list(range(8))


def test_gather_raises_the_first_error(client):
    with pytest.raises(ZeroDivisionError):
        client.gather([client.submit(divide, 1, 1), client.submit(divide, 1, 0)])


def test_large_argument_and_large_result_round_trip(client):
    size = 5 * 2**20
    assert client._submitter.inline_limit < size  # so both go through PutObject / GetObject
    blob = os.urandom(size)
    digest = client.submit(lambda b: hashlib.sha256(b).hexdigest(), blob).result(
        timeout=CALL_SECONDS)
    assert digest == hashlib.sha256(blob).hexdigest()

    big = np.arange(size // 8, dtype=np.float64)
    f = client.submit(np.multiply, big, 2)
    assert np.array_equal(f.result(timeout=CALL_SECONDS), big * 2)
    assert set(f.timings) >= {"serialize", "upload", "queue", "run", "download", "held"}
    # Held from placement to the end: the start, the run, and loading and storing 5 MiB there.
    assert f.timings["held"] > f.timings["start"] + f.timings["run"] > 0, f.timings

    made = client.submit(os.urandom, size).result(timeout=CALL_SECONDS)
    assert isinstance(made, bytes) and len(made) == size


def test_function_larger_than_the_inline_limit_is_uploaded_and_reused(client):
    blob = bytes(range(256)) * (8 * 2**10)  # 2 MiB captured by value

    def size():
        return len(blob)

    assert client.gather([client.submit(size), client.submit(size)]) == [len(blob)] * 2


def test_no_op_round_trip_is_fast(client):
    client.submit(add, 0).result(timeout=CALL_SECONDS)
    samples = []
    for _ in range(50):
        start = time.perf_counter()
        client.submit(add, 1).result(timeout=CALL_SECONDS)
        samples.append(time.perf_counter() - start)
    p50 = statistics.median(samples)
    print(f"no-op round trip through the real runtime: p50 {p50 * 1e3:.2f} ms")
    assert p50 < 0.1  # generous: 2 shared cores, a JVM and a Python executor per call
