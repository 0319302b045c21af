"""The error envelope: how an exception raised remotely travels back to the caller.

A pickled dict ``{"type": "module.QualName", "message": str, "traceback": str,
"exception": bytes | None, "frames": [(filename, lineno, name, line), ...], "cause": str}``
(docs/internals.md), written by the executor and read by the client. The client raises the
exception with the remote frames as its traceback (``_tracebacks``), below the caller's own.
"""

from __future__ import annotations

import os
import sys
import traceback as tb_module
from types import TracebackType

import cloudpickle

from ._errors import RemoteError, RemoteTraceback
from ._tracebacks import build_traceback

# A message longer than this is cut in the middle, with a note saying how much was cut.
MESSAGE_LIMIT = 4000
_HEAD, _TAIL = 3000, 800
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _qualified_type(exc: BaseException) -> str:
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception as err:  # a broken __str__ must not hide the original error
        return f"<str() failed: {err!r}>"


def shorten(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text``, or its head and tail with a note in between saying how much was cut."""
    if len(text) <= limit:
        return text
    cut = len(text) - _HEAD - _TAIL
    return (f"{text[:_HEAD]}\n[... {cut:,} of {len(text):,} characters cut by bulletin ...]\n"
            f"{text[-_TAIL:]}")


def _shorten_message(exc: BaseException) -> None:
    """Cuts the long string arguments of ``exc`` (its message, for most exception types):
    a 100 kB message would fill the caller's screen and travel three times."""
    if len(_safe_str(exc)) <= MESSAGE_LIMIT:
        return
    try:
        exc.args = tuple(shorten(a) if isinstance(a, str) else a for a in exc.args)
    except Exception:  # read-only args: the message and traceback texts are still cut
        pass


def _frames(tb: TracebackType | None) -> list[tuple]:
    """The remote frames, bulletin's own dropped from the top (the user's code comes first)."""
    frames = [(f.filename, f.lineno, f.name, f.line or "") for f in tb_module.extract_tb(tb)]
    while frames and os.path.abspath(frames[0][0]).startswith(_PACKAGE):
        frames.pop(0)
    return frames


def _chained(exc: BaseException) -> str:
    """The text of the exception ``exc`` was raised from or while handling, if any."""
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    if cause is None:
        return ""
    return shorten("".join(tb_module.format_exception(type(cause), cause, cause.__traceback__)),
                   4 * MESSAGE_LIMIT)


_OWN = object()


def make_envelope(exc: BaseException, tb: TracebackType | None | object = _OWN) -> dict:
    """tb, when given, is where the remote traceback starts: the executor skips its own frame,
    which leaves None when the call failed before entering the function (a bad argument)."""
    tb = exc.__traceback__ if tb is _OWN else tb
    _shorten_message(exc)
    text = "".join(tb_module.format_exception(type(exc), exc, tb))
    try:
        payload = cloudpickle.dumps(exc)
    except Exception:
        payload = None
    return {"type": _qualified_type(exc), "message": shorten(_safe_str(exc)),
            "traceback": shorten(text, 4 * MESSAGE_LIMIT), "exception": payload,
            "frames": _frames(tb), "cause": _chained(exc)}


def dumps_envelope(exc: BaseException, tb: TracebackType | None | object = _OWN) -> bytes:
    return cloudpickle.dumps(make_envelope(exc, tb))


def exception_from_envelope(envelope: dict, task_id: str = "", attempts: int = 1) -> BaseException:
    """Rebuilds the remote exception with its original type and the remote frames as its
    traceback; what it was raised from (if anything) as its cause.

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
    _shorten_message(exc)
    frames = envelope.get("frames")
    if frames is None:  # an executor of an older version: the text is all there is
        exc.__cause__ = RemoteTraceback(remote_tb)
    else:
        exc.__traceback__ = build_traceback(frames)
        if envelope.get("cause"):
            exc.__cause__ = RemoteTraceback(envelope["cause"])
    if sys.version_info >= (3, 11):
        where = f"bulletin task {task_id}" if task_id else "a bulletin task"
        runs = f", the last of {attempts} runs (retries=)" if attempts > 1 else ""
        exc.add_note(f"Raised remotely in {where}{runs}.")
    return exc
