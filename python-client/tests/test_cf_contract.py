"""The concurrent.futures and Dask promises of bulletin.Executor and bulletin.Future that need
no cluster: a stand-in client records the calls the Executor sends (issue 27, items 2 and 3).

The cluster-side half is tests/e2e/test_cf_executor.py (CPython's executor tests, adapted).
"""

from __future__ import annotations

import concurrent.futures as cf
import gc
import inspect
import pickle
import threading
import traceback
import types
import weakref

import pytest

import bulletin
from bulletin._envelope import exception_from_envelope, make_envelope
from bulletin._future import Future


class FakeClient:
    """What an Executor uses of a Client: ``_submit`` returns a Future the test ends."""

    address = "fake:0"

    def __init__(self):
        self.sent: list[Future] = []
        self.cancelled: list[Future] = []
        self._calls = types.SimpleNamespace(closed=False)

    def _submit(self, fn, args, kwargs, options, key=None):
        future = Future(f"{fn.__name__}-{len(self.sent)}", fn.__name__, self.cancelled.append)
        future.sent_with = (args, kwargs)
        self.sent.append(future)
        return future

    def close(self):
        self._calls.closed = True


def work(*args, **kwargs):
    return args, kwargs


def div(x, y):
    return x / y


def remote_error(fn, *args) -> BaseException:
    """The exception ``fn(*args)`` raises, as it comes back from an executor."""
    try:
        fn(*args)
    except BaseException as caught:  # noqa: BLE001
        envelope = make_envelope(caught, caught.__traceback__.tb_next)  # as the executor does
    return exception_from_envelope(envelope, "div-1")


@pytest.fixture
def fake():
    return FakeClient()


# -- Executor(5) is max_workers=5 ------------------------------------------------------------


def test_the_first_positional_argument_is_max_workers(fake):
    parameters = list(inspect.signature(bulletin.Executor).parameters.values())
    assert parameters[0].name == "max_workers"
    assert parameters[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD for p in parameters[1:])
    ex = bulletin.Executor(5, client=fake)
    assert ex._throttle.limit == 5 and "max_workers=5" in repr(ex)
    futures = [ex.submit(work, i) for i in range(7)]
    assert len(fake.sent) == 5  # five on the cluster, two waiting here
    for f in fake.sent[:5]:
        f._set_finished(None)
    assert len(fake.sent) == 7 and all(f.done() for f in futures[:5])


def test_a_client_given_by_position_says_to_name_it(fake):
    with pytest.raises(TypeError, match=r"max_workers.*client=client"):
        bulletin.Executor(fake)
    with pytest.raises(TypeError, match="max_workers must be an int"):
        bulletin.Executor("5", client=fake)
    for number in (0, -1, True):
        with pytest.raises(ValueError, match="max_workers must be greater than 0"):
            bulletin.Executor(number, client=fake)


# -- submit after shutdown -------------------------------------------------------------------


@pytest.mark.parametrize("max_workers", [None, 5])
def test_submit_after_shutdown_raises_from_submit(fake, max_workers):
    ex = bulletin.Executor(max_workers, client=fake)
    ex.shutdown()
    with pytest.raises(RuntimeError, match="^cannot schedule new futures after shutdown"):
        ex.submit(work, 1)
    assert fake.sent == []


@pytest.mark.parametrize("max_workers", [None, 5])
def test_submit_once_the_client_is_closed_raises_from_submit(fake, max_workers):
    ex = bulletin.Executor(max_workers, client=fake)
    fake.close()
    with pytest.raises(RuntimeError, match="cannot schedule new futures after shutdown.*Client"):
        ex.submit(work, 1)


# -- pickling errors are PicklingError ------------------------------------------------------


def test_serialization_errors_are_pickling_errors():
    for cls in (bulletin.SerializationError, bulletin.ResultSerializationError):
        assert issubclass(cls, pickle.PicklingError) and issubclass(cls, bulletin.BulletinError)
    assert issubclass(bulletin.SerializationError, TypeError)  # its other base stays
    from bulletin._serialize import dumps_args
    with pytest.raises(pickle.PicklingError, match="argument 1"):
        dumps_args((threading.Lock(),), {})
    error = bulletin.ResultSerializationError("the function returned a lock")
    assert str(pickle.loads(pickle.dumps(error))) == str(error)  # travels from the executor


# -- the remote traceback in __cause__, as the process pool's ------------------------------


def test_the_remote_traceback_is_the_cause_too():
    future = Future("div-1", "div", None)
    future._set_error(remote_error(div, 1, 0))
    with pytest.raises(ZeroDivisionError) as info:
        future.result()
    error = info.value
    assert isinstance(error.__cause__, bulletin.RemoteTraceback)
    assert "x / y" in str(error.__cause__) and "return x / y" in error.__cause__.tb
    assert "ZeroDivisionError" in error.__cause__.tb
    # Still there once a framework dropped the traceback (unittest's assertRaises does).
    error.__traceback__ = None
    assert "x / y" in str(error.__cause__)
    # The frames are still the exception's own too, below the caller's.
    assert traceback.extract_tb(future.traceback())[-1].line == "return x / y"
    printed = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    assert "RemoteTraceback" in printed and "return x / y" in printed


def lookup(d):
    try:
        return d["missing"]
    except KeyError as error:
        raise RuntimeError("lookup failed") from error


def test_what_a_remote_exception_was_raised_from_stays_in_the_cause():
    future = Future("lookup-1", "lookup", None)
    future._set_error(remote_error(lookup, {}))
    cause = future.exception().__cause__
    assert isinstance(cause, bulletin.RemoteTraceback)
    assert "KeyError: 'missing'" in str(cause) and "RuntimeError: lookup failed" in str(cause)


def test_errors_of_bulletin_itself_get_no_remote_cause():
    future = Future("k-1", "k", None)
    future._set_error(bulletin.WorkerDiedError("the executor died"))
    assert future.exception().__cause__ is None


# -- Future.type, Future.client, repr -------------------------------------------------------


def test_type_is_the_results_once_known():
    future = Future("inc-1", "inc", None)
    assert future.type is None and "type=" not in repr(future)
    future._set_finished(3)
    assert future.type is int
    assert repr(future) == "<bulletin.Future inc-1 status=finished type=int>"
    assert "<td" in future._repr_html_() and ">int<" in future._repr_html_()
    failed = Future("div-1", "div", None)
    failed._set_error(ZeroDivisionError())
    assert failed.type is None and "type=" not in repr(failed)
    cancelled = Future("c-1", "c", lambda f: None)
    cancelled.cancel()
    assert cancelled.type is None


def test_type_of_a_result_still_in_the_store_is_known_once_fetched():
    future = Future("big-1", "big", None)
    future._set_finished_remote("oid", 10, lambda oid, size: [1, 2], lambda oid: None)
    assert future.type is None  # the runtime does not say; fetching it would move its bytes
    assert future.result() == [1, 2] and future.type is list


def test_client_is_the_client_that_sent_the_call():
    from bulletin import _client

    class Submitter:
        def cancel(self, future):
            pass

    client = types.SimpleNamespace(_submitter=Submitter())
    holder = types.new_class("Holder")()
    holder.__dict__.update(vars(client))  # weak-referenceable, for _live_clients
    _client._live_clients.add(holder)
    try:
        assert Future("k-1", "k", holder._submitter.cancel).client is holder
    finally:
        _client._live_clients.discard(holder)
    assert Future("k-2", "k", None).client is None


# -- with max_workers, submit returns a bulletin.Future -------------------------------------


def test_a_waiting_call_is_a_bulletin_future_that_becomes_the_calls(fake):
    ex = bulletin.Executor(1, client=fake)
    first = ex.submit(work, 1)
    second = ex.submit(work, 2, keyword=3)
    assert isinstance(second, bulletin.Future) and isinstance(first, bulletin.Future)
    assert second.status == "queued" and not second.running() and second.attempts == 0
    info = second.wait_info
    assert info.code == "MAX_WORKERS" and info.position == 1 and "max_workers=1" in info.reason
    assert second.key.startswith("work-waiting-") and second.client is fake
    assert second.timings == {} and second.output == ""
    sent = fake.sent[0]
    sent._set_status("running")
    sent._add_output("stdout", b"hello\n")
    assert first.running() and first.status == "running" and first.key == sent.key
    assert first.output == "hello\n" and first.wait_info is None
    sent._set_finished(41)
    assert first.result() == 41 and first.type is int and first.status == "finished"
    assert "type=int" in repr(first)
    assert len(fake.sent) == 2 and fake.sent[1].sent_with == ((2,), {"keyword": 3})
    assert second.key == fake.sent[1].key and second.wait_info is None
    fake.sent[1]._set_error(remote_error(div, 1, 0))
    with pytest.raises(ZeroDivisionError) as info:
        second.result()
    assert traceback.extract_tb(info.value.__traceback__)[-1].line == "return x / y"
    assert "x / y" in str(info.value.__cause__)
    assert traceback.extract_tb(second.traceback())[-1].name == "div"


def test_a_waiting_call_cancelled_is_never_sent(fake):
    ex = bulletin.Executor(1, client=fake)
    first = ex.submit(work, 1)
    second = ex.submit(work, 2)
    third = ex.submit(work, 3)
    assert third.wait_info.position == 2
    assert second.cancel() and second.cancelled() and second.status == "cancelled"
    assert cf.wait([second], timeout=0).done == {second}
    assert third.wait_info.position == 1
    fake.sent[0]._set_finished(1)
    assert [f.sent_with[0] for f in fake.sent] == [(1,), (3,)]
    assert third.cancel()  # sent: cancelled on the cluster
    assert fake.cancelled == [fake.sent[1]] and third.cancelled()
    assert first.result() == 1 and not first.cancel()


def test_a_sent_call_cancelled_on_the_cluster_frees_its_turn(fake):
    ex = bulletin.Executor(1, client=fake)
    first, second = ex.submit(work, 1), ex.submit(work, 2)
    fake.sent[0]._set_cancelled()  # e.g. cancelled by client.cancel or the runtime
    assert first.cancelled() and len(fake.sent) == 2
    with pytest.raises(cf.CancelledError):
        first.result()
    fake.sent[1]._set_finished(2)
    assert second.result() == 2


def test_a_call_that_cannot_be_sent_fails_its_future(fake):
    def refuse(*_):
        raise bulletin.SerializationError("argument 1 (a lock) cannot be pickled")

    fake._submit = refuse
    ex = bulletin.Executor(1, client=fake)
    future = ex.submit(work, threading.Lock())
    with pytest.raises(pickle.PicklingError):
        future.result(timeout=1)
    with pytest.raises(bulletin.BulletinError, match="submit it again"):
        future.retry()


def test_shutdown_cancel_futures_cancels_the_waiting_calls(fake):
    ex = bulletin.Executor(1, client=fake)
    futures = [ex.submit(work, i) for i in range(4)]
    fake.sent[0]._set_status("running")  # a running call is waited for, not cancelled
    done = threading.Timer(0.2, lambda: fake.sent[0]._set_finished(0))
    done.start()
    ex.shutdown(wait=True, cancel_futures=True)
    done.join()
    assert futures[0].result() == 0 and all(f.cancelled() for f in futures[1:])
    assert len(fake.sent) == 1


def test_a_waiting_calls_arguments_are_let_go_once_it_is_sent(fake):
    class Big:
        pass

    ex = bulletin.Executor(1, client=fake)
    ex.submit(work, 1)
    big = Big()
    ref = weakref.ref(big)
    second = ex.submit(work, big)
    del big
    fake.sent[0]._set_finished(1)
    fake.sent[1].sent_with = None  # the call (here the fake) let them go
    fake.sent[1]._set_finished(2)
    gc.collect()
    assert ref() is None and second.result() == 2


def test_retry_of_a_failed_call_runs_it_again_under_the_same_future(fake):
    ex = bulletin.Executor(1, client=fake)
    future = ex.submit(work, 1)
    call = fake.sent[0]
    resent = []

    def resend(f, retries_left=None):
        resent.append(f)
        f._reopen()

    call._resend = resend
    call._set_error(ValueError("once"))
    assert future.status == "error"
    future.retry()
    assert resent == [call] and not future.done() and future.status == "queued"
    call._set_finished(5)
    assert future.result() == 5 and future.status == "finished"


# -- as_completed: the standard's timeout message -----------------------------------------


def test_as_completed_times_out_with_the_standards_message():
    pending, finished = cf.Future(), cf.Future()
    finished.set_result(1)
    with pytest.raises(cf.TimeoutError) as info:
        list(bulletin.as_completed([pending, finished, cf.Future()], timeout=0))
    assert str(info.value) == "2 (of 3) futures unfinished"


# -- a negative timeout is no wait, as the standard's (Executor.map passes one) -------------


def test_a_negative_timeout_is_no_wait():
    future = Future("k-1", "k", None)
    with pytest.raises(cf.TimeoutError):
        future.result(timeout=-0.005)
    with pytest.raises(cf.TimeoutError):
        future.exception(timeout=-1)
    assert bulletin.wait([future], timeout=-1).not_done == {future}
    with pytest.raises(cf.TimeoutError):
        next(iter(bulletin.as_completed([future], timeout=-1)))
    with pytest.raises(bulletin.InvalidArgumentError):
        future.result(timeout="-1 s")  # a duration string stays a duration >= 0


def test_map_with_a_spent_timeout_cancels_the_rest(fake):
    ex = bulletin.Executor(1, client=fake)
    results = ex.map(work, [1, 2, 3], timeout=0)
    with pytest.raises(cf.TimeoutError):
        next(results)
    results.close()
    # Every call is cancelled: the one waited for on the cluster, the others before they
    # ran (the second may be sent as the first's turn ends, and is cancelled there).
    assert len(fake.sent) < 3 and fake.cancelled == fake.sent


# -- differences kept (docs/from-dask.md, "Coming from concurrent.futures") -----------------


def test_without_max_workers_every_call_goes_to_the_cluster_differs(fake):
    # The standard's default is a number of workers; bulletin's leaves it to the cluster.
    ex = bulletin.Executor(client=fake)
    assert ex._throttle is None
    [ex.submit(work, i) for i in range(50)]
    assert len(fake.sent) == 50


def test_the_pools_own_arguments_are_refused_differs(fake):
    for name, value in (("initializer", print), ("mp_context", object()),
                        ("max_tasks_per_child", 1), ("thread_name_prefix", "pool")):
        with pytest.raises(bulletin.InvalidArgumentError, match=f"unknown option '{name}'"):
            bulletin.Executor(2, client=fake, **{name: value})


def test_shutdown_cancel_futures_keeps_the_calls_sent_differs(fake):
    # With max_workers, the calls sent are its workers' (not cancelled), those waiting here
    # are; without, every call the cluster has not started is cancelled.
    throttled = bulletin.Executor(1, client=fake)
    sent, waiting = throttled.submit(work, 1), throttled.submit(work, 2)
    throttled.shutdown(wait=False, cancel_futures=True)
    assert not sent.cancelled() and waiting.cancelled()
    other = FakeClient()
    plain = bulletin.Executor(client=other)
    queued, running = plain.submit(work, 1), plain.submit(work, 2)
    running._set_status("running")
    plain.shutdown(wait=False, cancel_futures=True)
    assert queued.cancelled() and not running.cancelled()


def test_a_remote_error_has_the_remote_traceback_as_its_cause_too():
    envelope = {"type": "torch.cuda.OutOfMemoryError", "message": "CUDA out of memory",
                "traceback": 'Traceback ...\n  File "train.py", line 3, in step\n    y = x / y\n'
                             "torch.cuda.OutOfMemoryError: CUDA out of memory\n",
                "exception": None}
    error = exception_from_envelope(envelope)
    assert isinstance(error, bulletin.RemoteError) and "CUDA out of memory" in str(error)
    assert isinstance(error.__cause__, bulletin.RemoteTraceback)
    assert "x / y" in str(error.__cause__) and error.__cause__.tb == error.remote_traceback
    again = pickle.loads(pickle.dumps(error))
    assert "x / y" in str(again.__cause__)
    printed = "".join(traceback.format_exception(error))
    assert printed.count("y = x / y") == 1  # once, in the cause
