"""Finding java and the runtime jar, and starting and stopping the runtime (`bulletin up/down`).

The launch contract (arguments, environment, runtime.json) is in docs/internals.md.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from . import _tls
from ._config import read_runtime_info
from ._errors import BulletinError

PACKAGE_DIR = Path(__file__).resolve().parent
JAR_NAME = "bulletin-runtime.jar"


def jar_candidates() -> list[Path]:
    if os.environ.get("BULLETIN_JAR"):
        return [Path(os.environ["BULLETIN_JAR"]).expanduser()]
    return [PACKAGE_DIR / "_jars" / JAR_NAME,
            PACKAGE_DIR.parents[1] / "runtime" / "target" / JAR_NAME]  # a source checkout


def find_jar() -> Path:
    candidates = jar_candidates()
    for path in candidates:
        if path.is_file():
            return path
    looked = ", ".join(str(p) for p in candidates)
    raise BulletinError(f"the bulletin runtime jar was not found (looked at {looked}). "
                        "In a source checkout run `make build`; or set BULLETIN_JAR to the jar.")


def find_java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        java = Path(java_home) / "bin" / "java"
        if java.is_file() and os.access(java, os.X_OK):
            return str(java)
    java = shutil.which("java")
    if java:
        return java
    raise BulletinError("no `java` found (looked at $JAVA_HOME/bin/java and PATH). The runtime "
                        "needs Java 17 or newer: install a JDK/JRE (e.g. `apt install "
                        "openjdk-17-jre-headless`) or set JAVA_HOME.")


WORKER_TOKEN_FILE = "worker-token"


def ensure_token(state_dir: Path, name: str = "token") -> Path:
    """Creates a secret (mode 0600, in a 0700 folder) unless one exists: the owner's token, or
    the cluster's worker token (name="worker-token") that workers attach with."""
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(state_dir, 0o700)
    path = state_dir / name
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(32) + "\n")
    return path


def pid_alive(pid: int) -> bool:
    try:
        # Reaps the runtime if it is our own exited child (tests), so it does not look alive.
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    except OSError:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    # A killed runtime stays a zombie until its parent (often init in containers) reaps it.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


# Logs of earlier starts kept beside this start's runtime.log: runtime.log.1 is the previous.
_KEPT_LOGS = 5


def rotate_log(path: Path, keep: int = _KEPT_LOGS) -> None:
    """One log file per start: the last start's log becomes path.1 (and so on, up to
    ``keep``), so runtime.log, and the lines `bulletin up` quotes from it when a start fails,
    are this start's only."""
    if not path.exists():
        return
    for n in range(keep - 1, 0, -1):
        older = path.with_name(f"{path.name}.{n}")
        if older.exists():
            older.replace(path.with_name(f"{path.name}.{n + 1}"))
    path.replace(path.with_name(f"{path.name}.1"))


def log_tail(state_dir: Path, lines: int = 30) -> str:
    try:
        text = (state_dir / "runtime.log").read_text(errors="replace")
    except OSError:
        return "(no runtime.log)"
    return "\n".join(text.splitlines()[-lines:])


@dataclass(frozen=True)
class ExecutorOptions:
    """How a worker keeps its executors (`bulletin up` and `bulletin worker` alike)."""
    max_calls: int = 0  # 0: no limit
    idle_seconds: float = 600.0
    result_timeout_seconds: float = 300.0
    # Values kept on the GPU between calls (docs/notebooks.md): how long spilled ones are kept
    # unused, and the byte caps ("0": none).
    resident_idle_seconds: float = 3600.0
    resident_user_bytes: str = "0"
    resident_host_bytes: str = "0"
    spilled_user_bytes: str = "0"
    spilled_host_bytes: str = "0"

    def arguments(self) -> list[str]:
        return ["--executor-max-calls", str(self.max_calls),
                "--executor-idle-seconds", repr(float(self.idle_seconds)),
                "--result-timeout-seconds", repr(float(self.result_timeout_seconds)),
                "--resident-idle-seconds", repr(float(self.resident_idle_seconds)),
                "--resident-user-bytes", self.resident_user_bytes,
                "--resident-host-bytes", self.resident_host_bytes,
                "--spilled-user-bytes", self.spilled_user_bytes,
                "--spilled-host-bytes", self.spilled_host_bytes]


@dataclass(frozen=True)
class UpOptions:
    gpus: str = "auto"
    cpus: int = 0  # 0: all of this machine's cores
    simulate_gpus: int = 0
    port: int | None = None  # None: the runtime's default (8770), or the next free one
    data_port: int = 0  # 0: any free port
    config: Path | None = None
    host: str = "127.0.0.1"
    store_capacity: int = 0  # 0: half of the store's file system
    store_arena_share: float | None = None  # None: the runtime's default (docs/data-plane.md)
    store_user_share: int = 0  # 0: the store's capacity (only with run_as users, as root)
    spill_dir: Path | None = None
    store_dir: Path | None = None
    executors: ExecutorOptions = ExecutorOptions()
    tls: bool | None = None  # None: on unless host is a loopback address
    tls_cert: Path | None = None  # your own certificate and key (else bulletin up makes them)
    tls_key: Path | None = None
    tls_ca: Path | None = None  # the CA that signed tls_cert, for clients
    usage_retention: float = 0.0  # seconds the usage ledger keeps rows; 0: for ever
    http_port: str | None = None  # /metrics and the dashboard: N, 0 (any free) or "off";
    # None: $BULLETIN_HTTP_PORT, else 8780 (the runtime's own default)
    state_dir: Path | None = None  # the journal's folder (None: $BULLETIN_HOME)
    journal: bool = True  # False: --no-journal, a restart loses every call

    def tls_on(self) -> bool:
        if self.tls is not None:
            return self.tls
        return self.tls_cert is not None or not _tls.is_loopback(self.host)


def tls_files(state_dir: Path, opts: UpOptions) -> _tls.ServerFiles | None:
    """What the runtime serves TLS with: the given certificate, or the cluster CA's (made in
    state_dir); None for plaintext."""
    if not opts.tls_on():
        if opts.tls_cert or opts.tls_key or opts.tls_ca:
            raise BulletinError("--tls-cert, --tls-key and --tls-ca need TLS on: drop --no-tls")
        return None
    if (opts.tls_cert is None) != (opts.tls_key is None):
        raise BulletinError("--tls-cert and --tls-key go together: give both, or neither to "
                            "let `bulletin up` make a certificate from the cluster CA")
    if opts.tls_cert is not None:
        return _tls.ServerFiles(opts.tls_cert.resolve(), opts.tls_key.resolve(),
                                opts.tls_ca.resolve() if opts.tls_ca else None)
    if opts.tls_ca is not None:
        raise BulletinError("--tls-ca names the CA of your own certificate: give it with "
                            "--tls-cert and --tls-key")
    return _tls.ensure_server_files(state_dir, opts.host)


# The runtime's (and a worker agent's) JVM flags. Left alone, the JVM starts with a small heap
# (80 MB committed on a 23 GiB machine) and G1 keeps its young generation at a few dozen MB: a
# no-op call allocates about 100 KB in the runtime, so a collection (pauses of several ms on a
# small machine) fell every few hundred calls, each one into some call's round trip: the
# no-op benchmark's p99. A fixed young generation of up to 512 MB collects every few thousand
# calls instead, and as the live set is small (~13 MB) a pause costs no more. What it takes:
# up to twice that in memory (RAM/16 at most). See docs/internals.md ("JVM flags").
_YOUNG_MB_MAX = 512


def default_jvm_flags() -> list[str]:
    young = _YOUNG_MB_MAX
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            total_kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
        young = max(32, min(_YOUNG_MB_MAX, total_kb // 1024 // 32))
    except (OSError, StopIteration, ValueError, IndexError):
        pass
    return ["-XX:+UseG1GC", f"-Xms{2 * young}m", f"-Xmn{young}m"]


def jvm_flags() -> list[str]:
    """default_jvm_flags(), or $BULLETIN_JAVA_OPTS in their place (split on white space)."""
    env = os.environ.get("BULLETIN_JAVA_OPTS")
    return env.split() if env is not None else default_jvm_flags()


def runtime_command(java: str, jar: Path, state_dir: Path, opts: UpOptions,
                    tls: _tls.ServerFiles | None = None) -> list[str]:
    cmd = [java, *jvm_flags(), "--add-opens=java.base/java.nio=ALL-UNNAMED", "-jar", str(jar),
           "--home", str(state_dir), "--host", opts.host,
           *(["--port", str(opts.port)] if opts.port is not None else []),
           "--data-port", str(opts.data_port),
           "--python", sys.executable,
           "--gpus", opts.gpus, "--cpus", str(opts.cpus or os.cpu_count() or 1),
           "--simulate-gpus", str(opts.simulate_gpus), *opts.executors.arguments(),
           "--usage-retention", f"{opts.usage_retention:g}s"]
    if opts.http_port is not None:
        cmd += ["--http-port", str(opts.http_port)]
    if opts.config is not None:
        cmd += ["--config", str(opts.config)]
    if opts.store_capacity:
        cmd += ["--store-capacity", str(opts.store_capacity)]
    if opts.store_user_share:
        cmd += ["--store-user-share", str(opts.store_user_share)]
    if opts.store_arena_share is not None:
        cmd += ["--store-arena-share", repr(float(opts.store_arena_share))]
    if opts.spill_dir is not None:
        cmd += ["--spill-dir", str(opts.spill_dir)]
    if opts.store_dir is not None:
        cmd += ["--store-dir", str(opts.store_dir)]
    if opts.state_dir is not None:
        cmd += ["--state-dir", str(opts.state_dir)]
    if not opts.journal:
        cmd += ["--no-journal"]
    if tls is not None:
        cmd += ["--tls-cert", str(tls.cert), "--tls-key", str(tls.key)]
        if tls.ca is not None:
            cmd += ["--tls-ca", str(tls.ca)]
        if tls.ca_key is not None:
            cmd += ["--worker-ca-key", str(tls.ca_key)]
    return cmd


def runtime_env(token_path: Path, tls: _tls.ServerFiles | None = None) -> dict[str, str]:
    # Tokens go in the environment, never in argv, where `ps` would show them.
    env = dict(os.environ)
    # The pool workers it starts (`bulletin worker`, with this environment) dial it as it
    # serves: with its CA, the system's CAs (your own certificate, no --tls-ca), or plaintext.
    env["BULLETIN_CA"] = ("none" if tls is None else str(tls.ca) if tls.ca is not None
                          else "system")
    env["BULLETIN_OWNER_TOKEN"] = token_path.read_text().strip()
    env["BULLETIN_OWNER_USER"] = getpass.getuser()
    worker_token = ensure_token(token_path.parent, WORKER_TOKEN_FILE)
    env["BULLETIN_WORKER_TOKEN"] = worker_token.read_text().strip()
    return env


@dataclass(frozen=True)
class WorkerOptions:
    head: str
    pool: str = ""
    worker_id: str | None = None
    gpus: str = "auto"
    simulate_gpus: int = 0
    cpus: int = 0  # 0: all of this machine's cores
    memory: str | None = None
    expires_at: float = 0.0
    store_dir: Path | None = None
    store_user_share: int = 0  # 0: the worker reads BULLETIN_STORE_USER_SHARE, else none
    data_path: str | None = None  # None: the worker reads BULLETIN_DATA_PATH
    executors: ExecutorOptions = ExecutorOptions()
    ca: Path | None = None  # None: $BULLETIN_CA, runtime.json, $BULLETIN_HOME/ca.pem
    reconnect_timeout: float | None = None  # None: the worker reads BULLETIN_RECONNECT_TIMEOUT
    join_token: str | None = None  # exchanged for the worker's own certificate (docs/security.md)


def worker_command(java: str, jar: Path, opts: WorkerOptions,
                   tls: _tls.CaChoice | None = None) -> list[str]:
    cmd = [java, *jvm_flags(), "--add-opens=java.base/java.nio=ALL-UNNAMED", "-jar", str(jar),
           "worker",
           "--head", opts.head, "--python", sys.executable, "--gpus", opts.gpus,
           "--simulate-gpus", str(opts.simulate_gpus),
           "--cpus", str(opts.cpus or os.cpu_count() or 1), *opts.executors.arguments()]
    if opts.pool:
        cmd += ["--pool", opts.pool]
    if opts.worker_id:
        cmd += ["--worker-id", opts.worker_id]
    if opts.memory:
        cmd += ["--memory", opts.memory]
    if opts.expires_at:
        cmd += ["--expires-at", f"{opts.expires_at:.3f}"]
    if opts.store_user_share:
        cmd += ["--store-user-share", str(opts.store_user_share)]
    if opts.store_dir is not None:
        cmd += ["--store-dir", str(opts.store_dir)]
    if opts.data_path:
        cmd += ["--data-path", opts.data_path]
    if opts.reconnect_timeout is not None:
        cmd += ["--reconnect-timeout", f"{opts.reconnect_timeout:g}"]
    if tls is not None and tls.enabled:
        cmd += ["--tls"] + (["--tls-ca", str(tls.path)] if tls.path else [])
    return cmd


def worker_token(state_dir: Path) -> str:
    """$BULLETIN_WORKER_TOKEN, else the worker-token file `bulletin up` wrote."""
    token = os.environ.get("BULLETIN_WORKER_TOKEN", "").strip()
    if token:
        return token
    path = state_dir / WORKER_TOKEN_FILE
    try:
        token = path.read_text().strip()
    except OSError:
        token = ""
    if not token:
        raise BulletinError(f"no worker token: set BULLETIN_WORKER_TOKEN to the cluster's worker "
                            f"token, or run on a machine that shares {path} with the head "
                            f"(`bulletin up` writes it there)")
    return token


# Where a worker writes the CA it was given as text (a Kubernetes pool's worker, from its Secret).
CA_FROM_ENV = "ca-from-env.pem"


def exec_worker(state_dir: Path, opts: WorkerOptions) -> None:
    """Replaces this process with a worker agent attached to the runtime at opts.head, over TLS
    when a CA is found for it (as a client finds one); a TLS mismatch fails here, clearly."""
    from . import _worker_identity

    java, jar = find_java(), find_jar()
    env = dict(os.environ)
    # The JVM reads its CA from a file: a CA given as text ($BULLETIN_CA_PEM) is written down.
    tls = _tls.resolve_ca(opts.ca, opts.head, given_as="--ca").as_file(state_dir / CA_FROM_ENV)
    # Check the head's certificate here, where a failure can say clearly what to do (the JVM
    # checks it again). Plaintext is not probed: a plaintext head may take long to drop a TLS
    # hello, and the JVM's error names BULLETIN_CA if the head turns out to speak TLS.
    why = _tls.diagnose(opts.head, tls, timeout=10.0, who="this worker") if tls.enabled else None
    if why:
        raise _tls.TlsError(why)
    join = opts.join_token
    if join is None and tls.enabled:
        # The owner starting a worker by hand: a token of its own, asked for here (the id is
        # fixed now, as the agent would choose it: execve keeps this pid).
        worker_id = opts.worker_id or f"{socket.gethostname()}-{os.getpid()}"
        join = _worker_identity.token_as_owner(opts.head, worker_id, tls.path)
        if join is not None:
            opts = dataclasses.replace(opts, worker_id=worker_id)
    env.pop("BULLETIN_JOIN_TOKEN", None)
    if join is not None:
        if not tls.enabled:
            raise BulletinError("a join token needs a runtime that speaks TLS (the token and "
                                "the certificate must not cross the network in the clear); "
                                "give the head's CA with --ca or $BULLETIN_CA")
        env["BULLETIN_JOIN_TOKEN"] = join
        env.pop("BULLETIN_WORKER_TOKEN", None)
    else:
        env["BULLETIN_WORKER_TOKEN"] = worker_token(state_dir)
    sys.stdout.flush()
    os.execve(java, worker_command(java, jar, opts, tls), env)


def start(state_dir: Path, opts: UpOptions, wait_seconds: float = 60.0) -> dict:
    """Starts the runtime in the background; returns its runtime.json once it serves."""
    java, jar = find_java(), find_jar()
    token_path = ensure_token(state_dir)
    tls = tls_files(state_dir, opts)
    # A stale file from a crashed runtime would read as "up" before the new JVM removes it.
    (state_dir / "runtime.json").unlink(missing_ok=True)
    rotate_log(state_dir / "runtime.log")
    with open(state_dir / "runtime.log", "wb") as log:
        proc = subprocess.Popen(runtime_command(java, jar, state_dir, opts, tls),
                                env=runtime_env(token_path, tls), stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                close_fds=True)
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        info = read_runtime_info(state_dir)
        if info and info.get("pid") == proc.pid:
            return info
        code = proc.poll()
        if code is not None:
            raise BulletinError(f"the runtime exited with code {code} while starting. "
                                f"Last lines of {state_dir / 'runtime.log'}:\n{log_tail(state_dir)}")
        time.sleep(0.1)
    proc.terminate()
    raise BulletinError(f"the runtime did not write runtime.json within {wait_seconds:g} s. "
                        f"Last lines of {state_dir / 'runtime.log'}:\n{log_tail(state_dir)}")


def exec_foreground(state_dir: Path, opts: UpOptions) -> None:
    """Replaces this process with the runtime, its log on this terminal."""
    java, jar = find_java(), find_jar()
    token_path = ensure_token(state_dir)
    tls = tls_files(state_dir, opts)
    sys.stdout.flush()
    os.execve(java, runtime_command(java, jar, state_dir, opts, tls),
              runtime_env(token_path, tls))


def wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.1)
    return not pid_alive(pid)


def stop_pid(pid: int, grace_seconds: float = 30.0) -> bool:
    """SIGTERM, then SIGKILL after the grace period; True once the process is gone."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    if wait_gone(pid, grace_seconds):
        return True
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    return wait_gone(pid, 5.0)


def remove_runtime_info(state_dir: Path, pid: int) -> None:
    """Removes runtime.json if it still describes the runtime with this pid."""
    info = read_runtime_info(state_dir)
    if info is None or info.get("pid") == pid:
        (state_dir / "runtime.json").unlink(missing_ok=True)

