"""Offload overhead: a no-op call through bulletin, Dask distributed and Ray, side by side.

    make bench                                  # or: python examples/overhead_benchmark.py
    python examples/overhead_benchmark.py --calls 500 --pipelined 2000 --only bulletin
    python examples/overhead_benchmark.py --only bulletin --tls   # what TLS costs a call

For each system, on the same machine and in the same run: p50/p99 round-trip latency of a
synchronous no-op call, synchronous calls per second, pipelined calls per second (submit
all, then gather), and the wall time of one map over --map items (10,000: a researcher's map
over small items). Each peer gets the same number of worker processes (--workers). Ratios
compare bulletin with each peer. Systems run one after another, never at the same time.
With --tls, bulletin also runs as `bulletin up --tls` (gRPC over TLS on loopback) and the
figures of the two are compared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))


def noop(x=None):
    return x


def measure(call_sync, run_pipelined, calls: int, pipelined: int, warmup: int,
            mapped: int = 0) -> dict:
    # Steady state for every system alike: JIT-compiled paths, warm worker pools and connections
    # (all three). Bulletin's JVM compiles for minutes: with -XX:+LogCompilation, pipelined
    # no-op calls on 2 cores drove 1,100 compilations in the second 20 s, 200-700 per 20 s up
    # to 120 s and under 100 after 140 s (about 100,000 calls); after 20,000 calls its compiler
    # threads still took 230-650 us of CPU per call, after 80,000 calls 73 us.
    for _ in range(500):
        call_sync()
    done = 0
    while done < warmup:
        run_pipelined(pipelined)
        done += pipelined
    latencies = []
    start = time.perf_counter()
    for _ in range(calls):
        t = time.perf_counter()
        call_sync()
        latencies.append(time.perf_counter() - t)
    sync_elapsed = time.perf_counter() - start
    latencies.sort()
    t = time.perf_counter()
    run_pipelined(pipelined)
    pipe_elapsed = time.perf_counter() - t
    map_elapsed = float("nan")
    if mapped:  # a researcher's map over many small items: one burst, all gathered
        t = time.perf_counter()
        run_pipelined(mapped)
        map_elapsed = time.perf_counter() - t
    return {
        "p50_ms": statistics.median(latencies) * 1e3,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1e3,
        "sync_per_s": calls / sync_elapsed,
        "pipelined_per_s": pipelined / pipe_elapsed,
        "map_s": map_elapsed,
    }


def bench_bulletin(args, up_args: tuple[str, ...] = (), noop=noop) -> dict:
    """``noop``: a script importing this one passes its own (a function of this module is
    pickled by reference there, and the executors cannot import it)."""
    from _local_cluster import local_cluster

    with local_cluster(cpus=args.workers, up_args=up_args) as client:
        def sync():
            client.submit(noop).result()

        def pipelined(n):
            client.gather(client.map(noop, range(n)))

        return measure(sync, pipelined, args.calls, args.pipelined, args.warmup, args.map)


def bench_dask(args) -> dict:
    from dask.distributed import Client, LocalCluster

    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        def sync():
            client.submit(noop, pure=False).result()

        def pipelined(n):
            client.gather(client.map(noop, range(n), pure=False))

        return measure(sync, pipelined, args.calls, args.pipelined, args.warmup, args.map)


def bench_ray(args) -> dict:
    import ray

    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    try:
        remote_noop = ray.remote(noop)

        def sync():
            ray.get(remote_noop.remote())

        def pipelined(n):
            ray.get([remote_noop.remote(i) for i in range(n)])

        return measure(sync, pipelined, args.calls, args.pipelined, args.warmup, args.map)
    finally:
        ray.shutdown()


def bench_bulletin_tls(args) -> dict:
    return bench_bulletin(args, ("--tls",))


SYSTEMS = {"bulletin": bench_bulletin, "dask": bench_dask, "ray": bench_ray}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000, help="synchronous calls (default 1000)")
    parser.add_argument("--pipelined", type=int, default=3000,
                        help="calls submitted at once for the throughput figure (default 3000)")
    parser.add_argument("--map", type=int, default=10000,
                        help="items of the map whose wall time is timed: bulletin's client.map, "
                             "Dask's client.map, Ray's remote calls, each gathered (default "
                             "10000; 0 leaves it out)")
    parser.add_argument("--warmup", type=int, default=100000,
                        help="pipelined calls every system runs before timing (default 100000: "
                             "a runtime's JIT settles after about that many)")
    parser.add_argument("--workers", type=int, default=2,
                        help="worker processes / CPU slots for every system (default 2)")
    parser.add_argument("--only", choices=sorted(SYSTEMS), action="append",
                        help="run only these systems (repeatable)")
    parser.add_argument("--tls", action="store_true",
                        help="also run bulletin with TLS on (`bulletin up --tls`) and compare")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every system this many times, in turn, and report the median "
                             "of each figure (a shared machine is noisy; default 1)")
    args = parser.parse_args()

    names = list(args.only or SYSTEMS)
    if args.tls:
        SYSTEMS["bulletin-tls"] = bench_bulletin_tls
        names.insert(names.index("bulletin") + 1 if "bulletin" in names else 0, "bulletin-tls")
    runs: dict[str, list[dict]] = {}
    for round_ in range(args.rounds):
        for name in names:
            try:
                runs.setdefault(name, []).append(SYSTEMS[name](args))
            except ImportError as error:
                print(f"{name}: skipped ({error}); install with `make bench`", file=sys.stderr)
            else:
                print(f"round {round_ + 1} {name}: {runs[name][-1]}", file=sys.stderr)
    results = {name: {key: statistics.median(r[key] for r in rs) for key in rs[0]}
               for name, rs in runs.items() if rs}
    print(f"\nno-op offload overhead, {args.calls} sync calls, {args.pipelined} pipelined, "
          f"{args.workers} workers, {os.cpu_count()} cores"
          + (f", median of {args.rounds} rounds" if args.rounds > 1 else ""))
    map_label = f"map {args.map} s"
    print(f"{'system':<13}{'p50 ms':>9}{'p99 ms':>9}{'sync/s':>10}{'pipelined/s':>13}"
          f"{map_label:>14}")
    for name, r in results.items():
        print(f"{name:<13}{r['p50_ms']:>9.3f}{r['p99_ms']:>9.3f}{r['sync_per_s']:>10.0f}"
              f"{r['pipelined_per_s']:>13.0f}{r['map_s']:>14.2f}")
    ours = results.get("bulletin")
    if ours and "bulletin-tls" in results:
        tls = results["bulletin-tls"]
        print(f"TLS costs: p50 {tls['p50_ms'] / ours['p50_ms']:.2f}x, p99 "
              f"{tls['p99_ms'] / ours['p99_ms']:.2f}x, pipelined throughput "
              f"{tls['pipelined_per_s'] / ours['pipelined_per_s']:.2f}x of plain")
    if ours:
        for name, r in results.items():
            if name in ("bulletin", "bulletin-tls"):
                continue
            print(f"bulletin vs {name}: p50 {ours['p50_ms'] / r['p50_ms']:.2f}x, "
                  f"p99 {ours['p99_ms'] / r['p99_ms']:.2f}x, pipelined throughput "
                  f"{ours['pipelined_per_s'] / r['pipelined_per_s']:.2f}x, map of {args.map} "
                  f"wall time {ours['map_s'] / r['map_s']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
