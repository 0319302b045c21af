"""What executors that belong to one user cost: a no-op call of the same user (warm), and one
of a user other than the last on the slot (the other user's executor is retired and one starts).

    python examples/user_switch_benchmark.py [--calls 200] [--switches 20]

Starts its own cluster (one GPU, simulated where there is none, and one CPU slot) with two users,
alice and bob. Each figure is measured on the GPU slot and on the CPU slot: p50/p99 of a
synchronous no-op round trip, and p50 of the round trip when the user alternates (every call a
user switch). Timings are printed, never asserted: a shared machine is noisy.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))

import bulletin  # noqa: E402
from _local_cluster import local_cluster  # noqa: E402

TOKENS = {"alice": "alice-benchmark-token-0123456789", "bob": "bob-benchmark-token-0123456789"}


def noop(x=None):
    return x


def percentiles(latencies: list[float]) -> tuple[float, float]:
    latencies = sorted(latencies)
    return (statistics.median(latencies) * 1e3,
            latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1e3)


def timed(client, gpus: int) -> float:
    start = time.perf_counter()
    client.submit(noop, gpus=gpus).result()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200, help="same-user calls per slot")
    parser.add_argument("--switches", type=int, default=20, help="user switches per slot")
    args = parser.parse_args()
    config = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    config.write("users:\n" + "".join(
        f"  - {{name: {name}, group: lab, token: \"{token}\"}}\n"
        for name, token in TOKENS.items()))
    config.close()
    try:
        with local_cluster(cpus=1, up_args=("--config", config.name)) as owner:
            address = owner.address
            users = {name: bulletin.Client(address, token=token, set_as_default=False)
                     for name, token in TOKENS.items()}
            print(f"{'slot':<5}{'same user p50 ms':>18}{'p99 ms':>9}"
                  f"{'user switch p50 ms':>20}{'p99 ms':>9}")
            for slot, gpus in (("GPU", 1), ("CPU", 0)):
                for _ in range(20):  # warm: the JVM's paths, both users' executors once
                    timed(users["alice"], gpus)
                same = [timed(users["alice"], gpus) for _ in range(args.calls)]
                switch = [timed(users["bob" if i % 2 == 0 else "alice"], gpus)
                          for i in range(args.switches)]
                (p50, p99), (s50, s99) = percentiles(same), percentiles(switch)
                print(f"{slot:<5}{p50:>18.2f}{p99:>9.2f}{s50:>20.2f}{s99:>9.2f}")
            for client in users.values():
                client.close()
    finally:
        os.unlink(config.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
