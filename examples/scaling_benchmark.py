"""Time to the first result of a no-op GPU call, by how much of the pool has to start first.

    python examples/scaling_benchmark.py [--rounds 5] [--no-slurm] [--provider kubernetes]

For each provider (local processes, always, as the baseline; Slurm when `sinfo` answers, e.g.
after `make slurm-up`; Kubernetes with `--provider kubernetes`) it starts a throwaway runtime
whose only GPUs come from a pool (`max_workers: 1`, simulated GPUs on machines without any),
then measures, per round:

- from zero: submit to result while the pool has no worker (the worker is launched, starts its
  JVM and warm executor, attaches, runs the call), then the launch-to-attached time the pool
  reported ("registered after N ms"); for Slurm also Slurm's job start to attached;
- warm: submit to result of the next calls, with the worker attached and its executor warm:
  the first 100 (the worker's JVM is still compiling its hot paths) and, in the last round, the
  steady state (median of the last 500 of --warm-calls).

Between rounds the pool's idle timeout (2 s) takes the worker away again. Targets (issue 5):
warm equal to the no-op round trip of the overhead benchmark; from zero with the local provider
under 3 s; Slurm job start to worker ready under 5 s.

Kubernetes (issue 31) runs against the provider tests' Kubernetes, started as a process
(`KubeSimulation` in runtime's test sources, built here with `mvn -o test-compile`): a real
kube-apiserver and etcd on loopback (`make kube` installs etcd and builds the API server into
.stamps/kube; without them the row is skipped, saying so) and a SIMULATED node, `FakeKubelet`,
which binds each new Pod and runs its command on this machine (a real `bulletin worker` with
this interpreter and this `bulletin` package, its environment from the Pod's Secret). The
runtime reaches the API server through a kubeconfig with only the Role of docs/pools.md. So
"from zero" there is: Pod and Secret created through the API, seen by the watch, bound, worker
started, joined, executor warm, call; with no image pull, no real scheduler and no container
runtime, which a real cluster adds (seconds to minutes for a cold image). After the table the
same process runs KubernetesScaleIT's measure: the autoscaler's pass with 1,000 Pods in the
provider's informer cache (`--no-scale` leaves it out).
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

import bulletin


def noop():
    return None


REPO = Path(__file__).resolve().parents[1]


def _cli(home: str, *args: str, env: dict[str, str] | None = None) -> None:
    env = dict(os.environ, **(env or {}), BULLETIN_HOME=home)
    subprocess.run([sys.executable, "-m", "bulletin._cli", *args], check=True, env=env,
                   stdout=subprocess.DEVNULL)


def _slurm_partition() -> str | None:
    if shutil.which("sinfo") is None:
        return None
    out = subprocess.run(["sinfo", "-h", "-o", "%P %a"], capture_output=True, text=True)
    up = [p.rstrip("*") for p, state in (r.split() for r in out.stdout.splitlines()) if state == "up"]
    return up[0] if out.returncode == 0 and up else None


def _config(home: str, provider: str, partition: str | None, namespace: str | None) -> str:
    simulate = "true" if shutil.which("nvidia-smi") is None else "false"
    walltime = ", walltime: 30m" if provider == "slurm" else ""
    if provider == "slurm":
        options = f"    slurm: {{partition: {partition}, simulate_gpus: {simulate}}}"
    elif provider == "kubernetes":
        # The simulated node runs the Pod's command here: this interpreter, not the image's.
        options = (f"    python: {sys.executable}\n    kubernetes: {{namespace: {namespace},"
                   f" image: bulletin-worker:sim, simulate_gpus: {simulate}}}")
    else:
        options = f"    local: {{simulate_gpus: {simulate}}}"
    path = os.path.join(home, "pools.yaml")
    with open(path, "w") as f:
        f.write(f"pools:\n  - name: gpu\n    provider: {provider}\n"
                f"    worker: {{gpus: 1, cpus: 1{walltime}}}\n    max_workers: 1\n"
                f"    idle_timeout: 2s\n{options}\n")
    return path


class KubeSimulation:
    """runtime's KubeSimulation (test sources) as a child process: the API server, etcd and the
    simulated node live while it does; closing its stdin stops them all."""

    MAIN = "dev.bulletin.runtime.pool.impl.KubeSimulation"

    def __init__(self, java: str, classpath: str, logs: str):
        # The worker Pods run `bulletin worker` with this environment: this package.
        package = str(Path(bulletin.__file__).resolve().parents[1])
        pythonpath = os.pathsep.join(p for p in (package, os.environ.get("PYTHONPATH")) if p)
        self.stderr = open(os.path.join(logs, "kubesim.stderr"), "w")
        self.proc = subprocess.Popen([java, "-cp", classpath, self.MAIN, logs], cwd=REPO,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True,
                                     env=dict(os.environ, PYTHONPATH=pythonpath))
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def until(self, prefix: str, timeout: float) -> tuple[str, list[str]]:
        """The first line starting with `KUBESIM ` (its rest), and the lines before it."""
        before, deadline = [], time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(f"KubeSimulation said no '{prefix}' within {timeout:.0f} s"
                                   f" (its stderr: {self.stderr.name})") from None
            if line is None:
                raise RuntimeError(f"KubeSimulation exited ({self.proc.wait()}): "
                                   + "; ".join(before[-5:]) + f" (its stderr: {self.stderr.name})")
            if line.startswith("KUBESIM "):
                return line[len("KUBESIM "):], before
            before.append(line)

    def scale(self) -> list[str]:
        """KubernetesScaleIT's measure, run in the simulation's JVM: its printed lines."""
        self.proc.stdin.write("scale\n")
        self.proc.stdin.flush()
        said, lines = self.until("scale-", 600)
        return lines + ([] if said == "scale-done" else [said])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                self.proc.wait(timeout=30)
        self.stderr.close()


def _kube_missing() -> str | None:
    """Why the Kubernetes row cannot run here, or None."""
    missing = [p for p in ("/usr/bin/etcd", str(REPO / ".stamps/kube/kube-apiserver"))
               if not os.access(p, os.X_OK)]
    if missing:
        return (f"{' and '.join(missing)} missing; `make kube` installs etcd-server and builds the"
                " API server (.ci/kube.sh)")
    if shutil.which("mvn") is None:
        return "no `mvn` to build the simulation (runtime's test sources)"
    return None


def _kube_classpath() -> tuple[str, str]:
    """(java, classpath) of KubeSimulation: runtime's test and main classes, the modules' own
    classes (not stale copies in ~/.m2), and runtime's test-scope dependencies."""
    mvn = ["mvn", "-o", "-q", "-B"]
    env = dict(os.environ, MAVEN_OPTS=os.environ.get("MAVEN_OPTS", "") + " -Djansi.noreset=true")
    subprocess.run([*mvn, "-pl", "runtime", "-am", "test-compile"], cwd=REPO, env=env, check=True)
    out = REPO / "runtime/target/kubesim.classpath"
    subprocess.run([*mvn, "dependency:build-classpath", f"-Dmdep.outputFile={out}",
                    "-Dmdep.includeScope=test"], cwd=REPO / "runtime", env=env, check=True,
                   stdout=subprocess.DEVNULL)
    jars = [j for j in out.read_text().strip().split(os.pathsep)
            if j and "/dev/bulletin/" not in j]
    own = [str(REPO / m / "target" / c) for m, c in (("runtime", "test-classes"),
                                                   ("runtime", "classes"), ("worker", "classes"),
                                                   ("arrow-bridge", "classes"),
                                                   ("protocol", "classes"))]
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java") or "java"
    return java, os.pathsep.join(own + jars)


def _registered_ms(events) -> float | None:
    for event in reversed(events):
        m = re.search(r"registered after (\d+) ms", event)
        if m:
            return float(m.group(1))
    return None


def _slurm_start_to_attach(client) -> float | None:
    """Slurm's StartTime of the worker's job (1 s resolution) to now (it has attached), in s."""
    for worker in client.status().workers:
        if worker.provider_handle.startswith("slurm:"):
            job = worker.provider_handle.split(":", 1)[1]
            start = subprocess.run(["squeue", "-h", "-j", job, "-o", "%S"], capture_output=True,
                                   text=True).stdout.strip()
            if start and start[0].isdigit():
                return time.time() - datetime.fromisoformat(start).timestamp()
    return None


def bench(provider: str, rounds: int, warm_calls: int, partition: str | None = None,
          kube: tuple[str, str] | None = None) -> dict:
    """kube: (kubeconfig, namespace) of the simulation, for provider kubernetes."""
    home = tempfile.mkdtemp(prefix=f"bulletin-scaling-{provider}-")
    env = {"KUBECONFIG": kube[0]} if kube else {}
    _cli(home, "up", "--port", "0", "--cpus", "1", "--simulate-gpus", "0",
         "--config", _config(home, provider, partition, kube[1] if kube else None), env=env)
    zero, launch, slurm_start, warm, steady = [], [], [], [], []
    try:
        os.environ["BULLETIN_HOME"] = home
        with bulletin.Client() as client:
            for round_ in range(rounds):
                while any(w.pool for w in client.status().workers):
                    time.sleep(0.2)  # wait for the idle timeout to take the worker away
                t = time.perf_counter()
                client.submit(noop, gpus=1).result(timeout=300)
                zero.append(time.perf_counter() - t)
                if provider == "slurm":
                    slurm_start.append(_slurm_start_to_attach(client) or float("nan"))
                launch.append((_registered_ms(client.status().pool_events) or float("nan")) / 1e3)
                calls = warm_calls if round_ == rounds - 1 else 100
                times = []
                for _ in range(calls):
                    t = time.perf_counter()
                    client.submit(noop, gpus=1).result(timeout=60)
                    times.append(time.perf_counter() - t)
                warm += times[:100]
                steady += times[100:][-500:]
    finally:
        _cli(home, "down")
        shutil.rmtree(home, ignore_errors=True)
    return {"zero": zero, "launch": launch, "slurm_start": slurm_start, "warm": warm,
            "steady": steady}


def bench_kubernetes(rounds: int, warm_calls: int, scale: bool) -> tuple[dict | None, list[str]]:
    """The Kubernetes row and KubernetesScaleIT's lines, or (None, [why it was skipped])."""
    missing = _kube_missing()
    if missing:
        return None, [f"(Kubernetes skipped: {missing})"]
    print("(building the Kubernetes simulation: mvn -o test-compile, dependency:build-classpath)")
    try:
        java, classpath = _kube_classpath()
    except subprocess.CalledProcessError as e:
        return None, [f"(Kubernetes skipped: `{' '.join(e.cmd)}` failed, exit {e.returncode})"]
    logs = tempfile.mkdtemp(prefix="bulletin-scaling-kubesim-")
    sim, done = KubeSimulation(java, classpath, logs), False
    try:
        said, _ = sim.until("ready", 180)
        if said.startswith("unavailable"):
            done = True
            return None, [f"(Kubernetes skipped: {said[len('unavailable '):]})"]
        _, kubeconfig, namespace = said.split()
        result = bench("kubernetes", rounds, warm_calls, kube=(kubeconfig, namespace))
        lines = ([] if not scale else
                 ["\nKubernetesScaleIT's measure, in the simulation (1,000 Pods in the"
                  " provider's informer cache):", *sim.scale()])
        done = True
        return result, lines
    finally:
        sim.close()
        if done:
            shutil.rmtree(logs, ignore_errors=True)
        else:
            print(f"(the Pods' output and the simulation's stderr are in {logs})")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Kubernetes: a real kube-apiserver and etcd (`make kube`) with a simulated node"
               " that runs the worker Pods here; see this script's docstring.")
    parser.add_argument("--rounds", type=int, default=5, help="from-zero rounds (default 5)")
    parser.add_argument("--warm-calls", type=int, default=2000,
                        help="warm calls of the last round (default 2000; steady = last 500)")
    parser.add_argument("--no-slurm", action="store_true", help="leave out the Slurm row")
    parser.add_argument("--provider", action="append", choices=["local", "slurm", "kubernetes"],
                        help="a provider to measure besides local (repeatable); default: slurm"
                             " when `sinfo` answers. kubernetes: the API-server simulation")
    parser.add_argument("--no-scale", action="store_true",
                        help="with kubernetes: leave out the autoscaler pass with 1,000 Pods")
    args = parser.parse_args()
    wanted = set(args.provider or ["slurm"])
    partition = None if args.no_slurm or "slurm" not in wanted else _slurm_partition()
    results, notes = {"local": bench("local", args.rounds, args.warm_calls)}, []
    if partition:
        results["slurm"] = bench("slurm", args.rounds, args.warm_calls, partition)
    elif "slurm" in wanted and not args.no_slurm:
        notes.append("(Slurm skipped: no `sinfo` answering; `make slurm-up` starts the test Slurm)")
    if "kubernetes" in wanted:
        kube, lines = bench_kubernetes(args.rounds, args.warm_calls, not args.no_scale)
        if kube:
            results["kubernetes"] = kube
        notes += lines
    med = lambda xs: statistics.median(xs) * 1e3 if xs else float("nan")  # noqa: E731
    print(f"\ntime to first result of a no-op GPU call, {args.rounds} rounds, "
          f"{os.cpu_count()} cores (medians, ms)")
    print(f"{'provider':10s} {'warm 100':>9s} {'steady':>7s} {'from zero':>10s} "
          f"{'launch->attached':>17s} {'slurm start->attached':>22s}")
    for name, r in results.items():
        print(f"{name:10s} {med(r['warm']):9.2f} {med(r['steady']):7.2f} {med(r['zero']):10.0f} "
              f"{med(r['launch']):17.0f} {med(r['slurm_start']):22.0f}")
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
