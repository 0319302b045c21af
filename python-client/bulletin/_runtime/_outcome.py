"""What a call's function gave, as the caller gets it: one place for the executor's runtime
path (``_executor``) and a lease's (``_lease``)."""

from __future__ import annotations

from .._data._objects import encode
from .._envelope import make_envelope as envelope
from .._errors import ResultSerializationError
from . import _resident


def kept_on_device(fn, value):
    """A result on the GPU stays there (issue 29, part 4): its handle goes back instead."""
    if _resident.is_device_value(value) and not _resident.SIMULATED:
        return _resident.keep(value, getattr(fn, "__name__", "result"))
    return value


def encode_outcome(value, raised: bool):
    """``(encoded, raised)``: the value, or the exception as an error envelope whose traceback
    starts in the user's function (the frame that caught it is skipped). A value that cannot be
    encoded becomes a ResultSerializationError that says so; never raises for what the value
    does (a ``__reduce__`` that calls sys.exit() too)."""
    if raised:
        tb = value.__traceback__.tb_next if value.__traceback__ is not None else None
        return encode(envelope(value, tb)), True
    try:
        return encode(value), False
    except BaseException as exc:  # noqa: BLE001
        error = ResultSerializationError(
            f"the function returned a {_type_name(value)}, which cannot be pickled: {exc}. "
            "Return plain data (arrays, tensors moved to the CPU, dicts) instead.")
        return encode(envelope(error)), True


def _type_name(obj) -> str:
    cls = type(obj)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
