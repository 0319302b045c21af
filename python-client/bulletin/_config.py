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
DEFAULT_HTTP_PORT = 8780  # the dashboard and /metrics (the runtime's --http-port default)
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


def token_path() -> Path:
    """The owner's token file `bulletin up` writes: $BULLETIN_HOME/token."""
    return home() / "token"


def resolve_token(token: str | None = None) -> tuple[str | None, str]:
    """(token or None, where it came from): argument, $BULLETIN_TOKEN, $BULLETIN_HOME/token."""
    if token:
        return token, "the token argument"
    if os.environ.get("BULLETIN_TOKEN"):
        return os.environ["BULLETIN_TOKEN"], "$BULLETIN_TOKEN"
    path = token_path()
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


_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"  # digits with an optional fraction: no sign, no exponent
_DURATION_PARTS = re.compile(rf"(?:{_NUMBER}\s*(?:ms|s|m|h|d)\s*)+")
_DURATION_PART = re.compile(rf"({_NUMBER})\s*(ms|s|m|h|d)")
_CLOCK = re.compile(r"(?:(\d+)-)?(\d+):(\d{1,2})(?::(\d{1,2}))?")
_DURATION_FORMS = ('seconds as a number, or a string like "90", "90s", "10 ms", "30m", "2h", '
                   '"1d", "1h30m", "1.5h" or Slurm\'s "[D-]HH:MM[:SS]"')


def parse_duration(value: float | str, name: str) -> float:
    """Seconds (>= 0) from a number of seconds or a duration string.

    The grammar is the runtime's, for durations in the cluster config
    (``Quantities.parseDuration`` in the Java runtime), so a duration reads the same everywhere:

    - a plain number is seconds: ``"90"``, ``"2.5"``;
    - otherwise one or more parts NUMBER UNIT, the unit one of ``ms s m h d``, in any case, with
      spaces allowed around the unit: ``"90s"``, ``"10 ms"``, ``"1h30m"``, ``"1h 30m"``,
      ``"1.5h"``;
    - or Slurm's clock form ``[D-]HH:MM[:SS]``, with ``MM:SS`` when there are only two fields
      and no day, as Slurm reads it: ``"1:30:00"``, ``"2-00:00:00"``, ``"45:00"``.

    A NUMBER is digits with an optional fraction (no sign, no exponent). The config's
    ``unlimited`` is no duration here: a call without a timeout passes None.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InvalidArgumentError(f"{name}={value!r}: expected {_DURATION_FORMS}")
    if not isinstance(value, str):
        seconds = float(value)
    else:
        text = value.strip().lower()
        clock = _CLOCK.fullmatch(text)
        if re.fullmatch(_NUMBER, text):
            seconds = float(text)
        elif clock:
            days, first, second, third = (int(g) if g else 0 for g in clock.groups())
            if clock.group(4) is not None or clock.group(1) is not None:  # [D-]HH:MM[:SS]
                seconds = float(days * 86400 + first * 3600 + second * 60 + third)
            else:  # MM:SS
                seconds = float(first * 60 + second)
        elif _DURATION_PARTS.fullmatch(text):
            seconds = sum(float(n) * _DURATION_UNITS[u] for n, u in _DURATION_PART.findall(text))
        else:
            raise InvalidArgumentError(f"{name}={value!r}: expected {_DURATION_FORMS}")
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidArgumentError(f"{name}={value!r}: must be a duration >= 0 ({_DURATION_FORMS})")
    return seconds


def parse_timeout(value: float | str | None, name: str = "timeout") -> float:
    """A call's timeout in seconds (see parse_duration); None means "no timeout" (0)."""
    if value is None:
        return 0.0
    seconds = parse_duration(value, name)
    if seconds <= 0:
        raise InvalidArgumentError(f"{name}={value!r}: must be a positive duration ({_DURATION_FORMS})")
    return seconds


def parse_wait(value: float | str | None, name: str = "timeout") -> float | None:
    """How long a wait may last (``result``, ``wait``, ``as_completed``, ``gather``), in
    seconds: a duration (see parse_duration); None waits for good."""
    if value is None:
        return None
    return parse_duration(value, name)


def _int_option(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgumentError(f"{name}={value!r}: expected an int >= {minimum}")
    return value


def _gpus_option(value) -> int | float:
    """Whole GPUs (an int >= 0), or a share of one GPU: a multiple of 1/8 below 1 (0.5, 0.25,
    0.125, ...); several calls then share one GPU (docs/scheduler.md, "Fractional GPUs")."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise InvalidArgumentError(
            f"gpus={value!r}: expected a whole number of GPUs (an int >= 0) or a share of one "
            "GPU (0.125, 0.25, 0.5, ...)")
    if float(value).is_integer():
        return int(value)
    if value > 1:
        raise InvalidArgumentError(
            f"gpus={value!r}: fractions are for less than one GPU (a share of one GPU: 0.125, "
            f"0.25, 0.5, ...); ask for {int(value) + 1} whole GPUs instead")
    if not (value * 8).is_integer():
        raise InvalidArgumentError(
            f"gpus={value!r}: a share of a GPU is a multiple of 1/8 (0.125, 0.25, 0.375, 0.5, "
            "0.625, 0.75, 0.875)")
    return float(value)


def gpu_eighths(gpus: int | float) -> int:
    """A share of one GPU in eighths (TaskSpec.resources.gpu_eighths); 0 for whole GPUs."""
    return 0 if float(gpus).is_integer() else round(gpus * 8)


@dataclass(frozen=True)
class Options:
    """The validated resources and policy of a call, as the TaskSpec carries them.

    Zero / empty values mean "not asked": the runtime applies its QoS defaults.
    """

    gpus: int | float = 0  # whole GPUs, or a share of one below 1 (a multiple of 1/8)
    cpus: float | None = None  # None: not asked; see cpu_demand
    memory: int = 0
    qos: str = ""
    priority: int = 0
    timeout: float = 0.0
    retries: int = 0
    credits: float = 0.0
    pip: tuple = ()  # requirements for a cached environment on the worker (docs/environments.md)

    @property
    def cpu_demand(self) -> float:
        """The CPU slots the call asks for: ``cpus``, else 1, or for a share of a GPU the same
        share of one CPU (gpus=0.5: 0.5), so that splitting a GPU never multiplies the CPU slots
        its calls need: a GPU's shares fit wherever a whole-GPU call would (docs/scheduler.md)."""
        if self.cpus is not None:
            return self.cpus
        return float(self.gpus) if 0 < self.gpus < 1 else 1.0

    @classmethod
    def make(cls, base: Options | None = None, **given) -> Options:
        """base with every option in ``given`` that is not None validated and applied."""
        values = {}
        for name, value in given.items():
            if value is None:
                continue
            if name == "gpus":
                values[name] = _gpus_option(value)
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
            elif name == "pip":
                from ._environment import parse_pip
                values[name] = parse_pip(value)
            else:
                raise InvalidArgumentError(
                    f"unknown option {name!r}; the options are gpus, cpus, memory, qos, "
                    "priority, timeout, retries, credits and pip")
        return replace(base or cls(), **values)
