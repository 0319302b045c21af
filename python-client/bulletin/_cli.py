"""The `bulletin` command: up, down, status, worker.

Exit codes: 0 ok, 1 failure, 2 usage error.
"""

from __future__ import annotations

import argparse
import time
import os
import sys
from pathlib import Path

from . import _launch, _tls
from ._config import DEFAULT_HTTP_PORT, DEFAULT_PORT, home, parse_duration, read_runtime_info
from ._errors import BulletinError


def _gpus_arg(value: str) -> str:
    if value == "auto" or (value.isdigit()):
        return value
    raise argparse.ArgumentTypeError(f"expected 'auto' or a number of GPUs, got {value!r}")


def _http_port_arg(value: str) -> str:
    if value.strip().lower() == "off" or (value.strip().isdigit() and int(value) <= 65535):
        return value.strip().lower()
    raise argparse.ArgumentTypeError(f"must be a port number (0 = any free) or off, got {value!r}")


def _add_offer_arguments(parser: argparse.ArgumentParser) -> None:
    """What this machine offers: shared by `up` (its embedded worker) and `worker`."""
    parser.add_argument("--gpus", type=_gpus_arg, default="auto", metavar="auto|N",
                        help="GPUs of this machine to offer (default: auto, all that are found)")
    parser.add_argument("--cpus", type=int, default=0, metavar="N",
                        help="CPU slots (default: all cores)")
    parser.add_argument("--simulate-gpus", type=int, default=0, metavar="N",
                        help="pretend to have N GPUs, for trying bulletin on a machine without any")
    parser.add_argument("--executor-max-calls", type=int, default=0, metavar="N",
                        help="retire an executor after it has run N calls (default: 0, no limit)")
    parser.add_argument("--executor-idle-seconds", type=float, default=600.0, metavar="S",
                        help="retire an executor that has run a user's calls once it has been "
                             "idle S seconds (default: 600)")
    parser.add_argument("--resident-idle-seconds", type=float, default=3600.0, metavar="S",
                        help="drop a user's spilled GPU values (kept between %%%%bulletin cells) "
                             "once unused S seconds (default: 3600)")
    parser.add_argument("--resident-user-bytes", default="0", metavar="SIZE",
                        help="most a user keeps on a GPU between calls, e.g. 8GiB (default: 0, "
                             "no cap); a value past it comes back by value")
    parser.add_argument("--resident-host-bytes", default="0", metavar="SIZE",
                        help="most all users keep on this host's GPUs between calls (default: "
                             "0, no cap); past it the idle values used longest ago are spilled")
    parser.add_argument("--spilled-user-bytes", default="0", metavar="SIZE",
                        help="most of a user's spilled GPU values a host keeps (default: 0, no cap)")
    parser.add_argument("--spilled-host-bytes", default="0", metavar="SIZE",
                        help="most spilled GPU values a host keeps, all users (default: 0, no cap)")
    parser.add_argument("--result-timeout-seconds", type=float, default=300.0, metavar="S",
                        help="once a call's function has returned, how long encoding and storing "
                             "its result may take before its executor is stopped as hung and the "
                             "call fails (default: 300)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bulletin",
        description="Run Python functions on the GPUs of a shared cluster. The state folder is "
                    "$BULLETIN_HOME (default ~/.bulletin): token, runtime.json, runtime.log.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = sub.add_parser(
        "up", help="start a runtime with a local worker on this machine",
        description="Start the bulletin runtime with a local worker in the background, creating "
                    "the owner's token if needed. If one is already up, starts nothing and "
                    "names the arguments it did not apply.")
    _add_offer_arguments(up)
    up.add_argument("--port", type=int, default=None, metavar="N",
                    help=f"port of the gRPC API (default: {DEFAULT_PORT}, or the next free one "
                         f"when another process holds it, as said at start; a port given here "
                         f"that is taken is an error)")
    up.add_argument("--data-port", type=int, default=0, metavar="N",
                    help="raw TCP port for the bytes of cross-host object transfers, on the same "
                         "address as --host (default: 0, any free port; clients learn it from "
                         "the runtime)")
    up.add_argument("--http-port", type=_http_port_arg, default=None, metavar="N|off",
                    help="HTTP port of the web dashboard and Prometheus /metrics, on the same "
                         "address as --host (default: $BULLETIN_HTTP_PORT, else 8780 or the "
                         "next free one when another process holds it; 0: any free port; off: "
                         "none, and no metrics are kept). Other hosts scrape "
                         "with BULLETIN_METRICS_TOKEN (docs/observability.md)")
    up.add_argument("--host", default="127.0.0.1", metavar="ADDR",
                    help="address to listen on (default: 127.0.0.1, this machine only; "
                         "0.0.0.0 lets workers on other machines attach)")
    up.add_argument("--config", type=Path, metavar="FILE",
                    help="cluster config (pools, QoS classes, groups, quotas, users) in YAML")
    up.add_argument("--store-dir", type=Path, metavar="DIR",
                    help="object store folder, on a memory file system (default: /dev/shm/"
                         "bulletin-<cluster>; a tmpfs mounted with huge=within_size writes "
                         "several times faster)")
    up.add_argument("--store-capacity", type=int, default=0, metavar="BYTES",
                    help="object store memory limit (default: half of /dev/shm)")
    up.add_argument("--store-user-share", type=int, default=0, metavar="BYTES",
                    help="with users[].run_as (runtime as root): each user's share of the "
                         "store, a memory file system of its own that everything of theirs "
                         "counts against, however written (default: the store capacity; see "
                         "docs/security.md)")
    up.add_argument("--store-arena-share", type=float, metavar="SHARE",
                    help="share of the store capacity (0..0.5, default 0.125) kept "
                         "pre-faulted once for this host, filled in the background, so that "
                         "even a first large write runs at memory speed: memory taken from the "
                         "machine while it waits, given back under memory pressure (0: none; "
                         "see docs/data-plane.md)")
    up.add_argument("--spill-dir", type=Path, metavar="DIR",
                    help="local-disk folder for objects pushed out of memory (default: temp dir)")
    up.add_argument("--state-dir", type=Path, metavar="DIR",
                    help="folder of the runtime's journal (default: $BULLETIN_HOME); a restart "
                         "on the same folder restores every call, session and the usage ledger "
                         "(docs/durability.md)")
    up.add_argument("--journal", action=argparse.BooleanOptionalAction, default=True,
                    help="journal the runtime's state (default: on); --no-journal is faster "
                         "per submit, and a restart or crash then loses every call")
    tls = up.add_argument_group(
        "TLS", "Both ports (gRPC API and data port) speak TLS with --tls, and by default "
               "whenever --host is not a loopback address. Without --tls-cert, `bulletin up` "
               "keeps a cluster CA in $BULLETIN_HOME (ca.pem) and issues the runtime a "
               "certificate for this host's names and addresses; clients on this host find the "
               "CA there, others need a copy: BULLETIN_CA=/path/to/ca.pem or Client(ca=...).")
    tls.add_argument("--tls", action=argparse.BooleanOptionalAction, default=None,
                     help="TLS on both ports (default: on unless --host is loopback); --no-tls "
                          "sends tokens and data in cleartext")
    tls.add_argument("--tls-cert", type=Path, metavar="FILE",
                     help="your own PEM certificate (chain) for the runtime, instead of one "
                          "from the cluster CA; implies --tls")
    tls.add_argument("--tls-key", type=Path, metavar="FILE", help="the PEM key of --tls-cert")
    tls.add_argument("--tls-ca", type=Path, metavar="FILE",
                     help="the PEM CA that signed --tls-cert, recorded for clients on this host "
                          "(default: clients use their system's trusted CAs)")
    up.add_argument("--usage-retention", default="0", metavar="DURATION",
                    help="how long the usage ledger keeps each call's row, e.g. 400d "
                         "(default 0: for ever)")
    up.add_argument("--foreground", action="store_true",
                    help="run in this terminal, logging to it, instead of in the background")
    up.set_defaults(run=_up)

    down = sub.add_parser("down", help="stop the runtime started by `bulletin up`",
                          description="Stop the runtime described by $BULLETIN_HOME/runtime.json.")
    down.set_defaults(run=_down)

    status = sub.add_parser("status", help="show workers, GPU/CPU slots and the queue",
                            description="Show the workers, GPU and CPU slots (total, reserved, "
                                        "busy) and the queue of the runtime.")
    status.set_defaults(run=_status)

    usage = sub.add_parser(
        "usage", help="GPU-hours reserved against busy, per user or group, over a period",
        description="The usage ledger: per user (or group) over a period, GPU-hours reserved, "
                    "GPU-hours the GPUs really computed (busy), their ratio, calls and credits. "
                    "You see your own calls; the cluster's owner and admins see everyone's.")
    usage.add_argument("--since", default="7d", metavar="DURATION",
                       help="how far back, e.g. 7d, 12h, 1d12h (default 7d)")
    usage.add_argument("--by", choices=("user", "group"), default="user")
    form = usage.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print JSON for tools")
    form.add_argument("--csv", action="store_true", help="print CSV for spreadsheets")
    usage.set_defaults(run=_usage)

    worker = sub.add_parser(
        "worker", help="offer this machine's GPUs to a runtime on another machine",
        description="Start a worker agent on this machine that attaches to the runtime at --head "
                    "and runs its calls until the runtime goes away. It authenticates with the "
                    "cluster's worker token: $BULLETIN_WORKER_TOKEN, else "
                    "$BULLETIN_HOME/worker-token (written by `bulletin up` on the head). Pool "
                    "providers (local, Slurm) start workers this way.")
    worker.add_argument("--head", required=True, metavar="HOST:PORT",
                        help="address of the runtime (what `bulletin up` printed)")
    worker.add_argument("--pool", default="", metavar="NAME",
                        help="the pool this worker belongs to (set by providers)")
    worker.add_argument("--worker-id", metavar="ID",
                        help="name in status and logs (default: HOST-PID); unique per cluster")
    _add_offer_arguments(worker)
    worker.add_argument("--memory", metavar="SIZE", help="memory to offer, e.g. 64GiB")
    worker.add_argument("--expires-at", type=float, default=0.0, metavar="EPOCH_SECONDS",
                        help="when this worker's allocation ends (e.g. Slurm walltime); it takes "
                             "no call it cannot finish by then")
    worker.add_argument("--store-dir", type=Path, metavar="DIR",
                        help="object store folder (default: /dev/shm/bulletin-worker-ID)")
    worker.add_argument("--store-user-share", type=int, default=0, metavar="BYTES",
                        help="with users[].run_as (this worker as root): each user's share of "
                             "this worker's store, a memory file system of its own that "
                             "everything of theirs counts against (default: "
                             "$BULLETIN_STORE_USER_SHARE, else none; see docs/security.md)")
    worker.add_argument("--reconnect-timeout", metavar="SECONDS", default=None,
                        help="how long the worker tries to reattach when the runtime goes "
                             "away, its calls running on (default: "
                             "$BULLETIN_RECONNECT_TIMEOUT, else 120; 0: stop at once)")
    worker.add_argument("--data-path", choices=("auto", "grpc"), default=None,
                        help="how objects move to and from the runtime: auto (its bulk data "
                             "port, or gRPC chunks when it has none or the port cannot be "
                             "reached from here) or grpc (chunks only); default: "
                             "$BULLETIN_DATA_PATH, else auto")
    worker.add_argument("--ca", type=Path, metavar="FILE",
                        help="the cluster's CA (a copy of the head's $BULLETIN_HOME/ca.pem) to "
                             "check the runtime's certificate with; default: $BULLETIN_CA, "
                             "else $BULLETIN_CA_PEM (the CA's text, as a Kubernetes pool's "
                             "worker gets it), else $BULLETIN_HOME/ca.pem; without one the "
                             "worker speaks "
                             "plaintext")
    worker.add_argument("--join", metavar="TOKEN",
                        help="a join token from the cluster's owner (bulletin worker join-token "
                             "ID on the head): the worker makes a key, exchanges the token once "
                             "for a certificate of its own and attaches with it. Shown by `ps` "
                             "while this command starts: prefer --join-file or "
                             "$BULLETIN_JOIN_TOKEN")
    worker.add_argument("--join-file", type=Path, metavar="FILE",
                        help="a file holding the join token (keep it 0600)")
    worker.set_defaults(run=_worker)

    # `bulletin worker join-token ID` and `bulletin worker revoke ID` (main() routes them here).
    join_token = sub.add_parser(
        "worker-join-token", help=argparse.SUPPRESS, prog="bulletin worker join-token",
        description="Print a single-use join token for worker ID (the cluster's owner only, on "
                    "a runtime started with --tls): the worker exchanges it for a certificate "
                    "of its own (bulletin worker --join-file FILE, or BULLETIN_JOIN_TOKEN).")
    join_token.add_argument("worker_id", metavar="ID", help="the worker's id (its --worker-id)")
    join_token.add_argument("--ttl", default="15m", metavar="DURATION",
                            help="how long the token stays good, e.g. 15m, 1h (default: 15m; "
                                 "at most 7d)")
    join_token.set_defaults(run=_worker_join_token)
    revoke = sub.add_parser(
        "worker-revoke", help=argparse.SUPPRESS, prog="bulletin worker revoke",
        description="Revoke worker ID's certificate (the cluster's owner only): its link closes "
                    "at once, and it is refused from then on, also after a restart.")
    revoke.add_argument("worker_id", metavar="ID")
    revoke.set_defaults(run=_worker_revoke)
    return parser


_WORKER_ACTIONS = {"join-token": "worker-join-token", "revoke": "worker-revoke"}


def _worker_join_token(args) -> int:
    from . import _worker_identity

    _require_runtime()
    ttl = parse_duration(args.ttl, "--ttl")
    token, expires = _worker_identity.issue(args.worker_id, ttl)
    print(token)
    print(f"bulletin: a join token for worker {args.worker_id}, good once until "
          f"{time.strftime('%Y-%m-%d %H:%M:%S %Z', time.localtime(expires))}; on the worker's "
          f"host, put it in a 0600 file and run: bulletin worker --head HOST:PORT "
          f"--worker-id {args.worker_id} --join-file FILE", file=sys.stderr)
    return 0


def _worker_revoke(args) -> int:
    from . import _worker_identity

    _require_runtime()
    was = _worker_identity.revoke(args.worker_id)
    print(f"worker {args.worker_id} revoked" + ("; its link is closed" if was else ""))
    return 0


def _cluster_summary(status) -> str:
    gpus = f"{status.gpus.total}" + (" simulated" if status.simulated_gpus else "")
    return f"GPUs: {gpus}, CPUs: {status.cpus.total}, workers: {len(status.workers)}"


def _running_info(state_dir: Path):
    info = read_runtime_info(state_dir)
    if info and isinstance(info.get("pid"), int) and _launch.pid_alive(info["pid"]):
        return info
    return None


def _moved_default_ports(args, info: dict) -> list[str]:
    """The default ports the runtime found taken and moved from (it moves only those), as
    Jupyter says it: "port 8780 is in use, using 8781"."""
    lines = []
    port = int(str(info.get("address", "")).rpartition(":")[2] or 0)
    if args.port is None and port and port != DEFAULT_PORT:
        lines.append(f"port {DEFAULT_PORT} is in use, using {port} (--port N chooses one)")
    http = info.get("http_port")
    if (args.http_port is None and "BULLETIN_HTTP_PORT" not in os.environ and http
            and int(http) != DEFAULT_HTTP_PORT):
        lines.append(f"port {DEFAULT_HTTP_PORT} is in use, using {http} for the dashboard "
                     f"(--http-port N chooses one)")
    return lines


def _say_what_was_not_applied(args, info: dict) -> None:
    """`bulletin up` on a running cluster starts nothing: name the arguments it did not apply.

    Arguments left at their defaults are not compared (a plain `bulletin up` only says the
    runtime is up); the others are compared with what runtime.json records.
    """
    defaults = _parser().parse_args(["up"])
    host, _, port = str(info.get("address", "")).rpartition(":")
    recorded = {  # argument: (what the running runtime has, as text; equal to the argument?)
        "port": (f"port {port}", lambda v: str(v) == port),
        # Listening on all addresses records 127.0.0.1 as the address: not told apart here.
        "host": (f"address {host}", lambda v: v in ("0.0.0.0", "::") or v == host),
        "data_port": (f"data port {info.get('data_port')}", lambda v: v == info.get("data_port")),
        "store_dir": (f"store {info.get('store_dir')}",
                      lambda v: Path(v).resolve() == Path(str(info.get("store_dir"))).resolve()),
        "spill_dir": (f"spill folder {info.get('spill_dir')}",
                      lambda v: Path(v).resolve() == Path(str(info.get("spill_dir"))).resolve()),
        "store_capacity": (f"store capacity {info.get('store_capacity_bytes')} bytes",
                           lambda v: v == info.get("store_capacity_bytes")),
        "tls": (f"TLS {'on' if info.get('tls') else 'off'}", lambda v: v == bool(info.get("tls"))),
        "http_port": (f"HTTP port {info.get('http_port') or 'off'}",
                      lambda v: (v == "0" and bool(info.get("http_port")))
                      or str(info.get("http_port") or "off") == v),
    }
    differ, unknown = [], []
    for name in ("port", "host", "data_port", "store_dir", "spill_dir", "store_capacity", "gpus",
                 "cpus", "simulate_gpus", "config", "tls", "tls_cert", "tls_key", "tls_ca",
                 "http_port"):
        value = getattr(args, name)
        if value == getattr(defaults, name):
            continue
        flag = (f"--{'' if value else 'no-'}tls" if name == "tls"
                else f"--{name.replace('_', '-')} {value}")
        if name not in recorded:
            unknown.append(flag)
        elif not recorded[name][1](value):
            differ.append(f"{flag}: it has {recorded[name][0]}")
    if not differ and not unknown:
        return
    lines = ["bulletin up: the running runtime keeps its own settings; not applied:"]
    lines += [f"  {line}" for line in differ]
    if unknown:
        lines.append(f"  {', '.join(unknown)} (runtime.json does not record these: not compared)")
    lines.append("To apply them: `bulletin down`, then `bulletin up` with them.")
    print("\n".join(lines), file=sys.stderr)


def _executor_options_valid(command: str, args) -> bool:
    if (args.executor_max_calls < 0 or not args.executor_idle_seconds > 0
            or not args.result_timeout_seconds > 0):
        print(f"bulletin {command}: --executor-max-calls must be >= 0, and "
              f"--executor-idle-seconds and --result-timeout-seconds > 0", file=sys.stderr)
        return False
    return True


def _executor_options(args) -> "_launch.ExecutorOptions":
    return _launch.ExecutorOptions(max_calls=args.executor_max_calls,
                                   idle_seconds=args.executor_idle_seconds,
                                   result_timeout_seconds=args.result_timeout_seconds,
                                   resident_idle_seconds=args.resident_idle_seconds,
                                   resident_user_bytes=args.resident_user_bytes,
                                   resident_host_bytes=args.resident_host_bytes,
                                   spilled_user_bytes=args.spilled_user_bytes,
                                   spilled_host_bytes=args.spilled_host_bytes)


def _up(args) -> int:
    from ._connection import Connection
    from ._status import ClusterStatus
    from ._proto import bulletin_pb2 as pb

    state_dir = home()
    if args.simulate_gpus < 0 or args.cpus < 0:
        print("bulletin up: --cpus and --simulate-gpus must be >= 0", file=sys.stderr)
        return 2
    if not _executor_options_valid("up", args):
        return 2
    retention = parse_duration(args.usage_retention, "--usage-retention")
    info = _running_info(state_dir)
    if info is not None:
        try:
            Connection(info["address"], connect_timeout=3.0).close()
        except BulletinError as exc:
            raise BulletinError(f"a runtime (pid {info['pid']}) is running but does not answer "
                                f"at {info['address']}: {exc}\nStop it with `bulletin down`.")
        print(f"bulletin runtime already up at {info['address']} (pid {info['pid']})")
        _say_what_was_not_applied(args, info)
        return 0
    opts = _launch.UpOptions(gpus=args.gpus, cpus=args.cpus, simulate_gpus=args.simulate_gpus,
                             port=args.port, data_port=args.data_port, config=args.config,
                             host=args.host,
                             store_capacity=args.store_capacity, spill_dir=args.spill_dir,
                             store_arena_share=args.store_arena_share,
                             store_user_share=args.store_user_share,
                             store_dir=args.store_dir, executors=_executor_options(args),
                             tls=args.tls, tls_cert=args.tls_cert, tls_key=args.tls_key,
                             tls_ca=args.tls_ca, usage_retention=retention,
                             http_port=args.http_port, state_dir=args.state_dir,
                             journal=args.journal)
    if args.foreground:
        _launch.exec_foreground(state_dir, opts)  # does not return
    info = _launch.start(state_dir, opts)
    token = (state_dir / "token").read_text().strip()  # the owner's, whatever $BULLETIN_TOKEN says
    try:
        conn = Connection(info["address"], token=token, connect_timeout=10.0)
    except BulletinError as exc:
        raise BulletinError(f"the runtime started (pid {info['pid']}) but does not answer: {exc}"
                            f"\nLast lines of its log:\n{_launch.log_tail(state_dir)}") from None
    try:
        # Only the summary is printed: a restarted runtime's long queue is not described.
        status = ClusterStatus._from_proto(conn.call(
            conn.stub.Status, pb.StatusRequest(max_queued_listed=1), "Status"))
    finally:
        conn.close()
    tls = f"TLS, CA {info['ca']}" if info.get("ca") else "TLS" if info.get("tls") else "plaintext"
    for line in _moved_default_ports(args, info):
        print(line)
    print(f"bulletin runtime up at {info['address']} (pid {info['pid']}; {tls})")
    if not _tls.is_loopback(args.host):
        import socket
        print(f"workers on other machines: bulletin worker --head "
              f"{socket.gethostname()}:{info['address'].rsplit(':', 1)[1]}")
        if info.get("ca"):
            print(f"  (they and remote clients check the runtime with the CA: copy {info['ca']} "
                  "there and set BULLETIN_CA to it, unless they share $BULLETIN_HOME)")
            if info["ca"] == str(state_dir / _tls.CA_FILE):  # its own CA: worker certificates
                print("  each worker joins with a single-use token: `bulletin worker join-token "
                      "ID` here, then `bulletin worker --worker-id ID --join-file FILE` there")
        elif not info.get("tls"):
            print("warning: --no-tls: tokens and data cross the network in cleartext",
                  file=sys.stderr)
    print(_cluster_summary(status))
    if info.get("dashboard_url"):
        print(f"dashboard: {info['dashboard_url']} (log in with your token); Prometheus "
              f"metrics: {info['dashboard_url']}metrics")
    print(f"log: {state_dir / 'runtime.log'}; stop it with `bulletin down`")
    return 0


def _down(args) -> int:
    from ._connection import Connection
    from ._proto import bulletin_pb2 as pb

    state_dir = home()
    info = read_runtime_info(state_dir)
    if info is None:
        print(f"no bulletin runtime is up (no {state_dir / 'runtime.json'})")
        return 0
    pid, address = info.get("pid"), info.get("address")
    if isinstance(pid, int) and not _launch.pid_alive(pid):
        _launch.remove_runtime_info(state_dir, pid)
        print(f"the runtime (pid {pid}) had already exited; removed its runtime.json")
        return 0
    try:
        conn = Connection(address, token=None, connect_timeout=3.0)
        try:
            conn.call(conn.stub.Shutdown, pb.ShutdownRequest(), "Shutdown", timeout=10.0)
        finally:
            conn.close()
    except BulletinError as exc:
        # The runtime may drop the connection as it stops; only a live pid means it failed.
        if not isinstance(pid, int) or _launch.pid_alive(pid):
            print(f"Shutdown through the API failed ({exc}); sending SIGTERM", file=sys.stderr)
    if isinstance(pid, int):
        if not (_launch.wait_gone(pid, 30.0) or _launch.stop_pid(pid)):
            raise BulletinError(f"the runtime (pid {pid}) is still running; stop it by hand")
        _launch.remove_runtime_info(state_dir, pid)
    print(f"bulletin runtime at {address} stopped")
    return 0


def _require_runtime() -> None:
    # Without runtime.json or $BULLETIN_ADDRESS the client's default port could be anybody's
    # runtime on this machine: ask for an address instead of trying it.
    if not os.environ.get("BULLETIN_ADDRESS") and read_runtime_info() is None:
        raise BulletinError(
            f"no bulletin runtime is up here (no {home() / 'runtime.json'}). Start one with "
            "`bulletin up`, or point at a running one with BULLETIN_ADDRESS=HOST:PORT (and "
            "BULLETIN_HOME or BULLETIN_TOKEN for its token).")


def _status(args) -> int:
    from ._connection import Connection
    from ._status import ClusterStatus
    from ._proto import bulletin_pb2 as pb

    _require_runtime()
    conn = Connection(connect_timeout=3.0)
    try:
        reply = conn.call(conn.stub.Status, pb.StatusRequest(), "Status")
    finally:
        conn.close()
    print(f"runtime {conn.address} ({'TLS' if conn.tls.enabled else 'plaintext'}), "
          f"version {conn.hello.runtime_version}, "
          f"you are {conn.hello.user} ({conn.hello.group})")
    print(f"dashboard: {conn.hello.dashboard_url or 'none (the runtime runs with --http-port off)'}")
    print(ClusterStatus._from_proto(reply))
    return 0


def _usage(args) -> int:
    from ._connection import Connection
    from ._usage import UsageReport, usage_request

    _require_runtime()
    request = usage_request(args.since, None, args.by)
    conn = Connection(connect_timeout=3.0)
    try:
        reply = conn.call(conn.stub.Usage, request, "Usage")
    finally:
        conn.close()
    report = UsageReport._from_proto(reply)
    print(report.to_json() if args.json else report.to_csv() if args.csv else report, end=""
          if args.csv else "\n")
    return 0


def _worker(args) -> int:
    from . import _worker_identity

    if args.simulate_gpus < 0 or args.cpus < 0 or args.expires_at < 0:
        print("bulletin worker: --cpus, --simulate-gpus and --expires-at must be >= 0",
              file=sys.stderr)
        return 2
    if not _executor_options_valid("worker", args):
        return 2
    host, _, port = args.head.rpartition(":")
    if not host or not port.isdigit():
        print(f"bulletin worker: --head must be HOST:PORT, got {args.head!r}", file=sys.stderr)
        return 2
    reconnect = None
    if args.reconnect_timeout is not None:
        try:
            reconnect = parse_duration(args.reconnect_timeout, "--reconnect-timeout")
        except BulletinError as exc:
            print(f"bulletin worker: {exc}", file=sys.stderr)
            return 2
    opts = _launch.WorkerOptions(head=args.head, pool=args.pool, worker_id=args.worker_id,
                                 gpus=args.gpus, simulate_gpus=args.simulate_gpus, cpus=args.cpus,
                                 memory=args.memory, expires_at=args.expires_at,
                                 store_dir=args.store_dir, data_path=args.data_path,
                                 store_user_share=args.store_user_share,
                                 executors=_executor_options(args), ca=args.ca,
                                 reconnect_timeout=reconnect,
                                 join_token=_worker_identity.given_token(args.join,
                                                                         args.join_file))
    _launch.exec_worker(home(), opts)  # does not return
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) >= 2 and argv[0] == "worker" and argv[1] in _WORKER_ACTIONS:
        argv[:2] = [_WORKER_ACTIONS[argv[1]]]
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except BulletinError as exc:
        print(f"bulletin {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
