"""Dask distributed's own client and as_completed tests, rewritten against a real bulletin cluster.

Each test names the Dask test it comes from (distributed/tests/test_client.py and
test_as_completed.py); where bulletin differs on purpose, docs/from-dask.md says how and why.
Tests without such a name check promises of bulletin's own that the Dask-shaped API makes.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import time
from operator import add

import pytest

import bulletin
from cluster_support import CALL_SECONDS, nothing_running, wait_for_file, wait_until

pytestmark = pytest.mark.timeout(90)


def inc(x):
    return x + 1


def div(x, y):
    return x / y


def gated_inc(gate, x):
    """inc, once the test creates the file ``gate``."""
    if not wait_for_file(gate, timeout=CALL_SECONDS):
        raise TimeoutError(f"{gate} never appeared")
    return x + 1


def mark(path, *inputs):
    """Leaves a file behind: the proof that the call ran."""
    with open(path, "w") as f:
        f.write(repr(inputs))
    return path


def slow_mark(path, seconds=1.0):
    time.sleep(seconds)
    return mark(path)


def _done_callback_ran(future) -> cf.Future:
    """A future set once every done callback registered on ``future`` before it has run."""
    ran = cf.Future()
    future.add_done_callback(lambda _: ran.set_result(True))
    return ran


# -- cancel ---------------------------------------------------------------------------------


def test_cancel_a_call_waiting_for_its_input_never_runs_it(client, tmp_path):
    # dask: test_cancel_sync (a dependent cancelled while its input still runs)
    gate, marker = str(tmp_path / "gate"), tmp_path / "ran"
    x = client.submit(gated_inc, gate, 1)
    y = client.submit(mark, str(marker), x)
    assert y.cancel() and y.cancelled() and y.status == "cancelled"
    callbacks_ran = _done_callback_ran(x)  # after y's own callback on x, in order
    open(gate, "w").close()
    assert x.result(timeout=CALL_SECONDS) == 2
    callbacks_ran.result(timeout=CALL_SECONDS)
    # Anything y's callback sent went out before this call, and ran before it ended.
    assert client.submit(inc, 0).result(timeout=CALL_SECONDS) == 1
    wait_until(lambda: nothing_running(client), timeout=CALL_SECONDS, what="an idle cluster")
    assert not marker.exists(), "the cancelled call ran once its input finished"


def test_cancel_right_after_submit_never_runs_the_call(client, tmp_path, monkeypatch):
    # dask: test_cancel_before_known_to_scheduler. The runtime ignores a cancel of a task it
    # does not know, and a cancel travels on the session stream, not with the Submit: a cancel
    # must not overtake its call. The Submit RPC is slowed down here so that it always would.
    real_submit = client._conn.stub.Submit

    def slow_submit(*args, **kwargs):
        time.sleep(0.5)
        return real_submit(*args, **kwargs)

    monkeypatch.setattr(client._conn.stub, "Submit", slow_submit, raising=False)
    in_flight, queued = tmp_path / "in-flight", tmp_path / "queued"
    first = client.submit(slow_mark, str(in_flight), 0.5)
    time.sleep(0.1)  # the first Submit is on its way; the second call queues behind it
    second = client.submit(slow_mark, str(queued), 0.5)
    assert first.cancel() and second.cancel()
    monkeypatch.undo()
    assert client.submit(inc, 0).result(timeout=CALL_SECONDS) == 1
    wait_until(lambda: nothing_running(client), timeout=CALL_SECONDS, what="an idle cluster")
    assert not in_flight.exists() and not queued.exists()


def test_a_call_whose_input_is_cancelled_is_cancelled(client, tmp_path):
    # dask: test_cancel, test_cancel_before_known_to_scheduler
    gate, marker = str(tmp_path / "gate"), tmp_path / "ran"
    x = client.submit(gated_inc, gate, 1)
    y = client.submit(mark, str(marker), x)
    x.cancel()
    with pytest.raises(cf.CancelledError):
        y.result(timeout=CALL_SECONDS)
    assert y.cancelled() and y.status == "cancelled"
    open(gate, "w").close()
    assert not marker.exists()


def test_submit_on_a_cancelled_future_gives_a_cancelled_future(client):
    # dask: test_submit_on_cancelled_future
    x = client.submit(inc, 1)
    assert x.result(timeout=CALL_SECONDS) == 2
    y = client.submit(gated_inc, "/nonexistent-gate", 1)
    y.cancel()
    z = client.submit(inc, y)
    with pytest.raises(cf.CancelledError):
        z.result(timeout=CALL_SECONDS)
