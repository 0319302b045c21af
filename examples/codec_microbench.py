"""Microbenchmark of bulletin's Arrow encoding (bulletin._codec) against memcpy, in one run.

    python examples/codec_microbench.py [--mib 1024] [--repeat 3] [--dir /dev/shm]

For a float32 array of --mib MiB (default 1 GiB):
- encode + write_into a file mapped from --dir, against a single-thread np.copyto of the same
  bytes into the same kind of destination, measured in the same run: once into a fresh file
  (pages allocated by the copy itself, what a new store object costs) and once into a warm,
  already-faulted mapping (what a store that reuses its memory sees); then write_into with
  several threads;
- digest (XXH3-128) throughput against the same memcpy;
- decode of the object from a memory-mapped file: pyarrow.memory_map + decode, and map_file +
  decode (must be well under 1 ms whatever the size);
- the same write_into ratio for a dict holding the array (pickle kind, out-of-band buffer) and
  a one-column pyarrow table (table kind).
Each figure is the best of --repeat runs; ratios > 1 mean faster than the memcpy.
"""

from __future__ import annotations

import argparse
import mmap
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python-client"))
from bulletin._codec import decode, encode, map_file  # noqa: E402

GB = 1e9


class Mapped:
    """A file of n bytes under a directory, mapped read-write; MAP_POPULATE when asked."""

    def __init__(self, directory: str, n: int, populate: bool = False) -> None:
        fd, self.path = tempfile.mkstemp(prefix="bulletin-bench-", dir=directory)
        try:
            os.ftruncate(fd, n)
            flags = mmap.MAP_SHARED | (mmap.MAP_POPULATE if populate else 0)
            self.map = mmap.mmap(fd, n, flags=flags)
        finally:
            os.close(fd)
        self.array = np.frombuffer(self.map, dtype=np.uint8)

    def close(self) -> None:
        del self.array
        self.map.close()
        os.unlink(self.path)


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def paired(repeat: int, reference, candidate) -> tuple[float, float]:
    """Best times of ``reference()`` and ``candidate()`` run alternately, so that both see the
    same machine (this box is shared: a drift in load hits both sides of each ratio)."""
    ref, cand = [], []
    for _ in range(repeat):
        for fn, out in ((reference, ref), (candidate, cand)):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return min(ref), min(cand)


def into_fresh(directory: str, n: int, copy):
    """A callable that maps a new file of n bytes, runs ``copy(mapping)`` (the timed part
    includes the page faults that allocate the file's memory) and removes the file."""
    def run() -> None:
        dest = Mapped(directory, n)
        try:
            copy(dest)
        finally:
            dest.close()
    return run


def row(label: str, seconds: float, nbytes: int, reference: float | None = None) -> None:
    ratio = f"  {reference / seconds:5.2f}x memcpy" if reference else ""
    print(f"  {label:<46} {seconds * 1e3:9.1f} ms  {nbytes / seconds / GB:6.2f} GB/s{ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="array size in MiB (default 1024)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (best is kept)")
    parser.add_argument("--dir", default="/dev/shm", help="where the mapped files go")
    args = parser.parse_args()
    if args.mib < 1 or args.repeat < 1:
        parser.error("--mib and --repeat must be >= 1")
    cpus = len(os.sched_getaffinity(0))
    thread_counts = sorted({2, 4, min(8, cpus), cpus} - {1})
    thread_counts = [k for k in thread_counts if k <= cpus]
    n = args.mib * 1024 * 1024
    x = np.random.default_rng(0).standard_normal(n // 4, dtype=np.float32)
    source = x.view(np.uint8)
    print(f"bulletin codec microbenchmark: {args.mib} MiB float32, {cpus} CPUs, dest {args.dir},"
          f" best of {args.repeat}, each ratio against a memcpy run alternately with it")

    t_encode = best(lambda: encode(x), args.repeat)
    enc = encode(x)
    print(f"\nencode (metadata only): {t_encode * 1e6:.0f} us; "
          f"stream = payload + {enc.nbytes - x.nbytes} bytes")

    print("\ninto a fresh mapped file (the copy itself allocates the file's pages):")
    memcpy_fresh = into_fresh(args.dir, n, lambda d: np.copyto(d.array, source))
    for threads in [1] + thread_counts:
        ref, t = paired(args.repeat, memcpy_fresh, into_fresh(
            args.dir, enc.nbytes, lambda d, k=threads: encode(x).write_into(d.map, threads=k)))
        if threads == 1:
            row("memcpy (np.copyto, 1 thread)", ref, n)
        row(f"encode + write_into, {threads} thread{'s' * (threads > 1)}", t, n, ref)
    populated = []
    t_populate = best(lambda: populated.append(Mapped(args.dir, enc.nbytes, populate=True)) or
                      populated.pop().close(), args.repeat)
    print(f"  (allocating the file's pages up front with MAP_POPULATE: {t_populate * 1e3:.1f} ms)")

    print("\ninto a warm mapping (pages already there, as in a store that reuses memory):")
    warm = Mapped(args.dir, enc.nbytes, populate=True)
    warm_src = warm.array[:n]

    def memcpy_warm() -> None:
        np.copyto(warm_src, source)

    for threads in [1] + thread_counts:
        ref, t = paired(args.repeat, memcpy_warm,
                        lambda k=threads: encode(x).write_into(warm.map, threads=k))
        if threads == 1:
            row("memcpy (np.copyto, 1 thread)", ref, n)
        row(f"encode + write_into, {threads} thread{'s' * (threads > 1)}", t, n, ref)

    print("\ndigest:")
    ref, t = paired(args.repeat, memcpy_warm, lambda: encode(x).digest())
    row("xxh3-128 of the stream (encode + digest)", t, n, ref)

    print("\nother kinds, warm destination, 1 thread:")
    for label, obj in (("pickle: {'x': array, 'lr': 0.1}", {"x": x, "lr": 0.1}),
                       ("table: pyarrow.table({'x': array})", pa.table({"x": x}))):
        e = encode(obj)
        dest = Mapped(args.dir, e.nbytes, populate=True)
        ref, t = paired(args.repeat, memcpy_warm,
                        lambda o=obj, d=dest: encode(o).write_into(d.map, threads=1))
        row(label, t, n, ref)
        dest.close()

    print("\ndecode from a memory-mapped file (median of 200):")
    enc.write_into(warm.map)
    warm.map.flush()
    timings = {"pyarrow.memory_map(path) + decode": lambda: decode(pa.memory_map(warm.path)),
               "map_file(path) + decode (copy-on-write)": lambda: decode(map_file(warm.path))}
    cleanup = []
    for label, obj in (("pickle", {"x": x}), ("table", pa.table({"x": x}))):
        e = encode(obj)
        path = Path(args.dir) / f"bulletin-bench-{label}-{os.getpid()}"
        cleanup.append(path)
        with open(path, "wb+") as f:
            f.truncate(e.nbytes)
            with mmap.mmap(f.fileno(), e.nbytes) as m:
                e.write_into(m)
        timings[f"{label}: pyarrow.memory_map(path) + decode"] = (
            lambda p=str(path): decode(pa.memory_map(p)))
    for label, fn in timings.items():
        fn()
        samples = []
        for _ in range(200):
            t0 = time.perf_counter_ns()
            out = fn()
            samples.append(time.perf_counter_ns() - t0)
            del out
        median = statistics.median(samples) / 1e3
        print(f"  {label:<46} {median:9.1f} us  (min {min(samples) / 1e3:.1f} us)")
    mapped = pa.memory_map(warm.path).read_buffer()
    out = decode(mapped)  # a view of the mapping, not a copy
    assert out.shape == x.shape and np.shares_memory(out, np.frombuffer(mapped, np.uint8))
    assert np.array_equal(out[:1000], x[:1000]) and np.array_equal(out[-1000:], x[-1000:])
    del out, mapped
    warm_src = None  # the mapping cannot close while a view of it exists
    warm.close()
    for path in cleanup:
        path.unlink()


if __name__ == "__main__":
    main()
