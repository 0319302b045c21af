"""What the runtime's metrics and dashboard cost: one runtime with them on (`--http-port 0`)
against one with them off (`--http-port off`), side by side in the same run.

    python examples/metrics_benchmark.py                       # defaults below
    python examples/metrics_benchmark.py --rounds 9 --calls 2000 --workers 100 --window 30

1. Pipelined no-op throughput (submit a map of no-op calls, gather them), in rounds that
   alternate between the two runtimes so that the machine's noise falls on both alike, each
   runtime running as many calls; /metrics of the "on" one is scraped every --scrape-seconds
   (with --dashboard, the dashboard's three API calls are polled every 2 s too, as an open
   browser tab does). Reported: the median of the rounds for each, and on/off, in calls per
   second and in the runtime's CPU per call (from /proc, steadier on a busy machine).
2. The runtime's CPU per second with --workers simulated workers attached (gRPC Attach with
   the worker token, a heartbeat from each every second; named as a simulation: no executor
   runs), measured from /proc/PID/stat of both runtimes over the same window, the "on" one
   scraped and polled as above. The usage ledger's utilisation samples ride these heartbeats
   once that branch is in; until then this measures the heartbeat and status path.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import grpc

import bulletin
from bulletin._proto import bulletin_pb2 as pb

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def noop(x=None):
    return x


class Runtime:
    """A runtime of its own (`bulletin up` in a temporary BULLETIN_HOME)."""

    def __init__(self, http_port: str, cpus: int):
        self.home = Path(tempfile.mkdtemp(prefix=f"bulletin-metrics-bench-{http_port}-"))
        self.env = dict(os.environ, BULLETIN_HOME=str(self.home))
        self.env.pop("BULLETIN_ADDRESS", None)
        self.env.pop("BULLETIN_TOKEN", None)
        up = subprocess.run([sys.executable, "-m", "bulletin._cli", "up", "--port", "0",
                             "--http-port", http_port, "--simulate-gpus", "1", "--cpus",
                             str(cpus)], env=self.env, capture_output=True, text=True)
        if up.returncode != 0:
            raise SystemExit(f"`bulletin up --http-port {http_port}` failed:\n{up.stdout}"
                             f"{up.stderr}")
        self.info = json.loads((self.home / "runtime.json").read_text())
        self.token = (self.home / "token").read_text().strip()
        self.worker_token = (self.home / "worker-token").read_text().strip()
        self.client = bulletin.Client(self.info["address"], token=self.token,
                                      set_as_default=False)

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.info['pid']}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime

    def stop(self) -> None:
        self.client.close()
        subprocess.run([sys.executable, "-m", "bulletin._cli", "down"], env=self.env,
                       capture_output=True)
        shutil.rmtree(self.home, ignore_errors=True)


class Observer:
    """A Prometheus scraping /metrics and a browser tab polling the dashboard's API."""

    def __init__(self, runtime: Runtime, scrape_seconds: float):
        self.url = runtime.info["dashboard_url"]
        self.token = runtime.token
        self.scrape_seconds = scrape_seconds
        self.stop = threading.Event()
        self.dashboard_open = threading.Event()  # the tab polls only while this is set
        self.dashboard_open.set()
        self.scrapes = 0
        self.polls = 0
        self.threads = [threading.Thread(target=self._scrape, daemon=True),
                        threading.Thread(target=self._poll, daemon=True)]

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join()

    def _get(self, path: str, token: str | None = None) -> None:
        request = urllib.request.Request(self.url + path)
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def _scrape(self) -> None:
        while not self.stop.wait(self.scrape_seconds):
            self._get("metrics")
            self.scrapes += 1

    def _poll(self) -> None:
        while not self.stop.wait(2.0):
            if not self.dashboard_open.is_set():
                continue
            for path in ("api/status", "api/usage", "api/history"):
                self._get(path, self.token)
            self.polls += 1


def pipelined(runtime: Runtime, calls: int) -> tuple[float, float]:
    """(calls per second, runtime CPU seconds per 1,000 calls) of one map of no-op calls."""
    cpu = runtime.cpu_seconds()
    start = time.perf_counter()
    runtime.client.gather(runtime.client.map(noop, range(calls)))
    elapsed = time.perf_counter() - start
    return calls / elapsed, (runtime.cpu_seconds() - cpu) / calls * 1000


class SimulatedWorkers:
    """N worker agents that register with no executors and send a heartbeat every second: a
    simulation of a large cluster's reporting load, nothing runs on them."""

    def __init__(self, runtime: Runtime, count: int, gpus: int = 8):
        self.stop = threading.Event()
        version = runtime.client._conn.hello.runtime_version
        self.channels = []
        self.threads = []
        self.accepted = 0
        self._lock = threading.Lock()
        for i in range(count):
            channel = grpc.insecure_channel(runtime.info["address"])
            attach = channel.stream_stream(
                "/bulletin.v1.Workers/Attach",
                request_serializer=pb.WorkerMessage.SerializeToString,
                response_deserializer=pb.HeadMessage.FromString)
            register = pb.RegisterWorker(
                worker_id=f"sim-{i:03d}", host=f"sim-host-{i:03d}", simulated_gpus=True,
                gpu_names=[f"simulated GPU {g}" for g in range(gpus)], cpus=16,
                memory_bytes=64 << 30, version=version)
            responses = attach(self._messages(register),
                               metadata=(("authorization", f"Bearer {runtime.worker_token}"),))
            thread = threading.Thread(target=self._read, args=(responses,), daemon=True)
            thread.start()
            self.channels.append(channel)
            self.threads.append(thread)

    def _messages(self, register):
        yield pb.WorkerMessage(register=register)
        while not self.stop.wait(1.0):
            yield pb.WorkerMessage(heartbeat=pb.WorkerHeartbeat(running_calls=0))

    def _read(self, responses) -> None:
        try:
            for message in responses:
                if message.HasField("accepted"):
                    with self._lock:
                        self.accepted += 1
        except grpc.RpcError:
            pass  # closed at the end

    def close(self) -> None:
        self.stop.set()
        for channel in self.channels:
            channel.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per runtime (default 5)")
    parser.add_argument("--calls", type=int, default=2000, help="no-op calls per round")
    parser.add_argument("--warmup", type=int, default=30000,
                        help="pipelined calls each runtime runs before timing (JIT; default "
                             "30000)")
    parser.add_argument("--dashboard", action="store_true",
                        help="a dashboard tab polls the 'on' runtime during the throughput "
                             "rounds too")
    parser.add_argument("--cpus", type=int, default=2, help="CPU executors per runtime")
    parser.add_argument("--workers", type=int, default=100, help="simulated workers")
    parser.add_argument("--window", type=float, default=30.0,
                        help="seconds over which the runtimes' CPU is measured")
    parser.add_argument("--scrape-seconds", type=float, default=5.0,
                        help="how often /metrics is scraped (Prometheus' default is 60 s, "
                             "common setups 15 s)")
    args = parser.parse_args()

    on, off = Runtime("0", args.cpus), Runtime("off", args.cpus)
    try:
        for runtime in (on, off):
            done = 0
            while done < args.warmup:
                pipelined(runtime, min(args.calls, args.warmup - done))
                done += args.calls
        # Both runtimes run exactly as many calls, in alternating rounds (the JIT keeps
        # compiling the runtime's hot paths for tens of thousands of calls: a runtime that ran
        # more would look faster for that alone). The first round of each is not counted.
        results = {"off": [], "on": []}
        with Observer(on, args.scrape_seconds) as observer:
            if not args.dashboard:
                observer.dashboard_open.clear()
            for round_ in range(args.rounds + 1):
                for name, runtime in (("off", off), ("on", on)) if round_ % 2 else (
                        ("on", on), ("off", off)):
                    result = pipelined(runtime, args.calls)
                    if round_:
                        results[name].append(result)
        rate = {name: statistics.median(r[0] for r in rounds) for name, rounds in results.items()}
        cpu = {name: statistics.median(r[1] for r in rounds) for name, rounds in results.items()}
        print(f"\npipelined no-op calls, {args.rounds} rounds of {args.calls} each, the two "
              f"runtimes alternating (median); /metrics of the 'on' runtime scraped every "
              f"{args.scrape_seconds:g} s throughout ({observer.scrapes} scrapes)"
              + (f", a dashboard tab polling it every 2 s ({observer.polls} polls)"
                 if args.dashboard else ""))
        print(f"{'':<44}{'calls/s':>9}{'vs off':>8}{'runtime CPU s/1000 calls':>26}")
        for name, label in (("off", "metrics off (--http-port off)"),
                            ("on", "metrics on (--http-port 0), scraped")):
            print(f"{label:<44}{rate[name]:>9.0f}{rate[name] / rate['off']:>8.3f}"
                  f"{cpu[name]:>26.3f}")
        print("rounds (calls/s): " + "; ".join(
            f"{name} {[round(r[0]) for r in rounds]}" for name, rounds in results.items()))

        sims = [SimulatedWorkers(runtime, args.workers) for runtime in (on, off)]
        try:
            deadline = time.monotonic() + 60
            while any(s.accepted < args.workers for s in sims) and time.monotonic() < deadline:
                time.sleep(0.2)
            if any(s.accepted < args.workers for s in sims):
                raise SystemExit(f"only {[s.accepted for s in sims]} of {args.workers} simulated "
                                 "workers were accepted")
            time.sleep(5)  # past the attach burst
            # First nobody looks (metrics kept, the chart sampled), then Prometheus scrapes the
            # 'on' runtime, then a dashboard tab polls it too; both runtimes measured together.
            windows = {}
            for watched in ("nobody", "scraped", "dashboard"):
                observer = Observer(on, args.scrape_seconds) if watched != "nobody" else None
                if observer:
                    if watched == "scraped":
                        observer.dashboard_open.clear()
                    observer.__enter__()
                before = {runtime: runtime.cpu_seconds() for runtime in (on, off)}
                start = time.monotonic()
                time.sleep(args.window)
                elapsed = time.monotonic() - start
                windows[watched] = {runtime: (runtime.cpu_seconds() - before[runtime]) / elapsed
                                    for runtime in (on, off)}
                if observer:
                    observer.__exit__(None, None, None)
            gpus = on.client.status().gpus.total
        finally:
            for s in sims:
                s.close()
        print(f"\n{args.workers} simulated workers (8 simulated GPUs each, {gpus} GPUs in all) "
              f"sending a heartbeat every second; three {args.window:g} s windows (the 'on' "
              f"runtime: /metrics scraped every {args.scrape_seconds:g} s; a dashboard tab "
              f"polling its three API calls every 2 s)")
        print(f"{'runtime CPU, ms per second':<52}{'metrics on':>11}{'off':>8}")
        for watched, label in (("nobody", "nobody scraping or looking"),
                               ("scraped", "on: scraped"),
                               ("dashboard", "on: scraped, dashboard tab open")):
            used = windows[watched]
            print(f"{label:<52}{used[on] * 1000:>11.1f}{used[off] * 1000:>8.1f}")
    finally:
        on.stop()
        off.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
