"""Progress bars (tqdm.auto: a widget in Jupyter, text in a terminal) for the two waits a user
otherwise watches in silence: a large upload, and a blocking call waiting in the queue. Bars
vanish when done (leave=False) and never print into a log that is not a terminal. Turn them
off with BULLETIN_PROGRESS=0."""

from __future__ import annotations

import os
import sys
import time

from ._output import in_kernel

# Uploads from this size get a bar.
UPLOAD_THRESHOLD = 64 << 20
# A call queued for longer than this gets a bar.
QUEUE_GRACE_SECONDS = 1.0


def enabled() -> bool:
    if os.environ.get("BULLETIN_PROGRESS", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    if in_kernel():
        return True  # a notebook: the widget
    return sys.stderr is not None and sys.stderr.isatty()


def _bar(**kwargs):
    from tqdm.auto import tqdm
    return tqdm(leave=False, file=sys.stderr, dynamic_ncols=True, **kwargs)


def upload_bar(nbytes: int, what: str):
    """A bar for an upload of ``nbytes``, or None (small, or bars off)."""
    if nbytes < UPLOAD_THRESHOLD or not enabled():
        return None
    return _bar(total=nbytes, unit="B", unit_scale=True, unit_divisor=1024, desc=what)


class QueueWait:
    """Shows a queued blocking call's position once it has waited QUEUE_GRACE_SECONDS; call
    ``update`` while it waits and ``close`` when it leaves the queue."""

    def __init__(self, name: str):
        self._name = name
        self._since = time.monotonic()
        self._bar = None
        self._first_position = 0

    def update(self, status: str, position: int | None) -> None:
        if status != "queued":
            self.close()
            return
        if self._bar is None:
            if time.monotonic() - self._since < QUEUE_GRACE_SECONDS or not enabled():
                return
            self._first_position = max(1, position or 1)
            self._bar = _bar(total=self._first_position, desc=f"{self._name}: queued",
                             bar_format="{desc} {bar} position {postfix}")
        pos = max(1, position or self._first_position)
        if pos > self._first_position:  # moved back (a preemption, higher priorities)
            self._first_position = pos
            self._bar.total = pos
        self._bar.n = self._first_position - pos
        self._bar.set_postfix_str(str(pos), refresh=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
