"""NumPy's allocator hook (NEP 49) that lets an executor's function compute a large result
straight into store memory (``lend.c``).

An executor offers one pre-faulted spare file (``_data._arena``) to the function's first large
allocation. When the function returns that very array, the executor writes the object's header
in front of it and names the spare: the result is written once, by the function itself, into
memory that was the store's already; no copy into the store follows.

The C library is compiled on first use with the machine's C compiler and cached per user
(``~/.cache/bulletin``, which must be this user's own and closed to others). Without a compiler,
or where anything about it fails, ``lender()`` is None and results are copied as before.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

_SOURCE = Path(__file__).with_name("lend.c")
_SET_HANDLER, _GET_HANDLER = 304, 305  # PyDataMem_{Set,Get}Handler in NumPy's C API table


class Lender:
    """The loaded library: ``offer`` a region before a call, ``withdraw`` it after."""

    def __init__(self, lib: ctypes.CDLL):
        self._lib = lib
        lib.bl_offer.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                                 ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        lib.bl_offer.restype = ctypes.c_int
        for name in ("bl_withdraw", "bl_lent"):
            getattr(lib, name).restype = ctypes.c_int
        table = _numpy_api()
        get_handler = ctypes.PYFUNCTYPE(ctypes.py_object)(table[_GET_HANDLER])
        self._set_handler = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object)(
            table[_SET_HANDLER])
        before = get_handler()  # NumPy's default here: ours falls back on it
        lib.bl_init.argtypes = (ctypes.c_void_p,)
        lib.bl_init(_capsule_pointer(before, b"mem_handler"))
        new_capsule = ctypes.pythonapi.PyCapsule_New
        new_capsule.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
        new_capsule.restype = ctypes.py_object
        name = ctypes.cast(lib.bl_capsule_name, ctypes.c_void_p).value
        self._capsule = new_capsule(ctypes.addressof(ctypes.c_char.in_dll(lib, "bl_handler")),
                                    name, None)

    def install(self):
        """Makes this thread's context allocate through the lender (NumPy keeps the handler
        per context); returns the handler it replaced, for ``uninstall``."""
        return self._set_handler(self._capsule)

    def uninstall(self, before) -> None:
        self._set_handler(before)

    def offer(self, address: int, size: int, minimum: int, mapping: int, mapping_size: int,
              fd: int) -> bool:
        """Lends ``size`` bytes at ``address`` to the next allocation of ``minimum`` bytes or
        more; they lie in the mapping (``mapping``, ``mapping_size``) of the file ``fd``, which
        a forked child gets as a private mapping. False while the region offered before is
        still lent."""
        return bool(self._lib.bl_offer(address, size, minimum, mapping, mapping_size, fd))

    def withdraw(self) -> bool:
        """Stops lending; True when an array still holds the region."""
        return bool(self._lib.bl_withdraw())

    def lent(self) -> bool:
        return bool(self._lib.bl_lent())


_LOCK = threading.Lock()
_LENDER: Lender | None = None
_WHY_NOT: str | None = None


def lender(may_compile: bool = True) -> Lender | None:
    """The process's lender, compiled (unless ``may_compile`` is False: only a cached library
    then) and loaded on first use; None where it cannot be (the reason is in ``why_not``)."""
    global _LENDER, _WHY_NOT
    with _LOCK:
        if _LENDER is None and _WHY_NOT is None:
            try:
                path, scratch = _library(may_compile)
                try:
                    _LENDER = Lender(ctypes.CDLL(str(path)))
                finally:
                    if scratch is not None:  # loaded: the mapping outlives the file
                        shutil.rmtree(scratch, ignore_errors=True)
            except Exception as exc:  # no compiler, a read-only home, an older NumPy
                _WHY_NOT = f"{type(exc).__name__}: {exc}"
        return _LENDER


def why_not() -> str | None:
    return _WHY_NOT


def _numpy_api():
    """NumPy's C API function table (its ``_ARRAY_API`` capsule), as an array of pointers."""
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # NumPy 1.x
        from numpy.core import _multiarray_umath as umath
    address = _capsule_pointer(umath._ARRAY_API, None)
    table = (ctypes.c_void_p * (_GET_HANDLER + 1)).from_address(address)
    if not table[_SET_HANDLER] or not table[_GET_HANDLER]:
        raise RuntimeError("this NumPy has no PyDataMem_SetHandler (NumPy 1.22 or later has)")
    return table


def _capsule_pointer(capsule, name: bytes | None) -> int:
    """The pointer a PyCapsule holds (``PyCapsule_GetPointer``)."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.argtypes = (ctypes.py_object, ctypes.c_char_p)
    get.restype = ctypes.c_void_p
    return get(capsule, name)


def _library(may_compile: bool) -> tuple[Path, Path | None]:
    """The compiled library, and the private temporary folder it was compiled into if not this
    user's cache (where the cache is not this user's own): from the cache if there, else
    compiled now."""
    source = _SOURCE.read_bytes()
    name = f"lend-{hashlib.sha256(source + os.uname().machine.encode()).hexdigest()[:16]}.so"
    cache = _private_cache()
    if cache is not None and _own_file(cache / name):
        return cache / name, None
    if not may_compile:
        raise RuntimeError("not compiled yet, and not compiled here (an executor under a memory "
                           "limit: the compiler's memory would count against its calls)")
    if cache is not None:
        return _compile(cache, name), None
    scratch = Path(tempfile.mkdtemp(prefix="bulletin-native-"))
    return _compile(scratch, name), scratch


def _compile(folder: Path, name: str) -> Path:
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("no C compiler (cc) on PATH")
    fd, scratch = tempfile.mkstemp(dir=folder, prefix=".lend-", suffix=".so")
    os.close(fd)
    try:
        done = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", scratch, str(_SOURCE)],
                              capture_output=True, text=True, timeout=60)
        if done.returncode:
            raise RuntimeError(f"{compiler} failed: {done.stderr.strip()[-500:]}")
        target = folder / name
        os.replace(scratch, target)
        return target
    finally:
        if os.path.exists(scratch):
            os.unlink(scratch)


def _private_cache() -> Path | None:
    """``$XDG_CACHE_HOME/bulletin`` (or ``~/.cache/bulletin``) when this user owns it and no one
    else can write there: a library another user could replace would run as this one."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = Path(base) / "bulletin"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        for path in (folder, folder.parent):
            st = os.lstat(path)
            if (not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid()
                    or st.st_mode & 0o022):
                return None
    except OSError:
        return None
    return folder


def _own_file(path: Path) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


__all__ = ["Lender", "lender", "why_not"]
if sys.platform != "linux":  # the store, and so this, is Linux only
    def lender(may_compile: bool = True) -> Lender | None:  # noqa: F811
        return None
