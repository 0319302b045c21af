"""Data plane: moving a 1 GiB float32 array through bulletin, against the machine's own limits
and against Dask distributed and Ray, in one run on one machine.

    make bench-data                   # or: python examples/data_plane_benchmark.py
    python examples/data_plane_benchmark.py --gib 0.25 --only same-host,dataset
    python examples/data_plane_benchmark.py --tls --only cross-host-tls,worker-host,worker-to-worker

Sections (each prints its numbers and ratios; --only picks some):
  same-host  the one copy into the store (encode + write) against a single-thread memcpy of the
             same bytes; opening the object on the other side (map + decode); a full call that
             takes the array and returns it (client -> executor -> client).
  same-host-run-as  the same with the runtime as root and the benchmark's user given a `run_as`
             account made for it (useradd; root needed), the client running as that account:
             what the privilege separation costs the data path (the user's store folder is a
             file system of its own share, root checks each staged file it publishes).
  same-host-huge  the same with the store on a tmpfs mounted with huge=within_size (root
             needed): 2 MiB pages instead of /dev/shm's 4 KiB ones, where page faults, not the
             copy, bound a first write.
  cross-host two network namespaces on a veth pair (root needed): upload and download of the
             array through the bulk data port (and, for comparison, the chunked gRPC path,
             BULLETIN_DATA_PATH=grpc) against a raw TCP stream between the same namespaces,
             the runtime in plaintext (`bulletin up --no-tls`).
  cross-host-tls  the same through the data port with TLS on (the default beyond loopback),
             against the plaintext figures: what TLS costs a cross-host transfer.
  worker-host  the runtime and its client in one namespace, a worker in the other: the worker
             fetching a call's 1 GiB input and uploading a 1 GiB result (pulled by result()),
             over the data port and over gRPC chunks (--data-path grpc), against raw TCP
             (plaintext, as cross-host; with --tls, TLS on).
  worker-to-worker  a result kept on worker A moved straight to a call on worker B (each in its
             own network namespace) against raw TCP, and the head's payload bytes for it
             (examples/worker_to_worker_benchmark.py; with --tls, TLS on).
  dask, ray  the same round trip (argument in, result out) through each peer, if installed.
  new-array-call  issue 30.5: a fresh 1 GiB array in, a new one out (v + 0), bulletin and Ray
             in the same run, bulletin's time split by phase (examples/new_array_call.py).
  dataset    a CIFAR-10-sized uint8 dataset (50,000 x 3 x 32 x 32) passed to 5 consecutive
             calls: the bytes uploaded on calls 2 to 5 (must be 0).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

GIB = 1 << 30


def echo(x):
    return x


def scale(x, k):
    return np.multiply(x, k)


def first(x):
    return float(x.reshape(-1)[0])


def best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def gbps(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e9


def array(nbytes: int) -> np.ndarray:
    return np.random.default_rng(0).random(nbytes // 4, dtype=np.float32)


# -- same host --------------------------------------------------------------------------------


def same_host(client, a: np.ndarray) -> dict:
    from bulletin._data._objects import encode, open_object

    nbytes = a.nbytes
    transfer = client._transfer
    # The client's pre-faulted spare files fill in the background from its start (`bulletin up`
    # itself does not wait for them): wait, so that the fill competes with no measurement. The
    # first write below is then the first into the store.
    spares = transfer.spares
    if spares is not None:
        spares.wait_filled(120)
    touched = np.empty_like(a)
    touched.fill(1)
    memcpy = best(lambda: np.copyto(touched, a))  # numpy's copy is one thread's memcpy
    del touched
    # The same copy into memory never touched before: the page faults a first store write pays.
    memcpy_fresh = best(lambda: np.copyto(np.empty_like(a), a))
    b = a.copy()  # changed in one element per round: a new object each time
    scatters = []

    def one_copy(round_: int) -> float:
        """Puts a new 1 GiB object through the client's path and releases it again: the next
        one reuses its memory. Returns the seconds spent copying into the store; records the
        whole scatter (encode, digest, "has it?", copy, adopt) in ``scatters``."""
        b[0] = round_
        before = transfer.write_seconds
        start = time.perf_counter()
        oid = transfer.acquire(encode(b))
        scatters.append(time.perf_counter() - start)
        seconds = transfer.write_seconds - before
        transfer.release(oid)
        time.sleep(0.2)  # the release travels on the session stream
        return seconds

    # Eight rounds: the first write's spare is made again in the background for about a second
    # (1.4 s on the 2-core VM), and the writes during that fill compete with it; the steady
    # state is what follows.
    writes = [one_copy(i) for i in range(8)]
    recycled = transfer._maps.recycled_writes
    spare_writes = transfer._maps.spare_writes
    digest = best(lambda: encode(a).digest())

    # The full handoff: in to the executor (one copy into the store), out again (the function
    # returns its argument: the store holds it already), opened here by mapping. A new argument
    # every round, as a training loop refills its batch: from the third round on, the write
    # reuses the memory of the content two rounds back (released when the array changed).
    client.submit(first, a[:1024]).result()  # warm the function and executor
    timings = []
    for round_ in range(5):
        b[0] = 100 + round_
        start = time.perf_counter()
        f = client.submit(echo, b)
        out = f.result()
        timings.append((time.perf_counter() - start, dict(f.timings)))
        assert out.shape == a.shape and out[0] == b[0]
        del out, f
        time.sleep(0.2)
    round_trip, phase = min(timings[2:], key=lambda t: t[0])
    # The same array again: content addressing finds it in the store, nothing is written.
    start = time.perf_counter()
    out = client.submit(echo, b).result()
    same_again = time.perf_counter() - start
    del out
    # A result that differs from the argument (and from every earlier result): the executor
    # writes 1 GiB of new bytes into fresh memory.
    def distinct_results(arg) -> float:
        times = []
        for k in (-1.0, 3.0, 5.0):
            start = time.perf_counter()
            out = client.submit(scale, arg, k).result()
            times.append(time.perf_counter() - start)
            del out
        return min(times)

    distinct = distinct_results(a)
    # The same with the input scattered once, as Ray's task gets `ray.put`'s ref: the array
    # passed itself is hashed again by every call (content addressing finds it in the store,
    # but only once it has read every byte: an array may have changed since the last call).
    a_ref = client.scatter(a)
    distinct_ref = distinct_results(a_ref)
    del a_ref
    # Opening an object in the store, as the executor and a same-host client do.
    f = client.submit(lambda n: np.ones(n // 4, dtype=np.float32), nbytes)
    f.exception()
    path = transfer.folder / f.remote_id
    opened = best(lambda: open_object(path), repeat=5)
    del f
    steady = min(writes[1:])
    return {
        "bytes": nbytes,
        "memcpy_GBps": gbps(nbytes, memcpy),
        "store_write_GBps": gbps(nbytes, steady),
        "store_write_vs_memcpy": memcpy / steady,
        "store_first_write_GBps": gbps(nbytes, writes[0]),
        "store_writes_s": [round(w, 4) for w in writes],
        "recycled_writes": recycled,
        "spare_writes": spare_writes,
        "spare_fill_s": spares.fill_seconds if spares is not None else None,
        "scatters_s": [round(w, 4) for w in scatters],
        "scatter_first_GBps": gbps(nbytes, scatters[0]),
        "scatter_GBps": gbps(nbytes, min(scatters[1:])),
        "store_first_write_vs_memcpy": memcpy / writes[0],
        "round_trips_s": [round(t[0], 4) for t in timings],
        "memcpy_fresh_GBps": gbps(nbytes, memcpy_fresh),
        "store_first_write_vs_memcpy_fresh": memcpy_fresh / writes[0],
        "digest_GBps": gbps(nbytes, digest),
        "open_ms": opened * 1e3,
        "round_trip_s": round_trip,
        "round_trip_same_array_again_s": same_again,
        "round_trip_distinct_result_s": distinct,
        "round_trip_distinct_result_scattered_s": distinct_ref,
        "round_trip_phases_s": {k: round(v, 4) for k, v in phase.items()},
    }


def huge_page_store(a: np.ndarray) -> dict:
    from _local_cluster import local_cluster

    if os.geteuid() != 0:
        return {"skipped": "mounting a huge-page tmpfs needs root"}
    mount = tempfile.mkdtemp(prefix="bulletin-huge-")
    size = f"{max(4 * a.nbytes, 1 << 30) >> 20}m"
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},huge=within_size",
                           "tmpfs", mount], capture_output=True, text=True)
    if done.returncode:
        os.rmdir(mount)
        return {"skipped": f"mount failed: {done.stderr.strip()}"}
    try:
        with local_cluster(cpus=2, up_args=("--store-dir", os.path.join(mount, "store"))) as client:
            return same_host(client, a)
    finally:
        subprocess.run(["umount", mount], capture_output=True)
        os.rmdir(mount)


# -- cross host -------------------------------------------------------------------------------

TCP_PORT = 18999


RUN_AS_TOKEN = "run-as-benchmark-token-0123456789"


@contextlib.contextmanager
def new_account():
    """An account made for the section (its name), removed afterwards: an ordinary one, as a
    lab's users have (a system account needs allow_system_accounts in the config)."""
    import secrets
    name = f"bbench{secrets.token_hex(3)}"
    subprocess.run(["useradd", "--no-create-home", "--user-group", "--shell",
                    "/usr/sbin/nologin", name], check=True, capture_output=True)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def as_account(account: str, python: str, *args: str) -> list[str]:
    """The command that runs ``python args`` as ``account``, through a shell's exec as the
    runtime starts the account's executors: the account, not root, must reach the program."""
    return ["setpriv", f"--reuid={account}", f"--regid={account}", "--init-groups", "/bin/sh",
            "-c", 'exec "$0" "$@"', python, *args]


def reachable_python(account: str) -> tuple[str, str] | None:
    """A Python of this version that ``account`` can run, and the PYTHONPATH under which it
    imports bulletin and this one's packages (a venv under /root is out of its reach)."""
    import bulletin
    packages = os.path.dirname(os.path.dirname(np.__file__))
    path = os.pathsep.join([os.path.dirname(os.path.dirname(bulletin.__file__)), packages])
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for python in dict.fromkeys([sys.executable, os.path.realpath(sys.executable),
                                 f"/usr/bin/{version}", f"/usr/local/bin/{version}"]):
        if os.path.exists(python) and subprocess.run(
                as_account(account, python, "-c", "import bulletin, numpy, pyarrow"),
                env={"PYTHONPATH": path, "PATH": os.environ["PATH"]}, cwd="/",
                capture_output=True).returncode == 0:
            return python, path
    return None


def run_as_same_host(nbytes: int) -> dict:
    """The same-host figures of a client that runs as its user's `run_as` account, against a
    runtime running as root: the set-up a cluster of users who do not trust each other has."""
    import shutil

    from _local_cluster import local_cluster

    from bulletin._config import read_runtime_info
    if os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("useradd"):
        return {"skipped": "needs root, useradd and setpriv"}
    with new_account() as account, tempfile.TemporaryDirectory() as folder:
        config = os.path.join(folder, "cluster.yaml")
        with open(config, "w", encoding="utf-8") as f:
            f.write("users:\n"
                    f"  - {{name: bench, token: \"{RUN_AS_TOKEN}\", run_as: {account}}}\n")
        found = reachable_python(account)
        if found is None:
            return {"skipped": f"no python{sys.version_info.major}.{sys.version_info.minor} "
                               f"that the account {account} can run with these packages"}
        python, path = found
        saved = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = path  # for `bulletin up`, and so the account's executors
        try:
            with local_cluster(cpus=2, up_args=("--config", config), python=python):
                child = subprocess.run(
                    as_account(account, python, os.path.abspath(__file__), "--_same-host-client",
                               read_runtime_info()["address"], str(nbytes)),
                    env={"PATH": os.environ["PATH"], "BULLETIN_TOKEN": RUN_AS_TOKEN,
                         "PYTHONPATH": path}, cwd="/", capture_output=True, text=True)
        finally:
            if saved is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = saved
    if child.returncode != 0:
        raise SystemExit(f"the run_as client failed:\n{child.stdout}{child.stderr}")
    return json.loads(child.stdout.strip().splitlines()[-1])


def same_host_client(address: str, nbytes: int) -> dict:
    """Runs as the run_as account: the first scatter after `bulletin up` (the whole acquire:
    hash, copy into the store, adopt; ``first_write_*``) and the round trip of a new 1 GiB argument (best of the last three of five), as in same-host, and
    which path the client's bytes took (a run_as client reached the store only through the
    data port before issue 26)."""
    import bulletin
    from bulletin._data._objects import encode
    a = array(nbytes)
    with bulletin.Client(address, token=os.environ["BULLETIN_TOKEN"],
                         set_as_default=False) as client:
        transfer = client._transfer
        if transfer.spares is not None:
            transfer.spares.wait_filled(120)
        start = time.perf_counter()
        oid = transfer.acquire(encode(a))
        first_write = time.perf_counter() - start
        path = transfer.last_path or ("same-host" if transfer.same_host else "?")
        into_spare = transfer._maps.spare_writes if transfer.spares is not None else None
        transfer.release(oid)
        time.sleep(0.2)
        client.submit(first, a[:1024]).result()
        trips = []
        for round_ in range(5):
            a[0] = 100 + round_
            start = time.perf_counter()
            out = client.submit(echo, a).result()
            trips.append(time.perf_counter() - start)
            del out
            time.sleep(0.2)
    return {"path": path, "first_write_s": first_write, "first_write_into_spare": into_spare,
            "first_write_GBps": gbps(nbytes, first_write), "round_trip_s": min(trips[2:]),
            "round_trips_s": [round(t, 4) for t in trips]}


def tcp_server(nbytes: int) -> None:
    with socket.create_server(("0.0.0.0", TCP_PORT)) as server:
        print("ready", flush=True)
        conn, _ = server.accept()
        buf = bytearray(8 << 20)
        view = memoryview(buf)
        got = 0
        with conn:
            while got < nbytes:
                n = conn.recv_into(view)
                if not n:
                    break
                got += n
            conn.sendall(b"k")


def tcp_client(host: str, nbytes: int) -> float:
    data = memoryview(array(nbytes)).cast("B")
    with socket.create_connection((host, TCP_PORT)) as conn:
        start = time.perf_counter()
        conn.sendall(data)
        conn.recv(1)
        return time.perf_counter() - start


class CpuClock:
    """CPU seconds (user + system) of this process and of the runtime (same PID namespace: the
    network namespaces share it): what a transfer costs, whatever else the machine runs."""

    def __init__(self):
        import resource

        from bulletin._config import read_runtime_info

        self._resource = resource
        self._runtime = read_runtime_info()["pid"]  # BULLETIN_HOME is the runtime's
        self._tick = os.sysconf("SC_CLK_TCK")

    def read(self) -> tuple[float, float]:
        usage = self._resource.getrusage(self._resource.RUSAGE_SELF)
        with open(f"/proc/{self._runtime}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return usage.ru_utime + usage.ru_stime, (int(fields[11]) + int(fields[12])) / self._tick


def cross_client(address: str, token: str, nbytes: int) -> dict:
    """Runs in the client namespace: upload then download through the path BULLETIN_DATA_PATH
    picks (the bulk data port by default), and says which path each took, with the CPU seconds
    the client and the runtime spent on the fastest of the steady-state ones."""
    import bulletin
    from bulletin._data._objects import encode

    client = bulletin.Client(address, token=token, connect_timeout=10)
    transfer = client._transfer
    assert not transfer.same_host
    clock = CpuClock()
    a = array(nbytes)
    # Four uploads of new content, as a loop sends a new batch each step; each releases the one
    # before it, so from the third on the runtime writes into memory it already has.
    uploads, held, upload_cpu = [], [], []
    recycled = client.status().store["recycled_files"]
    for round_ in range(4):
        a[0] = round_
        encoded = encode(a)
        # The content id and the CRC32C, computed in one pass before any transfer (as the client
        # does: it needs the id to ask "has it?"); the figure is the transfer itself.
        oid = encoded.digest(with_crc32c=True)
        cpu = clock.read()
        start = time.perf_counter()
        held.append(transfer.acquire(encoded))
        uploads.append(time.perf_counter() - start)
        upload_cpu.append([after - before for after, before in zip(clock.read(), cpu)])
        if len(held) > 1:
            transfer.release(held.pop(0))
            time.sleep(0.3)  # the release travels on the session stream
    put_path = transfer.last_path
    recycled = client.status().store["recycled_files"] - recycled
    # Four downloads, each value let go before the next: from the second on into memory the
    # client already has.
    downloads, download_cpu = [], []
    for _ in range(4):
        cpu = clock.read()
        start = time.perf_counter()
        back = transfer.fetch(oid, encoded.nbytes)
        downloads.append(time.perf_counter() - start)
        download_cpu.append([after - before for after, before in zip(clock.read(), cpu)])
        assert back.shape == a.shape and back[0] == a[0] and back[123] == a[123]
        del back
    get_path = transfer.last_path
    reused_downloads = transfer.receive_buffers.reused
    upload, download = min(uploads[2:]), min(downloads[1:])
    upload_cpu = upload_cpu[uploads.index(upload)]
    download_cpu = download_cpu[downloads.index(download)]
    start = time.perf_counter()
    out = client.submit(echo, a).result()
    call = time.perf_counter() - start
    assert out.shape == a.shape
    client.close()
    return {"upload_s": upload, "download_s": download, "call_round_trip_s": call,
            "put_path": put_path, "get_path": get_path, "uploads_s": uploads,
            "downloads_s": downloads, "uploads_into_reused_memory": recycled,
            "downloads_into_reused_memory": reused_downloads,
            # CPU seconds per GiB of the fastest steady-state transfer: [client, runtime]
            "upload_cpu_s_per_gib": [c / (nbytes / GIB) for c in upload_cpu],
            "download_cpu_s_per_gib": [c / (nbytes / GIB) for c in download_cpu]}


def raw_tcp(server_ns: str, client_ns: str, nbytes: int) -> float:
    """Seconds for nbytes over a raw TCP stream from the client namespace to the server's: the
    ceiling for any protocol on this link (best of three, as bulletin's figures are best of
    their rounds)."""
    import _netns

    me = os.path.abspath(__file__)
    raws = []
    for _ in range(3):
        server = subprocess.Popen(_netns.in_ns(server_ns, [
            sys.executable, me, "--_tcp-server", str(nbytes)]), stdout=subprocess.PIPE, text=True)
        server.stdout.readline()
        raws.append(json.loads(subprocess.check_output(_netns.in_ns(client_ns, [
            sys.executable, me, "--_tcp-client", _netns.SERVER_IP, str(nbytes)]))))
        server.wait(30)
    return min(raws)


def worker_driver(address: str, token: str, nbytes: int, worker_id: str) -> dict:
    """Runs on the runtime's host: each round scatters new content (a same-host write), then a
    call that must run on the remote worker reads it (the worker fetches it from the runtime);
    then a call there makes a new array of that size, kept on the worker until result() pulls
    it to the runtime (the worker uploads it) and maps it here."""
    import bulletin

    client = bulletin.Client(address, token=token, connect_timeout=10)
    deadline = time.monotonic() + 60
    while not any(w.worker_id == worker_id for w in client.status().workers):
        if time.monotonic() > deadline:
            raise RuntimeError("the worker on the other host did not attach within 60 s")
        time.sleep(0.2)
    a = array(nbytes)
    fetches, pulls = [], []
    for round_ in range(4):
        a[0] = round_
        ref = client.scatter(a)
        start = time.perf_counter()
        assert client.submit(first, ref, gpus=1).result(timeout=300) == round_
        fetches.append(time.perf_counter() - start)
        made = client.submit(scale, ref, 2.0, gpus=1)
        made.exception(timeout=300)  # done: the result waits on the worker
        start = time.perf_counter()
        value = made.result()
        pulls.append(time.perf_counter() - start)
        assert value[0] == 2 * round_
        del value, made, ref
        time.sleep(0.3)  # the releases travel on the session stream
    # The call alone, an input already on the worker: what a fetch adds is above this.
    ref = client.scatter(a)
    client.submit(first, ref, gpus=1).result(timeout=300)
    start = time.perf_counter()
    client.submit(first, ref, gpus=1).result(timeout=300)
    call = time.perf_counter() - start
    client.close()
    return {"fetches_s": fetches, "pulls_s": pulls, "call_s": call}


def worker_host(nbytes: int, tls: bool = False) -> dict:
    """A worker on the other host, the client beside the runtime: the worker's fetches of a
    call's input and its uploads of a result, over the data port and over gRPC chunks; with
    ``tls``, the runtime and so both ports speak TLS (the worker finds the CA in the shared
    $BULLETIN_HOME)."""
    import _netns

    why = _netns.available()
    if why:
        return {"skipped": why}
    me = os.path.abspath(__file__)
    runs = {}
    with two_host_runtime(nbytes, 18772, "--cpus", "1", "--tls" if tls else "--no-tls") as (
            server_ns, client_ns, env, raw):
        for path in ("auto", "grpc"):
            worker = subprocess.Popen(_netns.in_ns(client_ns, [
                sys.executable, "-m", "bulletin._cli", "worker", "--head",
                f"{_netns.SERVER_IP}:18772", "--worker-id", f"far-{path}",
                "--simulate-gpus", "1", "--cpus", "1", "--data-path", path]), env=env,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                out = subprocess.run(_netns.in_ns(server_ns, [
                    sys.executable, me, "--_worker-driver", "127.0.0.1:18772", str(nbytes),
                    f"far-{path}"]), env=env, capture_output=True, text=True)
                if out.returncode:
                    raise RuntimeError(f"worker-host driver failed:\n{out.stderr}")
                runs[path] = json.loads(out.stdout)
            finally:
                worker.terminate()
                worker.wait(30)
    tcp_gbps = gbps(nbytes, raw)

    def ratio(seconds):  # the call's own time taken out: the bytes' share of it
        return gbps(nbytes, max(seconds - runs["auto"]["call_s"], 1e-9)) / tcp_gbps

    bulk, grpc_run = runs["auto"], runs["grpc"]
    return {
        "tls": tls,
        "raw_tcp_GBps": tcp_gbps,
        "call_s": bulk["call_s"],
        "fetches_s": [round(s, 3) for s in bulk["fetches_s"]],
        "pulls_s": [round(s, 3) for s in bulk["pulls_s"]],
        "grpc_fetches_s": [round(s, 3) for s in grpc_run["fetches_s"]],
        "grpc_pulls_s": [round(s, 3) for s in grpc_run["pulls_s"]],
        "fetch_vs_tcp": ratio(min(bulk["fetches_s"][2:])),
        "pull_vs_tcp": ratio(min(bulk["pulls_s"][2:])),
        "grpc_fetch_vs_tcp": ratio(min(grpc_run["fetches_s"][2:])),
        "grpc_pull_vs_tcp": ratio(min(grpc_run["pulls_s"][2:])),
    }


@contextlib.contextmanager
def two_host_runtime(nbytes: int, port: int, *up_args: str):
    """Two namespaces, the raw TCP time between them measured, and a runtime (`bulletin up`
    on `port`, with `up_args`) in the server's; yields (server_ns, client_ns, env, raw seconds),
    env carrying the runtime's home and token; stops the runtime after."""
    import _netns

    with _netns.two_hosts() as (server_ns, client_ns), tempfile.TemporaryDirectory() as home:
        raw = raw_tcp(server_ns, client_ns, nbytes)
        env = {k: v for k, v in os.environ.items()
               if k not in ("BULLETIN_ADDRESS", "BULLETIN_TOKEN", "BULLETIN_DATA_PATH")}
        env["BULLETIN_HOME"] = home
        subprocess.run(_netns.in_ns(server_ns, [
            sys.executable, "-m", "bulletin._cli", "up", "--host", "0.0.0.0", "--port", str(port),
            *up_args]), env=env, check=True, capture_output=True)
        try:
            env["BULLETIN_TOKEN"] = open(os.path.join(home, "token")).read().strip()
            yield server_ns, client_ns, env, raw
        finally:
            subprocess.run(_netns.in_ns(server_ns, [sys.executable, "-m", "bulletin._cli",
                                                    "down"]), env=env, capture_output=True)


def cross_host(nbytes: int, tls: bool = False) -> dict:
    """Plaintext: the data port and, for comparison, gRPC chunks; with ``tls``, the data port
    over TLS (the client in the other namespace checks it with the head's CA, found in the
    shared $BULLETIN_HOME)."""
    import _netns

    why = _netns.available()
    if why:
        return {"skipped": why}
    me = os.path.abspath(__file__)
    runs = {}
    with two_host_runtime(nbytes, 18771, "--simulate-gpus", "1", "--cpus", "2",
                          "--tls" if tls else "--no-tls") as (server_ns, client_ns, env, raw):
        # the bulk data port, then chunked gRPC (plaintext only: the TLS figure is the port's)
        for path in ("auto",) if tls else ("auto", "grpc"):
            out = subprocess.run(_netns.in_ns(client_ns, [
                sys.executable, me, "--_cross-client", f"{_netns.SERVER_IP}:18771",
                str(nbytes)]), env=dict(env, BULLETIN_DATA_PATH=path), capture_output=True,
                text=True)
            if out.returncode:
                raise RuntimeError(f"cross-host client failed:\n{out.stderr}")
            runs[path] = json.loads(out.stdout)
    tcp_gbps = gbps(nbytes, raw)
    result = runs["auto"]
    out = {
        "tls": tls,
        "raw_tcp_GBps": tcp_gbps,
        "put_path": result["put_path"],
        "get_path": result["get_path"],
        "put_GBps": gbps(nbytes, result["upload_s"]),
        "get_GBps": gbps(nbytes, result["download_s"]),
        "put_vs_tcp": gbps(nbytes, result["upload_s"]) / tcp_gbps,
        "get_vs_tcp": gbps(nbytes, result["download_s"]) / tcp_gbps,
        "put_first_vs_tcp": gbps(nbytes, result["uploads_s"][0]) / tcp_gbps,
        "get_first_vs_tcp": gbps(nbytes, result["downloads_s"][0]) / tcp_gbps,
        "uploads_s": [round(s, 3) for s in result["uploads_s"]],
        "uploads_into_reused_memory": result["uploads_into_reused_memory"],
        "downloads_into_reused_memory": result["downloads_into_reused_memory"],
        "downloads_s": [round(s, 3) for s in result["downloads_s"]],
        "call_round_trip_s": result["call_round_trip_s"],
        "upload_cpu_s_per_gib": [round(c, 3) for c in result["upload_cpu_s_per_gib"]],
        "download_cpu_s_per_gib": [round(c, 3) for c in result["download_cpu_s_per_gib"]],
    }
    if "grpc" in runs:
        out.update({
            "grpc_put_vs_tcp": gbps(nbytes, runs["grpc"]["upload_s"]) / tcp_gbps,
            "grpc_get_vs_tcp": gbps(nbytes, runs["grpc"]["download_s"]) / tcp_gbps,
            "grpc_call_round_trip_s": runs["grpc"]["call_round_trip_s"],
        })
    return out


# -- peers ------------------------------------------------------------------------------------


def round_trips(call, repeat: int = 3) -> float:
    call()
    return best(call, repeat)


def dask_round_trip(a: np.ndarray) -> dict:
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        return {"skipped": "dask[distributed] is not installed (make bench installs it)"}
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        return {"round_trip_s": round_trips(lambda: client.submit(echo, a, pure=False).result())}


def ray_round_trip(a: np.ndarray) -> dict:
    try:
        import ray
    except ImportError:
        return {"skipped": "ray is not installed (make bench installs it)"}
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False,
             object_store_memory=max(3 * a.nbytes, 1 << 30))
    try:
        # ray.put of new content, the first right after ray.init, then 3 more (each let go):
        # what bulletin's scatter is measured against.
        b = a.copy()
        puts = []
        for round_ in range(4):
            b[0] = round_
            start = time.perf_counter()
            ref = ray.put(b)
            puts.append(time.perf_counter() - start)
            del ref
        remote_echo = ray.remote(echo)
        out = {"round_trip_s": round_trips(lambda: ray.get(remote_echo.remote(a))),
               "puts_s": [round(p, 4) for p in puts],
               "put_first_GBps": gbps(a.nbytes, puts[0]),
               "put_GBps": gbps(a.nbytes, min(puts[1:]))}
        # A task that returns a new array of the input's size, its input already in the store
        # (as bulletin's "distinct result" figure: np.multiply, then the result to the caller).
        remote_scale = ray.remote(scale)
        a_ref = ray.put(a)
        distinct = []
        for k in (-1.0, 3.0, 5.0, 7.0):
            start = time.perf_counter()
            value = ray.get(remote_scale.remote(a_ref, k))
            distinct.append(time.perf_counter() - start)
            del value
        out["distinct_result_s"] = min(distinct[1:])
        return out
    finally:
        ray.shutdown()


# -- dataset ----------------------------------------------------------------------------------


def dataset(client) -> dict:
    data = np.random.default_rng(1).integers(0, 255, (50_000, 3, 32, 32), dtype=np.uint8)
    uploaded = []
    for call in range(5):
        before = client._transfer.uploaded_bytes
        assert client.submit(first, data).result() == float(data.reshape(-1)[0])
        uploaded.append(client._transfer.uploaded_bytes - before)
    return {"dataset_bytes": data.nbytes, "uploaded_per_call": uploaded,
            "uploaded_calls_2_to_5": sum(uploaded[1:])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=1.0, help="array size in GiB (default 1)")
    parser.add_argument("--only",
                        default="same-host,same-host-run-as,same-host-huge,cross-host,"
                                "cross-host-tls,worker-host,worker-to-worker,dask,ray,dataset,"
                                "new-array-call")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run the selected sections this many times, a fresh cluster each, "
                             "and print issue 16 part 1's goal ratios round by round with their "
                             "median (default 1)")
    parser.add_argument("--tls", action="store_true",
                        help="worker-host and worker-to-worker with the runtime in TLS (as every "
                             "cluster reachable from other hosts is); cross-host-tls always is")
    parser.add_argument("--_tcp-server", dest="tcp_server", type=int)
    parser.add_argument("--_tcp-client", dest="tcp_client", nargs=2)
    parser.add_argument("--_cross-client", dest="cross_client", nargs=2)
    parser.add_argument("--_worker-driver", dest="worker_driver", nargs=3)
    parser.add_argument("--_same-host-client", dest="same_host_client", nargs=2)
    args = parser.parse_args()
    if args.tcp_server:
        return tcp_server(args.tcp_server)
    if args.tcp_client:
        return print(json.dumps(tcp_client(args.tcp_client[0], int(args.tcp_client[1]))))
    if args.cross_client:
        return print(json.dumps(cross_client(args.cross_client[0], os.environ["BULLETIN_TOKEN"],
                                             int(args.cross_client[1]))))
    if args.same_host_client:
        return print(json.dumps(same_host_client(args.same_host_client[0],
                                                 int(args.same_host_client[1]))))
    if args.worker_driver:
        return print(json.dumps(worker_driver(args.worker_driver[0], os.environ["BULLETIN_TOKEN"],
                                              int(args.worker_driver[1]),
                                              args.worker_driver[2])))

    nbytes = int(args.gib * GIB) // 4 * 4
    only = set(args.only.split(","))
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, not {args.rounds}")
    a = array(nbytes)
    rounds = []
    for round_ in range(1, args.rounds + 1):
        if args.rounds > 1:
            print(f"\n== round {round_} of {args.rounds} ==", flush=True)
        rounds.append(measure(only, a, nbytes, args.tls))
        summary(rounds[-1])
    if args.rounds > 1:
        print_rounds([part1_goals(results) for results in rounds])


def part1_goals(results: dict) -> dict[str, float]:
    """The ratios issue 16 part 1 sets goals for, from one round's results (those it has the
    sections for): the whole scatter against one thread's memcpy and against ray.put, and a
    call returning a new array against Ray's task (above 1: bulletin ahead)."""
    same, ray_ = results.get("same-host", {}), results.get("ray", {})
    goals = {}
    if "scatter_GBps" in same:
        goals["scatter_first_vs_memcpy"] = same["scatter_first_GBps"] / same["memcpy_GBps"]
        goals["scatter_steady_vs_memcpy"] = same["scatter_GBps"] / same["memcpy_GBps"]
    if "scatter_GBps" in same and "put_GBps" in ray_:
        goals["scatter_first_vs_ray_put"] = same["scatter_first_GBps"] / ray_["put_first_GBps"]
        goals["scatter_steady_vs_ray_put"] = same["scatter_GBps"] / ray_["put_GBps"]
        goals["new_array_call_vs_ray"] = (ray_["distinct_result_s"]
                                          / same["round_trip_distinct_result_scattered_s"])
    call = results.get("new-array-call", {})
    if "vs_ray" in call:  # issue 30.5: bulletin's time over Ray's (goal <= 0.8)
        goals["new_array_call_time_vs_ray"] = call["vs_ray"]
    return goals


def print_rounds(per_round: list[dict[str, float]]) -> None:
    """Each goal ratio round by round, and its median: one run on a shared machine swings."""
    names = [name for name in per_round[0] if all(name in r for r in per_round)]
    if not names:
        return
    print(f"\nissue 16 part 1 goals over {len(per_round)} rounds (ratio per round; median; goal)")
    targets = {"memcpy": ">= 0.8", "ray_put": ">= 1", "time_vs_ray": "<= 0.8", "vs_ray": ">= 1"}
    for name in names:
        values = [r[name] for r in per_round]
        target = next(t for suffix, t in targets.items() if name.endswith(suffix))
        print(f"  {name:28s} {' '.join(f'{v:.2f}' for v in values)}; median "
              f"{statistics.median(values):.2f}x; goal {target}")


def measure(only: set[str], a: np.ndarray, nbytes: int, tls: bool = False) -> dict:
    """One round of the selected sections; their results by name."""
    import new_array_call
    import worker_to_worker_benchmark

    results: dict[str, dict] = {}

    def record(name: str, value: dict) -> None:
        results[name] = value
        print(name, json.dumps(value, indent=1), flush=True)

    if only & {"same-host", "dataset"}:
        from _local_cluster import local_cluster
        # A cluster of its own: the first write is measured right after `bulletin up`.
        with local_cluster(cpus=2, reuse=False) as client:
            if "same-host" in only:
                record("same-host", same_host(client, a))
            if "dataset" in only:
                record("dataset", dataset(client))
    sections = {"same-host-run-as": lambda: run_as_same_host(nbytes),
                "same-host-huge": lambda: huge_page_store(a),
                "cross-host": lambda: cross_host(nbytes),
                "cross-host-tls": lambda: cross_host(nbytes, tls=True),
                "worker-host": lambda: worker_host(nbytes, tls),
                "worker-to-worker": lambda: worker_to_worker_benchmark.run(nbytes, tls),
                "dask": lambda: dask_round_trip(a), "ray": lambda: ray_round_trip(a),
                "new-array-call": lambda: new_array_call.run(a)}
    for name, run in sections.items():
        if name in only:
            record(name, run())
    return results


def summary(results: dict) -> None:
    print("\nsummary")
    same = results.get("same-host")
    if same:
        print(f"  one copy into the store: {same['store_write_GBps']:.2f} GB/s = "
              f"{same['store_write_vs_memcpy']:.2f}x single-thread memcpy "
              f"({same['memcpy_GBps']:.2f} GB/s); target >= 0.8x (steady state: the memory of "
              f"a released object reused, {same['recycled_writes']} of "
              f"{len(same['store_writes_s'])} writes)")
        print(f"  the first write, into fresh memory: {same['store_first_write_GBps']:.2f} GB/s; "
              f"memcpy into fresh memory {same['memcpy_fresh_GBps']:.2f} GB/s")
        print(f"  open on the other side: {same['open_ms']:.3f} ms; target < 1 ms")
        print(f"  1 GiB round trip through bulletin, a new argument each time: "
              f"{same['round_trip_s']:.3f} s (the function returns it); "
              f"{same['round_trip_same_array_again_s']:.3f} s for the same array again (found "
              f"in the store); {same['round_trip_distinct_result_s']:.3f} s when the function "
              "returns a new 1 GiB array (np.multiply, written into fresh memory)")
        print(f"  scatter of fresh content: first after `bulletin up` "
              f"{same['scatter_first_GBps']:.2f} GB/s (its copy "
              f"{same['store_first_write_vs_memcpy']:.2f}x memcpy), steady state "
              f"{same['scatter_GBps']:.2f} GB/s (its copy {same['store_write_vs_memcpy']:.2f}x "
              f"memcpy); {same['spare_writes']} of {len(same['store_writes_s'])} into "
              f"pre-faulted spares (filled in {same['spare_fill_s'] or 0:.2f} s in the "
              "background); target >= 0.8x memcpy")
        run_as = results.get("same-host-run-as", {})
        if "round_trip_s" in run_as:
            print(f"  with a run_as client against a root runtime: round trip "
                  f"{run_as['round_trip_s']:.3f} s "
                  f"({run_as['round_trip_s'] / same['round_trip_s']:.2f}x the plain one), "
                  f"first scatter after `bulletin up` (hash, copy, adopt) "
                  f"{run_as['first_write_GBps']:.2f} GB/s "
                  f"({same['scatter_first_GBps'] / run_as['first_write_GBps']:.2f}x the plain "
                  f"one's time), through {run_as['path']}")
        ray_ = results.get("ray", {})
        if "put_GBps" in ray_:
            print(f"  ray.put of fresh content: first {ray_['put_first_GBps']:.2f} GB/s, steady "
                  f"{ray_['put_GBps']:.2f} GB/s; bulletin's scatter is "
                  f"{same['scatter_first_GBps'] / ray_['put_first_GBps']:.2f}x / "
                  f"{same['scatter_GBps'] / ray_['put_GBps']:.2f}x that (target >= 1x); its "
                  f"copy alone {same['store_first_write_GBps'] / ray_['put_first_GBps']:.2f}x / "
                  f"{same['store_write_GBps'] / ray_['put_GBps']:.2f}x")
            # The goal lines of issue 16 part 1: the whole scatter (digest, "has it?", copy,
            # adopt) against one thread's memcpy into touched memory and ray.put, same run.
            goals = part1_goals(results)
            for when, key, rate, put in (
                    ("the first after `bulletin up`", "first", same["scatter_first_GBps"],
                     ray_["put_first_GBps"]),
                    ("steady state", "steady", same["scatter_GBps"], ray_["put_GBps"])):
                print(f"  GOAL scatter of fresh 1 GiB, {when}: {rate:.2f} GB/s = "
                      f"{goals[f'scatter_{key}_vs_memcpy']:.2f} x memcpy (goal >= 0.8x); ray.put "
                      f"{put:.2f} GB/s (goal: >= ray.put: "
                      f"{goals[f'scatter_{key}_vs_ray_put']:.2f}x)")
            ray_task = ray_['distinct_result_s']
            scattered = same['round_trip_distinct_result_scattered_s']
            print(f"  GOAL a call returning a new 1 GiB array, end to end, its input scattered "
                  f"once (Ray's task takes a ray.put ref): {scattered:.3f} s; ray "
                  f"{ray_task:.3f} s (goal: faster than Ray: "
                  f"{goals['new_array_call_vs_ray']:.2f}x)")
            print(f"  a call returning a new 1 GiB array, the array itself passed to each call "
                  f"(hashed by each): bulletin {same['round_trip_distinct_result_s']:.3f} s, "
                  f"{ray_task / same['round_trip_distinct_result_s']:.2f}x Ray's task")
        for peer in ("dask", "ray"):
            seconds = results.get(peer, {}).get("round_trip_s")
            if seconds:
                print(f"  {peer}: {seconds:.3f} s; bulletin is {seconds / same['round_trip_s']:.2f}x "
                      "as fast")
    huge = results.get("same-host-huge", {})
    if "store_write_GBps" in huge:
        print(f"  with the store on a huge-page tmpfs: one copy {huge['store_write_GBps']:.2f} GB/s"
              f" = {huge['store_write_vs_memcpy']:.2f}x memcpy ({huge['memcpy_GBps']:.2f} GB/s); "
              f"round trip {huge['round_trip_s']:.3f} s, {huge['round_trip_distinct_result_s']:.3f} s"
              " with a new result")
    elif huge:
        print(f"  huge-page store skipped: {huge['skipped']}")
    cross = results.get("cross-host", {})
    if "put_vs_tcp" in cross:
        print(f"  cross-host: upload {cross['put_vs_tcp']:.2f}x ({cross['put_path']} path), "
              f"download {cross['get_vs_tcp']:.2f}x ({cross['get_path']} path) raw TCP "
              f"({cross['raw_tcp_GBps']:.2f} GB/s); target >= 0.8x (steady state: memory of "
              f"released objects reused). The first of each, into fresh memory: "
              f"{cross['put_first_vs_tcp']:.2f}x / {cross['get_first_vs_tcp']:.2f}x. Chunked "
              f"gRPC: {cross['grpc_put_vs_tcp']:.2f}x / {cross['grpc_get_vs_tcp']:.2f}x")
    elif cross:
        print(f"  cross-host skipped: {cross['skipped']}")
    tls = results.get("cross-host-tls", {})
    if "put_GBps" in tls:
        against = (f"= {tls['put_GBps'] / cross['put_GBps']:.2f}x / "
                   f"{tls['get_GBps'] / cross['get_GBps']:.2f}x plaintext, "
                   if "put_GBps" in cross else "")
        print(f"  cross-host with TLS: upload {tls['put_GBps']:.2f} GB/s, download "
              f"{tls['get_GBps']:.2f} GB/s {against}{tls['put_vs_tcp']:.2f}x / "
              f"{tls['get_vs_tcp']:.2f}x raw TCP ({tls['raw_tcp_GBps']:.2f} GB/s this run; "
              "steady state)")
        if "put_GBps" in cross:
            def cpu(run, way):  # client + runtime CPU seconds per GiB
                return f"{run[way][0]:.2f} + {run[way][1]:.2f} s"
            print(f"    CPU per GiB (client + runtime): upload "
                  f"{cpu(cross, 'upload_cpu_s_per_gib')} plaintext, "
                  f"{cpu(tls, 'upload_cpu_s_per_gib')} TLS; download "
                  f"{cpu(cross, 'download_cpu_s_per_gib')} plaintext, "
                  f"{cpu(tls, 'download_cpu_s_per_gib')} TLS")
    elif tls:
        print(f"  cross-host-tls skipped: {tls['skipped']}")
    far = results.get("worker-host", {})
    if "fetch_vs_tcp" in far:
        mode = "TLS" if far.get("tls") else "plaintext"
        print(f"  worker on another host ({mode}): fetching a call's input "
              f"{far['fetch_vs_tcp']:.2f}x, "
              f"uploading a result {far['pull_vs_tcp']:.2f}x raw TCP ({far['raw_tcp_GBps']:.2f} "
              f"GB/s; the call's own {far['call_s'] * 1e3:.0f} ms taken out; steady state). "
              f"Over gRPC chunks (--data-path grpc): {far['grpc_fetch_vs_tcp']:.2f}x / "
              f"{far['grpc_pull_vs_tcp']:.2f}x")
    elif far:
        print(f"  worker-host skipped: {far['skipped']}")
    if "worker-to-worker" in results:
        import worker_to_worker_benchmark

        print("  " + worker_to_worker_benchmark.goal_line(results["worker-to-worker"]))
    if "new-array-call" in results:
        import new_array_call

        print("  GOAL " + new_array_call.goal_line(results["new-array-call"]))
    if "dataset" in results:
        print(f"  dataset to 5 calls: {results['dataset']['uploaded_calls_2_to_5']} bytes "
              "uploaded on calls 2-5; must be 0")


if __name__ == "__main__":
    main()
