"""Large arguments held in the store while the caller's object lives.

The same array passed to ten calls is uploaded once: the session holds its object for as long as
the array lives (a weak reference's finalizer lets it go). Only the array's current content is
held: one changed in place and passed again is a new object, and the content it had goes.
"""

from __future__ import annotations

import weakref

from ._data._transfer import Transfer


class KeptArguments:
    """The store objects held for the caller's live arguments: id(value) -> (a weak reference
    to it, its held content's id -> the finalizer that lets that content go)."""

    def __init__(self, transfer: Transfer):
        self._transfer = transfer
        self._kept: dict[int, tuple[weakref.ref, dict[str, weakref.finalize]]] = {}

    def keep(self, value, encoded) -> tuple[str, bool]:
        """Holds ``value``'s encoding in the store while ``value`` lives; (id, held for good:
        False when ``value`` cannot be weakly referenced, and is held for this call only).
        Calls already submitted hold their own references to what they were given."""
        oid = encoded.digest()
        key = id(value)
        kept = self._kept.get(key)
        if kept is not None and kept[0]() is value:
            if oid in kept[1]:
                return oid, True
            # The earlier content goes before the new one is written, so that the runtime can
            # hand its file back for this write (a loop refilling one buffer) instead of the
            # write taking fresh memory and the old content's staying cached.
            for stale, finalizer in kept[1].items():
                if finalizer.detach() is not None:
                    self._transfer.release(stale)
            kept[1].clear()
        oid = self._transfer.acquire(encoded)
        try:
            ref = weakref.ref(value)
        except TypeError:
            return oid, False
        if kept is None or kept[0]() is not value:
            kept = self._kept[key] = (ref, {})
        kept[1][oid] = weakref.finalize(value, self._forget, key, oid)
        return oid, True

    def _forget(self, key: int, oid: str) -> None:
        kept = self._kept.get(key)
        if kept is not None and kept[0]() is None:
            del self._kept[key]
        self._transfer.release(oid)
