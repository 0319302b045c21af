"""One call's arguments on their way to the cluster.

Large top-level arguments travel as store objects of their own (uploaded once, held while the
caller's object lives); Futures and Refs anywhere inside the arguments become placeholders
(``_placeholders``) that the executor resolves: a finished Future's result that is still in
the store is named by its id and never passes through the client, a small one that came back
travels inline; a Future not finished yet makes the call wait for it.
"""

from __future__ import annotations

import copy
import sys
from time import perf_counter
from typing import TYPE_CHECKING

from ._data._objects import Ref, StoreRef, encode
from ._errors import SerializationError
from ._future import Future
from ._placeholders import inline_value, never_resolved, pickling_call, stored_object
from ._resident import Resident
from ._serialize import dumps_args, type_name

if TYPE_CHECKING:
    from ._submitter import Submitter


class InputCancelled(Exception):
    """An input Future of a call was cancelled: the call is cancelled too, never sent."""

    def __init__(self, future: Future):
        super().__init__(f"an argument is the future of call {future.key}, which was cancelled")
        self.future = future


class InputFailed(Exception):
    """An input Future of a call failed: the call fails with its error, never sent."""

    def __init__(self, future: Future):
        super().__init__(f"an argument is the future of call {future.key}, which failed")
        self.future = future

    def error_for(self, key: str) -> BaseException:
        """The input's exception, as Dask raises it for a dependent call, noted with which
        call did not run and why (a copy: the input's own exception stays as it was)."""
        error = original = self.future.exception()
        try:
            error = copy.copy(original)
            error.__notes__ = list(getattr(original, "__notes__", ()))
        except Exception:  # an exception that cannot be copied is shared, unnoted
            return original.with_traceback(self.future.traceback())
        error.__traceback__ = self.future.traceback()  # the input's remote frames
        error.__cause__ = original.__cause__
        if sys.version_info >= (3, 11):
            error.add_note(f"Call {key} did not run: its argument, the future of call "
                           f"{self.future.key}, raised this.")
        return error


def encode_value(value, what: str):
    try:
        return encode(value)
    except Exception as exc:
        raise SerializationError(f"{what} (a {type_name(value)}) cannot be encoded: {exc}. "
                                 "Pass something picklable instead.") from exc


def _bulky(value, limit: int) -> bool:
    """Large enough to travel as an object of its own (uploaded once, shared by calls)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value) > limit
    if isinstance(value, Resident):
        # Its nbytes is the value it names on the cluster; the handle is a few hundred bytes.
        # It must be pickled with the call, where it names the worker the call prefers and the
        # spill the runtime restores, and not stored (a round trip to the runtime per call).
        return False
    nbytes = getattr(value, "nbytes", None)
    return isinstance(nbytes, int) and nbytes > limit and not isinstance(value, type)


class CallArguments:
    """The arguments of one call, the store objects they name, and the holds to drop once the
    call is queued."""

    def __init__(self, submitter: Submitter, args: tuple, kwargs: dict):
        self._submitter = submitter
        self._own_refs: dict[str, int] = {}  # large arguments uploaded as objects of their own
        self.refs: dict[str, int] = {}  # every store object the call names: id -> size
        self.releases: list[str] = []
        self.inputs: list = []  # the Futures and Refs found inside: kept alive with the call
        self.pending: list[Future] = []  # input Futures not finished at the last encode()
        self.upload_seconds = 0.0
        self.uploads: list = []  # the encodings of the large arguments (a retry needs them)
        self.args = tuple(self._convert(a) for a in args)
        self.kwargs = {k: self._convert(v) for k, v in kwargs.items()}

    def _convert(self, value):
        if isinstance(value, (Future, Ref)):
            return value
        if _bulky(value, max(self._submitter.inline_limit, 1 << 16)):
            encoded = encode_value(value, "an argument")
            start = perf_counter()
            oid, kept = self._submitter.kept.keep(value, encoded)
            self.upload_seconds += perf_counter() - start
            if not kept:
                self.releases.append(oid)
            self._own_refs[oid] = encoded.nbytes
            self.uploads.append(encoded)
            return StoreRef(oid)
        return value

    def encode(self):
        """The encoded ``(args, kwargs)``. Raises InputCancelled or InputFailed for an input
        that ended so; ``pending`` lists the inputs still running (the encoding is then only
        good for finding them)."""
        self.refs = dict(self._own_refs)
        self.inputs, self.pending = [], []
        self.prefer_worker = ""
        self.resident_handles = {}  # handle id -> None, in the order pickled
        with pickling_call(self):
            try:
                return encode((self.args, self.kwargs))
            except Exception as exc:
                ended = exc.__cause__  # the codec reports a failed pickling as its own error
                if isinstance(ended, (InputCancelled, InputFailed)):
                    raise ended from None
                dumps_args(self.args, self.kwargs)  # raises a SerializationError naming it
                raise

    def sent(self) -> None:
        """The call is queued: its spec holds what the arguments were; the values can go
        (the inputs stay: a retry names their results again)."""
        self.args = self.kwargs = None

    # -- the reductions of _placeholders, while encode() pickles ------------------------------

    def reduce_future(self, future: Future):
        self.inputs.append(future)
        if not future.done():
            self.pending.append(future)
            return never_resolved, (future.key,)
        if future.cancelled():
            raise InputCancelled(future)
        if future.exception() is not None:
            raise InputFailed(future)
        with future._fetch_lock:
            remote = future._remote
        if remote is not None:  # still in the store: named, never fetched
            self.refs[remote[0]] = remote[1]
            return stored_object, (remote[0],)
        return inline_value, (future.result(),)

    def note_resident(self, handle) -> None:
        """A ``bulletin.Resident`` in the arguments: the call prefers the worker that keeps it."""
        self.prefer_worker = self.prefer_worker or handle.worker
        # The runtime looks them up among this user's spills: one another host keeps is
        # brought to the call's worker and restored there.
        self.resident_handles[handle.id] = None

    def reduce_ref(self, ref: Ref):
        self.inputs.append(ref)
        self.refs[ref.id] = ref.nbytes
        return stored_object, (ref.id,)
