"""Issue 30's table in one run: each figure of a call's path beside its peer, with its goal.

    make bench                                        # this, then the offload overhead table
    python examples/call_path_benchmark.py --rounds 3 # medians of 3 rounds
    python examples/call_path_benchmark.py --skip-large --warmup 5000   # a quick look

Every round measures, one system after another and never two at once: the no-op call's p50
and p99, pipelined throughput and a map of 10,000 no-ops through bulletin, Ray and Dask
(``overhead_benchmark``); CPU per pipelined no-op call by process for bulletin and Ray
(``call_cpu_benchmark``); bulletin's pipelined throughput with the journal off (``bulletin up
--no-journal``); and the fresh 1 GiB in, new 1 GiB out call against Ray's (``new_array_call``).
Each figure is the median over the rounds, so a noisy neighbour moves one round, not the table.
The runtime's calls per second per core with 1,000 simulated workers is a JVM benchmark of its
own: ``make bench-scale``. Ray and Dask come with ``make bench``; without them their rows say
so.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import call_cpu_benchmark  # noqa: E402
import overhead_benchmark  # noqa: E402


def noop(x=None):
    return x


def plus_zero(v):
    return v + 0


def plus_one(v):
    return v + 1


# The benchmarks' own functions would travel by reference, and no worker can import those
# modules; ones defined here, in __main__, travel by value (for bulletin, Ray and Dask alike).
overhead_benchmark.noop = call_cpu_benchmark.noop = noop


def _round(args) -> dict:
    """One round's raw figures, by name; a peer that is not installed is left out."""
    figures: dict[str, float] = {}
    runs = {}
    for name, bench in (("bulletin", lambda a: overhead_benchmark.bench_bulletin(a, noop=noop)),
                        ("ray", overhead_benchmark.bench_ray),
                        ("dask", overhead_benchmark.bench_dask)):
        try:
            runs[name] = bench(args)
        except ImportError as error:
            print(f"{name}: skipped ({error}); install with `make bench`", file=sys.stderr)
    for name, run in runs.items():
        for key, value in run.items():
            figures[f"{name}.{key}"] = value
    journal_off = overhead_benchmark.bench_bulletin(args, ("--no-journal",), noop=noop)
    figures["bulletin-no-journal.pipelined_per_s"] = journal_off["pipelined_per_s"]
    cpu_args = argparse.Namespace(calls=args.cpu_calls, batch=1000, warmup=args.warmup,
                                  workers=args.workers)
    for name, bench in (("bulletin", call_cpu_benchmark.bench_bulletin),
                        ("ray", call_cpu_benchmark.bench_ray)):
        try:
            measured = bench(cpu_args)
        except ImportError:
            continue
        figures[f"{name}.cpu_us"] = sum(measured["processes"].values())
        if name == "bulletin":
            figures["bulletin.runtime_cpu_us"] = measured["processes"].get("java", float("nan"))
    if not args.skip_large:
        import new_array_call
        from data_plane_benchmark import GIB, array

        new_array_call.plus_zero, new_array_call.plus_one = plus_zero, plus_one

        large = new_array_call.run(array(GIB))
        figures["bulletin.new_array_s"] = large["bulletin"]["median_s"]
        if "median_s" in large["ray"]:
            figures["ray.new_array_s"] = large["ray"]["median_s"]
        figures["bulletin.new_bytes_s"] = large["bulletin_new_bytes"]["median_s"]
        if "median_s" in large["ray_new_bytes"]:
            figures["ray.new_bytes_s"] = large["ray_new_bytes"]["median_s"]
    print(f"round: {figures}", file=sys.stderr)
    return figures


def _ratio(figures: dict, ours: str, theirs: str) -> float:
    if ours not in figures or theirs not in figures:
        return float("nan")
    return figures[ours] / figures[theirs]


# (row, what is compared, goal as text, goal test)
ROWS = [
    ("no-op p50 vs Ray", lambda f: _ratio(f, "bulletin.p50_ms", "ray.p50_ms"), "<= 0.75x",
     lambda v: v <= 0.75),
    ("no-op p99 vs Ray", lambda f: _ratio(f, "bulletin.p99_ms", "ray.p99_ms"), "<= 1x",
     lambda v: v <= 1.0),
    ("pipelined calls/s vs Ray",
     lambda f: _ratio(f, "bulletin.pipelined_per_s", "ray.pipelined_per_s"), ">= 2x",
     lambda v: v >= 2.0),
    ("map, wall time vs Ray", lambda f: _ratio(f, "bulletin.map_s", "ray.map_s"),
     "<= 0.5x", lambda v: v <= 0.5),
    ("map, wall time vs Dask", lambda f: _ratio(f, "bulletin.map_s", "dask.map_s"),
     "(beside)", lambda v: True),
    ("runtime JVM CPU per pipelined no-op, µs", lambda f: f.get("bulletin.runtime_cpu_us",
                                                                  float("nan")),
     "<= 100", lambda v: v <= 100),
    ("whole-path CPU per call vs Ray's", lambda f: _ratio(f, "bulletin.cpu_us", "ray.cpu_us"),
     "<= 0.5x", lambda v: v <= 0.5),
    ("journal on vs off, pipelined",
     lambda f: _ratio(f, "bulletin.pipelined_per_s", "bulletin-no-journal.pipelined_per_s"),
     ">= 0.9x", lambda v: v >= 0.9),
    ("fresh 1 GiB in, new 1 GiB out, vs Ray",
     lambda f: _ratio(f, "bulletin.new_array_s", "ray.new_array_s"), "<= 0.8x",
     lambda v: v <= 0.8),
    ("the same call returning v + 1 (bytes no object has), vs Ray",
     lambda f: _ratio(f, "bulletin.new_bytes_s", "ray.new_bytes_s"), "(beside)",
     lambda v: True),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1,
                        help="rounds; each figure is the median of its rounds (default 1)")
    parser.add_argument("--calls", type=int, default=1000,
                        help="synchronous calls for p50/p99 (default 1000)")
    parser.add_argument("--pipelined", type=int, default=3000,
                        help="calls submitted at once for throughput (default 3000)")
    parser.add_argument("--map", type=int, default=10000, help="items of the timed map")
    parser.add_argument("--cpu-calls", type=int, default=10000,
                        help="pipelined calls whose CPU is counted (default 10000)")
    parser.add_argument("--warmup", type=int, default=30000,
                        help="pipelined calls before each measure, so the runtime's JIT has "
                             "settled (default 30000)")
    parser.add_argument("--workers", type=int, default=2,
                        help="worker processes for every system (default 2)")
    parser.add_argument("--skip-large", action="store_true",
                        help="leave out the 1 GiB call (it needs about 4 GiB of free memory)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, not {args.rounds}")
    rounds = [_round(args) for _ in range(args.rounds)]
    print(f"\nissue 30's figures ({args.map}-item map), {args.workers} workers, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end"
          + (f", median of {args.rounds} rounds" if args.rounds > 1 else ""))
    print(f"{'system':<22}{'p50 ms':>9}{'p99 ms':>9}{'pipelined/s':>13}{'map s':>9}"
          f"{'CPU µs/call':>13}")
    columns = (("p50_ms", 9, 3), ("p99_ms", 9, 3), ("pipelined_per_s", 13, 0), ("map_s", 9, 2),
               ("cpu_us", 13, 0))
    for system in ("bulletin", "bulletin-no-journal", "ray", "dask"):
        cells = []
        for key, width, digits in columns:
            values = [r[f"{system}.{key}"] for r in rounds if f"{system}.{key}" in r]
            cells.append(f"{statistics.median(values):>{width}.{digits}f}" if values
                         else f"{'-':>{width}}")
        if any(cell.strip() != "-" for cell in cells):
            print(f"{system:<22}" + "".join(cells))
    print(f"\n{'figure':<44}{'value':>10}  {'goal':<10}")
    for label, figure, goal, holds in ROWS:
        values = [figure(r) for r in rounds]
        values = [v for v in values if v == v]  # NaN: a peer or part left out
        if not values:
            print(f"{label:<44}{'-':>10}  {goal:<10} (not measured: left out, or its peer is "
                  "not installed)")
            continue
        value = statistics.median(values)
        mark = "" if goal == "(beside)" else ("met" if holds(value) else "not met")
        print(f"{label:<44}{value:>10.2f}  {goal:<10} {mark}")
    print("calls/s per runtime core with 1,000 simulated workers: `make bench-scale`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
