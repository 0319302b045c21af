"""Many clients at once: N sessions each making M no-op calls, all returning the same object.

    python examples/load_benchmark.py                      # 50 clients x 200 calls
    python examples/load_benchmark.py --clients 20 --calls 100 --processes 2

Every call returns None, so every result is the same stored object: the load that once made
0.1-0.2 % of calls fail with a false WorkerDiedError (a result released between the executor's
"already stored" check and the agent's adoption). Prints calls, failures by type, p50/p99 of
the round trip and calls per second. Clients are threads, spread over --processes processes
(each client has its own Client and session). Nothing here is asserted: it prints numbers.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))


def _client_thread(address: str | None, calls: int, latencies: list, failures: collections.Counter,
                   lock: threading.Lock, start: threading.Barrier) -> None:
    import bulletin

    def noop():  # defined here so it is pickled by value (spawned processes have no __main__)
        return None

    mine, errors = [], collections.Counter()
    with bulletin.Client(address, set_as_default=False) as client:
        start.wait()
        for _ in range(calls):
            t = time.perf_counter()
            try:
                client.submit(noop).result(timeout=120)
            except Exception as exc:  # counted by type: the point of the run
                errors[type(exc).__name__] += 1
            mine.append(time.perf_counter() - t)
    with lock:
        latencies.extend(mine)
        failures.update(errors)


def _process(address: str | None, clients: int, calls: int, out) -> None:
    latencies: list[float] = []
    failures: collections.Counter = collections.Counter()
    lock = threading.Lock()
    start = threading.Barrier(clients)
    threads = [threading.Thread(target=_client_thread,
                                args=(address, calls, latencies, failures, lock, start))
               for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out.put((latencies, dict(failures)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50, help="sessions in all (default 50)")
    parser.add_argument("--calls", type=int, default=200, help="calls per client (default 200)")
    parser.add_argument("--processes", type=int, default=5,
                        help="processes the client threads are spread over (default 5)")
    parser.add_argument("--cpus", type=int, default=2, help="CPU slots of the cluster (default 2)")
    args = parser.parse_args()
    if args.clients < 1 or args.calls < 1 or not 1 <= args.processes <= args.clients:
        parser.error("--clients and --calls must be >= 1, and 1 <= --processes <= --clients")

    from _local_cluster import local_cluster

    with local_cluster(cpus=args.cpus, reuse=False):
        address = os.environ.get("BULLETIN_ADDRESS")  # else the cluster's runtime.json
        context = multiprocessing.get_context("spawn")
        out = context.Queue()
        share = [args.clients // args.processes + (i < args.clients % args.processes)
                 for i in range(args.processes)]
        began = time.perf_counter()
        workers = [context.Process(target=_process, args=(address, n, args.calls, out))
                   for n in share]
        for worker in workers:
            worker.start()
        results = [out.get() for _ in workers]
        for worker in workers:
            worker.join()
        elapsed = time.perf_counter() - began

    latencies = sorted(t for lat, _ in results for t in lat)
    failures: collections.Counter = collections.Counter()
    for _, errors in results:
        failures.update(errors)
    total = len(latencies)
    print(f"{args.clients} clients x {args.calls} no-op calls over {args.processes} processes,"
          f" {args.cpus} CPU slots")
    print(f"calls {total}, failures {sum(failures.values())}"
          + (f" ({dict(failures)})" if failures else ""))
    print(f"round trip p50 {statistics.median(latencies) * 1e3:.2f} ms,"
          f" p99 {latencies[min(total - 1, int(total * 0.99))] * 1e3:.2f} ms;"
          f" {total / elapsed:.0f} calls/s (including client start-up)")


if __name__ == "__main__":
    main()
