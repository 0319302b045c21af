"""A remote exception's frames as a real traceback, so that it prints like a local one.

The executor sends each frame as (filename, line number, function name, source line); here
each becomes a frame object whose code has that file and function name (compiled from a
one-statement stub, run once to get a frame, as Jinja2 and tblib do), chained with
``types.TracebackType``. The stub's ``raise`` sits on the remote line with no columns (so no
printer, Python's or the interpreter's own, marks a part of the remote line with carets), and
the frame's code spans the file's lines from the first, as a module's does (IPython's stack_data
shows the lines around it so), and ``tb_lasti`` is its ``raise``: a negative
one sends IPython's ``executing`` into an endless loop (it looks backwards for an instruction
that is not a cache entry), and a code without line numbers makes IPython's formatter fail.
Remote source lines this process cannot read are registered in ``linecache`` for their file,
so tracebacks show them (a notebook's own cells are there already).

``attach_remote_cause`` also gives such an exception the remote traceback's text as its
``__cause__`` (a ``RemoteTraceback``), as ``concurrent.futures.ProcessPoolExecutor`` does.
"""

from __future__ import annotations

import ast
import dis
import linecache
import sys
import traceback
import types

from ._errors import RemoteTraceback

_STUB_MODULE = "bulletin_remote"  # the __name__ of the rebuilt frames' globals


class _Marker(Exception):
    pass


def build_traceback(frames) -> types.TracebackType | None:
    """The traceback of ``frames``, outermost first: (filename, lineno, name, line) each."""
    tb = None
    for filename, lineno, name, line in reversed(list(frames)):
        try:
            lineno = int(lineno)
            frame = _frame(str(filename), str(name), lineno)
            tb = types.TracebackType(tb, frame, _raise_offset(frame.f_code), lineno)
        except Exception:  # a frame that cannot be rebuilt is left out, never the error
            continue
        if line:
            _remember_line(str(filename), lineno, str(line))
    return tb


def _frame(filename: str, name: str, lineno: int) -> types.FrameType:
    code = compile(_stub(max(1, lineno)), filename, "exec")
    if sys.version_info >= (3, 11):
        code = code.replace(co_name=name, co_qualname=name)
    else:
        code = code.replace(co_name=name)
    try:
        exec(code, {"_marker": _Marker(), "__name__": _STUB_MODULE})
    except _Marker:
        return sys.exc_info()[2].tb_next.tb_frame
    raise RuntimeError("the frame stub did not raise")


def _stub(lineno: int) -> ast.Module:
    """``raise _marker`` on line ``lineno``, without columns (a negative offset compiles so)."""
    module = ast.parse("raise _marker")
    for node in ast.walk(module.body[0]):
        node.lineno = node.end_lineno = lineno
        node.col_offset = node.end_col_offset = -1
    return module


def _raise_offset(code: types.CodeType) -> int:
    return next(i.offset for i in dis.get_instructions(code) if i.opname == "RAISE_VARARGS")


def _remember_line(filename: str, lineno: int, line: str) -> None:
    """Makes ``line`` the source of ``filename:lineno`` for tracebacks, where this process
    has no source of its own for that file (a module only the executor has)."""
    if linecache.getline(filename, lineno):
        return
    entry = linecache.cache.get(filename)
    lines = list(entry[2]) if entry and len(entry) == 4 and entry[1] is None else []
    lines += [""] * (lineno - len(lines))
    lines[lineno - 1] = line if line.endswith("\n") else line + "\n"
    # mtime None: linecache.checkcache keeps the entry (as for sources loaders provide).
    linecache.cache[filename] = (len("".join(lines)), None, lines, filename)


def attach_remote_cause(exc: BaseException) -> None:
    """Makes the remote traceback's text the ``__cause__`` of ``exc``, a remote exception whose
    ``__traceback__`` holds the remote frames (``build_traceback``): what it was raised from
    remotely stays in that text. Exceptions without remote frames are left as they are (the
    errors of bulletin itself, a remote error that has no frame of the caller's code), and so
    is one that has its cause already."""
    cause = exc.__cause__
    if getattr(cause, "_whole", False) or not _has_remote_frames(exc.__traceback__):
        return
    try:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception:  # a broken __str__ must not hide the error
        return
    cause = RemoteTraceback(text)
    cause._whole = True  # the whole remote traceback: what it was raised from is in it
    exc.__cause__ = cause


def _has_remote_frames(tb: types.TracebackType | None) -> bool:
    while tb is not None:
        if tb.tb_frame.f_globals.get("__name__") == _STUB_MODULE:
            return True
        tb = tb.tb_next
    return False
