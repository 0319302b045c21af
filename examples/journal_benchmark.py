"""What the journal costs, and how long a restart with a full journal takes (docs/durability.md).

    python examples/journal_benchmark.py                     # both parts
    python examples/journal_benchmark.py --rounds 8 --calls 300 --pipelined 2000
    python examples/journal_benchmark.py --skip-throughput --restart-calls 100000

1. Pipelined no-op throughput (submit all, then gather) and the p50 of a synchronous no-op
   call, with the journal on (`bulletin up`, the default) against off (`bulletin up
   --no-journal`). Both clusters run side by side for the whole run, are warmed up alike, and
   are measured in alternating rounds (on, off, on, off, ...: a shared machine's load drifts,
   and each mode sees the same drift); each mode's median and spread (min-max) over the rounds
   are printed, and the ratio of the medians is the journal's cost (goal: at most 10 %).
2. Restart time with --restart-calls calls in the journal: one call holds the only slot while
   the others queue, the runtime is killed with SIGKILL, and `bulletin up` on the same home is
   timed until it serves, against `bulletin up` of the same cluster with an empty journal
   (goal: under 5 s). The runtime's log says how long reading the journal, finding the store's
   objects and restoring took. Set BULLETIN_JAR to time another build of the runtime.
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


def noop(x=None):
    # Defined here, not imported: the executor unpickles it by value (this script is __main__).
    return x


def up(home: Path, *extra: str, cpus: int = 1) -> float:
    env = {**os.environ, "BULLETIN_HOME": str(home)}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "bulletin._cli", "up", "--port", "0", "--http-port",
                    "0", "--cpus", str(cpus), "--simulate-gpus", "0", *extra], check=True,
                   env=env, capture_output=True)
    return time.perf_counter() - started


def connect(home: Path) -> "bulletin.Client":
    import json
    info = json.loads((home / "runtime.json").read_text())
    token = (home / "token").read_text().strip()
    return bulletin.Client(info["address"], token=token, set_as_default=False,
                           reconnect_timeout=0)


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
    client = connect(home)
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
    found = re.findall(r"store: found (\d+) objects .* in (\d+) ms", log)
    restored = re.findall(r"restored from the journal: .* (\d+) calls not ended.* in (\d+) ms", log)
    gate.touch()
    del futures, blocker
    down(home)
    return {"calls": calls, "submit_s": submit_seconds, "journal_mib": journal_bytes / 2**20,
            "up_empty_s": empty, "up_full_s": full,
            "read": read[-1] if read else None, "store": found[-1] if found else None,
            "restored": restored[-1] if restored else None}


def restart_with_jar(calls: int, jar: str) -> dict:
    before = os.environ.get("BULLETIN_JAR")
    os.environ["BULLETIN_JAR"] = jar
    try:
        return restart_time(calls)
    finally:
        if before is None:
            del os.environ["BULLETIN_JAR"]
        else:
            os.environ["BULLETIN_JAR"] = before


def sync_p50_ms(client, calls: int) -> float:
    latencies = []
    for _ in range(calls):
        started = time.perf_counter()
        client.submit(noop).result()
        latencies.append(time.perf_counter() - started)
    return statistics.median(latencies) * 1e3


def pipelined_per_s(client, calls: int) -> float:
    started = time.perf_counter()
    client.gather(client.map(noop, range(calls)))
    return calls / (time.perf_counter() - started)


def throughput(args) -> dict:
    """Journal on and off side by side, measured in alternating rounds: {mode: [rounds]}."""
    homes = {mode: Path(tempfile.mkdtemp(prefix=f"bulletin-journal-{mode}-"))
             for mode in ("on", "off")}
    clients = {}
    try:
        for mode, home in homes.items():
            up(home, "--journal" if mode == "on" else "--no-journal", cpus=args.workers)
            clients[mode] = connect(home)
        for mode, client in clients.items():
            # Steady state for both alike: the JVM's hot paths compiled, executors warm.
            sync_p50_ms(client, 200)
            done = 0
            while done < args.warmup:
                pipelined_per_s(client, args.pipelined)
                done += args.pipelined
        runs = {"on": [], "off": []}
        for round_ in range(args.rounds):
            for mode in ("on", "off"):
                run = {"pipelined_per_s": pipelined_per_s(clients[mode], args.pipelined),
                       "p50_ms": sync_p50_ms(clients[mode], args.calls)}
                runs[mode].append(run)
                print(f"round {round_ + 1} journal {mode:3}: {run['pipelined_per_s']:7.0f} "
                      f"pipelined calls/s, p50 {run['p50_ms']:.2f} ms", file=sys.stderr)
        return runs
    finally:
        for client in clients.values():
            client.close()
        for home in homes.values():
            down(home)


def report_throughput(runs: dict, goal: float = 0.10) -> None:
    def spread(mode, key):
        values = [r[key] for r in runs[mode]]
        return statistics.median(values), min(values), max(values)

    print(f"{'journal':8} {'pipelined calls/s: median [min-max]':36} {'p50 ms: median [min-max]'}")
    for mode in ("on", "off"):
        t, t_lo, t_hi = spread(mode, "pipelined_per_s")
        p, p_lo, p_hi = spread(mode, "p50_ms")
        print(f"{mode:8} {t:7.0f} [{t_lo:.0f}-{t_hi:.0f}]{'':18} {p:6.2f} [{p_lo:.2f}-{p_hi:.2f}]")
    through = spread("on", "pipelined_per_s")[0] / spread("off", "pipelined_per_s")[0]
    latency = spread("on", "p50_ms")[0] / spread("off", "p50_ms")[0]
    print(f"journal on/off, ratio of medians over {len(runs['on'])} rounds each: pipelined "
          f"throughput {through:.2f}x, p50 latency {latency:.2f}x")
    met = through >= 1 - goal and latency <= 1 + goal
    print(f"goal: the journal costs at most {goal:.0%} (throughput >= {1 - goal:.2f}x, p50 <= "
          f"{1 + goal:.2f}x): {'met' if met else 'NOT met'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="synchronous calls timed")
    parser.add_argument("--pipelined", type=int, default=2000, help="calls per pipelined batch")
    parser.add_argument("--warmup", type=int, default=4000, help="pipelined warm-up calls")
    parser.add_argument("--workers", type=int, default=2, help="executor slots (--cpus)")
    parser.add_argument("--rounds", type=int, default=6, help="on/off rounds, alternating")
    parser.add_argument("--restart-calls", type=int, default=100_000)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-restart", action="store_true")
    parser.add_argument("--compare-jar", metavar="JAR",
                        help="also time the restart with this runtime jar (an older build), "
                             "before this one, in the same run")
    args = parser.parse_args()
    if not args.skip_throughput:
        report_throughput(throughput(args))
    if not args.skip_restart:
        timed = {}
        if args.compare_jar:  # the other build first, then this one, in the same run
            timed["before"] = restart_with_jar(args.restart_calls, args.compare_jar)
        timed["now"] = restart_time(args.restart_calls)
        for name, r in timed.items():
            print(f"{name + ': ' if args.compare_jar else ''}restart with {r['calls']} calls in"
                  f" the journal ({r['journal_mib']:.1f} MiB, submitted in {r['submit_s']:.1f} s):"
                  f" `bulletin up` {r['up_full_s']:.2f} s against {r['up_empty_s']:.2f} s with an"
                  f" empty journal; journal read {r['read']} (records, ms), store {r['store']}"
                  f" (objects, ms), restore {r['restored']} (calls, ms)")
        if args.compare_jar:
            print(f"now/before: `bulletin up` with the full journal "
                  f"{timed['now']['up_full_s'] / timed['before']['up_full_s']:.2f}x, with an empty"
                  f" one {timed['now']['up_empty_s'] / timed['before']['up_empty_s']:.2f}x")
        r = timed["now"]
        print(f"goal: restart with {r['calls']} calls under 5 s: {r['up_full_s']:.2f} s, "
              f"{r['up_full_s'] / 5:.2f}x the goal: {'met' if r['up_full_s'] < 5 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
