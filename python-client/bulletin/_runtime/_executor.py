"""The executor process: ``python -m bulletin._runtime._executor``, started by a worker agent.

It runs one call at a time: function, arguments and the objects they refer to are files of the
node-local object store that it maps (zero copy); the result is encoded into a file the agent
then publishes. Only paths and ids travel over Py4J (docs/internals.md, "Runtime/worker →
executor").

The agent drives the executor only through Py4J's callback direction: the executor serves its
calls on a Py4J callback server (loopback, a token it read from its stdin) and holds no
credential of any Java gateway, so the user code it runs cannot call into the agent's JVM.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path

from .._envelope import make_envelope as envelope
from .._data._objects import encode, open_object, write_file
from .._data import _arena
from .._data._later import unlink_later
from .._data._write_maps import RECYCLE_MIN, WriteMappings
from . import _preempt, _resident
from .._resident import ResidentLostError
from ._gpu_share import apply_gpu_fraction, release_cached_gpu_memory
from ._argument_maps import ArgumentMaps
from ._limits import Limits, apply_memory_limit, over_limit
from ._outcome import encode_outcome, kept_on_device
from ._wire import Call, Finished, Stage, Unfit, _for_py4j, to_wire  # noqa: F401 - the API
from ._result_memory import Prepared, ResultMemory
from ._arguments import load_arguments
from .._errors import BulletinError, StoreFullError
from .._status import format_bytes

_LOG_PREFIX = "[bulletin executor]"
# The line the executor announces itself with on its stdout, once, before any user code runs
# (dev.bulletin.worker.impl.OutputPump): "\x1eBULLETIN-READY <callback port> <object id>".
_READY_WORD = "BULLETIN-READY"


def log(message: str) -> None:
    try:
        sys.stderr.write(f"{_LOG_PREFIX} {message}\n")
        sys.stderr.flush()
    except Exception:
        pass


# ---- Running calls --------------------------------------------------------------------------------

@dataclass
class _Pending:
    """A large result encoded by ``run``, written by ``commit``."""
    path: str
    encoded: object
    raised: bool
    run_seconds: float
    retire: str


@dataclass
class _InPlace:
    """A large result ``run`` made in the memory it lent the function, named by ``commit``."""
    path: str
    made: Prepared
    run_seconds: float
    retire: str


class Executor:
    """Runs calls whose function, arguments and referenced objects are files in the store.

    Files are mapped, not read: arrays inside them come back zero copy. Independent of Py4J so
    it can be tested, and reused, in-process.
    """

    def __init__(self, store_dir: str | os.PathLike, cache_size: int = 128,
                 keep_mapped_bytes: int = 0, memory_limit: int = 0, lend_results: bool = True,
                 name: str = ""):
        """With ``keep_mapped_bytes``, large results are written through mappings this executor
        kept, up to that many bytes, into files the agent recycles: ``run`` then answers
        ``Stage`` and ``commit`` writes. ``lend_results``: the function's first large array may
        live in a spare file, and if it is the result it is named there, not copied
        (``_result_memory``). ``name``: the agent's id for it, in the names of files it leaves
        in the staging folder (the agent deletes them when it ends)."""
        self.store = Path(store_dir)
        self._functions: OrderedDict[str, object] = OrderedDict()
        self._cache_size = cache_size
        self._maps = WriteMappings(keep_mapped_bytes) if keep_mapped_bytes else None
        self._result_memory = (
            ResultMemory(self._maps, name or f"pid{os.getpid()}", may_compile=not memory_limit)
            if self._maps is not None and lend_results else None)
        self._argument_maps = ArgumentMaps()
        self._limits = Limits()
        self._memory_limit = memory_limit  # applied by main() before: what calls report
        self._over_limit = False
        self._calls = 0
        self._pending: _Pending | None = None
        self._leased_calls: int | None = None  # the calls of the lease this call was, if one

    def run(self, call: Call, returned=lambda: None):
        """Runs one call; returns ``Finished``, ``Stage`` (then ``commit``) or ``Unfit``.
        ``returned`` is called once the function has returned or raised, before its result is
        encoded (the agent bounds what follows: a ``__reduce__`` may block for good).

        The encoded result is written to ``call.result_path`` (the agent publishes it under its
        id). Never raises for what the function does: whatever goes wrong (even SystemExit from
        the function) is reported as a raised envelope, so the executor stays warm.
        """
        try:
            reply = self._run(call, returned)
        except BaseException:
            self._end()
            raise
        if not isinstance(reply, Stage):
            self._end()  # here, where the call's values are gone
        return self._with_leased_calls(reply)

    def _end(self) -> None:
        """The call's values are gone: what they held is let go."""
        self._argument_maps.end()
        if self._result_memory is not None:
            self._result_memory.end()

    def _with_leased_calls(self, reply):
        """A lease call's end says how many calls it ran (``_lease.take_calls_run``)."""
        if isinstance(reply, Finished) and self._leased_calls is not None:
            reply = replace(reply, calls=self._leased_calls)
        return reply

    def _run(self, call: Call, returned):
        fresh = self._calls == 0
        self._calls += 1
        self._pending = None
        self._over_limit = False
        try:
            ran = self._invoke(call, fresh)
        finally:
            retire = self._limits.restore()  # before encoding: the result needs the memory
            self._leased_calls = _leased_calls()
        if self._over_limit:
            # Its heap may be left fragmented or half-freed: a fresh process for the next call.
            retire = "; ".join(filter(None, [retire, "its call went over its memory limit of "
                                             + format_bytes(self._memory_limit)]))
        if isinstance(ran, Unfit):
            return ran
        returned()
        value, raised, run_seconds, stored = ran
        if not raised:
            passed = _passed_through(value, stored)
            if passed is not None:
                # The function returned an argument object itself: the store holds its bytes
                # under its id; encoding (and hashing) them again would read every page.
                return Finished(passed[0], passed[1], False, run_seconds, retire)
            if self._result_memory is not None and self._result_memory.holds(value):
                box = [value]
                value = ran = None  # ``prepare`` needs to know whether anything else refers to it
                _clear(call.result_path)
                made = self._result_memory.prepare(
                    box, lambda oid: self._link_stored(call.result_path, oid))
                if made is not None:
                    if made.named:
                        return Finished(made.oid, made.size, False, run_seconds, retire)
                    # Named at commit: the agent may stage a released object's file first,
                    # which then replaces the spare the result takes.
                    self._pending = _InPlace(call.result_path, made, run_seconds, retire)
                    return Stage(made.size, tuple(self._maps.ids()), True)
                value = box.pop()
        encoded, raised = encode_outcome(value, raised)
        del value, ran  # a result or traceback holding GPU tensors frees them here
        release_cached_gpu_memory()
        return self._store(_Pending(call.result_path, encoded, raised, run_seconds, retire))

    def _invoke(self, call: Call, fresh: bool):
        """(value or exception, raised, run seconds, stored arguments), or Unfit."""
        try:
            try:
                with _resident.resolving_handles(call.spilled, call.dropped):
                    fn = self._function(call.function_path)
                    args, kwargs, stored = self._arguments(call.args_path, call.refs)
            except ResidentLostError:
                raise  # the call's own error, not a damaged executor: reported as raised
            except Exception as exc:
                log(f"task {call.task_id}: cannot load its function or arguments: {exc!r}")
                if not fresh:
                    return Unfit(f"{exc!r}")
                raise BulletinError(
                    f"the executor could not load the call's function or arguments: {exc!r}"
                ) from exc
            start = time.perf_counter()
            try:
                with self._lending():
                    value = kept_on_device(fn, fn(*args, **kwargs))
                return value, False, time.perf_counter() - start, stored
            except MemoryError as exc:
                if not self._memory_limit:
                    return exc, True, time.perf_counter() - start, stored
                self._over_limit = True
                return (over_limit(exc, self._memory_limit), True,
                        time.perf_counter() - start, stored)
            except BaseException as exc:
                return exc, True, time.perf_counter() - start, stored
        except BaseException as exc:
            return exc, True, 0.0, {}

    def commit(self, staged: bool) -> Finished:
        """Writes the result ``run`` answered ``Stage`` for; ``staged``: whether the agent put a
        recycled file at the result path."""
        try:
            return self._with_leased_calls(self._commit(staged))
        finally:
            self._end()

    def _commit(self, staged: bool) -> Finished:
        pending, self._pending = self._pending, None
        if pending is None:
            raise BulletinError("commit without a staged result (the agent's protocol is broken)")
        if isinstance(pending, _InPlace):
            self._result_memory.name(pending.made, pending.path, staged)
            return Finished(pending.made.oid, pending.made.size, False, pending.run_seconds,
                            pending.retire)
        path = Path(pending.path)
        self._spares_for(path.parent)
        if self._result_memory is not None:
            self._result_memory.expect(pending.encoded.nbytes)

        def write() -> None:
            # The id is computed as the bytes are copied (see _store): the copy reads them.
            if not (staged and self._maps.write_recycled(path, pending.encoded, None)):
                if staged:
                    unlink_later(path)  # another process may still map it: theirs to keep
                # Equal bytes stored already (``v + 0`` of an argument) are linked, not kept:
                # the spare the copy went into stays a spare instead of being made again.
                self._maps.write_new(path, pending.encoded, None,
                                     stored=lambda oid: self._link_stored(pending.path, oid))
        return _written(pending, write)

    def _lending(self):
        """Lends a spare to the function's first large array (``_result_memory``)."""
        if self._result_memory is None:
            return contextlib.nullcontext()
        return self._result_memory.lending()

    def _spares_for(self, folder: Path) -> None:
        """Spare files for this executor's large results, grown on demand from the first one
        (an executor serves one user, so one folder, for its life)."""
        if self._maps.spares is None and _arena.supported(folder):
            self._maps.spares = _arena.SpareFiles(folder, 0, self._maps.limit)

    @staticmethod
    def _link_stored(result_path: str, oid: str) -> bool:
        """Content addressing: when the store already holds these bytes (the function returned
        its argument, or a value computed before), the result is a hard link to them, not a
        copy. A link, not nothing: the stored object may be released and deleted before the
        agent adopts the result, and the link keeps its bytes (the store never reuses the
        memory of a file with another link). Where no link can be made, the bytes are written."""
        objects = os.path.dirname(os.path.dirname(result_path))  # the staging folder's parent
        try:
            os.link(os.path.join(objects, oid), result_path)
            return True
        except OSError:
            return False

    def _function(self, path: str):
        key = os.path.basename(path)  # the content id: equal ids, equal functions
        fn = self._functions.get(key)
        if fn is not None:
            self._functions.move_to_end(key)
            return fn
        fn = open_object(path)
        self._functions[key] = fn
        if len(self._functions) > self._cache_size:
            self._functions.popitem(last=False)
        return fn

    def _arguments(self, args_path: str, paths: dict):
        """The call's arguments, and the values that came from store objects: id to
        (value, path)."""
        return load_arguments(args_path, paths, self._argument_maps)

    def _store(self, pending: _Pending):
        """Writes the result where the agent expects it (the agent publishes it atomically), or
        asks the agent for a recycled file first when it is large."""
        _clear(pending.path)
        encoded = pending.encoded
        if self._maps is None or encoded.nbytes < RECYCLE_MIN:
            if self._link_stored(pending.path, encoded.digest()):
                return _finished(pending)
            return _written(pending, lambda: write_file(Path(pending.path), encoded))
        # A large result is not looked up first: its id would cost a pass over every byte
        # before the copy (56 ms per GiB on two cores), and a new value is the common case. One
        # the store holds already (not the function's argument itself, see _passed_through) is
        # written and then dropped by the agent's adopt.
        self._pending = pending
        return Stage(encoded.nbytes, tuple(self._maps.ids()),
                     self._maps.has_spare(encoded.nbytes))


def _leased_calls() -> int | None:
    """The calls of the lease the call just run was (None: it was no lease). Only a lease call
    imports ``_lease``, which an executor does not load at start (it brings in TLS)."""
    lease = sys.modules.get(f"{__package__}._lease")
    return lease.take_calls_run() if lease is not None else None


def _file_name_part(text: str) -> str:
    """``text`` as part of a file name: what is not an ASCII letter, digit, '-', '_' or '.'
    becomes '_' (as dev.bulletin.worker.impl.ExecutorProcess#sparePrefix writes it)."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in text)


def _clear(result_path: str) -> None:
    """Removes a result file left by an earlier attempt of the same task."""
    try:
        os.unlink(result_path)
    except FileNotFoundError:
        pass


def _written(pending: _Pending, write) -> Finished:
    """Runs ``write`` (the result's bytes into its file) and returns the call's end. A result
    that does not fit in the user's share of the store ends the call with a StoreFullError that
    says so: the result's file gives its memory back, and the error's few bytes take its place.
    (Were that too much, the user's own files fill the share: the agent hears why.)"""
    try:
        write()
        return _finished(pending)
    except StoreFullError as exc:
        why = str(exc)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        why = f"{exc.strerror} in {os.path.dirname(pending.path)}"
    try:
        os.unlink(pending.path)
    except FileNotFoundError:
        pass
    error = StoreFullError(f"the call returned {format_bytes(pending.encoded.nbytes)} that do not "
                           f"fit in your share of the node's object store: {why}")
    encoded = encode(envelope(error))
    write_file(Path(pending.path), encoded)
    return _finished(_Pending(pending.path, encoded, True, pending.run_seconds, pending.retire))


def _finished(pending: _Pending) -> Finished:
    return Finished(pending.encoded.digest(), pending.encoded.nbytes, pending.raised,
                    pending.run_seconds, pending.retire)


def _passed_through(value, stored: dict) -> tuple[str, int] | None:
    """(id, size) of the store object whose decoded value ``value`` is, if any."""
    for oid, (stored_value, path) in stored.items():
        if stored_value is value:
            try:
                return oid, os.path.getsize(path)
            except OSError:
                return None
    return None


def _end_marker(task_id: str) -> bool:
    """Tells the agent that all of the call's output has been written (see internals.md).
    False when the call closed or replaced the executor's output: the agent then waits its
    bounded drain, and this executor, which can no longer show a call's output, goes."""
    return _marker("BULLETIN-END", task_id, (1, 2))


def _returned_marker(task_id: str) -> None:
    """Tells the agent that the call's function returned: storing its result is now bounded.
    Without it (the call closed stderr) the call is bounded only by its own timeout."""
    _marker("BULLETIN-RETURNED", task_id, (2,))


def _marker(word: str, task_id: str, fds: tuple[int, ...]) -> bool:
    """Writes the agent's marker line after what the call printed; False if it could not."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass
    line = f"\x1e{word} {task_id}\n".encode()
    try:
        for fd in fds:
            os.write(fd, line)
    except OSError:
        return False
    return True


def _with_kept(reply):
    """The reply, saying whether values stay in this executor after the call."""
    kept = _resident.keeps() if isinstance(reply, Finished) else 0
    return replace(reply, keeps=kept) if kept else reply


class _PythonExecutor:
    """The object the agent calls through its Py4J proxy of dev.bulletin.worker.PythonExecutor:
    strings in, strings out."""

    def __init__(self, executor: Executor):
        self._executor = executor

    def run(self, call: str) -> str:
        parsed = Call.from_wire(call)
        _preempt._begin_call(parsed.task_id)
        try:
            with _resident.in_session(parsed.session):
                reply = self._executor.run(parsed, lambda: _returned_marker(parsed.task_id))
        except BaseException as exc:  # e.g. the store is full: still end the call's output
            log(f"task {parsed.task_id}: could not store its result: {exc!r}")
            raise _for_py4j(exc) from None
        finally:
            output_intact = _end_marker(parsed.task_id)
        if not output_intact and isinstance(reply, Finished):
            reply = replace(reply, retire="; ".join(filter(None, [
                reply.retire, "its call closed the executor's output"])))
        return to_wire(_with_kept(reply))

    def commit(self, staged: bool) -> str:
        try:
            return to_wire(_with_kept(self._executor.commit(bool(staged))))
        except BaseException as exc:
            raise _for_py4j(exc) from None

    def ping(self) -> str:
        return "pong"

    def spill(self, path: str) -> str:
        """Writes the values kept here into one object file at ``path`` and frees them; the
        agent calls it before it ends this executor (``_resident.spill``)."""
        try:
            return json.dumps(_resident.spill(path))
        except BaseException as exc:
            log(f"could not spill its resident values: {exc!r}")
            raise _for_py4j(exc) from None

    def dropSession(self, session: str) -> str:  # noqa: N802 - the Java interface's name
        """Forgets the values a client session kept here (it ended) and frees their memory;
        the agent calls it between calls or beside one (``_resident.drop_session``)."""
        try:
            return json.dumps(_resident.drop_session(str(session)))
        except BaseException as exc:
            log(f"could not drop the resident values of a session: {exc!r}")
            raise _for_py4j(exc) from None


def _keep_mapped_bytes() -> int:
    """How much of its results' memory an executor keeps mapped for the next ones: an eighth
    of the store (several executors share it)."""
    try:
        return int(os.environ.get("BULLETIN_STORE_CAPACITY", "0")) // 8
    except ValueError:
        return 0


def _required_env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        log(f"${name} is not set; executors are started by a bulletin worker agent")
        sys.exit(2)
    return value


def _take_token() -> tuple[str, int]:
    """Reads the callback token, the first line on stdin (never in the environment or argv,
    where user code or other users could read it). The pipe stays open on a private descriptor
    as the agent's lifeline (end of file: the agent went away); stdin itself becomes /dev/null."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(0, 256 - len(line))
        if not chunk:
            break
        line += chunk
    token = line.decode("ascii", "replace").strip()
    if not token:
        log("no callback token on stdin; executors are started by a bulletin worker agent")
        sys.exit(2)
    lifeline = os.dup(0)  # not inherited by the processes user code starts (PEP 446)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return token, lifeline


def _wait_for_agent(lifeline: int) -> None:
    """Blocks until the agent closes the pipe (or dies: the kernel closes it then)."""
    try:
        while os.read(lifeline, 4096):
            pass
    except OSError:
        pass


def _lead_a_session() -> None:
    """Makes the executor a session (and process group) leader: where the agent has no cgroup
    for it, it ends the executor's processes by their session and their parentage
    (dev.bulletin.worker.impl.ProcessSweep); and a signal to the agent's terminal or process
    group is not its own."""
    try:
        os.setsid()
    except OSError:
        pass  # a session leader already


def main() -> None:
    store = _required_env("BULLETIN_STORE_DIR")
    agent = os.getppid()  # the JVM that started it (the wrappers in between exec)
    _lead_a_session()
    token, lifeline = _take_token()
    sys.argv = [sys.argv[0]]  # user code must not see the executor's own command line

    import logging

    from py4j.java_gateway import CallbackServerParameters, PythonProxyPool, server_started

    from ._callback_server import AgentOnlyCallbackServer

    # The agent going away is the normal way to stop; py4j would log it as an error.
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    _preempt._install()
    pool = PythonProxyPool()
    # No gateway client: nothing here can call into the JVM, so nothing user code finds can.
    # Connections other than the agent's are closed before a thread is made for them.
    server = AgentOnlyCallbackServer(
        pool, None, agent_pid=agent, callback_server_parameters=CallbackServerParameters(
            address="127.0.0.1", port=0, auth_token=token, daemonize=True,
            daemonize_connections=True))
    del token
    listening = threading.Event()
    server_started.connect(lambda **kwargs: listening.set(), sender=server)
    server.start()
    if not listening.wait(30):  # start() binds; the server's thread listens (then announce)
        log("the Py4J callback server did not start listening")
        sys.exit(2)
    memory_limit = int(os.environ.pop("BULLETIN_MEMORY_LIMIT_BYTES", "0") or 0)
    if memory_limit > 0:
        apply_memory_limit(memory_limit)
    share = apply_gpu_fraction()  # before any call, so the first one is capped too
    if share:
        log(share)
    # Arrow's allocator sets up its arenas on first use: done now, a call that lowers the
    # process's address-space limit (RLIMIT_AS, which it cannot raise back) would leave no room
    # for them, and its result could not be stored and reported.
    encode(("warm", 0))
    # BULLETIN_LEND_RESULTS=0 turns off computing large results in store memory (a suspected
    # clash with an extension's own NumPy allocator): they are copied into the store instead.
    executor = Executor(store, keep_mapped_bytes=_keep_mapped_bytes(), memory_limit=memory_limit,
                        lend_results=os.environ.get("BULLETIN_LEND_RESULTS", "1") != "0",
                        name=_file_name_part(os.environ.get("BULLETIN_EXECUTOR_ID", "")))
    object_id = pool.put(_PythonExecutor(executor))
    os.write(1, f"\x1e{_READY_WORD} {server.get_listening_port()} {object_id}\n".encode())
    try:
        _wait_for_agent(lifeline)
    except KeyboardInterrupt:
        pass
    os._exit(0)  # callback threads may still sit in user code; do not wait for them


if __name__ == "__main__":
    main()
