"""``%%bulletin`` and ``%bulletin``: a notebook cell, or one statement, run on the cluster.

    %load_ext bulletin          # or: import bulletin (in a kernel, it registers the magic)

    %%bulletin gpus=1 timeout=600
    model = train(model, data)
    loss                        # shown as Jupyter shows a cell's last value

The cell runs in an executor (``_runtime._cell``) with the notebook names it reads; the names it
binds, deletes or may change in place (``_cell_names``) come back into the notebook. Its output,
displays and figures show under the cell as it runs; an error shows the cell's own lines;
interrupting the kernel cancels the call. docs/notebooks.md is the user's guide.
"""

from __future__ import annotations

import ast
import importlib
import shlex
import sys
import time
import types
from dataclasses import dataclass

from ._call_options import OPTION_NAMES
from ._cell_names import cell_names
from ._config import Options
from ._envelope import exception_from_envelope
from ._errors import BulletinError, InvalidArgumentError
from ._resident import Resident
from ._runtime._cell import CellSpec, ModuleName, run_cell, writable
from ._status import format_bytes

# The notebook's own names, never sent: IPython's history and its helpers.
_NOTEBOOK_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "_", "__", "___",
                             "_i", "_ii", "_iii", "_ih", "_oh", "_dh", "display"})
_USAGE = ("usage: %%bulletin [gpus=N] [cpus=N] [memory=SIZE] [qos=NAME] [timeout=SECONDS] "
          "[retries=N] [priority=N] [pip=[...]] [--quiet], then the cell; or %bulletin "
          "[options] STATEMENT; or %bulletin --release (frees what the notebook keeps there)")


@dataclass(frozen=True)
class CellRun:
    """One ``%%bulletin`` cell (or ``%bulletin`` statement) as it ran: what it cost.

    ``sent_bytes`` is what this kernel sent for it (inline, and uploads to the store; a value
    the store already held is not sent again), ``received_bytes`` the encoded size of what came
    back; ``waited_s`` the time before it started (queue and executor start), ``ran_s`` its run
    on the cluster, ``held_s`` how long its slots (its GPU) were reserved for it (placement to
    end: the run, and the executor's loading of the cell's inputs and storing of what it
    returns), ``wall_s`` the whole cell here."""
    source: str
    key: str
    where: dict
    waited_s: float
    ran_s: float
    wall_s: float
    sent_bytes: int
    received_bytes: int
    held_s: float


_RUNS: list[CellRun] = []


def cell_runs() -> list[CellRun]:
    """The ``%%bulletin`` cells this kernel ran, oldest first (a benchmark's or a curious
    user's record: the magic's one-line summary, kept)."""
    return list(_RUNS)


class RemoteModule(types.ModuleType):
    """A module a cell imported on the cluster that this kernel cannot import: usable in later
    ``%%bulletin`` cells (it crosses by name), and says so when used here."""

    def __init__(self, name: str, why: str):
        super().__init__(name)
        self.__dict__["_bulletin_why"] = why

    def __getattr__(self, attribute):
        raise BulletinError(
            f"{self.__name__} was imported by a %%bulletin cell on the cluster, and this kernel "
            f"cannot import it ({self.__dict__['_bulletin_why']}): use it in %%bulletin cells, "
            f"or install it here")


def load_ipython_extension(ipython) -> None:
    """``%load_ext bulletin``."""
    register(ipython)


def register(ipython) -> None:
    ipython.register_magic_function(_bulletin_magic, magic_kind="line_cell",
                                    magic_name="bulletin")


def register_in_running_kernel() -> None:
    """``import bulletin`` in IPython registers the magic (IPython already loaded: no cost)."""
    if "IPython" not in sys.modules:
        return
    try:
        from IPython import get_ipython
        shell = get_ipython()
    except Exception:  # noqa: BLE001 - a broken IPython must not break `import bulletin`
        return
    if shell is not None and hasattr(shell, "register_magic_function"):
        register(shell)


def _bulletin_magic(line: str, cell: str | None = None):
    __tracebackhide__ = True  # noqa: F841 (IPython hides this frame)
    from IPython import get_ipython
    shell = get_ipython()
    if cell is None and line.strip() == "--release":
        return release(shell)
    options, quiet, statement = parse_options(line, cell is not None)
    return run_source(shell, cell if cell is not None else statement, options, quiet)


def release(shell) -> None:
    """``%bulletin --release``: every value this notebook's session keeps on the cluster is
    dropped there (on whichever executor or spill of the user holds it; its GPU memory freed,
    shortly after), and its ``bulletin.Resident`` names here are deleted. Closing the client
    (or the kernel) does the same."""
    names = sorted(name for name, value in shell.user_ns.items()
                   if isinstance(value, Resident) and not name.startswith("_"))
    if not names:
        print("[bulletin] this notebook keeps nothing on the cluster")
        return
    # The runtime drops them as at the session's end, on every worker (not by a call, which
    # could land on another executor of the user than the one that keeps them).
    from ._client import get_client
    get_client()._release_resident()
    for name in names:
        del shell.user_ns[name]
    print(f"[bulletin] released {len(names)} value(s) kept on the cluster: {', '.join(names)}")


def parse_options(line: str, is_cell: bool) -> tuple[Options, bool, str]:
    """(call options, quiet, the statement of a line magic). Options lead: ``name=value`` for a
    call option (the value a Python literal, else a string), ``--quiet`` or ``-q``."""
    try:
        tokens = shlex.split(line, posix=True)
    except ValueError as exc:
        raise InvalidArgumentError(f"%bulletin {line!r}: {exc}. {_USAGE}") from None
    given, quiet, used = {}, False, 0
    for token in tokens:
        name, equals, value = token.partition("=")
        if token in ("-q", "--quiet"):
            quiet = True
        elif equals and name in OPTION_NAMES:
            given[name] = _literal(value)
        elif is_cell:
            raise InvalidArgumentError(f"%%bulletin: {token!r} is not an option. {_USAGE}")
        else:
            break
        used += 1
    statement = _rest(line, used) if not is_cell else ""
    if not is_cell and not statement.strip():
        raise InvalidArgumentError(f"%bulletin needs a statement. {_USAGE}")
    return Options.make(Options(), **given), quiet, statement


def run_source(shell, source: str, options: Options, quiet: bool = False):
    """Runs ``source`` on the cluster as the notebook would run it here; returns the value of
    its last expression (IPython shows it)."""
    __tracebackhide__ = True  # noqa: F841
    from ._client import get_client
    names = _names(shell, source)
    user = shell.user_ns
    inputs = {name: _sent(user[name]) for name in sorted(names.reads | names.may_change)
              if name in user and name not in _NOTEBOOK_NAMES}
    # The notebook's own name for the cell: tracebacks show "Cell In[n], line k" and its lines.
    filename = shell.compile.cache(source, _cell_number(shell))
    spec = CellSpec(source, filename, tuple(sorted(names.binds | names.may_change)),
                    names.last_expression)
    client = get_client()
    started, uploaded = time.perf_counter(), client._transfer.uploaded_bytes
    future = client._call_to_end(run_cell, (spec,), inputs, options, key=None, displays=True)
    result = future.result()
    timings = future.timings
    run = CellRun(source, future.key, dict(result.where),
                  timings.get("queue", 0.0) + timings.get("start", 0.0), timings.get("run", 0.0),
                  time.perf_counter() - started,
                  future._inline_bytes + client._transfer.uploaded_bytes - uploaded,
                  future._result_bytes, timings.get("held", 0.0))
    _RUNS.append(run)
    for name in result.deleted:
        user.pop(name, None)
    for name, value in result.values.items():
        user[name] = _received(name, value)
    for name, why in result.unsent.items():
        user.pop(name, None)  # a stale value would be worse than none
        print(f"[bulletin] {name} is not set here: {why}; it stays on the cluster only for "
              "this cell", file=sys.stderr)
    if not quiet:
        print(_summary(run))
    if result.error is not None:
        error = exception_from_envelope(result.error, future.key)
        raise error.with_traceback(error.__traceback__)
    return result.shown


def _names(shell, source: str):
    try:
        return cell_names(source)
    except SyntaxError:
        if shell.transform_cell(source) != source:  # IPython's own syntax: !cmd, %magic
            raise InvalidArgumentError(
                "%%bulletin runs Python only: shell commands (!cmd) and magics (%magic) run in "
                "the notebook's kernel, so put them in a cell of their own") from None
        raise


def _cell_number(shell) -> int:
    """The number of the cell running now (In[n]): that of the innermost frame whose file is
    one of IPython's cells (the magic is called from the cell's own code)."""
    cells = getattr(shell.compile, "_filename_map", {})
    frame = sys._getframe(1)
    while frame is not None:
        number = cells.get(frame.f_code.co_filename)
        if isinstance(number, int):
            return number
        frame = frame.f_back
    return shell.execution_count


def _sent(value):
    if isinstance(value, RemoteModule):
        return ModuleName(value.__name__)
    if isinstance(value, types.ModuleType) and getattr(value, "__name__", None):
        return ModuleName(value.__name__)
    return value


def _received(name: str, value):
    if not isinstance(value, ModuleName):
        return writable(value)  # a changed array comes back read-only-mapped
    try:
        return importlib.import_module(value.name)
    except ImportError as exc:
        return RemoteModule(value.name, str(exc))


def _summary(run: CellRun) -> str:
    """``[bulletin] ran on worker local (host vm), GPU 0 · waited 0.01 s · ran 1.20 s (held
    1.31 s) · sent 2.0 KiB, got 1.1 KiB``."""
    gpus = run.where.get("gpus") or ""
    worker = (run.where.get("executor") or "").rpartition("-e")[0]  # executor ids: <worker>-e<n>
    place = (f"worker {worker} (host {run.where.get('host', '?')})" if worker
             else run.where.get("host", "?")) + (f", GPU {gpus}" if gpus else ", no GPU")
    kept = run.where.get("kept", 0)
    return (f"[bulletin] ran on {place} · waited {run.waited_s:.2f} s · ran {run.ran_s:.2f} s"
            f" (held {run.held_s:.2f} s) · sent {_size(run.sent_bytes)}, got "
            f"{_size(run.received_bytes)}" + (f" · {format_bytes(kept)} kept on the GPU"
                                              if kept else ""))


def _size(n: int) -> str:
    return format_bytes(n) if n > 0 else "0 B"


def _literal(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _rest(line: str, used: int) -> str:
    """The line after its first ``used`` option tokens, as written (quotes kept)."""
    rest = line.lstrip()
    for _ in range(used):
        rest = rest.split(None, 1)[1] if len(rest.split(None, 1)) > 1 else ""
    return rest
