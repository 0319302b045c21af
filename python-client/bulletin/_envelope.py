"""The error envelope: how an exception raised remotely travels back to the caller.

A pickled dict ``{"type": "module.QualName", "message": str, "traceback": str,
"exception": bytes | None}`` (docs/internals.md), written by the executor and read by the client.
"""

from __future__ import annotations

import sys
import traceback as tb_module
from types import TracebackType

import cloudpickle

from ._errors import RemoteError, RemoteTraceback


def _qualified_type(exc: BaseException) -> str:
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception as err:  # a broken __str__ must not hide the original error
        return f"<str() failed: {err!r}>"


_OWN = object()


def make_envelope(exc: BaseException, tb: TracebackType | None | object = _OWN) -> dict:
    """tb, when given, is where the remote traceback starts: the executor skips its own frame,
    which leaves None when the call failed before entering the function (a bad argument)."""
    text = "".join(tb_module.format_exception(
        type(exc), exc, exc.__traceback__ if tb is _OWN else tb))
    try:
        payload = cloudpickle.dumps(exc)
    except Exception:
        payload = None
    return {"type": _qualified_type(exc), "message": _safe_str(exc), "traceback": text,
            "exception": payload}


def dumps_envelope(exc: BaseException, tb: TracebackType | None | object = _OWN) -> bytes:
    return cloudpickle.dumps(make_envelope(exc, tb))


def exception_from_envelope(envelope: dict, task_id: str = "", attempts: int = 1) -> BaseException:
    """Rebuilds the remote exception with its original type, the remote traceback as its cause.

    Exceptions that are not ``Exception`` subclasses (SystemExit, KeyboardInterrupt) come back as
    RemoteError: re-raising a remote sys.exit() must not end the caller's program.
    """
    remote_tb = envelope.get("traceback") or ""
    exc = None
    payload = envelope.get("exception")
    if payload is not None:
        try:
            exc = cloudpickle.loads(payload)
        except Exception:
            exc = None
    if not isinstance(exc, Exception):
        return RemoteError(envelope.get("type", "<unknown>"), envelope.get("message", ""), remote_tb)
    exc.__cause__ = RemoteTraceback(remote_tb)
    if sys.version_info >= (3, 11):
        where = f"bulletin task {task_id}" if task_id else "a bulletin task"
        runs = f" (the last of {attempts} runs: retries= ran it again)" if attempts > 1 else ""
        exc.add_note(f"Raised remotely in {where}{runs}; the remote traceback is shown above "
                     "as the cause.")
    return exc
