"""Two network namespaces joined by a veth pair: two "hosts" on one machine, for the cross-host
tests and benchmark. Needs root and iproute2; ``available()`` says why not otherwise."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid

SERVER_IP = "10.231.7.1"
CLIENT_IP = "10.231.7.2"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def available() -> str | None:
    """None when namespaces can be made here, else the reason they cannot."""
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    name = f"bltest{uuid.uuid4().hex[:6]}"
    try:
        _ip("netns", "add", name)
    except subprocess.CalledProcessError as exc:
        return f"`ip netns add` failed: {exc.stderr.strip()}"
    _ip("netns", "del", name)
    return None


@contextlib.contextmanager
def two_hosts():
    """Yields (server_ns, client_ns): namespaces with SERVER_IP and CLIENT_IP on a veth pair."""
    tag = uuid.uuid4().hex[:6]
    server, client = f"blsrv{tag}", f"blcli{tag}"
    _ip("netns", "add", server)
    try:
        _ip("netns", "add", client)
        try:
            _ip("link", "add", f"vs{tag}", "type", "veth", "peer", "name", f"vc{tag}")
            _ip("link", "set", f"vs{tag}", "netns", server)
            _ip("link", "set", f"vc{tag}", "netns", client)
            for ns, dev, addr in ((server, f"vs{tag}", SERVER_IP), (client, f"vc{tag}", CLIENT_IP)):
                _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
                _ip("-n", ns, "link", "set", dev, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
            yield server, client
        finally:
            subprocess.run(["ip", "netns", "del", client], capture_output=True)
    finally:
        subprocess.run(["ip", "netns", "del", server], capture_output=True)


def in_ns(ns: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", ns, *argv]
