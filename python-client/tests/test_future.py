"""Future semantics, with a recording canceller standing in for the client's session."""

import concurrent.futures as cf
import queue
import threading

import pytest

import bulletin
from bulletin._future import Future


@pytest.fixture
def cancels():
    return []


@pytest.fixture
def future(cancels):
    return Future("train-1", "train", cancels.append)


def test_new_future_is_pending_and_queued(future):
    assert not future.done() and future.status == "queued" and future.key == "train-1"


def test_running_status_does_not_block_cancel(future, cancels):
    future._set_status("running")
    assert future.running()
    assert future.cancel() is True
    assert cancels == [future]
    assert future.cancelled() and future.status == "cancelled"
    with pytest.raises(cf.CancelledError):
        future.result(timeout=0)


def test_cancel_after_finishing_is_refused_and_sends_nothing(future, cancels):
    future._set_finished(42)
    assert future.cancel() is False and cancels == []
    assert future.result() == 42 and future.status == "finished"


def test_terminal_event_after_local_cancel_is_ignored(future):
    future.cancel()
    future._set_finished(1)
    future._set_error(RuntimeError("late"))
    assert future.cancelled() and future.status == "cancelled"


def test_runtime_confirmed_cancel_settles_the_future(future):
    future._set_cancelled()
    assert future.cancelled() and future._settled.is_set()


def test_cancel_succeeds_locally_when_the_session_is_gone(future):
    def broken(key):
        raise bulletin.RuntimeUnreachableError("gone")

    future._canceller = broken
    assert future.cancel() is True


def test_error_is_raised_by_result_and_returned_by_exception(future):
    future._set_error(bulletin.WorkerDiedError("oom"))
    assert future.status == "error"
    assert isinstance(future.exception(), bulletin.WorkerDiedError)
    with pytest.raises(bulletin.WorkerDiedError):
        future.result()


def test_concurrent_futures_wait_and_as_completed_accept_bulletin_futures(cancels):
    fs = [Future(f"t-{i}", "t", cancels.append) for i in range(3)]
    threading.Timer(0.05, fs[1]._set_finished, args=(1,)).start()
    done, not_done = bulletin.wait(fs, timeout=5, return_when=bulletin.FIRST_COMPLETED)
    assert done == {fs[1]}
    fs[0]._set_finished(0)
    fs[2]._set_error(ValueError())
    assert set(bulletin.as_completed(fs, timeout=5)) == set(fs)


def test_output_goes_to_the_blocking_caller_when_one_drains_it(future, capsys):
    future._sink = queue.SimpleQueue()
    future._add_output("stdout", "héllo\n".encode()[:2])  # a split UTF-8 character
    future._add_output("stdout", "héllo\n".encode()[2:])
    future._add_output("stderr", b"warn\n")
    assert capsys.readouterr().out == ""  # nothing printed from the dispatcher's side
    future._set_finished(None)
    future._drain()
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("héllo\n", "warn\n")
    assert future.output == "héllo\nwarn\n"


def test_a_line_of_one_stream_is_never_cut_by_the_other(future, capsys):
    # print("to stderr", file=sys.stderr) writes the text and its newline apart; stdout lines
    # arriving in between must not land inside it.
    future._add_output("stderr", b"to stderr")
    future._add_output("stdout", b"during 0\nduring ")
    future._add_output("stderr", b"\n")
    future._add_output("stdout", b"1\n")
    assert future.output.splitlines() == ["during 0", "to stderr", "during 1"]
    future._add_output("stdout", b"no newline yet")
    assert future.output.endswith("during 1\nno newline yet")


def test_output_of_a_future_nobody_blocks_on_is_printed_as_it_arrives(future, capsys):
    future._add_output("stdout", b"epoch 1\n")
    assert capsys.readouterr().out == "epoch 1\n"


def test_a_cancelled_future_counts_as_done_for_every_waiter(future):
    """concurrent.futures.wait() treated a cancel()ed future as pending for good: gather,
    wait and as_completed hung on it (dask: test_cancel, test_wait_first_completed)."""
    other = Future("train-2", "train", lambda key: None)
    assert future.cancel() is True
    done, not_done = bulletin.wait([future], timeout=1)
    assert done == {future} and not not_done
    assert list(bulletin.as_completed([future], timeout=1)) == [future]
    other._set_finished(1)
    assert set(bulletin.as_completed([future, other], timeout=1)) == {future, other}


def test_a_cancel_from_the_runtime_wakes_a_waiter_in_another_thread(future):
    waited = []
    thread = threading.Thread(target=lambda: waited.append(bulletin.wait([future], timeout=10)))
    thread.start()
    future._set_cancelled()
    thread.join(timeout=10)
    assert not thread.is_alive() and waited[0][0] == {future}


@pytest.mark.parametrize("end, expected", [
    (lambda f: f._set_finished(1), "finished"),
    (lambda f: f._set_error(ValueError("boom")), "error"),
    (lambda f: f.cancel(), "cancelled"),
    (lambda f: f._set_cancelled(), "cancelled"),
])
def test_done_callbacks_see_the_final_status(future, end, expected):
    seen = []
    future.add_done_callback(lambda f: seen.append((f.status, f.done())))
    end(future)
    assert seen == [(expected, True)]


def test_waits_take_durations_as_strings(future):
    with pytest.raises(cf.TimeoutError):
        future.result(timeout="10 ms")
    with pytest.raises(cf.TimeoutError):
        future.exception(timeout="0.01s")
    done, not_done = bulletin.wait([future], timeout="10 ms")
    assert not done and not_done == {future}
    with pytest.raises(bulletin.InvalidArgumentError, match="timeout='soon'"):
        future.result(timeout="soon")


def test_wait_takes_one_future_and_counts_refs_as_done(future):
    ref = bulletin.Ref("a" * 32, 8, "pickle", lambda oid: None)
    future._set_finished(1)
    assert bulletin.wait(future) == ({future}, set())
    assert bulletin.wait([future, ref]).done == {future, ref}


def test_wait_refuses_what_is_not_a_future_and_a_future_as_timeout(future):
    with pytest.raises(TypeError, match="takes futures"):
        bulletin.wait([1, 2])
    with pytest.raises(TypeError, match=r"wait\(\[x, y\]\)"):
        bulletin.wait(future, future)


def test_traceback_is_the_errors_and_none_without_one(future, cancels):
    try:
        raise ValueError("here")
    except ValueError as exc:
        error = exc
    future._set_error(error)
    assert future.traceback() is error.__traceback__ is not None
    other = Future("t-2", "t", cancels.append)
    other._set_finished(1)
    assert other.traceback() is None


def test_retry_runs_a_failed_call_again_under_the_same_future(future):
    sent = []
    future._resend = lambda f: (sent.append(f), f._reopen())
    future._set_finished(1)
    future.retry()  # finished: nothing to do
    assert sent == []
    other = Future("t-2", "t", lambda key: None)
    def resend(f):
        sent.append(f)
        f._reopen()
        f._task_id = "t-2-again"

    other._resend = resend
    seen = []
    other.add_done_callback(lambda f: seen.append(f.status))
    other._set_error(ValueError("flaky"))
    other.retry()
    assert sent == [other] and not other.done() and other.status == "queued"
    assert other.key == "t-2" and other._task_id == "t-2-again"
    other._set_finished(3)
    assert other.result(timeout=1) == 3 and seen == ["error", "finished"]


def test_a_second_cancel_finds_the_future_notified(caplog):
    # The user's cancel, then the runtime's confirmation: no "unexpected state" error.
    from bulletin._future import Future
    future = Future("k", "f", lambda f: None)
    assert future.cancel()
    assert future._cancel_locally()
    assert future.cancelled() and "unexpected state" not in caplog.text
