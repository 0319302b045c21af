"""What the journal costs, and how long a restart with a full journal takes (docs/durability.md).

    python examples/journal_benchmark.py                     # both parts
    python examples/journal_benchmark.py --rounds 8 --calls 300 --pipelined 2000
    python examples/journal_benchmark.py --skip-throughput --restart-calls 100000 \
        --compare-jar /tmp/bulletin-runtime-before.jar

1. Pipelined no-op throughput (submit all, then gather) and the p50 of a synchronous no-op
   call, with the journal on (`bulletin up`, the default) against off (`bulletin up
   --no-journal`). Both clusters run side by side for the whole run, are warmed up alike, and
   are measured in alternating rounds (on off, off on, on off, ...: a shared machine's load
   drifts, and each mode sees the same drift); each mode's median and spread (min-max) over the rounds
   are printed, and the ratio of the medians is the journal's cost (goal: at most 10 %), with
   the median of each round's own on/off ratio beside it. With --compare-jar OLD.jar a third
   cluster, the journal on with that build, runs in the same rounds.
2. Restart time with --restart-calls calls in the journal: one call holds the only slot while
   the others queue, the runtime is killed with SIGKILL, and the journal and store are saved.
   `bulletin up` on a fresh copy of them is timed until it serves (then SIGKILL again), against
   `bulletin up` of a new cluster with an empty journal, --restart-rounds times (goal: under
   5 s). With --compare-jar OLD.jar an older build is timed the same way in alternating rounds,
   on copies of the same journal, and the ratio of the medians printed. The runtime's log says
   how long reading the journal, finding the store's objects and restoring took.
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


def restart_times(calls: int, jars: dict, rounds: int) -> dict:
    """One journal of ``calls`` queued calls is made once (one call holds the only slot while
    the others queue, then the runtime is killed with SIGKILL) and saved with its store. Then,
    ``rounds`` times, for each runtime jar in turn (alternating: a shared machine's load
    drifts): `bulletin up` on a fresh copy of that journal and store, timed until it serves,
    then SIGKILL again; and `bulletin up` of a new cluster with an empty journal, for
    comparison. ``jars``: name -> jar (None: $BULLETIN_JAR or the installed one)."""
    import json
    import shutil
    home = Path(tempfile.mkdtemp(prefix="bulletin-journal-bench-"))
    saved = Path(tempfile.mkdtemp(prefix="bulletin-journal-saved-"))
    up(home)
    info = json.loads((home / "runtime.json").read_text())
    store = Path(info["store_dir"])
    client = connect(home)
    client.submit(hold, str(home / "gate"))  # never opened: the other calls stay queued
    started = time.perf_counter()
    futures = client.map(noop, range(calls), batch_size=5000)
    # Every Submit answered: the calls are in the journal.
    while client._submitter._queue._unacknowledged:  # noqa: SLF001 - a benchmark's peek
        time.sleep(0.1)
    submit_seconds = time.perf_counter() - started
    os.kill(info["pid"], signal.SIGKILL)
    time.sleep(0.5)
    del futures
    journal_bytes = sum(f.stat().st_size for f in (home / "journal").iterdir())
    shutil.copytree(home / "journal", saved / "journal")
    shutil.copytree(store, saved / "store")
    port = info["address"].rsplit(":", 1)[1]
    runs = {name: {"full": [], "empty": [], "log": None} for name in jars}
    try:
        for _ in range(rounds):
            for name, jar in jars.items():
                with runtime_jar(jar):
                    for folder, copy in ((home / "journal", "journal"), (store, "store")):
                        shutil.rmtree(folder, ignore_errors=True)
                        shutil.copytree(saved / copy, folder)
                    runs[name]["full"].append(up(home, "--port", port))
                    pid = json.loads((home / "runtime.json").read_text())["pid"]
                    os.kill(pid, signal.SIGKILL)
                    runs[name]["log"] = (home / "runtime.log").read_text()
                    empty = Path(tempfile.mkdtemp(prefix="bulletin-journal-empty-"))
                    runs[name]["empty"].append(up(empty))
                    down(empty)
                    shutil.rmtree(empty, ignore_errors=True)
    finally:
        client.close()
        for folder in (home, saved, store):
            shutil.rmtree(folder, ignore_errors=True)
    for run in runs.values():
        log = run.pop("log") or ""
        read = re.findall(r"journal: read (\d+) records .* in (\d+) ms", log)
        found = re.findall(r"store: found (\d+) objects .* in (\d+) ms", log)
        restored = re.findall(r"restored from the journal: .* (\d+) calls not ended.* in (\d+) ms",
                              log)
        run.update(read=read[-1] if read else None, store=found[-1] if found else None,
                   restored=restored[-1] if restored else None)
    return {"calls": calls, "submit_s": submit_seconds, "journal_mib": journal_bytes / 2**20,
            "runs": runs}


class runtime_jar:
    """Runs `bulletin up` with this jar (None: as configured)."""

    def __init__(self, jar):
        self.jar, self.before = jar, os.environ.get("BULLETIN_JAR")

    def __enter__(self):
        if self.jar:
            os.environ["BULLETIN_JAR"] = self.jar

    def __exit__(self, *exc):
        if self.before is None:
            os.environ.pop("BULLETIN_JAR", None)
        else:
            os.environ["BULLETIN_JAR"] = self.before


def report_restart(timed: dict, goal_s: float = 5.0) -> None:
    runs = timed["runs"]
    print(f"restart with {timed['calls']} calls in the journal ({timed['journal_mib']:.1f} MiB,"
          f" submitted in {timed['submit_s']:.1f} s); `bulletin up` until it serves, median"
          f" [min-max] over {len(next(iter(runs.values()))['full'])} alternating rounds:")
    for name, run in runs.items():
        full, empty = statistics.median(run["full"]), statistics.median(run["empty"])
        print(f"  {name:7} full journal {full:6.2f} s [{min(run['full']):.2f}-"
              f"{max(run['full']):.2f}], empty journal {empty:6.2f} s [{min(run['empty']):.2f}-"
              f"{max(run['empty']):.2f}]; last full start's log: journal read {run['read']}"
              f" (records, ms), store {run['store']} (objects, ms), restore {run['restored']}"
              f" (calls, ms)")
    if "before" in runs:
        now, before = runs["now"], runs["before"]
        print(f"now/before, ratio of medians: full journal "
              f"{statistics.median(now['full']) / statistics.median(before['full']):.2f}x, empty"
              f" journal {statistics.median(now['empty']) / statistics.median(before['empty']):.2f}x")
    full = statistics.median(runs["now"]["full"])
    print(f"goal: restart with {timed['calls']} calls under {goal_s:g} s: {full:.2f} s, "
          f"{full / goal_s:.2f}x the goal: {'met' if full < goal_s else 'NOT met'}")


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
    modes = ("on", "off", "before") if args.compare_jar else ("on", "off")
    homes = {mode: Path(tempfile.mkdtemp(prefix=f"bulletin-journal-{mode}-")) for mode in modes}
    clients = {}
    try:
        for mode, home in homes.items():
            # "before": the journal on, with --compare-jar's runtime (an older build).
            with runtime_jar(args.compare_jar if mode == "before" else None):
                up(home, "--no-journal" if mode == "off" else "--journal", cpus=args.workers)
            clients[mode] = connect(home)
        for mode, client in clients.items():
            # Steady state for both alike: the JVM's hot paths compiled, executors warm.
            sync_p50_ms(client, 200)
            done = 0
            while done < args.warmup:
                pipelined_per_s(client, args.pipelined)
                done += args.pipelined
        runs = {mode: [] for mode in modes}
        for round_ in range(args.rounds):
            # Alternating, the order swapped every round (on off, off on, ...): a drift of the
            # machine's load (or of the JIT's warm-up) falls on both modes alike.
            for mode in modes if round_ % 2 == 0 else modes[::-1]:
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
    for mode in runs:
        t, t_lo, t_hi = spread(mode, "pipelined_per_s")
        p, p_lo, p_hi = spread(mode, "p50_ms")
        print(f"{mode:8} {t:7.0f} [{t_lo:.0f}-{t_hi:.0f}]{'':18} {p:6.2f} [{p_lo:.2f}-{p_hi:.2f}]")
    through = spread("on", "pipelined_per_s")[0] / spread("off", "pipelined_per_s")[0]
    latency = spread("on", "p50_ms")[0] / spread("off", "p50_ms")[0]
    print(f"journal on/off, ratio of medians over {len(runs['on'])} rounds each: pipelined "
          f"throughput {through:.2f}x, p50 latency {latency:.2f}x")
    paired = {key: statistics.median(on[key] / off[key] for on, off in zip(runs["on"], runs["off"]))
              for key in ("pipelined_per_s", "p50_ms")}
    print(f"journal on/off, median of the {len(runs['on'])} rounds' own ratios: pipelined "
          f"throughput {paired['pipelined_per_s']:.2f}x, p50 latency {paired['p50_ms']:.2f}x")
    if "before" in runs:
        print(f"journal on, this build/--compare-jar's, ratio of medians: pipelined throughput "
              f"{spread('on', 'pipelined_per_s')[0] / spread('before', 'pipelined_per_s')[0]:.2f}x,"
              f" p50 latency {spread('on', 'p50_ms')[0] / spread('before', 'p50_ms')[0]:.2f}x")
    met = through >= 1 - goal and latency <= 1 + goal
    print(f"goal: the journal costs at most {goal:.0%} (throughput >= {1 - goal:.2f}x, p50 <= "
          f"{1 + goal:.2f}x): {'met' if met else 'NOT met'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="synchronous calls timed")
    parser.add_argument("--pipelined", type=int, default=2000, help="calls per pipelined batch")
    parser.add_argument("--warmup", type=int, default=10000,
                        help="pipelined warm-up calls per cluster")
    parser.add_argument("--workers", type=int, default=2, help="executor slots (--cpus)")
    parser.add_argument("--rounds", type=int, default=10, help="on/off rounds, alternating")
    parser.add_argument("--restart-calls", type=int, default=100_000)
    parser.add_argument("--restart-rounds", type=int, default=3,
                        help="restarts timed per jar, alternating with --compare-jar's")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-restart", action="store_true")
    parser.add_argument("--compare-jar", metavar="JAR",
                        help="also run an older build: the journal-on throughput and p50 with "
                             "this runtime jar in the same alternating rounds, and the restart "
                             "alternating with this one, on copies of the same journal")
    args = parser.parse_args()
    if not args.skip_throughput:
        report_throughput(throughput(args))
    if not args.skip_restart:
        jars = {"before": args.compare_jar, "now": None} if args.compare_jar else {"now": None}
        report_restart(restart_times(args.restart_calls, jars, args.restart_rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
