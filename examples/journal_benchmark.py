"""What the journal costs, and how long a restart with a full journal takes (docs/durability.md).

    python examples/journal_benchmark.py                     # both parts
    python examples/journal_benchmark.py --calls 300 --pipelined 2000 --restart-calls 100000

1. Pipelined no-op throughput (submit all, then gather) and the p50 of a synchronous no-op
   call, with the journal on (`bulletin up`, the default) against off (`bulletin up
   --no-journal`), one cluster after the other in the same run, each measured --rounds times
   alternately; the ratio on/off is the journal's cost (goal: at most 10 %).
2. Restart time with --restart-calls calls in the journal: one call holds the only slot while
   the others queue, the runtime is killed with SIGKILL, and `bulletin up` on the same home is
   timed until it serves, against `bulletin up` of the same cluster with an empty journal. The
   runtime's log says how long reading the journal and restoring took (goal: under 5 s).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))

import bulletin  # noqa: E402
from overhead_benchmark import bench_bulletin  # noqa: E402


def noop(x=None):
    # Defined here, not imported: the executor unpickles it by value (this script is __main__).
    return x


def up(home: Path, *extra: str) -> float:
    env = {**os.environ, "BULLETIN_HOME": str(home)}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "bulletin._cli", "up", "--port", "0", "--cpus", "1",
                    "--simulate-gpus", "0", *extra], check=True, env=env, capture_output=True)
    return time.perf_counter() - started


def down(home: Path) -> None:
    subprocess.run([sys.executable, "-m", "bulletin._cli", "down"], env={
        **os.environ, "BULLETIN_HOME": str(home)}, capture_output=True)


def hold(gate: str) -> None:
    import os
    import time
    while not os.path.exists(gate):
        time.sleep(0.05)


def restart_time(calls: int) -> dict:
    import json
    home = Path(tempfile.mkdtemp(prefix="bulletin-journal-bench-"))
    gate = home / "gate"
    empty = up(home)
    down(home)
    up(home)
    info = json.loads((home / "runtime.json").read_text())
    token = (home / "token").read_text().strip()
    client = bulletin.Client(info["address"], token=token, set_as_default=False,
                             reconnect_timeout=0)
    blocker = client.submit(hold, str(gate))
    started = time.perf_counter()
    futures = client.map(noop, range(calls), batch_size=5000)
    # Every Submit answered: the calls are in the journal.
    while client._submitter._queue._unacknowledged:  # noqa: SLF001 - a benchmark's peek
        time.sleep(0.1)
    submit_seconds = time.perf_counter() - started
    os.kill(info["pid"], signal.SIGKILL)
    time.sleep(0.5)
    journal_bytes = sum(f.stat().st_size for f in (home / "journal").iterdir())
    full = up(home, "--port", info["address"].rsplit(":", 1)[1])
    log = (home / "runtime.log").read_text()
    read = re.findall(r"journal: read (\d+) records .* in (\d+) ms", log)
    restored = re.findall(r"restored from the journal: .* (\d+) calls not ended.* in (\d+) ms", log)
    gate.touch()
    del futures, blocker
    down(home)
    return {"calls": calls, "submit_s": submit_seconds, "journal_mib": journal_bytes / 2**20,
            "up_empty_s": empty, "up_full_s": full,
            "read": read[-1] if read else None, "restored": restored[-1] if restored else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="synchronous calls timed")
    parser.add_argument("--pipelined", type=int, default=2000, help="calls per pipelined batch")
    parser.add_argument("--warmup", type=int, default=4000, help="pipelined warm-up calls")
    parser.add_argument("--workers", type=int, default=2, help="executor slots (--cpus)")
    parser.add_argument("--rounds", type=int, default=2, help="on/off rounds, alternating")
    parser.add_argument("--restart-calls", type=int, default=100_000)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-restart", action="store_true")
    args = parser.parse_args()
    if not args.skip_throughput:
        results = {"on": [], "off": []}
        for _ in range(args.rounds):
            results["on"].append(bench_bulletin(args, ("--journal",), noop))
            results["off"].append(bench_bulletin(args, ("--no-journal",), noop))
        print(f"{'journal':8} {'pipelined/s':>12} {'p50 ms':>8} {'p99 ms':>8}")
        med = {}
        for name, runs in results.items():
            med[name] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            for r in runs:
                print(f"{name:8} {r['pipelined_per_s']:12.0f} {r['p50_ms']:8.2f} "
                      f"{r['p99_ms']:8.2f}")
        print(f"median on/off: pipelined {med['on']['pipelined_per_s'] / med['off']['pipelined_per_s']:.2f}x"
              f" throughput, p50 {med['on']['p50_ms'] / med['off']['p50_ms']:.2f}x latency")
    if not args.skip_restart:
        r = restart_time(args.restart_calls)
        print(f"restart with {r['calls']} calls in the journal ({r['journal_mib']:.1f} MiB,"
              f" submitted in {r['submit_s']:.1f} s): `bulletin up` {r['up_full_s']:.2f} s"
              f" against {r['up_empty_s']:.2f} s with an empty journal; journal read"
              f" {r['read']} (records, ms), restore {r['restored']} (calls, ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
