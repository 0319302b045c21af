"""Client.gather: the results of Futures and Refs in any nesting of containers, waited for
from a thread or, without blocking it, from an event loop."""

from __future__ import annotations

import concurrent.futures as cf

from ._config import parse_wait
from ._errors import InvalidArgumentError
from ._future import ALL_COMPLETED, FIRST_EXCEPTION, wait
from ._nested import futures_in, is_future, replace_futures


def gather(futures, errors: str = "raise", timeout=None) -> tuple[object, BaseException | None]:
    """(values, None), or (None, the error to raise): the caller raises it, so that the
    traceback shows the caller's frame and then the remote ones, nothing in between."""
    seconds = _check(errors, timeout)
    single = is_future(futures)
    found = futures_in(futures)
    done, not_done = wait(found, timeout=seconds, return_when=_return_when(errors))
    error = _first_error(found, done, "raise" if single else errors, not_done, timeout)
    if error is not None:
        return None, error
    values = _values(found)
    return replace_futures(futures, lambda f: values[id(f)], dropped=_failed), None


async def gather_async(futures, errors: str = "raise", timeout=None):
    """As gather, awaited: the waiting and the fetching of large results happen on worker
    threads, never on the event loop."""
    __tracebackhide__ = True  # noqa: F841 (pytest and IPython hide this frame)
    import asyncio
    seconds = _check(errors, timeout)
    single = is_future(futures)
    loop = asyncio.get_running_loop()
    found = futures_in(futures)
    done, not_done = await loop.run_in_executor(
        None, lambda: wait(found, timeout=seconds, return_when=_return_when(errors)))
    error = _first_error(found, done, "raise" if single else errors, not_done, timeout)
    if error is not None:
        raise error
    values = await loop.run_in_executor(None, _values, found)
    return replace_futures(futures, lambda f: values[id(f)], dropped=_failed)


def _check(errors: str, timeout) -> float | None:
    if errors not in ("raise", "skip"):
        raise InvalidArgumentError(f"errors={errors!r}: expected 'raise' or 'skip'")
    return parse_wait(timeout)


def _return_when(errors: str) -> str:
    return FIRST_EXCEPTION if errors == "raise" else ALL_COMPLETED


def _first_error(found: list, done: set, errors: str, not_done: set,
                 timeout) -> BaseException | None:
    """With errors="raise", the first failed call's error (in the order given) with its
    remote traceback; else TimeoutError if calls are still running; else None."""
    if errors == "raise":
        for f in found:
            if f in done and _failed(f):
                if f.cancelled():
                    return cf.CancelledError(f"call {f.key} was cancelled")
                return f.exception().with_traceback(f.traceback())
    if not_done:
        return cf.TimeoutError(f"{len(not_done)} of {len(found)} calls did not end within "
                               f"timeout={timeout!r}")
    return None


def _values(found: list) -> dict[int, object]:
    """The values of the futures that did not fail, by id (large ones fetched here)."""
    return {id(f): f.result() for f in found if not _failed(f)}


def _failed(f) -> bool:
    """Ended without a value: cancelled, or with an error (a Ref never fails)."""
    return isinstance(f, cf.Future) and f.done() and (f.cancelled() or f.exception() is not None)
