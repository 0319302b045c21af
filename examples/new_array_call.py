"""Issue 30.5's call: a fresh 1 GiB array in, a new 1 GiB array out (``lambda v: v + 0``), end
to end through bulletin and through Ray in the same run, with bulletin's time split by phase.

    python examples/data_plane_benchmark.py --only new-array-call --rounds 3
    PYTHONPATH=/path/to/ray python examples/new_array_call.py        # one round, this section

The argument changes before every call (one element), so neither side can find it stored: the
client encodes, hashes and copies it into the store each time, as Ray's ``f.remote(a)`` puts
it. ``v + 0`` returns the argument's bytes, which bulletin's store holds already (content
addressing: the result is linked, not stored again); the same call with ``v + 1``, whose bytes
are new, is measured beside it (``bulletin_new_bytes``, ``ray_new_bytes``). Phases (bulletin, the median call): the client's ``Future.timings`` (serialize: encode and
hash of the argument; upload: its copy into the store; queue, start; run: the function;
download: the client's map and decode), "store" (the runtime's ``held`` less start and run:
the executor loading the argument and encoding and writing the result, and its adopt), and
"result" for the rest (the notification reaching the client); they add up to the wall
time. The same steps are also timed one by one in this process (``local``), without a
cluster: what each costs on this machine now.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

import numpy as np

CALLS = 5  # per arm, after one warm-up call; the median is the figure


def plus_zero(v):
    return v + 0


def plus_one(v):
    """The same call with bytes no object has yet: ``v + 0`` equals its argument, which the
    store holds already (content addressing links it, copy-free); this one is a new object."""
    return v + 1


def _changed(b: np.ndarray, k: int) -> np.ndarray:
    b.reshape(-1)[0] = k  # new content for every call: nothing is found stored
    return b


def bulletin_arm(client, a: np.ndarray, name: str = "plus_zero") -> dict:
    fn = globals()[name]  # looked up now: call_path_benchmark puts ones of __main__ here
    if fn.__module__ == __name__ != "__main__":
        # Imported (data_plane_benchmark): the executors cannot import this file, so its
        # functions travel by value, as a notebook's do.
        import cloudpickle
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    b = a.copy()
    client.submit(fn, a[:1024]).result()  # warm the function and executor
    walls, phases = [], []
    for k in range(CALLS + 1):
        _changed(b, k)
        start = time.perf_counter()
        f = client.submit(fn, b)
        out = f.result()
        wall = time.perf_counter() - start
        assert out.shape == b.shape and out.reshape(-1)[0] == fn(k)
        del out
        if k:  # the first call pays the executor's first large mappings: a warm-up
            walls.append(wall)
            phases.append(_phases(f.timings, wall))
        del f
        time.sleep(0.2)  # the release of the argument and result travels on the session stream
    median = sorted(range(len(walls)), key=walls.__getitem__)[len(walls) // 2]
    return {"calls_s": [round(w, 4) for w in walls], "median_s": walls[median],
            "phases_s": {k: round(v, 4) for k, v in phases[median].items()}}


def _phases(timings: dict, wall: float) -> dict:
    """The call's wall time in phases that add up to it. ``held`` (placement to the call's end,
    as the usage ledger charges it) spans ``start`` and ``run``: it is not a phase of its own
    but gives ``store``, the executor's time around the function (loading the arguments,
    encoding and writing the result, the agent's adopt), and ``result``, the rest (the result's
    notification reaching the client)."""
    t = {k: timings.get(k, 0.0) for k in ("serialize", "upload", "queue", "start", "run")}
    held = timings.get("held", 0.0)
    t["store"] = held - t["start"] - t["run"]
    t["download"] = timings.get("download", 0.0)
    t["result"] = wall - sum(t.values())
    return t


def ray_arm(a: np.ndarray, names=("plus_zero",)) -> dict:
    try:
        import ray
    except ImportError:
        return {"skipped": "ray is not installed (pip install --target DIR ray; PYTHONPATH=DIR)"}
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False,
             object_store_memory=max(4 * a.nbytes, 1 << 30))
    try:
        return {name: _ray_calls(ray, globals()[name], a) for name in names}
    finally:
        ray.shutdown()


def _ray_calls(ray, fn, a: np.ndarray) -> dict:
    remote = ray.remote(fn)
    b = a.copy()
    ray.get(remote.remote(a[:1024]))
    walls = []
    for k in range(CALLS + 1):
        _changed(b, k)
        start = time.perf_counter()
        out = ray.get(remote.remote(b))
        wall = time.perf_counter() - start
        assert out.reshape(-1)[0] == fn(k)
        del out
        if k:
            walls.append(wall)
        time.sleep(0.2)
    return {"calls_s": [round(w, 4) for w in walls], "median_s": statistics.median(walls)}


def local_steps(a: np.ndarray) -> dict:
    """The call's steps in this process, each timed alone (median of 3), in a folder of
    /dev/shm: what the data path pays around the function on this machine."""
    from bulletin._data._objects import encode, open_object, write_file

    def median(fn) -> float:
        times = []
        for _ in range(3):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    out = {}
    folder = tempfile.mkdtemp(dir="/dev/shm", prefix="bulletin-steps-")
    try:
        out["digest_s"] = median(lambda: encode(a).digest())
        out["function_fresh_memory_s"] = median(lambda: plus_zero(a))
        r = plus_zero(a)
        path = os.path.join(folder, "r")

        def new_file():
            if os.path.exists(path):
                os.unlink(path)
            write_file(path, encode(r))
        out["write_new_file_s"] = median(new_file)
        out["open_s"] = median(lambda: open_object(path))
        os.unlink(path)
    finally:
        for name in os.listdir(folder):
            os.unlink(os.path.join(folder, name))
        os.rmdir(folder)
    return {k: round(v, 4) for k, v in out.items()}


def run(a: np.ndarray) -> dict:
    """``bulletin``/``ray``: the issue's call (``v + 0``); ``*_new_bytes``: ``v + 1``."""
    from _local_cluster import local_cluster

    with local_cluster(cpus=2, reuse=False) as client:
        spares = client._transfer.spares
        if spares is not None:
            spares.wait_filled(120)
        result = {"bulletin": bulletin_arm(client, a),
                  "bulletin_new_bytes": bulletin_arm(client, a, "plus_one")}
    ray_ = ray_arm(a, ("plus_zero", "plus_one"))
    if "skipped" in ray_:
        result["ray"] = result["ray_new_bytes"] = ray_
    else:
        result["ray"], result["ray_new_bytes"] = ray_["plus_zero"], ray_["plus_one"]
    result["local"] = local_steps(a)
    for ours, theirs, ratio in (("bulletin", "ray", "vs_ray"),
                                ("bulletin_new_bytes", "ray_new_bytes", "vs_ray_new_bytes")):
        if "median_s" in result[theirs]:
            result[ratio] = result[ours]["median_s"] / result[theirs]["median_s"]
    return result


def goal_line(result: dict) -> str:
    lines = []
    for ours, theirs, ratio, what in (
            ("bulletin", "ray", "vs_ray", "fresh 1 GiB in, v + 0 out"),
            ("bulletin_new_bytes", "ray_new_bytes", "vs_ray_new_bytes", "the same, v + 1 out")):
        mine, peer = result[ours], result[theirs]
        line = f"new-array call ({what}): bulletin {mine['median_s']:.3f} s"
        if "median_s" in peer:
            line += (f", Ray {peer['median_s']:.3f} s = {result[ratio]:.2f}x Ray's time"
                     + (" (goal <= 0.8x)" if ratio == "vs_ray" else ""))
        lines.append(line + "; phases " + ", ".join(
            f"{k} {v:.3f}" for k, v in mine["phases_s"].items()))
    return "\n".join(lines)


if __name__ == "__main__":
    import json
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from data_plane_benchmark import GIB, array

    res = run(array(GIB))
    print(json.dumps(res, indent=1))
    print(goal_line(res))
