"""The executor's Py4J callback server, open to its agent only.

py4j's CallbackServer starts a thread for every connection it accepts, before the connection
has sent its token: any process of the host could hold hundreds of threads of an executor by
connecting to its loopback port and sending nothing. This server closes, in its accept loop and
before a thread is made, every connection that is not the agent's:

- the peer's socket must belong to the agent's account (the owner /proc/net/tcp gives it);
- where the executor can read the agent's descriptors (it runs as the agent's own account), the
  peer's socket must be one of the agent's own: a call of the executor, or any other process of
  that account, is refused;
- where it cannot (a run_as executor: the agent is root), at most ``MAX_CONNECTIONS`` of the
  agent's account are served at once. The agent makes one connection at a time (one call at a
  time; py4j's client reconnects after closing an idle one); the second slot covers the moment
  the old connection's thread takes to see its end.

The agent is the executor's parent (the JVM that started it; the wrappers in between exec).
"""

from __future__ import annotations

import ipaddress
import os
import struct

from py4j.java_gateway import CallbackConnection, CallbackServer

MAX_CONNECTIONS = 2


class AgentOnlyCallbackServer(CallbackServer):
    """A CallbackServer whose accept loop refuses, thread-free, whatever is not the agent."""

    def __init__(self, *args, agent_pid: int, **kwargs):
        super().__init__(*args, **kwargs)
        self._agent_pid = agent_pid
        self._agent_uid = os.stat(f"/proc/{agent_pid}").st_uid

    def _create_connection(self, socket_instance, stream):
        # Called by the accept loop for each accepted socket, which then starts the returned
        # object: a refused one closes instead of starting a thread.
        if self.refusal(socket_instance) is not None:
            return _Refused(socket_instance, stream)
        return super()._create_connection(socket_instance, stream)

    def refusal(self, sock) -> str | None:
        """Why this accepted connection is not served, or None for the agent's."""
        try:
            peer, local = sock.getpeername()[:2], sock.getsockname()[:2]
        except OSError:
            return "it is closed already"
        owner = socket_owner(peer, local)
        if owner is None:
            return "its socket is not on this host's loopback"
        uid, inode = owner
        if uid != self._agent_uid:
            return f"it belongs to uid {uid}, not the agent's"
        agents = socket_inodes(self._agent_pid)
        if agents is not None:
            return None if inode in agents else "it is not one of the agent's sockets"
        if self._served() >= MAX_CONNECTIONS:
            return f"{MAX_CONNECTIONS} connections are served already"
        return None

    def _served(self) -> int:
        with self.lock:
            return sum(1 for c in list(self.connections)
                       if isinstance(c, CallbackConnection) and c.is_alive())


class _Refused:
    """What the accept loop starts for a refused connection: it closes it, in that loop."""

    def __init__(self, sock, stream):
        self.socket = sock
        self._stream = stream

    def start(self) -> None:
        self.close()

    def close(self, reset: bool = False) -> None:
        for closable in (self._stream, self.socket):
            try:
                closable.close()
            except Exception:
                pass


def _address(text: str) -> tuple[str, int]:
    """A /proc/net/tcp(6) address: the address as the kernel's u32 words in hex, then the port.
    An IPv4-mapped IPv6 address (a JVM's socket to 127.0.0.1 is an IPv6 one) reads as IPv4."""
    host, port = text.split(":")
    raw = b"".join(struct.pack("=I", int(host[i:i + 8], 16)) for i in range(0, len(host), 8))
    address = ipaddress.ip_address(raw)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address), int(port, 16)


def socket_owner(peer: tuple, local: tuple) -> tuple[int, int] | None:
    """(uid, inode) of the socket at ``peer`` connected to ``local``, from /proc/net/tcp and
    /proc/net/tcp6."""
    wanted = (str(ipaddress.ip_address(peer[0])), peer[1]), (
        str(ipaddress.ip_address(local[0])), local[1])
    for table_name in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            with open(table_name, encoding="ascii") as table:
                next(table)
                for line in table:
                    fields = line.split()
                    if (len(fields) > 9 and (_address(fields[1]), _address(fields[2]))
                            == wanted):
                        return int(fields[7]), int(fields[9])
        except (OSError, ValueError, StopIteration):
            pass
    return None


def socket_inodes(pid: int) -> set[int] | None:
    """The inodes of the sockets process ``pid`` holds, or None if this process may not see its
    descriptors (another account's)."""
    folder = f"/proc/{pid}/fd"
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    inodes = set()
    for name in names:
        try:
            target = os.readlink(f"{folder}/{name}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes
