"""bulletin.as_completed and awaitable Futures, over Futures that the test ends itself (the
dispatcher's side of a Future), from other threads as the client's dispatcher would. The same
behaviour against a real cluster is in tests/e2e/test_dask_api.py; Dask's test names cited."""

import asyncio
import concurrent.futures as cf
import threading
from collections.abc import Iterator

import pytest

import bulletin
from bulletin import as_completed
from bulletin._future import Future


def pending(key="t"):
    return Future(key, key, lambda k: None)


def finished(value, key="t"):
    f = pending(key)
    f._set_finished(value)
    return f


def failed(error, key="t"):
    f = pending(key)
    f._set_error(error)
    return f


def later(seconds, fn, *args):
    timer = threading.Timer(seconds, fn, args=args)
    timer.start()
    return timer


def test_as_completed_sync():
    # dask: test_as_completed_sync
    x, y, z = finished(2, "x"), finished(3, "y"), finished(2, "z")
    seq = as_completed([x, y, z])
    assert seq.count() == 3 and isinstance(seq, Iterator)
    assert set(seq) == {x, y, z}
    assert seq.count() == 0
    assert list(as_completed([])) == []


def test_futures_come_in_the_order_they_end():
    first, second = pending("first"), pending("second")
    later(0.05, second._set_finished, 2)
    later(0.15, first._set_finished, 1)
    assert list(as_completed([first, second], timeout=10)) == [second, first]


def test_as_completed_with_non_futures():
    # dask: test_as_completed_with_non_futures
    with pytest.raises(TypeError, match="takes futures"):
        list(as_completed([1, 2, 3]))


def test_as_completed_timeout_sync():
    # dask: test_as_completed_timeout_sync (a duration string, from creation)
    x, y, z = finished(1), finished(2), pending()
    seq = as_completed([x, y, z], timeout="100 ms")
    next(seq)
    next(seq)
    with pytest.raises(cf.TimeoutError):
        next(seq)


def test_as_completed_repeats():
    # dask: test_as_completed_repeats
    ac = as_completed()
    x = finished(2)
    ac.add(x)
    ac.add(x)
    assert next(ac) is x
    assert next(ac) is x
    with pytest.raises(StopIteration):
        next(ac)
    ac.add(x)
    assert next(ac) is x


def test_as_completed_is_empty():
    # dask: test_as_completed_is_empty
    ac = as_completed()
    assert ac.is_empty()
    x = finished(2)
    ac.add(x)
    assert not ac.is_empty()
    assert next(ac) is x
    assert ac.is_empty()


def test_as_completed_update_and_next_batch():
    # dask: test_as_completed_update
    todo, total, ac = list(range(10)), 0, as_completed([])
    while todo or not ac.is_empty():
        if todo:
            work, todo = todo[:4], todo[4:]
            ac.update([finished(i + 1) for i in work])
        total += sum(f.result() for f in ac.next_batch(block=True))
    assert total == sum(range(1, 11))


def test_as_completed_next_batch_does_not_block_when_told_not_to():
    # dask: test_as_completed_next_batch
    futures = [pending("a"), pending("b")]
    ac = as_completed(futures)
    assert not ac.is_empty() and ac.next_batch(block=False) == [] and not ac.has_ready()
    later(0.05, futures[0]._set_finished, 1)
    later(0.05, futures[1]._set_finished, 2)
    seen = []
    while not ac.is_empty():
        seen += ac.next_batch(block=True)
    assert set(seen) == set(futures) and not ac.has_ready()


def test_as_completed_error_and_cancel_end_too():
    # dask: test_as_completed_error, test_as_completed_cancel
    x, y, z = failed(RuntimeError("hello!")), finished(2), pending()
    ac = as_completed([x, y, z])
    z.cancel()
    assert set(ac) == {x, y, z}
    assert (x.status, y.status, z.status) == ("error", "finished", "cancelled")


def test_as_completed_with_results_raises_the_first_error():
    # dask: test_as_completed_with_results
    x, y, z = pending("x"), pending("y"), finished(2, "z")
    ac = as_completed([x, y, z], with_results=True)
    y.cancel()
    x._set_error(RuntimeError("hello!"))
    with pytest.raises(RuntimeError) as info:
        list(ac)
    assert str(info.value) == "hello!"


def test_as_completed_with_results_no_raise():
    # dask: test_as_completed_with_results_no_raise
    x, y, z = pending("x"), pending("y"), finished(2, "z")
    ac = as_completed([x, y, z], with_results=True, raise_errors=False)
    y.cancel()
    x._set_error(RuntimeError("hello!"))
    dd = {r[0]: r[1:] for r in ac}
    assert dd.keys() == {x, y, z}
    assert isinstance(dd[y][0], cf.CancelledError)
    assert dd[x][0][0] is RuntimeError and isinstance(dd[x][0][1], RuntimeError)
    assert dd[z][0] == 2


def test_str():
    # dask: test_str
    futures = [finished(1), pending(), pending()]
    ac = as_completed(futures)
    assert "waiting=2" in str(ac) and "done=1" in repr(ac)
    next(ac)
    assert "done=0" in str(ac)
    for f in futures[1:]:
        f._set_finished(0)
    assert "done=2" in str(ac) and "waiting=0" in str(ac)


def test_clear():
    # dask: test_clear
    futures = [finished(i) for i in range(3)]
    ac = as_completed(futures)
    ac.clear()
    with pytest.raises(StopIteration):
        next(ac)


def test_batches_yield_what_ended_since_the_last_batch():
    # dask: test_as_completed_batches
    futures = [pending(str(i)) for i in range(20)]
    for i, f in enumerate(futures):
        later(0.005 * i, f._set_finished, i)
    out = []
    for batch in as_completed(futures, with_results=True).batches():
        assert isinstance(batch, list)
        out.extend(batch)
    assert sorted(r for _, r in out) == list(range(20))


def test_refs_count_as_finished():
    ref = bulletin.Ref("a" * 32, 8, "pickle", lambda oid: None, lambda oid, size: "value")
    assert list(as_completed([ref], with_results=True)) == [(ref, "value")]


def test_async_for_waits_without_blocking_the_loop():
    # dask: test_async_for_py2_equivalent, test_as_completed_async
    futures = [pending(str(i)) for i in range(3)]
    ticks = []

    async def ticker():
        while True:
            ticks.append(1)
            await asyncio.sleep(0.01)

    async def main():
        tick_task = asyncio.create_task(ticker())
        for i, f in enumerate(futures):
            later(0.1 + 0.05 * i, f._set_finished, i)
        before = len(ticks)
        got = [f async for f in as_completed(futures)]
        during = len(ticks) - before
        tick_task.cancel()
        return got, during

    got, during = asyncio.run(main())
    assert got == futures
    assert during > 0, "the event loop did not run while as_completed waited"


def test_async_for_results_and_timeout():
    # dask: test_as_completed_timeout_async, test_as_completed_with_results_async
    async def main():
        x, y = finished(1, "x"), pending("y")
        seq = as_completed([x, y], timeout="100 ms", with_results=True)
        assert await seq.__anext__() == (x, 1)
        with pytest.raises(cf.TimeoutError):
            await seq.__anext__()
        z = failed(RuntimeError("hello!"))
        with pytest.raises(RuntimeError, match="hello!"):
            async for _ in as_completed([z], with_results=True):
                pass

    asyncio.run(main())


def test_await_a_future_inside_a_running_loop():
    # dask: test_await_future
    async def main():
        f = pending()
        later(0.05, f._set_finished, 2)
        assert await f == 2
        g = pending()
        later(0.05, g._set_error, ZeroDivisionError("x"))
        with pytest.raises(ZeroDivisionError):
            await g
        h = pending()
        later(0.05, h.cancel)
        with pytest.raises(cf.CancelledError):
            await h
        assert await finished(3) == 3

    asyncio.run(main())


def test_cancelling_the_awaiting_task_leaves_the_call_alone():
    f = pending()

    async def main():
        task = asyncio.create_task(asyncio.wait_for(f._result_async(), 0.05))
        with pytest.raises(asyncio.TimeoutError):
            await task

    asyncio.run(main())
    assert not f.done()
