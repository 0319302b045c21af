"""The submitter thread: queued TaskSpecs leave in batches, one Submit RPC in flight at a time.

Specs queued while a Submit is in flight go as the next batch, in order, which keeps the spec
that carries a function's bytes ahead of every spec that only names the function. Releases of
objects go through the same queue, after the submits queued before them (the runtime has taken
its own references by then).

A cancel must stop a call the runtime does not know yet (the runtime ignores a cancel of an
unknown task, and a cancel travels on the session stream, not with the Submit): a call cancelled
while it queues here is left out of its batch; one cancelled while its Submit is in flight is
cancelled once the runtime has answered that Submit.
"""

from __future__ import annotations

import queue
import threading

import grpc

from ._connection import Connection, SessionStream
from ._data._transfer import Transfer
from ._errors import BulletinError, RuntimeFailure
from ._reconnect import link_lost
from ._proto import bulletin_pb2 as pb

# A Submit batch stays under the runtime's message limit (one spec may carry up to the inline
# limit) and bounded in count.
_BATCH_CALLS = 1000
# A queue entry: the calls queued before it leave in Submits of their own (map's batch_size).
_END_BATCH = object()


class _Release:
    """A queue entry: drop the session's hold on an object once earlier submits are in."""

    __slots__ = ("oid",)

    def __init__(self, oid: str):
        self.oid = oid


class SubmitQueue:
    """The queue of specs and releases, and the thread that sends them."""

    def __init__(self, conn: Connection, session: SessionStream, transfer: Transfer, calls,
                 inline_limit: int, batch_bytes: int, sent_functions: set[str]):
        self._conn = conn
        self._session = session
        self._transfer = transfer
        self._calls = calls
        self._inline_limit = inline_limit
        self._batch_bytes = batch_bytes
        # Under the call table's lock: queued or in a Submit not answered yet; cancelled so.
        self._unacknowledged: set[str] = set()
        self._cancel_when_accepted: set[str] = set()
        # The first spec naming a function, by task id: (function id, its encoding). If that
        # spec is cancelled before it is sent, the next spec naming the function carries it.
        self._first_use: dict[str, tuple] = {}
        self._carry: dict[str, object] = {}  # submitter thread only
        # The functions whose bytes went (or go) out: the Submitter's set, under the lock.
        self._sent_functions = sent_functions
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="bulletin-submitter",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Sends what is queued, then stops."""
        self._queue.put(None)

    def release(self, oid: str) -> None:
        self._queue.put(_Release(oid))

    def end_batch(self) -> None:
        """The calls queued so far leave without the ones queued after."""
        self._queue.put(_END_BATCH)

    def put_locked(self, spec, first_use: tuple | None = None) -> None:
        """Queues a spec; the caller holds the call table's lock. ``first_use``: (function
        id, encoding) when this spec is the first to name its function."""
        self._unacknowledged.add(spec.task_id)
        if first_use is not None:
            self._first_use[spec.task_id] = first_use
        self._queue.put(spec)

    def cancel_locked(self, task_id: str) -> bool:
        """True if the call is queued or its Submit in flight: it will never run (left out of
        its batch, or cancelled once accepted). The caller holds the call table's lock."""
        if task_id not in self._unacknowledged:
            return False
        self._cancel_when_accepted.add(task_id)
        return True

    def send_cancel(self, task_id: str) -> None:
        if self._calls.is_open():
            self._session.send(pb.ClientMessage(cancel=pb.CancelTask(task_id=task_id)))

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if item is _END_BATCH:
                continue
            batch, releases, size = [], [], 0
            while True:
                if item is _END_BATCH:
                    break
                if isinstance(item, _Release):
                    releases.append(item.oid)
                else:
                    batch.append(item)
                    size += item.ByteSize()
                if len(batch) >= _BATCH_CALLS or size >= self._batch_bytes:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # stop after sending what came before it
                    break
            batch = self._without_cancelled(batch)
            if batch:
                try:
                    holds = self._attach_carried(batch)
                except Exception as exc:  # noqa: BLE001 - the upload of a carried function
                    # failed (store full, runtime gone): its calls fail, this thread goes on
                    # with the next batch instead of dying and leaving every later call hanging.
                    self._fail_batch(batch, exc)
                    self._accepted(batch)
                else:
                    self._submit(batch)
                    self._accepted(batch)
                    for oid in holds:
                        self._transfer.release(oid)
            if releases:
                self._session.send(pb.ClientMessage(release=pb.ReleaseObjects(ids=releases)))

    def _submit(self, batch: list) -> None:
        """Sends the batch; while the link is lost, waits for the session to resume and sends
        again the calls the runtime has not answered for (it ignores one it accepted already,
        and one that ended meanwhile has had its end replayed, so it is not pending)."""
        while True:
            try:
                self._conn.stub.Submit(pb.SubmitRequest(session_id=self._session.session_id,
                                                        tasks=batch),
                                       metadata=self._conn.metadata)
                return
            except grpc.RpcError as exc:
                if not (self._conn.reconnect_timeout > 0 and link_lost(exc)
                        and self._session.wait_usable()):
                    self._fail_batch(batch, exc)
                    return
            except Exception as exc:  # noqa: BLE001 - every failure fails the batch's calls
                self._fail_batch(batch, exc)
                return
            batch = [spec for spec in batch if self._calls.get(spec.task_id) is not None]
            if not batch:
                return

    def _without_cancelled(self, batch: list) -> list:
        """The batch less the calls cancelled while they queued here: those are never sent.
        A function whose bytes a dropped spec carried is carried by the next spec naming it."""
        with self._calls.lock:
            dropped = {spec.task_id for spec in batch if spec.task_id in self._cancel_when_accepted}
            for task_id in dropped:
                self._cancel_when_accepted.discard(task_id)
                self._unacknowledged.discard(task_id)
                first_use = self._first_use.pop(task_id, None)
                if first_use is not None:  # specs queued since carry it; later ones, inline
                    self._carry[first_use[0]] = first_use[1]
                    self._sent_functions.discard(first_use[0])
        for task_id in dropped:
            self._calls.pop(task_id)
        return [spec for spec in batch if spec.task_id not in dropped] if dropped else batch

    def _attach_carried(self, batch: list) -> list[str]:
        """Puts a carried function in the first spec of the batch that names it: its bytes
        inline, or the object put in the store for the Submit (the holds returned)."""
        holds, carried = [], []
        try:
            for spec in batch:
                encoded = self._carry.pop(spec.function.id, None) if self._carry else None
                if encoded is None or spec.function.inline_data:
                    continue
                carried.append((spec.function.id, encoded))
                if encoded.nbytes <= self._inline_limit:
                    spec.function.inline_data = encoded.to_bytes()
                else:
                    holds.append(self._transfer.acquire(encoded))
                with self._calls.lock:
                    self._sent_functions.add(spec.function.id)
        except BaseException:
            # The batch is not sent: the next spec naming one of its functions carries it.
            with self._calls.lock:
                for function_id, encoded in carried:
                    self._carry[function_id] = encoded
                    self._sent_functions.discard(function_id)
            for oid in holds:
                self._transfer.release(oid)
            raise
        return holds

    def _accepted(self, batch: list) -> None:
        """The runtime answered the batch's Submit: cancels asked meanwhile can go now."""
        with self._calls.lock:
            cancels = []
            for spec in batch:
                self._unacknowledged.discard(spec.task_id)
                self._first_use.pop(spec.task_id, None)
                if spec.task_id in self._cancel_when_accepted:
                    self._cancel_when_accepted.discard(spec.task_id)
                    cancels.append(spec.task_id)
        for task_id in cancels:
            self.send_cancel(task_id)

    def _fail_batch(self, batch: list, error) -> None:
        if isinstance(error, grpc.RpcError):
            failure = self._conn.error(error, "the submission")
        elif isinstance(error, BulletinError):
            failure = error  # says what was wrong already (a function larger than the store)
        else:
            failure = RuntimeFailure(f"bulletin could not submit: {error!r}")
        for spec in batch:
            future = self._calls.pop(spec.task_id)
            if future is not None:
                future._set_error(failure)
