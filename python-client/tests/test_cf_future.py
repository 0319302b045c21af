"""CPython's FutureTests (Lib/test/test_concurrent_futures/test_future.py), adapted to
bulletin.Future: its states are reached the way the client reaches them (the runtime's events:
``_set_status``, ``_set_finished``, ``_set_error``, a cancel), not by setting ``_state``.

Where bulletin differs on purpose a test pins it (named ``..._differs``) and
docs/from-dask.md ("concurrent.futures") says why. Also AsCompletedTests'
test_free_reference_yielded_future for bulletin.as_completed (plain futures, as there).
"""

from __future__ import annotations

import concurrent.futures as cf
import gc
import threading
import weakref

import pytest

import bulletin
from bulletin._future import Future


def pending():
    return Future("call-1", "call", lambda f: None)


def running():
    f = pending()
    f._set_status("running")
    return f


def cancelled():
    f = pending()
    f.cancel()
    return f


def failed():
    f = pending()
    f._set_error(OSError())
    return f


def successful():
    f = pending()
    f._set_finished(42)
    return f


def test_done_callback_with_result():
    results = []
    f = pending()
    f.add_done_callback(lambda done: results.append(done.result()))
    f._set_finished(5)
    assert results == [5]


def test_done_callback_with_exception():
    errors = []
    f = pending()
    f.add_done_callback(lambda done: errors.append(done.exception()))
    f._set_error(Exception("test"))
    assert errors[0].args == ("test",)


def test_done_callback_with_cancel():
    seen = []
    f = pending()
    f.add_done_callback(lambda done: seen.append(done.cancelled()))
    assert f.cancel()
    assert seen == [True]


def test_done_callback_raises(caplog):
    called = []

    def raising_fn(_):
        called.append("raising")
        raise Exception("doh!")

    f = pending()
    f.add_done_callback(raising_fn)
    f.add_done_callback(lambda _: called.append("fn"))
    f._set_finished(5)
    assert called == ["raising", "fn"]
    assert "exception calling callback for" in caplog.text and "doh!" in caplog.text


@pytest.mark.parametrize("exit_with", [SystemExit(3), KeyboardInterrupt()])
def test_a_callbacks_exit_does_not_end_the_thread_that_settles_the_future(caplog, exit_with):
    # The client settles futures on its own threads: one ended by a callback hangs every call.
    called = []

    def exits(_):
        called.append("exits")
        raise exit_with

    f = pending()
    f.add_done_callback(exits)
    f.add_done_callback(lambda _: called.append("next"))
    f._set_finished(5)  # would raise here, in the settling thread
    assert called == ["exits", "next"] and f.result() == 5
    assert "exception calling callback for" in caplog.text


def test_done_callback_already_successful():
    results = []
    f = successful()
    f.add_done_callback(lambda done: results.append(done.result()))
    assert results == [42]


def test_done_callback_already_failed():
    errors = []
    f = failed()
    f.add_done_callback(lambda done: errors.append(done.exception()))
    assert isinstance(errors[0], OSError)


def test_done_callback_already_cancelled():
    seen = []
    f = cancelled()
    f.add_done_callback(lambda done: seen.append(done.cancelled()))
    assert seen == [True]


def test_repr_differs():
    # The standard: <Future at 0x... state=finished returned int>. bulletin's names the call
    # (its key), the remote status, and the result's type once known (as Dask's repr).
    assert repr(pending()) == "<bulletin.Future call-1 status=queued>"
    assert repr(running()) == "<bulletin.Future call-1 status=running>"
    assert repr(cancelled()) == "<bulletin.Future call-1 status=cancelled>"
    assert repr(failed()) == "<bulletin.Future call-1 status=error>"
    assert repr(successful()) == "<bulletin.Future call-1 status=finished type=int>"


def test_cancel():
    f1, f3, f5, f6 = pending(), cancelled(), failed(), successful()
    assert f1.cancel() and f1.cancelled()
    assert f3.cancel() and f3.cancelled()
    assert not f5.cancel() and not f5.cancelled()
    assert not f6.cancel() and f6.result() == 42


def test_cancel_a_running_call_differs():
    # The standard cannot stop a running call (cancel() is False); bulletin stops it on the
    # cluster: a GPU held by a call nobody wants is the cost this avoids.
    cancels = []
    f = Future("call-1", "call", cancels.append)
    f._set_status("running")
    assert f.cancel() and f.cancelled() and cancels == [f]


def test_cancelled():
    assert not pending().cancelled()
    assert not running().cancelled()
    assert cancelled().cancelled()
    assert not failed().cancelled()
    assert not successful().cancelled()


def test_done():
    assert not pending().done()
    assert not running().done()
    assert cancelled().done()
    assert failed().done()
    assert successful().done()


def test_running():
    assert not pending().running()
    assert running().running()
    assert not cancelled().running()
    assert not failed().running()
    assert not successful().running()


def test_result_with_timeout():
    with pytest.raises(cf.TimeoutError):
        pending().result(timeout=0)
    with pytest.raises(cf.TimeoutError):
        running().result(timeout=0)
    with pytest.raises(cf.CancelledError):
        cancelled().result(timeout=0)
    with pytest.raises(OSError):
        failed().result(timeout=0)
    assert successful().result(timeout=0) == 42


def test_result_with_success():
    f = pending()
    threading.Timer(0.2, f._set_finished, (42,)).start()
    assert f.result(timeout=5) == 42


def test_result_with_cancel():
    f = pending()
    threading.Timer(0.2, f.cancel).start()
    with pytest.raises(cf.CancelledError):
        f.result(timeout=5)


def test_exception_with_timeout():
    with pytest.raises(cf.TimeoutError):
        pending().exception(timeout=0)
    with pytest.raises(cf.TimeoutError):
        running().exception(timeout=0)
    with pytest.raises(cf.CancelledError):
        cancelled().exception(timeout=0)
    assert isinstance(failed().exception(timeout=0), OSError)
    assert successful().exception(timeout=0) is None


def test_exception_with_success():
    f = pending()
    threading.Timer(0.2, f._set_error, (OSError(),)).start()
    assert isinstance(f.exception(timeout=5), OSError)


def test_multiple_set_result():
    f = pending()
    f.set_result(1)
    with pytest.raises(cf.InvalidStateError,
                       match=r"FINISHED: <bulletin.Future call-1 status=finished type=int>"):
        f.set_result(2)
    assert f.done() and f.result() == 1


def test_multiple_set_exception():
    f = pending()
    e = ValueError()
    f.set_exception(e)
    with pytest.raises(cf.InvalidStateError, match="FINISHED: <bulletin.Future call-1"):
        f.set_exception(Exception())
    assert f.exception() is e


def test_a_late_event_from_the_runtime_is_ignored():
    # The runtime's terminal event can cross a local cancel or a second answer: the client's
    # own setters keep the first outcome instead of raising InvalidStateError.
    f = pending()
    f._set_finished(1)
    f._set_finished(2)
    f._set_error(OSError())
    assert f.result() == 1


def test_free_reference_yielded_future():
    # AsCompletedTests.test_free_reference_yielded_future, for bulletin.as_completed.
    futures_list = [cf.Future() for _ in range(10)]
    futures_list[8].set_result(42)
    futures_list[9].cancel()
    futures_list[9].set_running_or_notify_cancel()
    with pytest.raises(cf.TimeoutError):
        for future in bulletin.as_completed(futures_list, timeout=0):
            futures_list.remove(future)
            wr = weakref.ref(future)
            del future
            gc.collect()
            assert wr() is None
    futures_list[0].set_result("test")
    for future in bulletin.as_completed(futures_list):
        futures_list.remove(future)
        wr = weakref.ref(future)
        del future
        gc.collect()
        assert wr() is None
        if futures_list:
            futures_list[0].set_result("test")
    assert futures_list == []


def test_wait_and_as_completed_take_bulletin_futures():
    f1, f2 = pending(), successful()
    threading.Timer(0.1, f1._set_finished, (1,)).start()
    assert list(cf.as_completed([f1, f2], timeout=5))[0] is f2
    assert cf.wait([f1, f2], timeout=5).not_done == set()
