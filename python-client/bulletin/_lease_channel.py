"""One connection of a lease's executor, the client's side (``bulletin._leases`` makes them).

A writer thread sends the calls waiting for the lease's shape in batches (what waits when it
wakes, up to the lease's window of unanswered calls); a reader thread resolves their Futures
from the executor's results, and gives back to the runtime what the connection leaves
unanswered when it closes.
"""

from __future__ import annotations

import socket
import threading
import time

from ._lease_wire import FrameReader, LeaseProtocolError, frame

# Calls sent to one lease and not yet answered; more wait here for whichever lease frees first.
# A lease starts with one and doubles it with each call that ran under FAST_SECONDS, up to
# WINDOW; a call that ran longer than SLOW_SECONDS halves it: a burst of long calls must not
# queue behind one executor while other slots are free.
WINDOW = 32
FAST_SECONDS = 0.002
SLOW_SECONDS = 0.02
# A result this large comes faster through the store (the executor writes it once into memory
# the client maps) than down a socket: its shape's calls go the runtime's way for a while.
LARGE_RESULT = 16 << 20
LARGE_SECONDS = 60.0


class Channel:
    """One connection of a lease's executor: a writer thread sends calls in batches (what is
    waiting when it wakes, up to WINDOW unanswered), a reader thread resolves their Futures."""

    def __init__(self, leases, lease, sock: socket.socket):
        """``leases``: the ``Leases`` that made it; ``lease``: the lease it serves."""
        self.leases = leases
        self.lease = lease
        self._sock = sock
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._sent: dict[int, object] = {}
        self._numbers: dict[str, int] = {}
        self._next = 0
        self._functions: set[str] = set()
        self._cancels: list[int] = []
        self._window = 1
        self.ending = False
        self._closed = False

    def start(self) -> None:
        threading.Thread(target=self._write_loop, daemon=True, name="bulletin-lease-out").start()
        threading.Thread(target=self._read_loop, daemon=True, name="bulletin-lease-in").start()

    def cancel(self, task_id: str) -> bool:
        with self._lock:
            number = self._numbers.get(task_id)
            if number is None:
                return False
            self._cancels.append(number)
        self.leases.wake()
        return True

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _write_loop(self) -> None:
        try:
            while True:
                with self._room:
                    while (len(self._sent) >= self._window and not self.ending
                           and not self._closed):
                        self._room.wait()
                    room = self._window - len(self._sent)
                if self.ending or self._closed:
                    break
                calls = self.leases.take(self, room)
                messages = self._messages(calls)
                if messages:
                    self._sock.sendall(frame(messages))
            self._send_rest()
        except OSError:
            pass

    def _messages(self, calls: list) -> list:
        placement = self.lease.future.placement if self.lease.future is not None else None
        messages, gone = [], []
        with self._lock:
            for number in self._cancels:
                messages.append(("cancel", number))
            self._cancels.clear()
            for call in calls:
                future = call.future
                if future is None or future.done():
                    gone.append(call)  # cancelled while it waited
                    continue
                number, self._next = self._next, self._next + 1
                self._sent[number] = call
                self._numbers[call.task_id] = number
                fn_id = call.spec.function.id
                fn_bytes = None
                if fn_id not in self._functions:
                    fn_bytes = call.fn_encoded.to_bytes()
                    self._functions.add(fn_id)
                messages.append(("call", number, fn_id, fn_bytes, call.spec.args.inline_data))
                future.placement = placement
                future._attempts += 1
                future._attempt += 1
                future._set_status("running")
        for call in gone:
            self.leases.answered(call)
        return messages

    def _send_rest(self) -> None:
        """The lease is ending: cancels still to tell, then the last word."""
        with self._lock:
            messages = [("cancel", number) for number in self._cancels]
            self._cancels.clear()
        if not self._closed:
            self._sock.sendall(frame(messages + [("bye",)]))

    def _read_loop(self) -> None:
        reader = FrameReader(self._sock)
        try:
            while True:
                messages, tails = reader.read_with_tails()
                tails.reverse()
                for message in messages:
                    self._on_message(message, tails)
        except (OSError, LeaseProtocolError, EOFError, ValueError):
            pass
        finally:
            with self._room:
                self._closed = True
                unanswered = list(self._sent.values())
                self._sent.clear()
                self._room.notify_all()
            self.leases.wake()
            try:
                self._sock.close()
            except OSError:
                pass
            self.leases.closed(self, unanswered)

    def _on_message(self, message, tails: list) -> None:
        kind = message[0]
        if kind == "done":
            _, number, raised, data, out, err, run_seconds = message
            if data is None:
                data = tails.pop()  # a large result: the frame's next tail
                if len(data) >= LARGE_RESULT:
                    self.lease.pool.large_until = time.monotonic() + LARGE_SECONDS
            call = self._answer(number, run_seconds)
            future = call.future if call is not None else None
            if future is None:
                return
            if out:
                future._add_output("stdout", out)
            if err:
                future._add_output("stderr", err)
            future._timings["run"] = run_seconds
            self.leases.resolve(future, raised, data, time.perf_counter())
        elif kind == "cancelled":
            call = self._answer(message[1], None)
            if call is not None and call.future is not None:
                call.future._set_cancelled()
        elif kind == "ending":
            with self._room:
                self.ending = True
                self._room.notify_all()
            self.leases.lease_ending(self.lease)

    def _answer(self, number: int, run_seconds: float | None):
        with self._room:
            if run_seconds is None:
                pass  # cancelled: it never ran
            elif run_seconds < FAST_SECONDS:
                self._window = min(WINDOW, self._window * 2)
            elif run_seconds > SLOW_SECONDS:
                self._window = max(1, self._window // 2)
            call = self._sent.pop(number, None)
            if call is not None:
                self._numbers.pop(call.task_id, None)
                self._room.notify_all()
        if call is not None:
            self.leases.answered(call)
        return call
