"""CPU time per pipelined no-op call, per process, for bulletin and Ray side by side.

    python examples/call_cpu_benchmark.py                 # bulletin and Ray
    python examples/call_cpu_benchmark.py --only bulletin --calls 20000

Wall-clock throughput on a shared machine moves with whatever else runs; the CPU seconds each
process spends per call move much less, and they say where a call's cost is: the caller, the
runtime (per JVM thread, by name), the executors, or Ray's driver, raylet and workers. Both
systems get the same number of worker processes and run one after the other. Linux only (reads
/proc).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

TICKS = os.sysconf("SC_CLK_TCK")


def noop(x=None):
    return x


def _stat_fields(path: str) -> tuple[str, list[str]]:
    text = open(path).read()
    return text[text.index("(") + 1:text.rindex(")")], text.rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (its threads included), 0 if it is gone."""
    try:
        fields = _stat_fields(f"/proc/{pid}/stat")[1]
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def descendants(root: int) -> list[int]:
    children = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                children[int(_stat_fields(f"/proc/{entry}/stat")[1][1])].append(int(entry))
            except OSError:
                pass
    found, i = [root], 0
    while i < len(found):
        found += children[found[i]]
        i += 1
    return found[1:]


def thread_seconds(pid: int) -> dict[str, float]:
    """CPU seconds per thread name (digits folded, so pools add up), for one process."""
    totals: dict[str, float] = collections.Counter()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name, fields = _stat_fields(f"/proc/{pid}/task/{tid}/stat")
        except OSError:
            continue
        totals[re.sub(r"\d+", "N", name)] += (int(fields[11]) + int(fields[12])) / TICKS
    return totals


def process_name(pid: int) -> str:
    try:
        argv = open(f"/proc/{pid}/cmdline").read().split("\0")
    except OSError:
        return "?"
    for word in argv:
        if word.startswith("bulletin.") or word.startswith("ray::") or "raylet" in word \
                or "gcs_server" in word:
            return os.path.basename(word)
    return os.path.basename(argv[0]) if argv else "?"


def measure(run_batch, processes, calls: int, batch: int, threads_of: int | None = None) -> dict:
    """Runs calls in pipelined batches and returns CPU µs per call by process (and by thread of
    ``threads_of``), the caller's own included, and the wall-clock rate."""
    pids = processes()
    before = {pid: cpu_seconds(pid) for pid in pids}
    threads_before = thread_seconds(threads_of) if threads_of else {}
    own = os.times()
    start = time.perf_counter()
    for _ in range(calls // batch):
        run_batch(batch)
    elapsed = time.perf_counter() - start
    mine = os.times()
    per_call = 1e6 / calls
    by_process = collections.Counter()
    by_process["caller"] = (mine.user + mine.system - own.user - own.system) * per_call
    for pid in pids:
        by_process[f"{process_name(pid)}"] += (cpu_seconds(pid) - before[pid]) * per_call
    by_thread = {}
    if threads_of:
        after = thread_seconds(threads_of)
        by_thread = {name: (after[name] - threads_before.get(name, 0)) * per_call
                     for name in after}
    return {"rate": calls / elapsed, "processes": dict(by_process), "threads": by_thread}


def bench_bulletin(args) -> dict:
    import json

    from _local_cluster import local_cluster

    with local_cluster(cpus=args.workers, reuse=False) as client:
        home = os.environ["BULLETIN_HOME"]
        runtime = json.load(open(os.path.join(home, "runtime.json")))["pid"]

        def batch(n):
            client.gather(client.map(noop, range(n)))

        for _ in range(args.warmup // args.batch):
            batch(args.batch)
        return measure(batch, lambda: [runtime, *descendants(runtime)], args.calls, args.batch,
                       threads_of=runtime)


def bench_ray(args) -> dict:
    import ray

    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    try:
        remote_noop = ray.remote(noop)

        def batch(n):
            ray.get([remote_noop.remote(i) for i in range(n)])

        for _ in range(args.warmup // args.batch):
            batch(args.batch)
        return measure(batch, lambda: descendants(os.getpid()), args.calls, args.batch)
    finally:
        ray.shutdown()


SYSTEMS = {"bulletin": bench_bulletin, "ray": bench_ray}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=10000, help="measured calls (default 10000)")
    parser.add_argument("--batch", type=int, default=1000,
                        help="calls submitted at once, then gathered (default 1000)")
    parser.add_argument("--warmup", type=int, default=30000,
                        help="calls before measuring, so the JVM's hot paths are compiled "
                             "(default 30000)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--only", choices=sorted(SYSTEMS), action="append",
                        help="run only this system (repeatable)")
    args = parser.parse_args()
    results = {name: SYSTEMS[name](args) for name in (args.only or list(SYSTEMS))}
    print(f"\nCPU µs per pipelined no-op call ({args.calls} calls in batches of {args.batch},"
          f" {args.workers} workers, load average {os.getloadavg()[0]:.1f})")
    for name, result in results.items():
        total = sum(result["processes"].values())
        print(f"{name}: {total:.0f} µs/call in all, {result['rate']:.0f} calls/s wall clock")
        for process, micros in sorted(result["processes"].items(), key=lambda kv: -kv[1]):
            if micros >= 1:
                print(f"  {process:<34}{micros:8.0f}")
        for thread, micros in sorted(result["threads"].items(), key=lambda kv: -kv[1]):
            if micros >= 5:
                print(f"    runtime thread {thread:<19}{micros:8.0f}")
    if "bulletin" in results and "ray" in results:
        ours = sum(results["bulletin"]["processes"].values())
        theirs = sum(results["ray"]["processes"].values())
        print(f"bulletin/ray CPU per call: {ours / theirs:.2f}x")


if __name__ == "__main__":
    main()
