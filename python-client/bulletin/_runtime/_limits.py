"""The process limits of an executor: what a call changed is set back after it, and the
memory= request's limit (``apply_memory_limit``), which the calls it runs cannot raise."""

from __future__ import annotations

import resource

from .._errors import MemoryLimitError
from .._status import format_bytes

# The memory= limit applied to this executor (0: none); calls report going over it.
memory_limit = 0


# ---- Limits a call may change ------------------------------------------------------------------

# Each limit once (RLIMIT_OFILE is RLIMIT_NOFILE under another name).
_RLIMITS = sorted({getattr(resource, name): name for name in sorted(dir(resource), reverse=True)
                   if name.startswith("RLIMIT_")}.items())


def _rlimit_text(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


class Limits:
    """The process's resource limits when the executor started; what a call changes is set back
    after it, so a limit the call set does not outlive it."""

    def __init__(self):
        self._start = {}
        for number, name in _RLIMITS:
            try:
                self._start[name] = (number, resource.getrlimit(number))
            except (OSError, ValueError):
                pass

    def restore(self) -> str:
        """Sets changed limits back; returns what could not be (a lowered hard limit only
        privileged processes may raise again), empty if all are as they were."""
        problems = []
        getrlimit = resource.getrlimit
        for name, (number, start) in self._start.items():
            try:
                now = getrlimit(number)
                if now == start:
                    continue
                resource.setrlimit(number, start)
            except (OSError, ValueError) as exc:
                problems.append(f"a call lowered {name} to soft {_rlimit_text(now[0])}, hard "
                                f"{_rlimit_text(now[1])} and it cannot be set back ({exc})")
                self._raise_soft_to_hard(number, start, now)
        return "; ".join(problems)

    @staticmethod
    def _raise_soft_to_hard(number: int, start, now) -> None:
        """The most that can be restored: the soft limit up to the (lowered) hard one, so the
        executor can still report the call's result before it is retired."""
        wanted = now[1] if start[0] == resource.RLIM_INFINITY or (
            now[1] != resource.RLIM_INFINITY and start[0] > now[1]) else start[0]
        try:
            resource.setrlimit(number, (wanted, now[1]))
        except (OSError, ValueError):
            pass


# ---- The memory limit of a call's memory= request ----------------------------------------------

# Room above the executor's own data at start for what it needs around each call (Py4J's
# connection thread stacks, decoding, the reply): the call itself gets its whole request.
_MEMORY_HEADROOM = 64 << 20


def _data_bytes() -> int:
    """The process's data segment as RLIMIT_DATA counts it (private writable mappings)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmData in /proc/self/status")


def apply_memory_limit(limit: int) -> None:
    """Limits this executor to ``limit`` bytes of data beyond what it holds now (its imports),
    soft and hard: the calls it runs cannot raise it again (unless it runs as root). An
    allocation past it fails with MemoryError, which the call reports as MemoryLimitError.
    RLIMIT_DATA counts private writable memory (heap, anonymous mappings) and not the store's
    shared files; docs/environments.md says what that misses (GPU memory among others)."""
    global memory_limit
    memory_limit = limit
    ceiling = _data_bytes() + limit + _MEMORY_HEADROOM
    resource.setrlimit(resource.RLIMIT_DATA, (ceiling, ceiling))


def over_limit(exc: BaseException, limit: int) -> MemoryLimitError:
    error = MemoryLimitError(
        f"the call went over the memory it asked for, memory={format_bytes(limit)} "
        f"({limit} bytes): {type(exc).__name__}: {exc}. Ask for more with memory=..., or "
        "allocate less; its executor was replaced.")
    error.__cause__ = exc
    error.__traceback__ = exc.__traceback__
    return error
