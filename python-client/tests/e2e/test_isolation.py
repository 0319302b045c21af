"""The attack suite (issue 12): bob's code, run by the real runtime, tries to take what belongs to
the cluster or to alice, and fails. Two users in the config's `users:` list, real executors.

- the cluster's tokens: not in bob's environment, nor in /proc/self/environ;
- the runtime's JVM: nothing Py4J-ish bob finds in his own process reaches it;
- alice's leftovers in `__main__`, `builtins` and `sys.modules`: never in bob's process;
- a call that lowers its own memory limit breaks no later call, of either user.

The tests with `run_as` (users' executors under their own Unix accounts) are in
test_isolation_accounts.py: they need root.
"""

from __future__ import annotations

import pytest

import bulletin
from cluster_support import CALL_SECONDS, start_cluster

ALICE_TOKEN = "alice-token-0123456789abcdef"
BOB_TOKEN = "bob-token-0123456789abcdef"

CONFIG = f"""
users:
  - {{name: alice, group: lab, token: "{ALICE_TOKEN}"}}
  - {{name: bob, group: lab, token: "{BOB_TOKEN}"}}
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    home = tmp_path_factory.mktemp("bulletin-isolation")
    config = home / "cluster.yaml"
    config.write_text(CONFIG)
    c = start_cluster(home, "--config", str(config), "--executor-max-calls", "1000", gpus=1,
                      cpus=2)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def alice(lab):
    with bulletin.Client(lab.address, token=ALICE_TOKEN, set_as_default=False) as c:
        yield c


@pytest.fixture(scope="module")
def bob(lab):
    with bulletin.Client(lab.address, token=BOB_TOKEN, set_as_default=False) as c:
        yield c


def secrets_of(lab) -> dict[str, str]:
    """What bob must never find: every token of the cluster, and alice's."""
    return {"owner token": lab.token,
            "worker token": (lab.home / "worker-token").read_text().strip(),
            "alice's token": ALICE_TOKEN}


# ---- Runs as bob's function: each returns what it managed to find -------------------------------

def environment_findings(secrets: dict[str, str]) -> list[str]:
    import os
    found = [f"os.environ[{name}]" for name in os.environ
             if name.startswith("BULLETIN_") and "TOKEN" in name]
    found += [f"{what} in os.environ[{name}]" for name, value in os.environ.items()
              for what, secret in secrets.items() if secret in value]
    with open("/proc/self/environ", "rb") as f:
        raw = f.read().decode(errors="replace")
    found += [f"{what} in /proc/self/environ" for what, secret in secrets.items() if secret in raw]
    found += [f"/proc/self/environ: {entry.split('=')[0]}" for entry in raw.split("\0")
              if entry.startswith("BULLETIN_") and "TOKEN" in entry.split("=")[0]]
    return found


def reach_the_jvm() -> str:
    """Every py4j object in this process, every port/token pair they hold, tried as a Java
    gateway against this process's own ports and the runtime's listening ones."""
    import gc
    import os

    from py4j.java_gateway import GatewayParameters, JavaGateway

    tokens, ports = {None}, set()
    for obj in gc.get_objects():
        module = getattr(type(obj), "__module__", None)
        if not isinstance(module, str) or not module.startswith("py4j"):
            continue
        if isinstance(obj, JavaGateway):
            try:
                return "reached via a gateway object: " + obj.jvm.java.lang.System.getProperty(
                    "user.dir")
            except Exception:
                pass
        for name in ("auth_token", "port", "java_port", "python_port"):
            value = getattr(obj, name, None)
            if name == "auth_token" and isinstance(value, str):
                tokens.add(value)
            elif isinstance(value, int) and value > 0:
                ports.add(value)
        params = getattr(obj, "gateway_parameters", None) or getattr(
            obj, "callback_server_parameters", None)
        if params is not None:
            tokens.add(getattr(params, "auth_token", None))
            ports.add(getattr(params, "port", 0))
    ports |= listening_ports(os.getppid()) | listening_ports(os.getpid())
    ports.discard(0)
    for port in ports:
        for token in tokens:
            try:
                gateway = JavaGateway(gateway_parameters=GatewayParameters(
                    port=port, auth_token=token, read_timeout=2.0))
                answer = gateway.jvm.java.lang.System.getProperty("user.dir")
                return f"reached on port {port}: {answer}"
            except Exception:
                pass
    return f"refused ({len(ports)} ports x {len(tokens)} tokens tried)"


def listening_ports(pid: int) -> set[int]:
    """The TCP ports a process listens on (its sockets' inodes in /proc/net/tcp*)."""
    import os
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return set()
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def leave_traces() -> int:
    import builtins
    import sys
    import types
    sys.modules["__main__"].alice_secret = "alice's global"
    builtins.alice_builtin = "alice's builtin"
    sys.modules["alice_module"] = types.ModuleType("alice_module")
    return 1


def traces_found() -> list[str]:
    import builtins
    import sys
    found = []
    if hasattr(sys.modules["__main__"], "alice_secret"):
        found.append("__main__.alice_secret")
    if hasattr(builtins, "alice_builtin"):
        found.append("builtins.alice_builtin")
    if "alice_module" in sys.modules:
        found.append("sys.modules['alice_module']")
    return found


def lower_memory_limit() -> tuple:
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (1 << 28, 1 << 28))  # soft and hard: 256 MiB
    return resource.getrlimit(resource.RLIMIT_AS)


def mapped_length(data) -> int:
    return len(data)


# ---- The attempts ---------------------------------------------------------------------------

def test_bobs_code_finds_no_token_in_its_environment(lab, bob):
    for gpus in (0, 1):
        found = bob.submit(environment_findings, secrets_of(lab), gpus=gpus).result(
            timeout=CALL_SECONDS)
        assert found == [], found


def test_bobs_code_cannot_reach_the_runtimes_jvm_through_py4j(bob):
    for gpus in (0, 1):
        outcome = bob.submit(reach_the_jvm, gpus=gpus).result(timeout=CALL_SECONDS)
        assert outcome.startswith("refused"), outcome


def test_bob_never_sees_what_alices_calls_left_in_their_executor(alice, bob):
    for gpus in (1, 0):
        assert alice.submit(leave_traces, gpus=gpus).result(timeout=CALL_SECONDS) == 1
        # Alice's own next call runs warm, in the process she left them in...
        assert len(alice.submit(traces_found, gpus=gpus).result(timeout=CALL_SECONDS)) == 3
        # ...bob's never does, on the GPU slot or on any CPU one.
        for _ in range(3):
            assert bob.submit(traces_found, gpus=gpus).result(timeout=CALL_SECONDS) == []


def test_a_call_that_lowers_its_memory_limit_breaks_no_later_call(alice, bob):
    import numpy as np
    payload = np.ones(64 << 20, dtype=np.uint8)  # 64 MiB: mapped when the next call loads it
    for gpus in (1, 0):
        assert bob.submit(lower_memory_limit, gpus=gpus).result(timeout=CALL_SECONDS) == (
            1 << 28, 1 << 28)
        for user in (bob, alice, bob):
            assert user.submit(mapped_length, payload, gpus=gpus).result(
                timeout=CALL_SECONDS) == 64 << 20
