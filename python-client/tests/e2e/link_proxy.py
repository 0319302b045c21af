"""A TCP proxy between a client (or worker) and a runtime that a test can cut and restore: the
"network" of the reconnect tests. Cutting closes every connection through it and closes those
that arrive until it is restored, as a broken link or a restarting head would."""

from __future__ import annotations

import socket
import threading


class LinkProxy:
    def __init__(self, target: str):
        host, port = target.rsplit(":", 1)
        self._target = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut = False
        self._closed = False
        # Frozen: bytes are read and dropped, connections stay open (a host that hangs or falls
        # off the network sends no FIN: only the silence tells).
        self._frozen = threading.Event()
        self.connections = 0
        threading.Thread(target=self._accept, name="link-proxy", daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            sockets, self._open = self._open, set()
        for s in sockets:
            _close(s)

    def freeze(self) -> None:
        self._frozen.set()

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        self._closed = True
        self.cut()
        _close(self._listener)

    def __enter__(self) -> LinkProxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                cut = self._cut
            if cut:
                _close(client)
                continue
            try:
                upstream = socket.create_connection(self._target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                if self._cut:
                    _close(client)
                    _close(upstream)
                    continue
                self._open.update((client, upstream))
                self.connections += 1
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b, self._frozen), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket, frozen: threading.Event) -> None:
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            if not frozen.is_set():
                sink.sendall(data)
    except OSError:
        pass
    _close(source)
    _close(sink)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass
