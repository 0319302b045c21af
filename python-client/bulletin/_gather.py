"""Client.gather: the results of Futures and Refs in any nesting of containers, waited for
from a thread or, without blocking it, from an event loop."""

from __future__ import annotations

import concurrent.futures as cf

from ._config import parse_wait
from ._errors import InvalidArgumentError
from ._future import ALL_COMPLETED, FIRST_EXCEPTION, wait
from ._nested import futures_in, is_future, replace_futures


def gather(futures, errors: str = "raise", timeout=None):
    __tracebackhide__ = True  # noqa: F841 (pytest and IPython hide this frame)
    seconds = _check(errors, timeout)
    if is_future(futures):
        return futures.result(seconds)
    found = futures_in(futures)
    done, not_done = wait(found, timeout=seconds, return_when=_return_when(errors))
    _raise_first_error(found, done, errors, not_done, timeout)
    values = _values(found)
    return replace_futures(futures, lambda f: values[id(f)], dropped=_failed)


async def gather_async(futures, errors: str = "raise", timeout=None):
    """As gather, awaited: the waiting and the fetching of large results happen on worker
    threads, never on the event loop."""
    __tracebackhide__ = True  # noqa: F841
    import asyncio
    seconds = _check(errors, timeout)
    if is_future(futures):
        futures = [futures]
        single = True
    else:
        single = False
    loop = asyncio.get_running_loop()
    found = futures_in(futures)
    done, not_done = await loop.run_in_executor(
        None, lambda: wait(found, timeout=seconds, return_when=_return_when(errors)))
    _raise_first_error(found, done, "raise" if single else errors, not_done, timeout)
    values = await loop.run_in_executor(None, _values, found)
    result = replace_futures(futures, lambda f: values[id(f)], dropped=_failed)
    return result[0] if single else result


def _check(errors: str, timeout) -> float | None:
    if errors not in ("raise", "skip"):
        raise InvalidArgumentError(f"errors={errors!r}: expected 'raise' or 'skip'")
    return parse_wait(timeout)


def _return_when(errors: str) -> str:
    return FIRST_EXCEPTION if errors == "raise" else ALL_COMPLETED


def _raise_first_error(found: list, done: set, errors: str, not_done: set, timeout) -> None:
    """With errors="raise", the first failed call's error (in the order given), raised from
    here with its own traceback; then TimeoutError if calls are still running."""
    __tracebackhide__ = True  # noqa: F841
    if errors == "raise":
        for f in found:
            if f in done and _failed(f):
                if f.cancelled():
                    raise cf.CancelledError(f"call {f.key} was cancelled")
                error = f.exception()
                raise error.with_traceback(f.traceback())
    if not_done:
        raise cf.TimeoutError(f"{len(not_done)} of {len(found)} calls did not end within "
                              f"timeout={timeout!r}")


def _values(found: list) -> dict[int, object]:
    """The values of the futures that did not fail, by id (large ones fetched here)."""
    return {id(f): f.result() for f in found if not _failed(f)}


def _failed(f) -> bool:
    """Ended without a value: cancelled, or with an error (a Ref never fails)."""
    return isinstance(f, cf.Future) and f.done() and (f.cancelled() or f.exception() is not None)
