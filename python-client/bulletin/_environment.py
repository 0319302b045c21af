"""The caller's Python environment, as each call carries it (docs/environments.md).

A worker on a host where the caller's interpreter exists starts the caller's executors with it
(the same virtualenv or conda env); the fingerprint tells it when that environment changed (a
package installed since), so it restarts the caller's executors then, and only then. The
fingerprint is cheap by design: the interpreter's path and the modification times of its
site-packages folders (installing or removing a package adds or removes entries there), one
``stat`` per folder at most every 10 ms (a stat costs 1-3 us, a call on the pipelined path some
tens), hashed only when one changed.
"""

from __future__ import annotations

import hashlib
import os
import site
import sys
import time

from ._errors import InvalidArgumentError

# How long a fingerprint is taken as current: far below the time between a `pip install` and
# the next call a person (or a script that waited for pip to exit) makes.
_RECHECK_SECONDS = 0.01


class CallerEnvironment:
    """This process's interpreter, its Python version and its environment's fingerprint."""

    def __init__(self):
        # Not resolved: a venv's python is a link to the base interpreter, and the venv is
        # what the path names.
        self.executable = os.path.abspath(sys.executable) if sys.executable else ""
        self.python_version = "%d.%d" % sys.version_info[:2]
        folders = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
        if site.ENABLE_USER_SITE:
            folders.append(site.getusersitepackages())
        self._folders = [f for f in dict.fromkeys(folders) if os.path.isdir(f)]
        self._stamp: tuple | None = None
        self._fingerprint = ""
        self._next_check = 0.0

    def fingerprint(self) -> str:
        """Changes when a package is installed into (or removed from) this environment."""
        now = time.monotonic()
        if now < self._next_check:
            return self._fingerprint
        self._next_check = now + _RECHECK_SECONDS
        stamp = tuple([_mtime(folder) for folder in self._folders])
        if stamp != self._stamp:
            digest = hashlib.blake2b(digest_size=8)
            digest.update(self.executable.encode())
            for folder, mtime in zip(self._folders, stamp):
                digest.update(f"\0{folder}\0{mtime}".encode())
            self._fingerprint, self._stamp = digest.hexdigest(), stamp
        return self._fingerprint


def _mtime(folder: str) -> int:
    try:
        return os.stat(folder).st_mtime_ns
    except OSError:
        return 0


# pip options a call may give (where packages come from); the worker checks them again.
_PIP_OPTIONS = ("--find-links", "-f", "--no-index", "--index-url", "-i", "--extra-index-url",
                "--pre", "--no-deps", "--only-binary", "--prefer-binary")


def parse_pip(value) -> tuple[str, ...]:
    """``pip=["numpy==2.1", "--find-links=/wheels", "/wheels/mine-1.0-py3-none-any.whl"]``."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v.strip()
                                                       for v in value):
        raise InvalidArgumentError(
            f"pip={value!r}: expected a list of requirements, e.g. pip=['scipy>=1.11', "
            "'--find-links=/shared/wheels']")
    entries = tuple(v.strip() for v in value)
    for entry in entries:
        if entry.startswith("-") and entry.split("=", 1)[0].split(" ", 1)[0] not in _PIP_OPTIONS:
            raise InvalidArgumentError(
                f"pip=[..., {entry!r}, ...]: a call's pip options may only say where packages "
                f"come from ({', '.join(_PIP_OPTIONS)})")
    return entries
