"""What Client.status() and `bulletin status` report: workers, slots and the queue."""

from __future__ import annotations

from dataclasses import dataclass, field


def format_bytes(n: int) -> str:
    if n <= 0:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class Slots:
    total: int
    reserved: int  # held by placed or running calls
    busy: int      # running a call right now
    # GPUs: reserved with a GPU that fractional calls share counted as their shares (1.5 for a
    # whole GPU and two quarters); `reserved` counts that GPU as 1.
    reserved_share: float = 0.0

    @property
    def free(self) -> int:
        return self.total - self.reserved

    def __str__(self) -> str:
        shared = (f" ({self.reserved_share:g} in GPU shares)"
                  if self.reserved_share and self.reserved_share != self.reserved else "")
        return f"{self.total} total, {self.reserved} reserved{shared}, {self.busy} busy"

    @classmethod
    def _from_proto(cls, msg) -> Slots:
        return cls(msg.total, msg.reserved, msg.busy, msg.reserved_share)


@dataclass(frozen=True)
class WorkerInfo:
    worker_id: str
    host: str
    gpus: Slots
    cpus: Slots
    memory_bytes: int
    simulated_gpus: bool
    executors: int
    idle_executors: int
    gpu_names: tuple[str, ...]
    pool: str = ""
    state: str = "ready"
    remote: bool = False
    provider_handle: str = ""  # e.g. "slurm:1234"
    # A remote worker's own store: references held there (its last heartbeat), and results it
    # keeps for the runtime that were not fetched yet.
    store_referenced: int = 0
    kept_objects: int = 0
    # GPUs fractional calls share: GPU index to the share held (0.75), e.g. {0: 0.5}.
    gpu_shares: dict = field(default_factory=dict)


@dataclass(frozen=True)
class QueuedCall:
    task_id: str
    name: str
    user: str
    gpus: int | float  # whole GPUs, or a share of one (0.5)
    cpus: float
    memory_bytes: int
    position: int
    reason: str


@dataclass(frozen=True)
class PoolInfo:
    name: str
    provider: str
    starting: int
    idle: int
    busy: int
    draining: int
    max_workers: int
    backoff_until: float  # epoch seconds; 0 when launches do not back off
    problem: str = ""  # why the pool does not grow now (e.g. a Pod's scheduler reason); "" if nothing


@dataclass(frozen=True)
class ClusterStatus:
    cluster_id: str
    workers: tuple[WorkerInfo, ...]
    gpus: Slots
    cpus: Slots
    queue: tuple[QueuedCall, ...]
    running: int
    pools: tuple[PoolInfo, ...] = ()
    pool_events: tuple[str, ...] = ()
    # The object store: objects, referenced, spilled, memory_bytes, spilled_bytes, capacity_bytes;
    # worker_objects (results kept only on remote workers), pulled_objects and pulled_bytes
    # (moved from a worker's store to the runtime's), sent_to_workers_bytes (workers fetched);
    # recycled_files (writes that reused a released object's memory); data_port_bytes (moved
    # over the bulk data port, both ways, by clients and workers); direct_tickets (tickets the
    # head signed for a worker-to-worker or worker-to-client move that bypasses it).
    store: dict = field(default_factory=dict)
    # Queued calls of other users: counted, not listed (only the owner and admins see them).
    others_queued: int = 0
    dashboard_url: str = ""

    @property
    def simulated_gpus(self) -> bool:
        return any(w.simulated_gpus for w in self.workers if w.gpus.total)

    @classmethod
    def _from_proto(cls, msg, dashboard_url: str = "") -> ClusterStatus:
        workers = tuple(
            WorkerInfo(w.worker_id, w.host, Slots._from_proto(w.gpus), Slots._from_proto(w.cpus),
                       w.memory_bytes, w.simulated_gpus, w.executors, w.idle_executors,
                       tuple(w.gpu_names), w.pool, w.state or "ready", w.remote,
                       w.provider_handle, w.store_referenced, w.kept_objects,
                       dict(sorted(w.gpu_shares.items())))
            for w in msg.workers)
        queue = tuple(
            QueuedCall(q.task_id, q.name, q.user,
                       q.resources.gpu_eighths / 8 if q.resources.gpu_eighths else q.resources.gpus,
                       q.resources.cpus,
                       q.resources.memory_bytes, q.position, q.reason)
            for q in msg.queue)
        store = {name: getattr(msg.store, name) for name in (
            "objects", "referenced", "spilled", "memory_bytes", "spilled_bytes", "capacity_bytes",
            "worker_objects", "pulled_objects", "pulled_bytes", "sent_to_workers_bytes",
            "recycled_files", "data_port_bytes", "direct_tickets")}
        pools = tuple(PoolInfo(p.name, p.provider, p.starting, p.idle, p.busy, p.draining,
                               p.max_workers, p.backoff_until, p.problem) for p in msg.pools)
        return cls(msg.cluster_id, workers, Slots._from_proto(msg.gpus),
                   Slots._from_proto(msg.cpus), queue, msg.running, pools,
                   tuple(msg.pool_events), store, msg.others_queued, dashboard_url)

    def __str__(self) -> str:
        sim = " (simulated)" if self.simulated_gpus else ""
        lines = [
            f"cluster {self.cluster_id}: {len(self.workers)} worker(s), "
            f"{self.running} running, {len(self.queue) + self.others_queued} queued"
            + (f" ({self.others_queued} of other users, not shown)" if self.others_queued else ""),
            f"GPUs: {self.gpus}{sim}",
            f"CPUs: {self.cpus}",
        ]
        if self.workers:
            rows = [("worker", "host", "pool", "state", "GPUs res/busy/total",
                     "CPUs res/busy/total", "memory", "executors idle/all")]
            for w in self.workers:
                gpu_sim = " sim" if w.simulated_gpus and w.gpus.total else ""
                executors = f"{w.idle_executors}/{w.executors}" if not w.remote else "-"
                shared = "".join(f" gpu{gpu}={share:g}" for gpu, share in w.gpu_shares.items())
                rows.append((w.worker_id, w.host, w.pool or "-", w.state,
                             f"{w.gpus.reserved}/{w.gpus.busy}/{w.gpus.total}{gpu_sim}{shared}",
                             f"{w.cpus.reserved}/{w.cpus.busy}/{w.cpus.total}",
                             format_bytes(w.memory_bytes), executors))
            lines += ["", *_table(rows)]
        if self.pools:
            rows = [("pool", "provider", "starting", "idle", "busy", "draining", "max")]
            rows += [(p.name, p.provider, str(p.starting), str(p.idle), str(p.busy),
                      str(p.draining), str(p.max_workers)) for p in self.pools]
            lines += ["", "pools:", *_table(rows)]
            lines += [f"  {p.name}: {p.problem}" for p in self.pools if p.problem]
            lines += [f"  {event}" for event in self.pool_events[-5:]]
        if self.queue:
            rows = [("pos", "task", "user", "gpus", "cpus", "reason")]
            rows += [(str(q.position), q.task_id, q.user, f"{q.gpus:g}", f"{q.cpus:g}", q.reason)
                     for q in sorted(self.queue, key=lambda q: q.position)]
            lines += ["", "queue:", *_table(rows)]
        return "\n".join(lines)

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython / Jupyter display
        printer.text(str(self))

    def _repr_html_(self) -> str:
        from ._html import html_table, link_line
        sim = " (simulated)" if self.simulated_gpus else ""
        title = (f"cluster {self.cluster_id}: {self.running} running, "
                 f"{len(self.queue) + self.others_queued} queued; GPUs {self.gpus}{sim}")
        workers = [(w.worker_id, w.host, w.state, w.gpus.total, w.gpus.reserved, w.gpus.busy,
                    f"{w.cpus.reserved}/{w.cpus.total}") for w in self.workers]
        out = html_table(title, ("worker", "host", "state", "GPUs", "reserved", "busy",
                                 "CPUs res/total"), workers)
        if self.queue:
            out += html_table("queue", ("pos", "task", "user", "gpus", "reason"), [
                (q.position, q.task_id, q.user, q.gpus, q.reason)
                for q in sorted(self.queue, key=lambda q: q.position)])
        return out + link_line(self.dashboard_url)


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
            for row in rows]
