"""Where the runtime is, who we are, and validation of the per-call options.

Everything can be set through the environment (BULLETIN_HOME, BULLETIN_ADDRESS, BULLETIN_TOKEN),
so tests and scripts point the client anywhere without code changes.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from ._errors import InvalidArgumentError

DEFAULT_PORT = 8770
DEFAULT_ADDRESS = f"127.0.0.1:{DEFAULT_PORT}"


def home() -> Path:
    return Path(os.environ.get("BULLETIN_HOME") or "~/.bulletin").expanduser()


def read_runtime_info(state_dir: Path | None = None) -> dict | None:
    """runtime.json of a running runtime, or None when absent or unreadable (half written)."""
    path = (state_dir or home()) / "runtime.json"
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def resolve_address(address: str | None = None) -> tuple[str, str]:
    """(address, where it came from): argument, $BULLETIN_ADDRESS, runtime.json, the default."""
    if address:
        return address, "the address argument"
    if os.environ.get("BULLETIN_ADDRESS"):
        return os.environ["BULLETIN_ADDRESS"], "$BULLETIN_ADDRESS"
    info = read_runtime_info()
    if info and info.get("address"):
        return str(info["address"]), str(home() / "runtime.json")
    return DEFAULT_ADDRESS, "the default address"


def resolve_token(token: str | None = None) -> tuple[str | None, str]:
    """(token or None, where it came from): argument, $BULLETIN_TOKEN, $BULLETIN_HOME/token."""
    if token:
        return token, "the token argument"
    if os.environ.get("BULLETIN_TOKEN"):
        return os.environ["BULLETIN_TOKEN"], "$BULLETIN_TOKEN"
    path = home() / "token"
    try:
        value = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None, str(path)
    return (value or None), str(path)


_MEMORY_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_MEMORY_FORMS = 'an int of bytes or a string like "512MB", "32GiB", "1.5GB"'
_NUMBER_UNIT = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_memory(value: int | str | None, name: str = "memory") -> int:
    """Bytes from an int or a string with a unit; None means "no limit asked" (0)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InvalidArgumentError(f"{name}={value!r}: expected {_MEMORY_FORMS}")
    if isinstance(value, (int, float)):
        if value < 0 or not math.isfinite(value):
            raise InvalidArgumentError(f"{name}={value!r}: must be a non-negative number of bytes")
        return int(value)
    match = _NUMBER_UNIT.match(value)
    unit = match.group(2).lower() if match else None
    if unit not in _MEMORY_UNITS:
        raise InvalidArgumentError(
            f"{name}={value!r}: expected {_MEMORY_FORMS} (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)")
    return int(float(match.group(1)) * _MEMORY_UNITS[unit])


_DURATION_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([dhms])")
_DURATION_FORMS = 'seconds as a number, or a string like "45s", "30m", "2h", "1h30m"'


def parse_timeout(value: float | str | None, name: str = "timeout") -> float:
    """Seconds from a number or a duration string; None means "no timeout" (0)."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InvalidArgumentError(f"{name}={value!r}: expected {_DURATION_FORMS}")
    if isinstance(value, str):
        text = value.strip().lower()
        try:
            seconds = float(text)
        except ValueError:
            parts = _DURATION_PART.findall(text)
            if not parts or _DURATION_PART.sub("", text).strip():
                raise InvalidArgumentError(f"{name}={value!r}: expected {_DURATION_FORMS}") from None
            seconds = sum(float(n) * _DURATION_UNITS[u] for n, u in parts)
    else:
        seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidArgumentError(f"{name}={value!r}: must be a positive duration ({_DURATION_FORMS})")
    return seconds


def _int_option(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgumentError(f"{name}={value!r}: expected an int >= {minimum}")
    return value


@dataclass(frozen=True)
class Options:
    """The validated resources and policy of a call, as the TaskSpec carries them.

    Zero / empty values mean "not asked": the runtime applies its QoS defaults.
    """

    gpus: int = 0
    cpus: float = 1.0
    memory: int = 0
    qos: str = ""
    priority: int = 0
    timeout: float = 0.0
    retries: int = 0
    credits: float = 0.0

    @classmethod
    def make(cls, base: Options | None = None, **given) -> Options:
        """base with every option in ``given`` that is not None validated and applied."""
        values = {}
        for name, value in given.items():
            if value is None:
                continue
            if name == "gpus":
                values[name] = _int_option(name, value, 0)
            elif name == "cpus":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                    raise InvalidArgumentError(f"cpus={value!r}: expected a number > 0, e.g. 1 or 0.5")
                values[name] = float(value)
            elif name == "memory":
                values[name] = parse_memory(value)
            elif name == "qos":
                if not isinstance(value, str):
                    raise InvalidArgumentError(f"qos={value!r}: expected a QoS class name such as 'interactive'")
                values[name] = value
            elif name == "priority":
                if isinstance(value, bool) or not isinstance(value, int):
                    raise InvalidArgumentError(f"priority={value!r}: expected an int")
                values[name] = value
            elif name == "timeout":
                values[name] = parse_timeout(value)
            elif name == "retries":
                values[name] = _int_option(name, value, 0)
            elif name == "credits":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                    raise InvalidArgumentError(f"credits={value!r}: expected a number >= 0")
                values[name] = float(value)
            else:
                raise InvalidArgumentError(f"unknown option {name!r}")
        return replace(base or cls(), **values)
