"""Which keywords of a call are the function's own and which set the call's options.

``client.submit(fn, *args, **kwargs)``, ``client.map`` and a decorated function's ``submit``,
``map`` and call take both in one set of keywords, as Dask's ``submit`` does. The rule that
tells them apart, the same everywhere (docs/from-dask.md, "Keyword arguments", says why):

1. A keyword the function accepts (a parameter of that name, or ``**kwargs``) reaches the
   function: ``client.submit(requests.get, url, timeout=5)`` passes ``timeout`` to ``get``.
2. A keyword the function cannot accept that names a call option (``gpus``, ``cpus``,
   ``memory``, ``qos``, ``priority``, ``timeout``, ``retries``, ``credits``, and Dask's ``key``,
   ``pure``, ``resources``, ...) sets that option: ``client.submit(train, x, gpus=2)``.
3. Where the function's signature cannot be read (some builtins), an option's name is refused,
   with how to pass it either way; nothing is ever taken silently.

Options that must be set although the function has a keyword of that name go through the
options object: ``bulletin.gpu(fn, timeout="2h")`` or ``remote_fn.options(timeout="2h")``.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

from ._config import Options
from ._errors import InvalidArgumentError

# The fields of Options, which submit and map also take as keywords.
OPTION_NAMES = ("gpus", "cpus", "memory", "qos", "priority", "timeout", "retries", "credits",
                "pip")
# Dask's own keywords of submit and map that mean something here (see _dask_keyword).
DASK_NAMES = ("key", "pure", "resources", "workers", "allow_other_workers", "fifo_timeout",
              "actor", "actors")
# Dask's resources= names for what bulletin's options count.
_RESOURCES = {"gpu": "gpus", "gpus": "gpus", "cpu": "cpus", "cpus": "cpus",
              "memory": "memory", "mem": "memory"}


@dataclass(frozen=True)
class CallKeywords:
    """A call's keywords, split: its options, Dask's call-level extras, the function's own."""

    options: Options
    kwargs: dict
    key: object = None  # Dask's key=: names the call (map: one name for all, or one each)
    batch_size: int | None = None  # map only


def split_keywords(fn: Callable, kwargs: dict, base: Options, *, what: str = "submit",
                   extra_names: tuple[str, ...] = ()) -> CallKeywords:
    """Splits ``kwargs`` by the module's rule; ``base`` holds the options already chosen (a
    decorator's). ``extra_names`` are further call-level keywords (map's batch_size)."""
    names = [name for name in kwargs
             if name in OPTION_NAMES or name in DASK_NAMES or name in extra_names]
    if not names:
        return CallKeywords(base, kwargs)
    accepts = _accepted_keywords(fn)
    if accepts is None:
        raise InvalidArgumentError(_unreadable_signature(fn, names, what))
    taken = [name for name in names if not accepts(name)]
    if not taken:
        return CallKeywords(base, kwargs)
    own = {name: value for name, value in kwargs.items() if name not in taken}
    options = {name: kwargs[name] for name in taken if name in OPTION_NAMES}
    extras = {name: kwargs[name] for name in taken if name not in OPTION_NAMES}
    for name, value in extras.items():
        if name in DASK_NAMES:
            _dask_keyword(name, value, options)
    return CallKeywords(Options.make(base, **options), own, key=extras.get("key"),
                        batch_size=_batch_size(extras.get("batch_size")))


def _accepted_keywords(fn: Callable) -> Callable[[str], bool] | None:
    """Whether fn takes a keyword of a given name; None when its signature cannot be read."""
    try:  # a decorated function's signature is its function's (__wrapped__)
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return lambda name: True
    named = {p.name for p in parameters
             if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)}
    return named.__contains__


def _unreadable_signature(fn: Callable, names: list[str], what: str) -> str:
    fn_name = getattr(fn, "__qualname__", None) or repr(fn)
    given = ", ".join(f"{name}=" for name in names)
    first = names[0]
    return (f"{what} cannot tell whether {given} {'is' if len(names) == 1 else 'are'} for "
            f"{fn_name} or for the call: bulletin cannot read {fn_name}'s signature. Set call "
            f"options with bulletin.cpu({fn_name}, {first}=...) (bulletin.gpu for GPUs), or pass "
            f"the function's own keyword with functools.partial({fn_name}, {first}=...).")


def _dask_keyword(name: str, value, options: dict) -> None:
    """Dask's keywords: key names the call, resources maps onto gpus/cpus/memory, pure and
    fifo_timeout change nothing here, placement on chosen workers and actors do not exist."""
    if name == "resources" and value is not None:
        if not isinstance(value, dict):
            raise InvalidArgumentError(f"resources={value!r}: expected a dict such as "
                                       "{'GPU': 1, 'memory': '8GiB'}")
        for resource, amount in value.items():
            option = _RESOURCES.get(str(resource).lower())
            if option is None:
                raise InvalidArgumentError(
                    f"resources={value!r}: {resource!r} is not a resource bulletin schedules; "
                    "it knows GPU, CPU and memory (also as gpus=, cpus=, memory=)")
            if option == "cpus" and isinstance(amount, int) and not isinstance(amount, bool):
                amount = float(amount)
            options[option] = amount
    elif name == "workers" and value is not None:
        raise InvalidArgumentError(
            f"workers={value!r}: bulletin places each call itself (free GPUs, data locality, "
            "quotas); pass qos= or resources instead, or leave workers out")
    elif name in ("actor", "actors") and value:
        raise InvalidArgumentError(f"{name}={value!r}: bulletin has no actors; each call runs "
                                   "on its own")
    elif name == "key" and value is not None and not isinstance(value, (str, list, tuple)):
        raise InvalidArgumentError(f"key={value!r}: expected a str (map: or one str per call)")


def _batch_size(value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgumentError(f"batch_size={value!r}: expected an int >= 1")
    return value
