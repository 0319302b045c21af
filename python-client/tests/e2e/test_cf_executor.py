"""bulletin.Executor against the standard library's own executor tests.

The cases of CPython 3.13's Lib/test/test_concurrent_futures that apply to an executor whose
work runs elsewhere, rewritten for pytest against a real cluster: executor.py (ExecutorTest),
test_wait.py (WaitTests), test_as_completed.py (AsCompletedTests), test_shutdown.py,
test_deadlock.py (how errors reach the caller) and the process pool's and thread pool's own
(test_traceback, test_map_submits_without_iteration, ...); plus bulletin's own: options,
max_workers, a refused option. The generic cases run as the standard runs them, with
``max_workers=5``, and with the cluster deciding (no max_workers). Where bulletin differs on
purpose a test pins what it does instead (named ``..._differs``), and docs/from-dask.md
("concurrent.futures") says why. FutureTests (no cluster needed) are tests/test_cf_future.py.
"""

from __future__ import annotations

import concurrent.futures as cf
import gc
import itertools
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
import traceback
import weakref

import pytest

import bulletin
from cluster_support import (CALL_SECONDS, cli_env, nothing_running, wait_for_file,
                             wait_until)

pytestmark = pytest.mark.timeout(180)


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


def sleep_and_raise(t):
    time.sleep(t)
    raise Exception("this is an exception")


def mark(path, *args):
    with open(path, "w") as f:
        f.write(repr(args))
    return path


@pytest.fixture(params=[None, 5], ids=["cluster-decides", "max_workers=5"])
def executor(client, request):
    ex = bulletin.Executor(request.param, client=client)
    yield ex
    ex.shutdown(wait=True)


def plain_future(state: str, result=None, exception=None) -> cf.Future:
    """CPython's create_future: a concurrent.futures.Future in a given state."""
    f = cf.Future()
    f._state, f._result, f._exception = state, result, exception
    return f


def cancelled():
    return plain_future(cf._base.CANCELLED)


def cancelled_and_notified():
    return plain_future(cf._base.CANCELLED_AND_NOTIFIED)


def failed():
    return plain_future(cf._base.FINISHED, exception=OSError())


def successful():
    return plain_future(cf._base.FINISHED, result=42)


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
            bulletin.Executor(max_workers=number, client=client)
        with pytest.raises(ValueError, match="max_workers must be greater than 0"):
            bulletin.Executor(number, client=client)


def test_free_reference(executor):
    for obj in executor.map(make_dummy_object, range(10)):
        ref = weakref.ref(obj)
        del obj
        gc.collect()
        assert ref() is None


# -- CPython shutdown tests -----------------------------------------------------------------

@pytest.mark.parametrize("max_workers", [None, 5])
def test_run_after_shutdown(client, max_workers):
    ex = bulletin.Executor(max_workers, client=client)
    ex.shutdown()
    with pytest.raises(RuntimeError, match="cannot schedule new futures after shutdown"):
        ex.submit(pow, 2, 5)


def test_context_manager_shutdown(client):
    with bulletin.Executor(client=client) as ex:
        future = ex.submit(nap, 0.5)
    # Leaving the block waited for the call (shutdown(wait=True)).
    assert future.done() and future.result() == 0.5


def test_shutdown_no_wait(client):
    ex = bulletin.Executor(client=client)
    future = ex.submit(nap, 1)
    started = time.monotonic()
    ex.shutdown(wait=False)
    assert not future.done() or time.monotonic() - started < 1
    assert future.result(timeout=30) == 1


def test_cancel_futures(client):
    # One CPU slot for this executor's calls at a time (max_workers=1): the first runs, the
    # rest wait; shutdown(cancel_futures=True) cancels those that have not started.
    ex = bulletin.Executor(1, client=client)
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
    ex = bulletin.Executor(client=client, cpus=2)
    futures = [ex.submit(nap, 1) for _ in range(4)]
    ex.shutdown(wait=True, cancel_futures=True)
    assert all(f.done() for f in futures)
    assert any(f.cancelled() for f in futures)
    assert all(f.result() == 1 for f in futures if not f.cancelled())


# -- bulletin's own -------------------------------------------------------------------------

def test_options_apply_to_every_call(client):
    with bulletin.Executor(client=client, gpus=1) as ex:
        # The simulated GPU is the cluster's only one: the call got it.
        assert ex.submit(gpu_count).result() != ""
    with bulletin.Executor(client=client) as ex:
        assert ex.submit(gpu_count).result() == ""


def test_a_wrong_option_fails_at_once(client):
    with pytest.raises(bulletin.InvalidArgumentError, match="gpus"):
        bulletin.Executor(client=client, gpus="two")


def test_max_workers_keeps_order_and_results(client):
    with bulletin.Executor(2, client=client) as ex:
        assert list(ex.map(mul, range(8), range(8))) == [i * i for i in range(8)]
        with pytest.raises(ZeroDivisionError):
            ex.submit(divmod, 1, 0).result()


def test_a_waiting_call_cancelled_is_done_at_once(client):
    with bulletin.Executor(1, client=client) as ex:
        first = ex.submit(nap, 1)
        second = ex.submit(nap, 1)
        assert second.cancel()
        done, _ = cf.wait([second], timeout=0)
        assert done == {second}
        assert first.result() == 1


# -- CPython WaitTests (test_wait.py) -------------------------------------------------------

def test_wait_20369(executor):
    future = executor.submit(time.sleep, 1.5)
    done, not_done = cf.wait([future, future], return_when=cf.ALL_COMPLETED)
    assert done == {future} and not_done == set()


def test_wait_first_completed(executor):
    future1 = executor.submit(mul, 21, 2)
    future2 = executor.submit(time.sleep, 1.5)
    cancelled_future = cancelled()
    done, not_done = cf.wait([cancelled_future, future1, future2],
                             return_when=cf.FIRST_COMPLETED)
    assert done == {future1} and not_done == {cancelled_future, future2}


def test_wait_first_completed_some_already_completed(executor):
    future1 = executor.submit(time.sleep, 1.5)
    already = {cancelled_and_notified(), successful()}
    finished, pending = cf.wait(already | {future1}, return_when=cf.FIRST_COMPLETED)
    assert finished == already and pending == {future1}


def test_wait_first_exception(executor):
    future1 = executor.submit(mul, 2, 21)
    future2 = executor.submit(sleep_and_raise, 1.5)
    future3 = executor.submit(time.sleep, 3)
    finished, pending = cf.wait([future1, future2, future3], return_when=cf.FIRST_EXCEPTION)
    assert finished == {future1, future2} and pending == {future3}
    # bulletin.wait keeps the contract
    assert bulletin.wait([future1, future2], return_when=cf.FIRST_EXCEPTION).done == {
        future1, future2}


def test_wait_first_exception_some_already_complete(executor):
    future1 = executor.submit(divmod, 21, 0)
    future2 = executor.submit(time.sleep, 1.5)
    ok, cancelled_future, notified = successful(), cancelled(), cancelled_and_notified()
    finished, pending = cf.wait([ok, cancelled_future, notified, future1, future2],
                                return_when=cf.FIRST_EXCEPTION)
    assert finished == {ok, notified, future1} and pending == {cancelled_future, future2}


def test_wait_first_exception_one_already_failed(executor):
    future1 = executor.submit(time.sleep, 2)
    error = failed()
    finished, pending = cf.wait([error, future1], return_when=cf.FIRST_EXCEPTION)
    assert finished == {error} and pending == {future1}


def test_wait_all_completed(executor):
    future1 = executor.submit(divmod, 2, 0)
    future2 = executor.submit(mul, 2, 21)
    already = {successful(), cancelled_and_notified(), failed()}
    finished, pending = cf.wait(already | {future1, future2}, return_when=cf.ALL_COMPLETED)
    assert finished == already | {future1, future2} and pending == set()


def test_wait_timeout(executor):
    future = executor.submit(time.sleep, 0.5)
    already = {cancelled_and_notified(), failed(), successful()}
    finished, pending = cf.wait(already | {future}, timeout=0.05,
                                return_when=cf.ALL_COMPLETED)
    assert finished == already and pending == {future}


# -- CPython AsCompletedTests (test_as_completed.py) ----------------------------------------

AS_COMPLETED = [cf.as_completed, bulletin.as_completed]


@pytest.mark.parametrize("as_completed", AS_COMPLETED, ids=["concurrent.futures", "bulletin"])
def test_as_completed_no_timeout(executor, as_completed):
    future1 = executor.submit(mul, 2, 21)
    future2 = executor.submit(mul, 7, 6)
    already = {cancelled_and_notified(), failed(), successful()}
    assert set(as_completed(already | {future1, future2})) == already | {future1, future2}


@pytest.mark.parametrize("as_completed", AS_COMPLETED, ids=["concurrent.futures", "bulletin"])
def test_as_completed_future_times_out(executor, as_completed):
    already = {cancelled_and_notified(), failed(), successful()}
    for timeout in (0, 0.1):
        completed = set()
        future = executor.submit(time.sleep, 1)
        with pytest.raises(cf.TimeoutError):
            for f in as_completed(already | {future}, timeout):
                completed.add(f)
        assert completed == already


def test_as_completed_duplicate_futures(executor):
    future1 = executor.submit(time.sleep, 2)
    assert len(list(cf.as_completed(itertools.repeat(future1, 3)))) == 1


def test_as_completed_yields_a_future_given_twice_twice_differs(executor):
    # bulletin.as_completed is Dask's: the same future added n times is yielded n times.
    future1 = executor.submit(time.sleep, 0.5)
    assert list(bulletin.as_completed(itertools.repeat(future1, 3))) == [future1] * 3


# -- CPython ExecutorShutdownTest (test_shutdown.py), the rest --------------------------------

def run_script(cluster, script: str, timeout: float = 90) -> subprocess.CompletedProcess:
    """Runs ``script`` in a fresh interpreter whose default client is the test cluster's."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)],
                          env=cli_env(cluster.home), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


SLEEP_AND_PRINT = """
    import sys, time
    import bulletin

    def sleep_and_print(t, msg):
        time.sleep(t)
        print(msg)
        sys.stdout.flush()
"""


@pytest.mark.parametrize("max_workers", [None, 5])
def test_interpreter_shutdown(cluster, client, max_workers):
    # The standard waits at exit for calls still pending, without shutdown(); so does bulletin.
    done = run_script(cluster, SLEEP_AND_PRINT + f"""
    t = bulletin.Executor({max_workers})
    t.submit(sleep_and_print, 1.0, "apple")
    """)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and done.stdout.strip() == "apple"


def test_interpreter_shutdown_queued_calls_run_too(cluster, client):
    # Calls waiting for their turn (max_workers) at exit are sent and waited for as well.
    done = run_script(cluster, SLEEP_AND_PRINT + """
    t = bulletin.Executor(1)
    for fruit in ("apple", "pear", "plum"):
        t.submit(sleep_and_print, 0.2, fruit)
    """)
    assert done.stderr == "" and done.stdout.split() == ["apple", "pear", "plum"]


def test_interpreter_exit_without_waiting_when_asked(cluster, client, tmp_path):
    # wait_at_exit=False (bulletin's opt-out): the program exits at once and its calls are
    # cancelled when the client disconnects; the one waiting for its turn is never sent.
    marker = tmp_path / "ran"
    started = time.monotonic()
    done = run_script(cluster, SLEEP_AND_PRINT + f"""
    t = bulletin.Executor(1, wait_at_exit=False)
    first = t.submit(sleep_and_print, 6.0, "apple")
    t.submit(open, {str(marker)!r}, "w")
    while first.status != "running":
        time.sleep(0.05)
    """)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 6 and "apple" not in done.stdout
    wait_until(lambda: nothing_running(client), timeout=CALL_SECONDS,
               what="the call of the exited program to be cancelled")
    assert not marker.exists()


def test_ctrl_c_while_waiting_at_exit_cancels_the_calls(cluster, client, tmp_path):
    marker = tmp_path / "ran"
    script = textwrap.dedent(f"""
    import sys, time
    import bulletin

    def late_mark(path):
        time.sleep(8)
        open(path, "w").close()

    t = bulletin.Executor()
    f = t.submit(late_mark, {str(marker)!r})
    while f.status != "running":
        time.sleep(0.05)
    print("waiting at exit", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], env=cli_env(cluster.home),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "waiting at exit"
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert err.startswith("bulletin: interrupted while waiting at exit") and "Traceback" not in err
    wait_until(lambda: nothing_running(client), timeout=CALL_SECONDS,
               what="the call of the interrupted program to be cancelled")
    time.sleep(1)
    assert not marker.exists()


def test_client_calls_are_not_waited_for_at_exit_differs(cluster, client):
    # Dask's API (client.submit) keeps Dask's behaviour: at exit the client disconnects and
    # the runtime cancels its calls; only an Executor waits.
    started = time.monotonic()
    done = run_script(cluster, SLEEP_AND_PRINT + """
    client = bulletin.Client()
    client.submit(sleep_and_print, 8.0, "apple")
    """)
    assert done.returncode == 0, done.stderr
    assert "apple" not in done.stdout and time.monotonic() - started < 8
    wait_until(lambda: nothing_running(client), timeout=CALL_SECONDS,
               what="the call of the exited program to be cancelled")


@pytest.mark.parametrize("max_workers", [None, 5])
def test_submit_after_interpreter_shutdown(cluster, client, max_workers):
    done = run_script(cluster, f"""
    import atexit

    @atexit.register
    def run_last():
        try:
            t.submit(id, None)
        except RuntimeError:
            print("runtime-error")
            raise

    import bulletin
    t = bulletin.Executor({max_workers})
    t.submit(id, 42).result()
    """)
    assert "RuntimeError: cannot schedule new futures" in done.stderr
    assert done.stdout.strip() == "runtime-error"


def test_hang_issue12364(client):
    with bulletin.Executor(5, client=client) as ex:
        futures = [ex.submit(time.sleep, 0.1) for _ in range(20)]
        ex.shutdown()
        for f in futures:
            f.result()


def test_hang_gh83386(cluster, client):
    # shutdown(wait=False) does not hang at exit with calls running, and they end first.
    done = run_script(cluster, SLEEP_AND_PRINT + """
    t = bulletin.Executor(max_workers=3)
    t.submit(sleep_and_print, 1.0, "apple")
    t.shutdown(wait=False)
    """)
    assert done.stderr == "" and done.stdout.strip() == "apple"


def test_hang_gh94440(client):
    # shutdown(wait=True) does not hang when a call was submitted and cancelled just before.
    executor = bulletin.Executor(max_workers=1, client=client)
    executor.submit(int).result(timeout=CALL_SECONDS)
    started = time.monotonic()
    executor.submit(int).cancel()
    executor.shutdown(wait=True)
    assert time.monotonic() - started < 5


def test_del_shutdown(client):
    executor = bulletin.Executor(max_workers=5, client=client)
    results = executor.map(abs, range(-5, 5))
    del executor
    gc.collect()
    assert list(results) == [abs(v) for v in range(-5, 5)]


def test_cancel_futures_wait_false(cluster, client):
    done = run_script(cluster, SLEEP_AND_PRINT + """
    t = bulletin.Executor()
    t.submit(sleep_and_print, .1, "apple")
    t.shutdown(wait=False, cancel_futures=True)
    """)
    assert done.stderr == "" and done.stdout.strip() in ("apple", "")


def test_map_submits_without_iteration(executor, tmp_path):
    # ThreadPoolExecutorTest.test_map_submits_without_iteration (issue 11777)
    paths = [str(tmp_path / str(i)) for i in range(6)]
    executor.map(mark, paths)
    executor.shutdown(wait=True)
    assert all(os.path.exists(p) for p in paths)


def log_n_wait(gate, log_dir, ident):
    mark(os.path.join(log_dir, f"{ident}-started"))
    wait_for_file(gate, timeout=CALL_SECONDS)


def test_executor_map_current_future_cancel(client, tmp_path):
    # ThreadPoolExecutorTest.test_executor_map_current_future_cancel: a map that times out
    # cancels the call it waited for and the ones after it; none of them runs.
    gate = str(tmp_path / "gate")
    with bulletin.Executor(max_workers=1, client=client) as pool:
        first = pool.submit(log_n_wait, gate, str(tmp_path), "first")
        try:
            gen = pool.map(log_n_wait, [gate] * 2, [str(tmp_path)] * 2, ["second", "third"],
                           timeout=0)
            with pytest.raises(cf.TimeoutError):
                next(gen)
            gen.close()
        finally:
            open(gate, "w").close()
        first.result(timeout=CALL_SECONDS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first-started", "gate"]


# -- how errors reach the caller (CPython's test_deadlock.py, test_process_pool.py) ---------

def _crash(delay=None):
    if delay:
        time.sleep(delay)
    import faulthandler
    faulthandler.disable()
    faulthandler._sigsegv()


def _exit():
    sys.exit(1)


def _raise_error(error_type):
    raise error_type()


def _return_instance(cls):
    return cls()


class CrashAtPickle:
    def __reduce__(self):
        _crash()


class CrashAtUnpickle:
    def __reduce__(self):
        return _crash, ()


class ExitAtPickle:
    def __reduce__(self):
        _exit()


class ExitAtUnpickle:
    def __reduce__(self):
        return _exit, ()


class ErrorAtPickle:
    def __reduce__(self):
        raise pickle.PicklingError("Error in pickle")


class ErrorAtUnpickle:
    def __reduce__(self):
        return _raise_error, (pickle.UnpicklingError,)


def check_error(executor, error, fn, *args):
    """CPython's _check_crash: the call fails with ``error`` (from submit or from result)
    and the executor keeps serving."""
    with pytest.raises(error) as info:
        executor.submit(fn, *args).result(timeout=CALL_SECONDS)
    assert executor.submit(mul, 6, 7).result(timeout=CALL_SECONDS) == 42
    return info.value


# The cases where bulletin raises what the standard raises.

def test_error_at_task_pickle(executor):
    check_error(executor, pickle.PicklingError, id, ErrorAtPickle())


def test_error_at_task_pickle_is_raised_by_submit_differs(client):
    # The arguments are pickled in submit: without max_workers the error comes from submit,
    # before anything was sent; the standard's comes from result().
    with bulletin.Executor(client=client) as ex:
        with pytest.raises(bulletin.SerializationError, match="argument 1"):
            ex.submit(id, ErrorAtPickle())


def test_error_during_func_exec_on_worker(executor):
    check_error(executor, RuntimeError, _raise_error, RuntimeError)


def test_error_during_result_pickle_on_worker(executor):
    error = check_error(executor, pickle.PicklingError, _return_instance, ErrorAtPickle)
    assert isinstance(error, bulletin.ResultSerializationError)


def test_shutdown_deadlock_pickle(client):
    with bulletin.Executor(max_workers=2, client=client) as executor:
        executor.submit(id, 42).result(timeout=CALL_SECONDS)
        f = executor.submit(id, ErrorAtPickle())
        executor.shutdown(wait=False)
        with pytest.raises(pickle.PicklingError):
            f.result(timeout=CALL_SECONDS)


# The cases where the standard's pool breaks (BrokenProcessPool) or a remote exit ends the
# caller: bulletin fails that one call with its own error and keeps serving.

@pytest.mark.parametrize("fn, args, error", [
    (id, (ExitAtUnpickle(),), bulletin.BulletinError),  # the standard: BrokenProcessPool
    (id, (ErrorAtUnpickle(),), bulletin.BulletinError),  # BrokenProcessPool
    (id, (CrashAtUnpickle(),), bulletin.WorkerDiedError),  # BrokenProcessPool
    (_crash, (), bulletin.WorkerDiedError),  # BrokenProcessPool
    (_exit, (), bulletin.RemoteError),  # SystemExit
    (_return_instance, (CrashAtPickle,), bulletin.WorkerDiedError),  # BrokenProcessPool
    (_return_instance, (ExitAtPickle,), bulletin.ResultSerializationError),  # SystemExit
    (_return_instance, (ErrorAtUnpickle,), bulletin.BulletinError),  # BrokenProcessPool
    (_return_instance, (ExitAtUnpickle,), bulletin.BulletinError),  # BrokenProcessPool
], ids=["exit_at_task_unpickle", "error_at_task_unpickle", "crash_at_task_unpickle",
        "crash_during_func_exec_on_worker", "exit_during_func_exec_on_worker",
        "crash_during_result_pickle_on_worker", "exit_during_result_pickle_on_worker",
        "error_during_result_unpickle_in_result_handler",
        "exit_during_result_unpickle_in_result_handler"])
def test_a_failing_call_fails_alone_differs(client, fn, args, error):
    with bulletin.Executor(2, client=client) as executor:
        check_error(executor, error, fn, *args)


def test_shutdown_deadlock_differs(client):
    # A call whose executor crashes after shutdown(): WorkerDiedError (BrokenProcessPool).
    with bulletin.Executor(max_workers=2, client=client) as executor:
        f = executor.submit(_crash, delay=.1)
        executor.shutdown(wait=True)
        with pytest.raises(bulletin.WorkerDiedError):
            f.result()


def _test_traceback():
    raise RuntimeError(123)  # some comment


def test_traceback(executor, capsys):
    # ProcessPoolExecutorTest.test_traceback: the remote traceback is the exception's cause
    # (bulletin's is in its __traceback__ too, below the caller's frames).
    future = executor.submit(_test_traceback)
    with pytest.raises(Exception) as cm:
        future.result(timeout=CALL_SECONDS)
    exc = cm.value
    assert type(exc) is RuntimeError and exc.args == (123,)
    assert isinstance(exc.__cause__, bulletin.RemoteTraceback)
    assert "raise RuntimeError(123)  # some comment" in exc.__cause__.tb
    assert traceback.extract_tb(exc.__traceback__)[-1].name == "_test_traceback"
    try:
        raise exc
    except RuntimeError:
        sys.excepthook(*sys.exc_info())
    assert "raise RuntimeError(123)  # some comment" in capsys.readouterr().err


def test_traceback_survives_a_dropped_traceback(executor):
    # unittest's assertRaises clears __traceback__: the cause still has the remote text.
    future = executor.submit(divmod, 1, 0)
    error = future.exception(timeout=CALL_SECONDS)
    error.__traceback__ = None
    future2 = executor.submit(_test_traceback)
    error2 = future2.exception(timeout=CALL_SECONDS)
    error2.__traceback__ = None
    assert "# some comment" in str(error2.__cause__)


def test_an_error_raised_before_any_remote_frame_has_no_remote_cause_differs(executor):
    # The process pool's cause always holds its worker's frame; bulletin drops its own frames,
    # so a builtin called directly leaves no remote frame to show: no cause.
    error = executor.submit(int, "x").exception(timeout=CALL_SECONDS)
    assert isinstance(error, ValueError) and error.__cause__ is None


# -- Futures of an Executor ------------------------------------------------------------------

def test_submit_returns_a_bulletin_future(executor):
    future = executor.submit(sleep_and_print_remote, 0.2, "hello")
    assert isinstance(future, bulletin.Future)
    assert future.result(timeout=CALL_SECONDS) == "hello"
    assert future.output == "hello\n" and future.type is str and future.client is not None
    assert {"queue", "run"} <= set(future.timings) and future.status == "finished"
    assert "type=str" in repr(future)


def sleep_and_print_remote(t, msg):
    time.sleep(t)
    print(msg)
    return msg


def test_a_call_waiting_for_its_turn_says_why(client, tmp_path):
    gate = str(tmp_path / "gate")
    with bulletin.Executor(1, client=client) as ex:
        first = ex.submit(wait_for_file, gate, CALL_SECONDS)
        second = ex.submit(mul, 6, 7)
        assert isinstance(second, bulletin.Future) and second.status == "queued"
        assert second.wait_info.code == "MAX_WORKERS" and second.wait_info.position == 1
        assert second.client is client
        open(gate, "w").close()
        assert first.result(timeout=CALL_SECONDS) is True
        assert second.result(timeout=CALL_SECONDS) == 42 and second.type is int
        assert second.wait_info is None and second.attempts == 1
        assert second.key in repr(second) and "waiting" not in second.key


def test_a_waiting_calls_future_passes_to_another_call(client):
    with bulletin.Executor(1, client=client) as ex:
        first = ex.submit(mul, 6, 7)
        second = ex.submit(mul, first, 2)
        assert second.result(timeout=CALL_SECONDS) == 84
        assert client.submit(mul, second, 0.5).result(timeout=CALL_SECONDS) == 42
