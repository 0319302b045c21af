"""bulletin.Executor against the standard library's own executor tests.

The cases of CPython's Lib/test/test_concurrent_futures (executor.py and shutdown.py) that
apply to an executor whose work runs elsewhere, rewritten for pytest against a real cluster,
plus bulletin's own: options, max_workers, a refused option.
"""

from __future__ import annotations

import concurrent.futures as cf
import gc
import time
import weakref

import pytest

import bulletin


def mul(x, y):
    return x * y


def capture(*args, **kwargs):
    return args, kwargs


class MyObject:
    def my_method(self):
        pass


def make_dummy_object(_):
    return MyObject()


def gpu_count():
    import os
    return os.environ.get("CUDA_VISIBLE_DEVICES", "")


def nap(seconds):
    time.sleep(seconds)
    return seconds


@pytest.fixture
def executor(client):
    ex = bulletin.Executor(client)
    yield ex
    ex.shutdown(wait=True)


def test_is_a_standard_executor(client):
    ex = client.get_executor()
    assert isinstance(ex, cf.Executor)
    ex.shutdown()


# -- CPython ExecutorTest -------------------------------------------------------------------

def test_submit(executor):
    assert executor.submit(pow, 2, 8).result() == 256


def test_submit_keyword(executor):
    assert executor.submit(mul, 2, y=8).result() == 16
    # Every keyword goes to the function, even ones named like call options.
    assert executor.submit(capture, 1, self=2, fn=3).result() == ((1,), {"self": 2, "fn": 3})
    assert executor.submit(capture, gpus=2, timeout=1).result() == ((), {"gpus": 2, "timeout": 1})
    with pytest.raises(TypeError):
        executor.submit(fn=capture, arg=1)
    with pytest.raises(TypeError):
        executor.submit(arg=1)


def test_map(executor):
    assert list(executor.map(pow, range(10), range(10))) == list(map(pow, range(10), range(10)))
    assert (list(executor.map(pow, range(10), range(10), chunksize=3))
            == list(map(pow, range(10), range(10))))


def test_map_exception(executor):
    results = executor.map(divmod, [1, 1, 1, 1], [2, 3, 0, 5])
    assert next(results) == (0, 1)
    assert next(results) == (0, 1)
    with pytest.raises(ZeroDivisionError):
        next(results)


def test_map_timeout(executor):
    results = []
    with pytest.raises(cf.TimeoutError):
        for value in executor.map(nap, [0, 0, 6], timeout=3):
            results.append(value)
    assert results == [0, 0]


def test_shutdown_race_issue12456(executor):
    executor.map(str, [2] * 3)
    executor.shutdown()


def test_no_stale_references(executor):
    my_object = MyObject()
    collected = []
    ref = weakref.ref(my_object, lambda _: collected.append(True))
    executor.submit(my_object.my_method).result()
    del my_object
    gc.collect()
    assert ref() is None and collected


def test_max_workers_negative(client):
    for number in (0, -1):
        with pytest.raises(ValueError, match="max_workers must be greater than 0"):
            bulletin.Executor(client, max_workers=number)


def test_free_reference(executor):
    for obj in executor.map(make_dummy_object, range(10)):
        ref = weakref.ref(obj)
        del obj
        gc.collect()
        assert ref() is None


# -- CPython shutdown tests -----------------------------------------------------------------

def test_run_after_shutdown(client):
    ex = bulletin.Executor(client)
    ex.shutdown()
    with pytest.raises(RuntimeError, match="cannot schedule new futures after shutdown"):
        ex.submit(pow, 2, 5)


def test_context_manager_shutdown(client):
    with bulletin.Executor(client) as ex:
        future = ex.submit(nap, 0.5)
    # Leaving the block waited for the call (shutdown(wait=True)).
    assert future.done() and future.result() == 0.5


def test_shutdown_no_wait(client):
    ex = bulletin.Executor(client)
    future = ex.submit(nap, 1)
    started = time.monotonic()
    ex.shutdown(wait=False)
    assert not future.done() or time.monotonic() - started < 1
    assert future.result(timeout=30) == 1


def test_cancel_futures(client):
    # One CPU slot for this executor's calls at a time (max_workers=1): the first runs, the
    # rest wait; shutdown(cancel_futures=True) cancels those that have not started.
    ex = bulletin.Executor(client, max_workers=1)
    futures = [ex.submit(nap, 1) for _ in range(5)]
    ex.shutdown(wait=True, cancel_futures=True)
    cancelled = [f for f in futures if f.cancelled()]
    finished = [f for f in futures if not f.cancelled()]
    assert futures[0] in finished and futures[0].result() == 1
    assert len(cancelled) >= 3, [f._state for f in futures]
    assert all(f.result() == 1 for f in finished)


def test_cancel_futures_on_the_cluster(client):
    # Without max_workers the calls queue on the cluster (2 CPU slots, 4 CPUs asked each):
    # cancelling them there leaves no call behind and gather does not hang.
    ex = bulletin.Executor(client, cpus=2)
    futures = [ex.submit(nap, 1) for _ in range(4)]
    ex.shutdown(wait=True, cancel_futures=True)
    assert all(f.done() for f in futures)
    assert any(f.cancelled() for f in futures)
    assert all(f.result() == 1 for f in futures if not f.cancelled())


# -- bulletin's own -------------------------------------------------------------------------

def test_options_apply_to_every_call(client):
    with bulletin.Executor(client, gpus=1) as ex:
        # The simulated GPU is the cluster's only one: the call got it.
        assert ex.submit(gpu_count).result() != ""
    with bulletin.Executor(client) as ex:
        assert ex.submit(gpu_count).result() == ""


def test_a_wrong_option_fails_at_once(client):
    with pytest.raises(bulletin.InvalidArgumentError, match="gpus"):
        bulletin.Executor(client, gpus="two")


def test_max_workers_keeps_order_and_results(client):
    with bulletin.Executor(client, max_workers=2) as ex:
        assert list(ex.map(mul, range(8), range(8))) == [i * i for i in range(8)]
        with pytest.raises(ZeroDivisionError):
            ex.submit(divmod, 1, 0).result()


def test_a_waiting_call_cancelled_is_done_at_once(client):
    with bulletin.Executor(client, max_workers=1) as ex:
        first = ex.submit(nap, 1)
        second = ex.submit(nap, 1)
        assert second.cancel()
        done, _ = cf.wait([second], timeout=0)
        assert done == {second}
        assert first.result() == 1
