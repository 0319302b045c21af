"""What utilisation sampling costs the runtime: its CPU per second while N simulated remote
workers (8 simulated GPUs each) send a heartbeat every second, once with 8 GPU utilisation
samples in each heartbeat and once without (the peer, in the same run). The workers are bare
Attach streams under the cluster's worker token: no executors, so only the runtime is measured.

    python examples/usage_sampling_benchmark.py [--workers 100] [--seconds 30]
"""

from __future__ import annotations

import argparse
import os
import queue
import random
import threading
import time

import grpc

import bulletin
from bulletin._proto import bulletin_pb2 as pb
from bulletin._proto import bulletin_pb2_grpc as pb_grpc

from _local_cluster import local_cluster


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class FakeWorker:
    """An Attach stream that registers and sends one heartbeat per second."""

    def __init__(self, stub, token: str, worker_id: str, version: str, samples: bool):
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.samples = samples
        self.outbox.put(pb.WorkerMessage(register=pb.RegisterWorker(
            worker_id=worker_id, host="bench", gpu_names=[f"simulated GPU {i}" for i in range(8)],
            simulated_gpus=True, cpus=32, memory_bytes=256 << 30, version=version)))
        self.replies = stub.Attach(iter(self.outbox.get, None),
                                   metadata=(("authorization", f"Bearer {token}"),))
        self.accepted = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for reply in self.replies:
                if reply.HasField("accepted"):
                    self.accepted.set()
        except grpc.RpcError:
            pass

    def beat(self) -> None:
        beat = pb.WorkerHeartbeat(running_calls=8)
        if self.samples:
            beat.gpu_utilisation.extend(pb.GpuUtilisationSample(gpu=g, utilisation=random.random())
                                        for g in range(8))
        self.outbox.put(pb.WorkerMessage(heartbeat=beat))

    def close(self) -> None:
        self.outbox.put(None)
        self.replies.cancel()


def measure(client, home: str, pid: int, workers: int, seconds: float, samples: bool) -> float:
    token = open(os.path.join(home, "worker-token"), encoding="ascii").read().strip()
    channel = grpc.insecure_channel(client.address)
    stub = pb_grpc.WorkersStub(channel)
    fleet = [FakeWorker(stub, token, f"bench-{samples:d}-{i}", client.runtime_version, samples)
             for i in range(workers)]
    try:
        for w in fleet:
            if not w.accepted.wait(30):
                raise SystemExit("a fake worker was not accepted (see runtime.log)")
        time.sleep(2)  # the attach burst settles
        start_cpu, start = cpu_seconds(pid), time.monotonic()
        while time.monotonic() - start < seconds:
            for w in fleet:
                w.beat()
            time.sleep(1.0)
        return (cpu_seconds(pid) - start_cpu) / (time.monotonic() - start)
    finally:
        for w in fleet:
            w.close()
        channel.close()
        time.sleep(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=30)
    args = parser.parse_args()
    with local_cluster(cpus=1, reuse=False) as client:
        home = os.environ["BULLETIN_HOME"]
        import json
        pid = json.load(open(os.path.join(home, "runtime.json"), encoding="utf-8"))["pid"]
        idle_start, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(5)
        idle = (cpu_seconds(pid) - idle_start) / (time.monotonic() - t0)
        without = measure(client, home, pid, args.workers, args.seconds, samples=False)
        with_samples = measure(client, home, pid, args.workers, args.seconds, samples=True)
        print(f"runtime CPU, {args.workers} workers x 8 GPUs, a heartbeat per second each, "
              f"{args.seconds:.0f} s per run:")
        print(f"  idle (no workers attached)        {idle:.3f} CPU-s/s")
        print(f"  heartbeats without GPU samples    {without:.3f} CPU-s/s")
        print(f"  heartbeats with 8 GPU samples     {with_samples:.3f} CPU-s/s")
        print(f"  sampling costs                    {with_samples - without:+.3f} CPU-s/s "
              f"({(with_samples - without) / max(without, 1e-9):+.0%} of the heartbeats')")


if __name__ == "__main__":
    main()
