"""What a ``%%bulletin`` cell costs against the same cell run in the notebook, in one run.

    python examples/cell_offload_benchmark.py                  # a throwaway local cluster
    python examples/cell_offload_benchmark.py --cells 200 --input-mib 1024

Cells run through IPython's own ``run_cell`` (an in-process shell: the kernel's messaging,
the same both ways, is left out), once as written and once under ``%%bulletin -q``:

- a no-op cell: p50 and p95 of each, and the difference, beside a plain no-op call's round trip
  measured in the same loop (after --warmup pipelined calls: the JVMs compile for thousands);
- a cell that reads a large array the notebook already sent to an earlier cell, unchanged:
  bytes uploaded (content addressing finds the store's copy by its hash) and its time;
- GPU-seconds the cluster's ledger counts as reserved while the session sits between cells
  (with the session's values resident on the GPU meanwhile);
- resident GPU state (issue 29): a second cell that reads 1 GiB left on the GPU by the first
  (its time, the bytes sent), and spilling and restoring 1 GiB (``_runtime._resident``'s own
  spill and restore, in this process) against a single-thread copy of 1 GiB.

Without a GPU (``--simulate-gpus``) torch CPU tensors stand in for device memory: the resident
rows are then a simulation and say so; spill is the copy out of the tensor into the store's
shared memory and restore the copy back out of it, as a real GPU's device-to-host and
host-to-device copies would be.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))


def _timed(shell, source: str) -> float:
    start = time.perf_counter()
    result = shell.run_cell(source)
    elapsed = time.perf_counter() - start
    if result.error_in_exec is not None or result.error_before_exec is not None:
        raise SystemExit(f"the cell failed: {result.error_in_exec or result.error_before_exec}")
    return elapsed


def _noop():
    return None


def _call_seconds(client) -> float:
    start = time.perf_counter()
    client.submit(_noop).result()
    return time.perf_counter() - start


def _warm_up(client, calls: int) -> None:
    """Pipelined no-op calls, as overhead_benchmark warms up: the runtime's and the worker's
    JVMs compile their hot paths over the first thousands of calls, and a cold one doubles a
    no-op's round trip."""
    pending = []
    for _ in range(calls):
        pending.append(client.submit(_noop))
        if len(pending) >= 200:
            for future in pending:
                future.result()
            pending = []
    for future in pending:
        future.result()


def _quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=100, help="no-op cells each way (default 100)")
    parser.add_argument("--warmup", type=int, default=5000,
                        help="pipelined no-op calls first, to warm the JVMs' compilers "
                             "(default 5000)")
    parser.add_argument("--input-mib", type=int, default=256,
                        help="size of the array the unchanged-input cell reads (default 256)")
    parser.add_argument("--idle-seconds", type=float, default=3.0,
                        help="time the session sits between two GPU cells (default 3)")
    parser.add_argument("--resident-mib", type=int, default=1024,
                        help="GPU state the resident rows keep, spill and restore (default 1024)")
    args = parser.parse_args()

    from IPython.testing.globalipapp import get_ipython

    from _local_cluster import local_cluster

    with local_cluster() as client:
        shell = get_ipython()
        shell.run_cell("%load_ext bulletin\nimport numpy as np")
        _warm_up(client, args.warmup)
        for _ in range(5):  # warm both ways: the executor's imports, IPython's caches
            _timed(shell, "pass")
            _timed(shell, "%%bulletin -q\npass")
        # Interleaved, so that a machine's moods fall on all three alike.
        local, remote, call = [], [], []
        for _ in range(args.cells):
            local.append(_timed(shell, "pass"))
            remote.append(_timed(shell, "%%bulletin -q\npass"))
            call.append(_call_seconds(client))
        (local_p50, local_p95), (remote_p50, remote_p95) = _quantiles(local), _quantiles(remote)
        call_p50 = _quantiles(call)[0]
        print(f"no-op cell, {args.cells} each: local p50 {local_p50 * 1e3:.2f} ms "
              f"p95 {local_p95 * 1e3:.2f} ms; %%bulletin p50 {remote_p50 * 1e3:.2f} ms "
              f"p95 {remote_p95 * 1e3:.2f} ms; added p50 {(remote_p50 - local_p50) * 1e3:.2f} ms "
              f"(goal: <= 5 ms), of which a plain no-op call's round trip is "
              f"{call_p50 * 1e3:.2f} ms (client.submit(noop).result(), the same loop)")

        shell.run_cell(f"data = np.ones({args.input_mib} << 17)")  # MiB of float64
        transfer = client._transfer
        first_bytes = transfer.uploaded_bytes
        first = _timed(shell, "%%bulletin -q\ntotal = float(data[:1].sum())")
        sent_first = transfer.uploaded_bytes - first_bytes
        second_bytes = transfer.uploaded_bytes
        second = _timed(shell, "%%bulletin -q\ntotal = float(data[:1].sum())")
        sent_second = transfer.uploaded_bytes - second_bytes
        print(f"cell reading {args.input_mib} MiB: first {first * 1e3:.1f} ms, "
              f"{sent_first / 2**20:.0f} MiB sent; unchanged, again: {second * 1e3:.1f} ms, "
              f"{sent_second} bytes sent (goal: 0)")

        gpus = 1 if client.status().gpus.total else 0
        if gpus:
            before = _reserved_gpu_seconds(client)
            _timed(shell, "%%bulletin -q gpus=1\npass")
            after_cell = _reserved_gpu_seconds(client)
            time.sleep(args.idle_seconds)
            _timed(shell, "%%bulletin -q gpus=1\npass")
            after_idle = _reserved_gpu_seconds(client)
            cell = after_cell - before
            print(f"GPU-seconds reserved: one gpus=1 cell {cell:.3f}; the session idle "
                  f"{args.idle_seconds:.0f} s, then a second cell: {after_idle - after_cell:.3f} "
                  f"(the idle gap adds {max(0.0, after_idle - after_cell - cell):.3f}; goal: 0)")
        if gpus:
            _resident_rows(shell, client, args.resident_mib)
        _spill_restore_row(args.resident_mib)


def _resident_rows(shell, client, mib: int) -> None:
    """A cell leaves ``mib`` MiB on the GPU; the next cells read it there. A no-op gpus=1 cell,
    timed alongside, is the floor (a loaded machine moves both)."""
    simulated = " (simulated GPU: CPU tensors)" if not _real_gpu(client) else ""
    shell.run_cell("import torch")
    _timed(shell, f"%%bulletin -q gpus=1\nw = torch.ones({mib} << 18)")  # float32: MiB
    transfer = client._transfer
    seconds, floor, sent = [], [], []
    for _ in range(9):
        floor.append(_timed(shell, "%%bulletin -q gpus=1\npass"))
        before = transfer.uploaded_bytes
        seconds.append(_timed(shell, "%%bulletin -q gpus=1\nfirst = float(w[0])"))
        sent.append(transfer.uploaded_bytes - before)
    print(f"cell reading {mib} MiB resident on the GPU{simulated}: p50 "
          f"{_quantiles(seconds)[0] * 1e3:.1f} ms of 9 (goal: < 10 ms; a no-op gpus=1 cell: "
          f"{_quantiles(floor)[0] * 1e3:.1f} ms); bytes sent: {sent[0]} the first time (the "
          f"cell's call, no data), {sent[-1]} once unchanged (goal: 0); the notebook holds "
          f"{shell.user_ns['w']!r}")
    before = _reserved_gpu_seconds(client)
    time.sleep(3.0)
    print(f"GPU-seconds reserved while the session sits 3 s between cells with {mib} MiB "
          f"resident: {_reserved_gpu_seconds(client) - before:.3f} (goal: 0)")
    shell.run_cell("%%bulletin -q gpus=1\ndel w")


def _spill_restore_row(mib: int) -> None:
    """``_runtime._resident.spill`` and its restore, in this process, on ``mib`` MiB, each
    beside a single-thread copy of the same bytes into new memory made just before it.

    Paired, because on a VM the cost of new memory depends on what was freed last: pages the
    guest freed a moment ago come back at once, pages it gave back to the host (free page
    reporting) fault there again, several times slower (on the 2-core VM, 1 GiB copied into new
    memory took 0.42-0.53 s just after 1 GiB was freed and 1.5-3.0 s otherwise). A copy made
    just before an operation meets the same memory as it."""
    import tempfile

    import torch

    from bulletin._runtime import _resident

    torch.set_num_threads(1)
    source = torch.ones((mib << 20) // 4)
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None  # where the store keeps objects
    folder = tempfile.mkdtemp(dir=shm)
    touched = bytearray(source.nbytes)
    touched_seconds = min(_copy_seconds(source, into=touched) for _ in range(3))
    del touched
    shm_seconds = min(_copy_seconds(source, folder) for _ in range(3))
    rows: dict[str, list[tuple[float, float]]] = {"staged": [], "spill": [], "restore": []}
    try:
        for attempt in range(3):
            # Into a pre-faulted file, as the agent stages one from the store's arena (its
            # pages were touched ahead of time, by another mapping: this one maps them anew).
            _resident.keep(source, "w")
            path = os.path.join(folder, f".staged-{attempt}")
            _prefaulted(path, source.nbytes + (1 << 20))
            copy = _copy_seconds(source)
            start = time.perf_counter()
            _resident.spill(path)
            rows["staged"].append((time.perf_counter() - start, copy))
            os.unlink(path)
            # Into new memory (a store without an arena), then restored from there.
            _resident.keep(source, "w")
            path = os.path.join(folder, f".spill-{attempt}")
            copy = _copy_seconds(source)
            start = time.perf_counter()
            spilled = _resident.spill(path)
            rows["spill"].append((time.perf_counter() - start, copy))
            copy = _copy_seconds(source)
            start = time.perf_counter()
            restored = _resident.resolve(spilled["handles"][0], {spilled["handles"][0]: path}, {})
            rows["restore"].append((time.perf_counter() - start, copy))
            assert restored.shape == source.shape
            _resident.forget_names(["w"])
            del restored
            os.unlink(path)
    finally:
        os.rmdir(folder)

    def row(name: str) -> str:
        seconds = statistics.median(op for op, _ in rows[name])
        ratio = statistics.median(copy / op for op, copy in rows[name])
        copies = statistics.median(copy for _, copy in rows[name])
        return (f"{seconds * 1e3:.0f} ms, {ratio:.2f}x the copy beside it "
                f"({copies * 1e3:.0f} ms)")

    print(f"spill and restore of {mib} MiB (simulation: CPU tensors stand in for device memory; "
          f"medians of 3, each beside a single-thread copy into new memory made just before it). "
          f"Spill into a pre-faulted arena file: {row('staged')}; into a new file: "
          f"{row('spill')}; restore (into new memory): {row('restore')} (goal: >= 0.8x). For "
          f"scale, best of 3: a copy into memory already touched {touched_seconds * 1e3:.0f} ms, "
          f"into a new file of the store's shared memory {shm_seconds * 1e3:.0f} ms")


def _copy_seconds(source, folder: str | None = None, into=None) -> float:
    """One copy of the tensor's bytes on one thread into newly allocated memory (anonymous, or
    a new file in ``folder``), or ``into`` memory already touched."""
    import mmap

    import numpy as np
    view = source.numpy().view(np.uint8)
    if into is not None:
        start = time.perf_counter()
        np.frombuffer(into, np.uint8)[:] = view
        return time.perf_counter() - start
    if folder is None:
        start = time.perf_counter()
        copied = bytearray(view)
        elapsed = time.perf_counter() - start
        del copied
        return elapsed
    path = os.path.join(folder, "copy")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        start = time.perf_counter()
        os.ftruncate(fd, view.nbytes)
        target = mmap.mmap(fd, view.nbytes)
        np.frombuffer(target, np.uint8)[:] = view
        elapsed = time.perf_counter() - start
        target.close()
        return elapsed
    finally:
        os.close(fd)
        os.unlink(path)


def _prefaulted(path: str, size: int) -> None:
    """A file of ``size`` bytes whose pages are allocated and touched (the arena's spares)."""
    import mmap

    import numpy as np
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, size)
        with mmap.mmap(fd, size) as target:
            np.frombuffer(target, np.uint8)[::4096] = 0
    finally:
        os.close(fd)


def _real_gpu(client) -> bool:
    return not client.status().simulated_gpus


def _reserved_gpu_seconds(client) -> float:
    time.sleep(1.5)  # the ledger is charged as calls end; its report is refreshed each second
    report = client.usage(since="1h")
    return 3600 * sum(row.gpu_hours_reserved for row in report.rows)


if __name__ == "__main__":
    main()
