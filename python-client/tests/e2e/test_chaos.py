"""Chaos (issue 13): clients submit a mix of calls (short, long, large arguments, large
results) while the runtime is killed with SIGKILL at random points and started again on the
same home, several times. Every accepted call ends exactly once from its caller's view, with its
right result; none is lost; and no object leaks: once the clients are gone, nothing in the store
is referenced, and a restart keeps no file the journal does not name."""

from __future__ import annotations

import random
import threading
import time

import pytest

from cluster_support import CALL_SECONDS, referenced_objects, start_cluster, wait_until
from durability_support import crash, restart, store_files

pytestmark = pytest.mark.timeout(300)

KILLS = 3
BIG = 3 << 19  # 1.5 MiB: above the inline limit, so it travels as an object of its own


def short(x: int) -> int:
    return x + 1


def long(x: int) -> int:
    import time
    time.sleep(1.2)
    return x * 3


def checksum(data: bytes) -> int:
    return len(data) + sum(data[::4096])


def big_result(x: int) -> bytes:
    return bytes([x % 256]) * BIG


def expected(kind: str, x: int):
    return {"short": x + 1, "long": x * 3, "arg": BIG + sum(bytes([x % 256]) * (BIG // 4096)),
            "result": bytes([x % 256]) * BIG}[kind]


def wait_for_every_end(submitted, timeout: float) -> None:
    """Waits, for at most ``timeout`` seconds in all, until every call ended; fails naming
    the calls that never did (a lost call must fail the test, not hang it)."""
    deadline = time.monotonic() + timeout
    for _, _, future in submitted:
        try:
            future.exception(timeout=max(0.01, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 - a timeout here is reported below, with the others
            pass
    never = [f"{kind}({i}) {future.key} status={future.status}"
             for kind, i, future in submitted if not future.done()]
    assert not never, (f"{len(never)} of {len(submitted)} calls never ended within "
                       f"{timeout:g} s:\n  " + "\n  ".join(never))


def test_calls_survive_repeated_sigkills_of_the_runtime(tmp_path):
    rng = random.Random(1313)
    cluster = start_cluster(tmp_path / "home", gpus=0, cpus=2)
    submitted: list[tuple[str, int, object]] = []
    ends: dict[str, int] = {}
    ends_lock = threading.Lock()
    stop = threading.Event()

    def count_end(future):
        with ends_lock:
            ends[future.key] = ends.get(future.key, 0) + 1

    thread_errors: list[BaseException] = []

    def submit_mix(client, seed: int):
        try:
            submit_calls(client, seed)
        except BaseException as exc:  # a submit that raised must fail the test, not end quietly
            thread_errors.append(exc)
            raise

    def submit_calls(client, seed: int):
        local = random.Random(seed)
        i = 0
        while not stop.is_set():
            kind = local.choice(("short", "short", "long", "arg", "result"))
            if kind == "short":
                future = client.submit(short, i)
            elif kind == "long":
                future = client.submit(long, i)
            elif kind == "arg":
                future = client.submit(checksum, bytes([i % 256]) * BIG)
            else:
                future = client.submit(big_result, i)
            future.add_done_callback(count_end)
            submitted.append((kind, i, future))
            i += 1
            time.sleep(local.uniform(0.05, 0.3))

    started = time.monotonic()
    try:
        clients = [cluster.client(set_as_default=False, reconnect_timeout=120) for _ in range(2)]
        threads = [threading.Thread(target=submit_mix, args=(c, n), daemon=True)
                   for n, c in enumerate(clients)]
        for thread in threads:
            thread.start()
        for _ in range(KILLS):
            time.sleep(rng.uniform(1.0, 3.0))
            crash(cluster)
            time.sleep(rng.uniform(0.0, 0.5))
            cluster = restart(cluster, gpus=0, cpus=2)
        time.sleep(1.0)
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        assert not thread_errors, f"submitting raised: {thread_errors!r}"
        assert len(submitted) > 20, f"only {len(submitted)} calls were submitted"
        wait_for_every_end(submitted, timeout=CALL_SECONDS * 4)
        for kind, i, future in submitted:
            assert future.result(timeout=1) == expected(kind, i), (kind, i)
        wait_until(lambda: len(ends) == len(submitted), timeout=5, what="every done callback")
        assert all(count == 1 for count in ends.values()), "a call ended twice for its caller"
        for client in clients:
            client.close()
        with cluster.client(set_as_default=False) as fresh:
            wait_until(lambda: referenced_objects(fresh) == 0, timeout=15,
                       what="nothing referenced once the clients are gone")
        # A last crash: the restart keeps no store file the journal does not name.
        crash(cluster)
        cluster = restart(cluster, gpus=0, cpus=2)
        assert store_files(cluster) == set()
    finally:
        stop.set()
        cluster.stop()
    print(f"chaos: {len(submitted)} calls, {KILLS} kills, {time.monotonic() - started:.1f} s")
