"""Dask distributed's own client and as_completed tests, rewritten against a real bulletin cluster.

Each test names the Dask test it comes from (distributed/tests/test_client.py and
test_as_completed.py); where bulletin differs on purpose, docs/from-dask.md says how and why.
Tests without such a name check promises of bulletin's own that the Dask-shaped API makes.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures as cf
import dataclasses
import os
import pickle
import sys
import time
import traceback
from operator import add

import numpy as np

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


def test_a_function_whose_first_call_is_cancelled_unsent_still_runs_later(client, monkeypatch):
    # The first call of a function carries its bytes; cancelled before it is sent, the next
    # call of that function must carry them instead.
    real_submit = client._conn.stub.Submit

    def slow_submit(*args, **kwargs):
        time.sleep(0.5)
        return real_submit(*args, **kwargs)

    def never_sent_before(x):
        return x * 3

    monkeypatch.setattr(client._conn.stub, "Submit", slow_submit, raising=False)
    client.submit(inc, 1)  # its Submit is in flight while the next call queues
    time.sleep(0.1)
    first = client.submit(never_sent_before, 1)
    assert first.cancel()
    monkeypatch.undo()
    assert client.submit(never_sent_before, 2).result(timeout=CALL_SECONDS) == 6


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


# -- keyword arguments ----------------------------------------------------------------------


def fetch(url, timeout=None):
    """Shaped like requests.get: its own timeout keyword."""
    time.sleep(0.3)
    return url, timeout


def keywords(**kwargs):
    return kwargs


def add_y(x, y=10, **ignored):
    return x + y


def test_a_functions_own_keywords_reach_it_even_when_they_name_an_option(client):
    # Was: submit took timeout= (and gpus, memory, ...) as the call's options, silently.
    assert client.submit(fetch, "u", timeout=0.1).result(timeout=CALL_SECONDS) == ("u", 0.1)
    given = dict(gpus=64, cpus=99, memory="1TB", qos="nonexistent", priority=7, credits=1e9,
                 retries=3, timeout=0.01, key="k", pure=False)
    assert client.submit(keywords, **given).result(timeout=CALL_SECONDS) == given
    assert client.gather(client.map(add_y, [1], gpus=64, y=1)) == [2]
    assert client.gather(client.map(fetch, ["u"], timeout=0.1)) == [("u", 0.1)]
    remote = bulletin.cpu(fetch)
    assert remote.submit("u", timeout=0.1).result(timeout=CALL_SECONDS) == ("u", 0.1)


def test_option_names_the_function_cannot_take_are_the_calls_options(client):
    with pytest.raises(bulletin.InfeasibleError, match="64 GPUs"):
        client.submit(inc, 1, gpus=64).result(timeout=CALL_SECONDS)
    with pytest.raises(bulletin.InfeasibleError, match="64 GPUs"):
        client.submit(inc, 1, resources={"GPU": 64}).result(timeout=CALL_SECONDS)
    with pytest.raises(bulletin.CallTimeoutError):
        client.submit(slow_mark, "/dev/null", 5, timeout="500 ms").result(timeout=CALL_SECONDS)
    # Both at once: the options object sets the call's timeout, the keyword is fetch's.
    longer = bulletin.cpu(fetch).options(timeout="1m")
    assert client.submit(longer, "u", timeout=0.1).result(timeout=CALL_SECONDS) == ("u", 0.1)


def test_option_names_for_a_builtin_are_refused_saying_how(client):
    with pytest.raises(bulletin.InvalidArgumentError, match=r"bulletin.cpu\(int, qos=...\)"):
        client.submit(int, "3", qos="batch")
    assert client.submit(bulletin.cpu(int, qos="batch"), "3").result(timeout=CALL_SECONDS) == 3


def test_map_passes_keywords_to_every_call(client):
    # dask: test_map (the keyword part), test_map_on_futures_with_kwargs
    assert client.gather(client.map(add_y, range(5), y=5)) == list(range(5, 10))
    y = client.submit(add_y, 10)
    assert client.gather(client.map(add_y, range(5), y=y)) == list(range(20, 25))
    futures = client.map(inc, range(10))
    assert client.gather(client.map(add_y, futures, y=20)) == [i + 1 + 20 for i in range(10)]


def test_map_key_names_the_calls(client):
    # dask: test_map_keynames (keys stay unique here: a key starts the call's id)
    futures = client.map(inc, range(4), key="INC")
    assert all(f.key.startswith("INC-") for f in futures) and len({f.key for f in futures}) == 4
    named = client.map(inc, range(4), key=["inc-1", "inc-2", "inc-3", "inc-4"])
    assert [f.key.rsplit("-", 1)[0] for f in named] == ["inc-1", "inc-2", "inc-3", "inc-4"]
    assert client.gather(futures + named) == [1, 2, 3, 4] * 2


def test_map_of_nothing_is_nothing(client):
    # dask: test_map_empty
    assert client.gather(client.map(inc, [], pure=False)) == []


def test_map_zips_to_the_shortest(client):
    # dask: test_map_different_lengths
    assert len(client.map(add, [1, 2], [1, 2, 3])) == 2


# -- Futures and Refs inside the arguments --------------------------------------------------

BIG = 1 << 18  # float64s: 2 MiB, above the inline limit: such a result stays in the store


def ones(n):
    return np.ones(n)


def identity(x):
    return x


def shape_of(value):
    """The structure of ``value`` with each array replaced by its sum."""
    if isinstance(value, np.ndarray):
        return float(value.sum())
    if isinstance(value, dict):
        return {k: shape_of(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(shape_of(v) for v in value)
    return value


Pair = collections.namedtuple("Pair", "left right")


@dataclasses.dataclass
class Job:
    data: object
    scale: float = 1.0


def scaled(job):
    return float(job.data.sum() * job.scale)


def test_a_future_inside_a_list_is_resolved_the_usual_reduce_step(client):
    # dask: test_map (submit(sum, L2)); was: "cannot pickle '_thread.RLock' object"
    futures = client.map(inc, range(5))
    assert client.submit(sum, futures).result(timeout=CALL_SECONDS) == sum(range(1, 6))


def test_futures_in_dicts_tuples_sets_namedtuples_and_dataclasses_are_resolved(client):
    # dask: test_resolves_future_in_dict, test_resolves_future_in_namedtuple
    one, two = client.submit(identity, 1), client.submit(identity, 2)
    assert client.submit(identity, {"x": one, "y": 2}).result(timeout=CALL_SECONDS) == \
        {"x": 1, "y": 2}
    nested = {"a": [one, (two, {"deep": [one]})], "s": {one, two}, "p": Pair(one, right=two)}
    assert client.submit(identity, nested).result(timeout=CALL_SECONDS) == \
        {"a": [1, (2, {"deep": [1]})], "s": {1, 2}, "p": Pair(1, 2)}
    big = client.submit(ones, BIG)
    assert client.submit(scaled, Job(big, scale=2.0)).result(timeout=CALL_SECONDS) == 2.0 * BIG


def test_nested_futures_still_running_make_the_call_wait(client, tmp_path):
    gate = str(tmp_path / "gate")
    x = client.submit(gated_inc, gate, 1)
    y = client.submit(identity, {"later": [x]})
    open(gate, "w").close()
    assert y.result(timeout=CALL_SECONDS) == {"later": [2]}


def test_nested_results_stay_on_the_cluster(client):
    first, second = client.submit(ones, BIG), client.submit(ones, BIG)
    assert client.submit(shape_of, {"pair": [first, second]}).result(timeout=CALL_SECONDS) == \
        {"pair": [float(BIG), float(BIG)]}
    assert first.remote_id is not None and second.remote_id is not None, \
        "a nested result came through the client"


@pytest.mark.parametrize("use_kwarg", [False, "simple", "future"])
def test_map_accepts_nested_futures(client, use_kwarg):
    # dask: test_map_accepts_nested_futures
    def reducer(futs, *, offset=0, **kwargs):
        return sum(futs) + offset

    f1, f2 = client.submit(identity, 10), client.submit(identity, 20)
    offset = None
    if use_kwarg == "simple":
        future = client.map(reducer, [[f1, f2]], foo=True)[0]
    elif use_kwarg == "future":
        offset = client.submit(identity, 1)
        future = client.map(reducer, [[f1, f2]], offset=offset)[0]
    else:
        future = client.map(reducer, [[f1, f2]])[0]
    assert future.result(timeout=CALL_SECONDS) == (31 if offset else 30)


def test_refs_inside_arguments_are_resolved(client):
    # dask: test_submit_list_kwargs, test_map_list_kwargs (with one scatter per element)
    refs = [client.scatter(i) for i in (1, 2, 3)]

    def total(i=0, L=None):
        return i + sum(L)

    assert client.submit(total, L=refs).result(timeout=CALL_SECONDS) == 6
    assert client.gather(client.map(total, range(3), L=refs)) == [6, 7, 8]
    assert client.submit(identity, {"r": (refs[0],)}).result(timeout=CALL_SECONDS) == {"r": (1,)}


def test_a_future_pickled_outside_a_call_says_how_to_pass_it(client):
    f = client.submit(inc, 1)
    with pytest.raises(TypeError, match="pass it in a call's arguments"):
        pickle.dumps([f])
    assert f.result(timeout=CALL_SECONDS) == 2


def test_map_batch_size_sends_at_most_that_many_calls_per_submit(client, monkeypatch):
    # dask: test_map_batch_size
    real_submit, sizes = client._conn.stub.Submit, []

    def recording_submit(request, **kwargs):
        sizes.append(len(request.tasks))
        return real_submit(request, **kwargs)

    monkeypatch.setattr(client._conn.stub, "Submit", recording_submit, raising=False)
    # Every call to the runtime: a lease would carry most of a burst (docs/internals.md).
    monkeypatch.setattr(client._submitter, "leases", None)
    assert client.gather(client.map(inc, range(100), batch_size=10)) == list(range(1, 101))
    assert client.gather(client.map(add, range(100), range(100), batch_size=10)) == \
        list(range(0, 200, 2))
    assert client.gather(client.map(add, range(100, 200), range(10), batch_size=2)) == \
        list(range(100, 120, 2))
    assert sum(sizes) == 210 and max(sizes) <= 10


# -- gather, scatter, cancel, wait, retry ---------------------------------------------------


def throws(x):
    raise RuntimeError("hello!")


def fails_until(path):
    """Fails until the file ``path`` exists (the test's way to make a call flaky)."""
    if not os.path.exists(path):
        raise KeyError(f"{path} is not there yet")
    return 100


def test_gather_takes_one_future_lists_and_nested_dicts(client):
    # dask: test_gather
    x = client.submit(inc, 10)
    y = client.submit(inc, x)
    assert client.gather(x) == 11
    assert client.gather([x]) == [11]
    assert client.gather({"x": x, "y": [y]}) == {"x": 11, "y": [12]}
    assert client.gather(({"deep": (x, {y})}, "not a future", 3)) == \
        ({"deep": (11, {12})}, "not a future", 3)


def test_gather_raises_the_first_error_or_skips_failures(client):
    # dask: test_gather_sync, test_gather_strict
    x = client.submit(inc, 1)
    y = client.submit(div, 1, 0)
    with pytest.raises(ZeroDivisionError):
        client.gather([x, y])
    [xx] = client.gather([x, y], errors="skip")
    assert xx == 2
    assert client.gather({"x": x, "y": y}, errors="skip") == {"x": 2}
    with pytest.raises(bulletin.InvalidArgumentError, match="errors='ignore'"):
        client.gather([x], errors="ignore")


def test_gather_skip_leaves_out_failed_and_cancelled_calls(client, tmp_path):
    # dask: test_gather_skip
    x = client.submit(div, 1, 0, priority=10)
    y = client.submit(gated_inc, str(tmp_path / "gate"), 1)
    z = client.submit(gated_inc, "/nonexistent-gate", 1)
    z.cancel()
    open(tmp_path / "gate", "w").close()
    assert client.gather([x, y, z], errors="skip") == [2]


def test_gather_raises_each_calls_own_error(client):
    # dask: test_gather_errors
    def f(a, b):
        raise TypeError

    def g(a, b):
        raise AttributeError

    with pytest.raises(TypeError):
        client.gather(client.submit(f, 1, 2))
    with pytest.raises(AttributeError):
        client.gather(client.submit(g, 1, 2))


def test_errors_do_not_block_gathering_the_others(client):
    # dask: test_errors_dont_block
    L = [client.submit(inc, 1), client.submit(throws, 1), client.submit(inc, 2),
         client.submit(throws, 2)]
    assert client.gather([L[0], L[2]]) == [2, 3]
    assert client.gather(L, errors="skip") == [2, 3]


def test_gather_of_a_cancelled_call_raises_cancelled_and_a_timeout_is_a_duration(client):
    x = client.submit(gated_inc, "/nonexistent-gate", 1)
    with pytest.raises(cf.TimeoutError):
        client.gather([x], timeout="100 ms")
    x.cancel()
    with pytest.raises(cf.CancelledError):
        client.gather([x])


def test_scatter_gives_one_ref_per_element_of_a_list_or_dict(client):
    # dask: test_scatter
    d = client.scatter({"y": 20})
    assert isinstance(d["y"], bulletin.Ref)
    assert client.gather([d["y"]]) == [20]
    [x] = client.scatter([10])
    assert isinstance(x, bulletin.Ref) and client.gather([x]) == [10]
    z = client.submit(add, x, d["y"])
    assert z.result(timeout=CALL_SECONDS) == 30
    assert client.gather([z, x]) == [30, 10]


def test_scatter_keeps_the_container_type(client):
    # dask: test_scatter_types
    d = client.scatter({"x": 1})
    assert isinstance(d, dict) and list(d) == ["x"]
    for seq in [[1], (1,), {1}, frozenset([1])]:
        refs = client.scatter(seq)
        assert isinstance(refs, type(seq)) and len(refs) == 1
    seq = client.scatter(range(5))
    assert isinstance(seq, list) and len(seq) == 5 and client.gather(seq) == list(range(5))


def test_scatter_of_one_value_gives_a_ref_with_a_result(client):
    # dask: test_scatter_non_list, test_scatter_singletons
    x = client.scatter(1)
    assert isinstance(x, bulletin.Ref) and x.result() == 1 and client.gather(x) == 1
    for value in [1, np.ones(5)]:
        assert str(client.scatter(value).result()) == str(value)
    array = np.arange(3.0)
    [ref] = client.scatter([array], broadcast=True)
    assert client.submit(lambda a: float(a.sum()), ref).result(timeout=CALL_SECONDS) == 3.0
    with pytest.raises(bulletin.InvalidArgumentError, match="workers="):
        client.scatter(1, workers=["somewhere"])


def test_client_cancel_cancels_every_future_in_a_collection(client):
    # dask: test_cancel_collection, test_cancel
    gate = "/nonexistent-gate"
    futures = client.map(gated_inc, [gate] * 3, [1, 2, 3])
    client.cancel({"all": futures})
    assert all(f.cancelled() for f in futures)
    x = client.submit(gated_inc, gate, 1)
    y = client.submit(inc, x)
    client.cancel([x])
    assert x.cancelled() and "cancel" in repr(x)
    with pytest.raises(cf.CancelledError):
        y.result(timeout=CALL_SECONDS)


def test_retry_runs_a_failed_call_again(client, tmp_path):
    # dask: test_retry
    ready = str(tmp_path / "ready")
    future = client.submit(fails_until, ready)
    with pytest.raises(KeyError):
        future.result(timeout=CALL_SECONDS)
    open(ready, "w").close()
    future.retry()
    assert future.result(timeout=CALL_SECONDS) == 100 and future.status == "finished"


def test_retry_of_a_dependent_runs_its_failed_input_again(client, tmp_path):
    # dask: test_retry_dependencies
    ready = str(tmp_path / "ready")
    x = client.submit(fails_until, ready)
    y = client.submit(inc, x)
    with pytest.raises(KeyError):
        y.result(timeout=CALL_SECONDS)
    open(ready, "w").close()
    y.retry()
    assert y.result(timeout=CALL_SECONDS) == 101
    y.retry()
    x.retry()
    assert y.result(timeout=CALL_SECONDS) == 101 and x.result(timeout=CALL_SECONDS) == 100


def test_wait_returns_done_and_not_done(client):
    # dask: test_wait, test_wait_sync
    x, y, z = client.submit(inc, 1), client.submit(inc, 1), client.submit(inc, 2)
    done, not_done = bulletin.wait([x, y, z])
    assert done == {x, y, z} and not_done == set()
    assert x.status == y.status == "finished"


def test_wait_first_completed(client, tmp_path):
    # dask: test_wait_first_completed
    gate = str(tmp_path / "gate")
    # Half a CPU each: the cluster's two CPUs leave room for z while x and y wait.
    x, y = (client.submit(gated_inc, gate, i, cpus=0.5) for i in (1, 2))
    z = client.submit(inc, 2)
    done, not_done = bulletin.wait([x, y, z], return_when="FIRST_COMPLETED")
    assert done == {z} and not_done == {x, y}
    assert z.status == "finished" and x.status in ("queued", "running")
    open(gate, "w").close()
    assert client.gather([x, y]) == [2, 3]


def test_wait_timeout_takes_a_duration_and_one_future(client, tmp_path):
    # dask: test_wait_timeout. Dask raises TimeoutError; bulletin.wait returns (done,
    # not_done) as concurrent.futures.wait does (docs/from-dask.md).
    future = client.submit(gated_inc, str(tmp_path / "gate"), 1)
    assert bulletin.wait(future, timeout=0.01).not_done == {future}
    assert bulletin.wait(future, timeout="0.01 s").not_done == {future}
    with pytest.raises(cf.TimeoutError):
        future.result(timeout="10 ms")
    open(tmp_path / "gate", "w").close()
    assert bulletin.wait(future).done == {future}


def test_wait_says_the_futures_go_in_one_list(client):
    # dask: test_wait_informative_error_for_timeouts
    x, y = client.submit(inc, 1), client.submit(inc, 2)
    with pytest.raises(TypeError, match="list"):
        bulletin.wait(x, y)
    assert client.gather([x, y]) == [2, 3]


def test_future_type_client_and_repr(client):
    # dask: test_future_type (Future.type once the result is known), Future.client,
    # test_future_repr and the notebook display (the result's type in both)
    x = client.submit(inc, 10)
    assert x.client is client
    assert x.result(timeout=CALL_SECONDS) == 11
    assert x.type is int and "type=int" in repr(x) and ">int<" in x._repr_html_()
    failed = client.submit(div, 1, 0)
    assert failed.exception(timeout=CALL_SECONDS) is not None and failed.type is None
    big = client.submit(np.zeros, 1 << 20)  # 8 MiB: stays in the store until result()
    bulletin.wait([big], timeout=CALL_SECONDS)
    assert big.status == "finished" and big.type is None and "type=" not in repr(big)
    assert big.result().shape == (1 << 20,) and big.type is np.ndarray
    assert "type=numpy.ndarray" in repr(big)


@bulletin.cpu
def decorated_inc(x):
    return x + 1


def test_future_client_of_a_decorated_call_is_the_default_client(client):
    f = decorated_inc.submit(1)
    assert f.client is client and f.result(timeout=CALL_SECONDS) == 2


def test_client_futures_lists_the_futures_still_referenced(client):
    # dask: test_future_repr (client.futures), test_gc
    x = client.submit(inc, 10)
    assert x.result(timeout=CALL_SECONDS) == 11
    assert client.futures[x.key] is x and "finished" in repr(client.futures[x.key])
    key = x.key
    del x
    import gc
    gc.collect()
    assert key not in client.futures


# -- as_completed and await -----------------------------------------------------------------


def test_as_completed_list(client):
    # dask: test_as_completed_list
    seq = client.map(inc, range(5))
    assert set(client.gather(list(bulletin.as_completed(seq)))) == {1, 2, 3, 4, 5}


def test_as_completed_results(client):
    # dask: test_as_completed_results
    seq = client.map(inc, range(5))
    pairs = list(bulletin.as_completed(seq, with_results=True))
    assert {r for _, r in pairs} == {1, 2, 3, 4, 5} and {f for f, _ in pairs} == set(seq)


def test_as_completed_add(client):
    # dask: test_as_completed_add
    total, expected = 0, sum(map(inc, range(10)))
    futures = client.map(inc, range(10))
    ac = bulletin.as_completed(futures)
    for i, future in enumerate(ac):
        result = future.result()
        total += result
        if i % 2 == 0:
            ac.add(client.submit(add, future, 10))
            expected += result + 10
    assert total == expected


@pytest.mark.parametrize("with_results", [True, False])
def test_as_completed_batches(client, with_results):
    # dask: test_as_completed_batches
    n = 20
    futures = client.map(inc, range(n))
    out = []
    for batch in bulletin.as_completed(futures, with_results=with_results).batches():
        assert isinstance(batch, (tuple, list))
        out.extend(batch)
    assert len(out) == n
    if with_results:
        assert {r for _, r in out} == set(range(1, n + 1))
    else:
        assert set(out) == set(futures)


def test_as_completed_with_results_raises_the_calls_error(client):
    # dask: test_as_completed_with_results, test_as_completed_error
    x, y, z = client.submit(throws, 1), client.submit(slow_mark, "/dev/null", 5), \
        client.submit(inc, 1)
    ac = bulletin.as_completed([x, y, z], with_results=True)
    y.cancel()
    with pytest.raises(RuntimeError) as info:
        list(ac)
    assert str(info.value) == "hello!"
    ac = bulletin.as_completed([x, y, z], with_results=True, raise_errors=False)
    dd = {r[0]: r[1:] for r in ac}
    assert isinstance(dd[y][0], cf.CancelledError) and isinstance(dd[x][0][1], RuntimeError)
    assert dd[z][0] == 2 and (x.status, y.status, z.status) == ("error", "cancelled", "finished")


def test_await_future(client):
    # dask: test_await_future
    async def main():
        assert await client.submit(inc, 1) == 2
        with pytest.raises(ZeroDivisionError):
            await client.submit(div, 1, 0)
        assert float((await client.submit(ones, BIG)).sum()) == BIG  # a large result

    asyncio.run(main())


def test_as_completed_async_for(client):
    # dask: test_as_completed_async_for, test_as_completed_async_for_results
    async def main():
        results = [await f async for f in bulletin.as_completed(client.map(inc, range(10)))]
        pairs = [r async for _, r in bulletin.as_completed(client.map(inc, range(10)),
                                                           with_results=True)]
        return results, pairs

    results, pairs = asyncio.run(main())
    assert set(results) == set(range(1, 11)) and set(pairs) == set(range(1, 11))


def test_as_completed_async_for_cancel(client):
    # dask: test_as_completed_async_for_cancel
    async def main():
        x = client.submit(inc, 1)
        y = client.submit(gated_inc, "/nonexistent-gate", 1)
        ac = bulletin.as_completed([x, y])
        await x
        y.cancel()
        return [f async for f in ac], x, y

    futures, x, y = asyncio.run(main())
    assert futures == [x, y]


def test_the_event_loop_runs_while_futures_and_gather_are_awaited(client, tmp_path):
    # A notebook's cells run inside Jupyter's event loop: awaiting must never block it.
    # dask: test_use_synchronous_client_in_async_context
    gate = str(tmp_path / "gate")

    async def main():
        ticks = []

        async def ticker():
            while True:
                ticks.append(1)
                await asyncio.sleep(0.01)

        tick_task = asyncio.create_task(ticker())
        x = await client.scatter(123, asynchronous=True)
        y = client.submit(gated_inc, gate, x)
        asyncio.get_running_loop().call_later(0.3, lambda: open(gate, "w").close())
        before = len(ticks)
        z = await client.gather(y, asynchronous=True)
        during_gather = len(ticks) - before
        w = client.submit(slow_mark, "/dev/null", 0.3)
        before = len(ticks)
        await w
        during_await = len(ticks) - before
        tick_task.cancel()
        return z, during_gather, during_await

    z, during_gather, during_await = asyncio.run(main())
    assert z == 124
    assert during_gather > 0 and during_await > 0, "the event loop was blocked"


def test_an_asynchronous_client_returns_awaitables(cluster):
    # dask: test_async_with, test_gather (async), test_cancel (await c.cancel)
    async def main():
        async with await bulletin.Client(cluster.address, token=cluster.token,
                                         asynchronous=True, set_as_default=False) as c:
            x = c.submit(inc, 10)
            y = c.submit(inc, x)
            assert await c.gather({"x": x, "y": [y]}) == {"x": 11, "y": [12]}
            [ref] = await c.scatter([1])
            assert await c.gather(c.submit(inc, ref)) == 2
            z = c.submit(gated_inc, "/nonexistent-gate", 1)
            await c.cancel([z])
            assert z.cancelled()
            with pytest.raises(ZeroDivisionError):
                await c.gather([c.submit(div, 1, 0)])

    asyncio.run(main())


# -- retries --------------------------------------------------------------------------------


def varying(counter, outcomes):
    """Returns or raises ``outcomes[n]`` on its n-th run (counted in the file ``counter``)."""
    n = int(open(counter).read()) if os.path.exists(counter) else 0
    with open(counter, "w") as f:
        f.write(str(n + 1))
    outcome = outcomes[n]
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def unpicklable():
    import threading
    return threading.Lock()


ARGS = [[ZeroDivisionError("one"), 2, 3], [4, 5, 6],
        [ZeroDivisionError("seven"), ZeroDivisionError("eight"), 9]]


def counters(tmp_path, tag):
    return [str(tmp_path / f"{tag}-{i}") for i in range(len(ARGS))]


def test_map_retries(client, tmp_path):
    # dask: test_map_retries
    x, y, z = client.map(varying, counters(tmp_path, "two"), ARGS, retries=2)
    assert (x.result(timeout=CALL_SECONDS), y.result(timeout=CALL_SECONDS),
            z.result(timeout=CALL_SECONDS)) == (2, 4, 9)
    assert (x.attempts, y.attempts, z.attempts) == (2, 1, 3)

    x, y, z = client.map(varying, counters(tmp_path, "one"), ARGS, retries=1, pure=False)
    assert x.result(timeout=CALL_SECONDS) == 2 and y.result(timeout=CALL_SECONDS) == 4
    with pytest.raises(ZeroDivisionError, match="eight") as info:
        z.result(timeout=CALL_SECONDS)
    assert z.attempts == 2 and z.status == "error"
    assert any("2 runs" in note for note in getattr(info.value, "__notes__", ["2 runs"]))

    x, y, z = client.map(varying, counters(tmp_path, "zero"), ARGS, retries=0, pure=False)
    with pytest.raises(ZeroDivisionError, match="one"):
        x.result(timeout=CALL_SECONDS)
    assert y.result(timeout=CALL_SECONDS) == 4
    with pytest.raises(ZeroDivisionError, match="seven"):
        z.result(timeout=CALL_SECONDS)
    assert (x.attempts, z.attempts) == (1, 1)


def test_retries_of_a_blocking_call_say_so_in_the_cell(client, tmp_path, capsys):
    # dask: test_retries_get
    outcomes = [ZeroDivisionError("one"), ZeroDivisionError("two"), 3]
    flaky = bulletin.cpu(varying, retries=5)
    assert flaky(str(tmp_path / "counter"), outcomes) == 3
    err = capsys.readouterr().err
    assert err.count("running it again") == 2 and "ZeroDivisionError" in err
    with pytest.raises(ZeroDivisionError, match="one"):
        bulletin.cpu(varying)(str(tmp_path / "other"), outcomes)


def test_retries_leave_timeouts_and_bulletins_own_errors_alone(client):
    f = client.submit(unpicklable, retries=2)
    with pytest.raises(bulletin.ResultSerializationError):
        f.result(timeout=CALL_SECONDS)
    assert f.attempts == 1
    g = client.submit(slow_mark, "/dev/null", 5, timeout="300 ms", retries=2)
    with pytest.raises(bulletin.CallTimeoutError):
        g.result(timeout=CALL_SECONDS)
    assert g.attempts == 1


# -- tracebacks -----------------------------------------------------------------------------


def deep(n):
    if n == 0:
        raise ValueError("bottom")
    return deep(n - 1)


@pytest.mark.parametrize("method", ["result", "gather"])
def test_short_tracebacks(client, method):
    # dask: test_short_tracebacks. Was: 4-5 frames of bulletin and concurrent.futures between
    # the caller and the remote frames, and those only as text in __cause__.
    future = client.submit(div, 1, 0)
    with pytest.raises(ZeroDivisionError) as e:
        if method == "result":
            future.result(timeout=CALL_SECONDS)
        else:
            client.gather(future)
    frames = traceback.extract_tb(e.value.__traceback__)
    assert len(frames) < 4
    assert frames[0].name == "test_short_tracebacks" and frames[-1].name == "div"
    assert frames[-1].line == "return x / y"


def test_traceback_clean(client):
    # dask: test_traceback_clean (no frame of the machinery: executor, concurrent.futures)
    x = client.submit(div, 1, 0)
    try:
        client.gather([x])
    except ZeroDivisionError:
        frames = traceback.extract_tb(sys.exc_info()[2])
    files = [f.filename for f in frames]
    assert not [f for f in files if "concurrent" in f or "_runtime" in f or "_executor" in f]
    # The package's own frames, wherever the clone is (`make test` also runs this test from a
    # folder named bulletin, where every path of the checkout holds /bulletin/).
    package = os.path.dirname(os.path.abspath(bulletin.__file__)) + os.sep
    assert len([f for f in files if os.path.abspath(f).startswith(package)]) == 1  # the gather


def test_traceback_of_a_failed_call_and_of_a_call_that_needed_it(client):
    # dask: test_traceback, test_traceback_sync, test_gather_traceback
    x = client.submit(div, 1, 0)
    tb = x.traceback(timeout=CALL_SECONDS)
    assert any("x / y" in (frame.line or "") for frame in traceback.extract_tb(tb))
    y = client.submit(inc, x)
    tb2 = y.traceback(timeout=CALL_SECONDS)
    assert {f.line for f in traceback.extract_tb(tb2)} >= {f.line for f in traceback.extract_tb(tb)}
    z = client.submit(div, 1, 2)
    assert z.traceback(timeout=CALL_SECONDS) is None
    try:
        client.gather(x)
    except ZeroDivisionError as e:
        assert any("x / y" in line for line in traceback.format_tb(sys.exc_info()[2]))
        # dask: test_traceback_sync (the remote text also in the cause, as the process
        # pool's: still there once a framework drops __traceback__)
        assert isinstance(e.__cause__, bulletin.RemoteTraceback) and "x / y" in str(e.__cause__)
    try:
        y.result(timeout=CALL_SECONDS)
    except ZeroDivisionError as e:
        assert "x / y" in str(e.__cause__)


def test_long_error(client):
    # dask: test_long_error
    def bad(x):
        raise ValueError("a" * 100000)

    x = client.submit(bad, 10)
    with pytest.raises(ValueError) as info:
        x.result(timeout=CALL_SECONDS)
    assert len(str(info.value)) < 100000 and "characters cut" in str(info.value)
    assert all(len(line) < 100000 for frame in traceback.extract_tb(x.traceback())
               for line in (frame.line or "", frame.name))


def test_a_deep_remote_stack_comes_back_whole(client):
    # dask: test_long_traceback (bulletin keeps every frame; printing folds repeated lines)
    x = client.submit(deep, 50)
    with pytest.raises(ValueError, match="bottom") as info:
        x.result(timeout=CALL_SECONDS)
    names = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert names.count("deep") == 51


def test_a_chained_remote_exception_keeps_its_cause(client):
    def lookup(d):
        try:
            return d["missing"]
        except KeyError as error:
            raise RuntimeError("lookup failed") from error

    with pytest.raises(RuntimeError, match="lookup failed") as info:
        client.submit(lookup, {}).result(timeout=CALL_SECONDS)
    assert isinstance(info.value.__cause__, bulletin.RemoteTraceback)
    assert "KeyError: 'missing'" in str(info.value.__cause__)


# -- submit, exceptions, callbacks ----------------------------------------------------------


def test_submit(client):
    # dask: test_submit
    x = client.submit(inc, 10, key="x")
    assert isinstance(x, bulletin.Future) and x.key.startswith("x-")
    assert asyncio.run(_awaited(x)) == 11 and x.done()
    y = client.submit(inc, 20, key="y")
    z = client.submit(add, x, y)
    assert z.result(timeout=CALL_SECONDS) == 11 + 21


async def _awaited(future):
    return await future


def test_exceptions(client):
    # dask: test_exceptions (the cluster goes on after a remote error)
    assert client.submit(div, 1, 2).result(timeout=CALL_SECONDS) == 0.5
    with pytest.raises(ZeroDivisionError):
        client.submit(div, 1, 0).result(timeout=CALL_SECONDS)
    assert client.submit(div, 10, 2).result(timeout=CALL_SECONDS) == 5


def test_add_done_callback(client):
    # dask: test_add_done_callback (callbacks see the final status, also one added after)
    seen = set()

    def f(future):
        future.add_done_callback(g)

    def g(future):
        seen.add((future.key, future.status))

    u = client.submit(inc, 1)
    v = client.submit(throws, "hello")
    w = client.submit(slow_mark, "/dev/null", 0.3)
    x = client.submit(inc, 3)
    for future in (u, v, w):
        future.add_done_callback(f)
    bulletin.wait([u, v, w, x])
    x.add_done_callback(f)
    wait_until(lambda: len(seen) == 4, timeout=CALL_SECONDS, what="four callbacks")
    assert seen == {(f.key, f.status) for f in (u, v, w, x)}
    assert {status for _, status in seen} == {"finished", "error"}


def test_map_large_kwargs_are_uploaded_once(client):
    # dask: test_map_large_kwargs_in_graph
    x = np.random.random(100000)
    uploads = client._transfer.uploads
    futures = client.map(lambda a, b: a + float(b[0]), range(20), b=x)
    assert client.gather(futures) == [i + float(x[0]) for i in range(20)]
    assert client._transfer.uploads - uploads <= 2  # the array, and the function at most


def test_bad_tasks_fail(client):
    # dask: test_bad_tasks_fail (Dask: KilledWorker; here the executor reports the exit and
    # keeps serving)
    f = client.submit(sys.exit, 0)
    with pytest.raises(bulletin.RemoteError, match="SystemExit"):
        f.result(timeout=CALL_SECONDS)
    assert client.submit(inc, 1).result(timeout=CALL_SECONDS) == 2
