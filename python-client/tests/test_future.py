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
    assert cancels == ["train-1"]
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


def test_output_of_a_future_nobody_blocks_on_is_printed_as_it_arrives(future, capsys):
    future._add_output("stdout", b"epoch 1\n")
    assert capsys.readouterr().out == "epoch 1\n"
