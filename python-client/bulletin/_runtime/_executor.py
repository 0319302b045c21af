"""The executor process: ``python -m bulletin._runtime._executor``, started by a worker agent.

It connects back to the agent's Py4J gateway and runs one call at a time: function, arguments
and the objects they refer to are files of the node-local object store that it maps (zero
copy); the result is encoded into a file the agent then publishes. Only paths and ids travel
over Py4J (docs/internals.md, "Runtime/worker → executor").
"""

from __future__ import annotations

import os
import sys
import time
from collections import OrderedDict
from pathlib import Path

from .._envelope import make_envelope as envelope
from .._data._objects import encode, open_object, write_file
from .._data._write_maps import RECYCLE_MIN, WriteMappings
from . import _preempt
from ._arguments import load_arguments
from .._errors import BulletinError, ResultSerializationError

_LOG_PREFIX = "[bulletin executor]"


def log(message: str) -> None:
    try:
        sys.stderr.write(f"{_LOG_PREFIX} {message}\n")
        sys.stderr.flush()
    except Exception:
        pass


def _type_name(obj) -> str:
    cls = type(obj)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


class Executor:
    """Runs calls whose function, arguments and referenced objects are files in the store.

    Files are mapped, not read: arrays inside them come back zero copy. Independent of Py4J so
    it can be tested, and reused, in-process.
    """

    def __init__(self, store_dir: str | os.PathLike, cache_size: int = 128,
                 recycle=None, keep_mapped_bytes: int = 0):
        """``recycle(result_path, size, mapped_ids) -> bool`` asks the agent to stage a released
        object's file at the result path (ExecutorRegistrar.recycleResultFile); results are then
        written through mappings this executor kept, up to ``keep_mapped_bytes``."""
        self.store = Path(store_dir)
        self._functions: OrderedDict[str, object] = OrderedDict()
        self._cache_size = cache_size
        self._recycle = recycle
        self._maps = WriteMappings(keep_mapped_bytes) if recycle and keep_mapped_bytes else None

    def run(self, task_id: str, function_path: str, args_path: str, refs: str,
            result_path: str) -> str:
        """Runs one call; returns ``"ok|raised <resultId> <size> <runSeconds>"``.

        The encoded result is written to ``result_path`` (the agent publishes it under its id).
        Never raises: whatever goes wrong (even SystemExit from the function) is reported as a
        "raised" envelope, so the executor stays warm for the next call.
        """
        run_seconds = 0.0
        try:
            try:
                fn = self._function(function_path)
                args, kwargs, stored = self._arguments(args_path, refs)
            except Exception as exc:
                log(f"task {task_id}: cannot load its function or arguments: {exc!r}")
                raise BulletinError(
                    f"the executor could not load the call's function or arguments: {exc!r}"
                ) from exc
            start = time.perf_counter()
            try:
                value = fn(*args, **kwargs)
            finally:
                run_seconds = time.perf_counter() - start
        except BaseException as exc:
            # Skip this frame: the remote traceback starts in the user's function.
            tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
            encoded, kind = encode(envelope(exc, tb)), "raised"
        else:
            passed = _passed_through(value, stored)
            if passed is not None:
                # The function returned an argument object itself: the store holds its bytes
                # under its id; encoding (and hashing) them again would read every page.
                return f"ok {passed[0]} {passed[1]} {run_seconds:.6f}"
            try:
                encoded, kind = encode(value), "ok"
            except Exception as exc:
                error = ResultSerializationError(
                    f"the function returned a {_type_name(value)}, which cannot be pickled: "
                    f"{exc}. Return plain data (arrays, tensors moved to the CPU, dicts) instead.")
                encoded, kind = encode(envelope(error)), "raised"
        self._write(result_path, encoded)
        return f"{kind} {encoded.digest()} {encoded.nbytes} {run_seconds:.6f}"

    @staticmethod
    def _link_stored(result_path: str, encoded) -> bool:
        """Content addressing: when the store already holds these bytes (the function returned
        its argument, or a value computed before), the result is a hard link to them, not a
        copy. A link, not nothing: the stored object may be released and deleted before the
        agent adopts the result, and the link keeps its bytes (the store never reuses the
        memory of a file with another link)."""
        folder = os.path.dirname(result_path)
        try:
            os.link(os.path.join(folder, encoded.digest()), result_path)
            return True
        except FileNotFoundError:
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

    @staticmethod
    def _arguments(args_path: str, refs: str):
        """The call's arguments, and the values that came from store objects: id to
        (value, path)."""
        return load_arguments(args_path, refs)

    def _write(self, result_path: str, encoded) -> None:
        """Writes the result where the agent expects it; the agent publishes it atomically."""
        try:
            os.unlink(result_path)  # left by an earlier attempt of the same task
        except FileNotFoundError:
            pass
        if self._link_stored(result_path, encoded):
            return
        path = Path(result_path)
        if self._maps is None or encoded.nbytes < RECYCLE_MIN:
            write_file(path, encoded)
            return
        oid = encoded.digest()
        try:
            staged = self._recycle(result_path, encoded.nbytes, " ".join(self._maps.ids()))
        except Exception as exc:  # the agent's gateway: a new file does as well
            log(f"could not ask the agent for a recycled result file: {exc!r}")
            staged = False
        if staged and self._maps.write_recycled(path, encoded, oid):
            return
        if staged:
            os.unlink(path)  # another process still maps it: theirs to keep
        self._maps.write_new(path, encoded, oid)


def _passed_through(value, stored: dict) -> tuple[str, int] | None:
    """(id, size) of the store object whose decoded value ``value`` is, if any."""
    for oid, (stored_value, path) in stored.items():
        if stored_value is value:
            try:
                return oid, os.path.getsize(path)
            except OSError:
                return None
    return None


def _end_marker(task_id: str) -> None:
    """Tells the agent that all of the call's output has been written (see internals.md)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass
    marker = f"\x1eBULLETIN-END {task_id}\n".encode()
    for fd in (1, 2):
        os.write(fd, marker)


class _PythonExecutor:
    """The Py4J proxy of dev.bulletin.worker.PythonExecutor."""

    def __init__(self, executor: Executor):
        self._executor = executor

    def run(self, taskId: str, functionPath: str, argsPath: str, refs: str,  # noqa: N803
            resultPath: str) -> str:  # noqa: N803 (Java names)
        _preempt._begin_call()
        try:
            return self._executor.run(taskId, functionPath, argsPath, refs, resultPath)
        except BaseException as exc:  # e.g. the store is full: still end the call's output
            log(f"task {taskId}: could not store its result: {exc!r}")
            raise
        finally:
            _end_marker(taskId)

    def ping(self) -> str:
        return "pong"

    class Java:
        implements = ["dev.bulletin.worker.PythonExecutor"]


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


def main() -> None:
    port = int(_required_env("BULLETIN_GATEWAY_PORT"))
    token = _required_env("BULLETIN_GATEWAY_TOKEN")
    store = _required_env("BULLETIN_STORE_DIR")
    sys.argv = [sys.argv[0]]  # user code must not see the executor's own command line

    import logging

    from py4j.java_gateway import CallbackServerParameters, GatewayParameters, JavaGateway
    from py4j.protocol import Py4JError

    _preempt._install()
    gateway = JavaGateway(
        gateway_parameters=GatewayParameters(port=port, auth_token=token),
        callback_server_parameters=CallbackServerParameters(
            port=0, auth_token=token, daemonize=True, daemonize_connections=True))
    try:
        callback_port = gateway.get_callback_server().get_listening_port()
        registrar = gateway.entry_point
        executor = Executor(store, recycle=registrar.recycleResultFile,
                            keep_mapped_bytes=_keep_mapped_bytes())
        registrar.register(_PythonExecutor(executor), callback_port)
        clock = gateway.jvm.java.lang.System
        # From here on the agent going away is the normal way to stop; py4j would log it as an
        # error with tracebacks.
        logging.getLogger("py4j").setLevel(logging.CRITICAL)
        parent = os.getppid()
        # Calls arrive on the callback server's threads; this thread only watches for the agent
        # going away (the gateway stops answering, or the parent process is gone).
        while os.getppid() == parent:
            time.sleep(2.0)
            clock.currentTimeMillis()
    except Py4JError as exc:
        log(f"the worker agent's gateway went away ({exc.__class__.__name__}); exiting")
    except KeyboardInterrupt:
        pass
    os._exit(0)  # callback threads may still sit in user code; do not wait for them


if __name__ == "__main__":
    main()
