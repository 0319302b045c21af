"""Where a call's printed output goes, a whole line at a time.

The runtime streams a call's stdout and stderr in chunks cut wherever the pipe was read, so two
calls printing at once could come out merged in the middle of a line ("call 27 line 0call 28
line 0"). Each call's output is therefore held here until a line ends, and written one whole
line at a time; when a call runs at the same time as another call of the same client, each of
its lines starts with a short label naming it (the start of its key, as ``repr(future)`` shows
it), which ``Client(output_prefix=False)`` turns off.

In a Jupyter kernel (ipykernel), a call's output belongs under the cell that started it, but the
thread that receives it writes under whichever cell runs at the time. The cell that submits a
call is known only at submit time: its parent header is captured then, and every line of the
call is published on the kernel's IOPub channel with that parent, so the front end (Notebook,
JupyterLab, nbclient) puts it under that cell. Outside a kernel the lines go to ``sys.stdout``
and ``sys.stderr`` as before.
"""

from __future__ import annotations

import sys
import threading

from . import _displays
from ._errors import InvalidArgumentError

_LABEL_HEX = 6  # hex digits of the key's random part kept in the label


def write_output(stream: str, text: str, displays: bool = False) -> None:
    """Writes a call's finished lines here; with ``displays``, its display lines
    (``_displays``) are shown as displays."""
    for kind, piece in _displays.split(text) if displays else [("text", text)]:
        if kind == "display":
            _displays.show(piece)
            continue
        # Looked up per write so that redirect_stdout, pytest capture and Jupyter cells work.
        target = sys.stderr if stream == "stderr" else sys.stdout
        if target is not None:
            target.write(piece)
            target.flush()


def call_label(key: str) -> str:
    """``train-3f2a1c`` for the key ``train-3f2a1c...`` (name, dash, 32 hex digits)."""
    name, dash, tail = key.rpartition("-")
    return f"{name}-{tail[:_LABEL_HEX]}" if dash and name else key[:24]


def checked_prefix(value) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"output_prefix={value!r}: expected True or False")
    return value


class KernelRoute:
    """Publishes text on a Jupyter kernel's IOPub channel under one cell (a parent header)."""

    def __init__(self, streams: dict, parent: dict):
        self._streams = streams  # "stdout"/"stderr" -> ipykernel OutStream
        self._parent = parent

    def write(self, stream: str, text: str, displays: bool = False) -> None:
        out = self._streams[stream]
        if out.pub_thread is None:  # the kernel closed its streams (it is shutting down)
            write_output(stream, text, displays)
            return
        # The messages OutStream's flush and IPython's display send, with the submitting cell
        # as their parent; the IOPub thread takes messages from any thread.
        for kind, piece in _displays.split(text) if displays else [("text", text)]:
            if kind == "display":
                out.session.send(out.pub_thread, "display_data", content={
                    "data": piece["data"], "metadata": piece.get("metadata") or {},
                    "transient": {}}, parent=self._parent, ident=b"display_data")
            else:
                out.session.send(out.pub_thread, "stream", content={"name": stream,
                                                                     "text": piece},
                                 parent=self._parent, ident=out.topic)


def in_kernel() -> bool:
    """Whether this runs in a Jupyter kernel: its streams are ipykernel's (ipykernel being
    imported is not enough; a test or a tool may import it)."""
    return type(sys.stderr).__module__.startswith("ipykernel.")


def kernel_route() -> KernelRoute | None:
    """The route to the cell running now, when this runs in an ipykernel cell; else None."""
    streams = {"stdout": sys.stdout, "stderr": sys.stderr}
    for out in streams.values():
        if not type(out).__module__.startswith("ipykernel.") or not all(
                hasattr(out, name) for name in ("session", "pub_thread", "topic",
                                                "parent_header")):
            return None
    try:
        parent = dict(sys.stdout.parent_header or {})
    except Exception:  # an ipykernel whose streams work otherwise: leave them as they are
        return None
    if not parent.get("msg_id"):  # no cell runs (the kernel is starting)
        return None
    return KernelRoute(streams, parent)


class OutputPolicy:
    """A client's rules for its calls' output: whether lines get labels, when calls overlap.

    A call overlaps once another call of the client was in flight at the same time, at any
    moment of its life: whether two calls overlap is known when the second is submitted, not
    when a line arrives (the last call of a map, printing after all the others ended, still
    belongs to the map's interleaved output and keeps its label)."""

    def __init__(self, prefix: bool = True):
        self.prefix = prefix
        self._lock = threading.Lock()
        self._live = 0  # outputs opened and not ended
        self._opened = 0  # outputs opened so far: a later one opened while this one was live
        # if the count moved during its life (O(1) per call: a map of thousands opens them all)

    def open(self, key: str, displays: bool = False) -> CallOutput:
        """The output of one new call, routed to the cell (if any) submitting it now; with
        ``displays``, its display lines show as displays (a %%bulletin cell's)."""
        route = kernel_route()
        with self._lock:
            self._opened += 1
            met_others = self._live > 0
            self._live += 1
            return CallOutput(call_label(key), self, route, self._opened, met_others, displays)

    def opened(self) -> int:
        """Outputs opened so far."""
        return self._opened

    def ended(self) -> int:
        """One output ended (called once per output); the count of outputs opened by then."""
        with self._lock:
            self._live -= 1
            return self._opened


class CallOutput:
    """One call's output on its way to the caller: whole lines, labelled while calls overlap."""

    def __init__(self, label: str, policy: OutputPolicy | None = None,
                 route: KernelRoute | None = None, opened_as: int = 0,
                 met_others: bool = False, displays: bool = False):
        self._label = label
        # Whether display lines show as displays: only for calls that asked (a %%bulletin
        # cell). Any other call's output is text, whatever it holds: a function that prints
        # data it was given must not put that data's HTML or scripts into the notebook.
        self.displays = displays
        self._policy = policy
        self._route = route
        self._partial = {"stdout": "", "stderr": ""}
        self._opened_as = opened_as  # the policy's count of opened outputs when this one opened
        self._met_others = met_others  # other calls were in flight when this one opened
        self._ended_at: int | None = None  # the policy's count when this one ended
        self._lock = threading.Lock()

    @property
    def overlapped(self) -> bool:
        """Another call of the client was in flight with this one at some moment of its life."""
        if self._met_others:
            return True
        if self._policy is None:
            return False
        last = self._policy.opened() if self._ended_at is None else self._ended_at
        return last > self._opened_as

    def lines(self, stream: str, text: str) -> str:
        """The whole lines that ``text`` completes (labelled if need be); keeps the rest."""
        with self._lock:
            text = self._partial[stream] + text
            end = max(text.rfind("\n"), text.rfind("\r")) + 1
            self._partial[stream] = text[end:]
            return self._labelled_lines(text[:end])

    def rest(self) -> list[tuple[str, str]]:
        """What is left of unfinished lines once the call ended, each as a line of its own."""
        with self._lock:
            left = [(stream, self._labelled_lines(text + "\n"))
                    for stream, text in self._partial.items() if text]
            self._partial = {"stdout": "", "stderr": ""}
            if self._policy is not None and self._ended_at is None:
                self._ended_at = self._policy.ended()
        return left

    def _labelled_lines(self, text: str) -> str:
        if not text:
            return ""
        if not self.overlapped or self._policy is None or not self._policy.prefix:
            return text
        tag = f"[{self._label}] "
        return "".join(tag + line for line in _displays.lines(text))

    def write(self, stream: str, text: str) -> None:
        """Writes finished lines where this call's output belongs (its cell, or sys.stdout)."""
        if self._route is not None:
            self._route.write(stream, text, self.displays)
        else:
            write_output(stream, text, self.displays)
