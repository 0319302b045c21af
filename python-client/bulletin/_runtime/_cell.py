"""A ``%%bulletin`` cell, run in an executor as the notebook would run it (see ``_magic``).

The cell runs in a namespace made of the notebook names it reads; what it binds, deletes or may
have changed goes back in a :class:`CellResult`. Its ``display()`` calls, rich values and
matplotlib figures go to the cell as display lines on stdout (``_displays``); its last expression
comes back to be shown as Jupyter shows it.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import linecache
import os
import socket
import sys
import types
from dataclasses import dataclass, field

from .._cell_names import writes_into
from .._displays import display_line, figure_bundle, mime_bundle
from .._envelope import make_envelope
from . import _resident


@dataclass(frozen=True)
class CellSpec:
    source: str
    filename: str  # the notebook's own name for the cell: tracebacks say "Cell In[n], line k"
    returns: tuple[str, ...]  # names that come back if the cell leaves them bound
    last_expression: bool


@dataclass(frozen=True)
class ModuleName:
    """A module crossing between the notebook and the cluster: by name, imported there."""
    name: str


@dataclass
class CellResult:
    values: dict  # name -> value (a module as ModuleName)
    deleted: tuple[str, ...]  # notebook names the cell deleted
    unsent: dict = field(default_factory=dict)  # name -> why its value cannot come back
    shown: object = None  # the last expression's value (None: nothing to show)
    where: dict = field(default_factory=dict)  # host and GPUs the cell ran on
    # The cell raised: its error's envelope (the notebook raises it). What the cell did before
    # the error is in the fields above, as a local cell's statements before an error stay done.
    error: dict | None = None


def display(*objects, **_ignored) -> None:
    """IPython's display(), for a cell on the cluster: each object shows under the cell."""
    for obj in objects:
        _show(mime_bundle(obj))


def run_cell(spec: CellSpec, /, **inputs) -> CellResult:
    namespace = {"__name__": "__main__", "__builtins__": builtins, "display": display}
    for name, value in inputs.items():
        namespace[name] = (importlib.import_module(value.name)
                           if isinstance(value, ModuleName) else value)
    for name in writes_into(spec.source) & inputs.keys():
        namespace[name] = writable(namespace[name])
    given = {name: id(value) for name, value in namespace.items()}
    # Inputs the cell may change in place: their content now, to send back only those it did
    # change (an unchanged one stays the notebook's own object, as after a local cell). A
    # value kept on the GPU is left out: its handle already names the live object here, and
    # hashing it would copy it off the device.
    before = {name: _content_id(namespace[name]) for name in spec.returns
              if name in inputs and not isinstance(inputs[name], ModuleName)
              and not _resident.is_device_value(namespace[name])}
    # The source is the traceback's: its lines show with the cell's own line numbers.
    lines = spec.source.splitlines(keepends=True)
    linecache.cache[spec.filename] = (len(spec.source), None, lines, spec.filename)
    os.environ.setdefault("MPLBACKEND", "agg")  # figures are sent as images, never opened
    tree = ast.parse(spec.source, spec.filename)
    last = tree.body.pop() if spec.last_expression else None
    shown = error = None
    try:
        exec(compile(tree, spec.filename, "exec"), namespace)
        if last is not None:
            shown = eval(compile(ast.Expression(last.value), spec.filename, "eval"), namespace)
    except BaseException as exc:  # noqa: BLE001 - a cell's sys.exit() too, as IPython shows it
        error = make_envelope(exc, exc.__traceback__.tb_next)  # from the cell's first frame
    _show_figures()
    changed = {name for name, content in before.items()
               if content is None or name not in namespace
               or _content_id(namespace[name]) != content}
    result = _result(spec, namespace, given, changed, shown)
    result.error = error
    return result


def _result(spec: CellSpec, namespace: dict, given: dict, changed: set, shown) -> CellResult:
    returned = [name for name in namespace
                if not name.startswith("__") and (name not in given
                                                  or id(namespace[name]) != given[name])]
    returned += [name for name in sorted(changed) if name in namespace and name not in returned]
    result = CellResult({}, tuple(name for name in given
                                  if name not in namespace and not name.startswith("__")
                                  and name != "display"),
                        where={"host": socket.gethostname(),
                               "executor": os.environ.get("BULLETIN_EXECUTOR_ID", ""),
                               "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", "")})
    _resident.forget_names(result.deleted)
    values = {name: _returned(name, namespace[name])
              for name in returned if namespace[name] is not display}
    if _resident.is_device_value(shown):
        shown = _resident.keep(shown, "_")
    result.where["kept"] = _resident.nbytes()  # what stays on the GPU: the summary line says
    # One probe of everything; the values one by one only when it fails (pickling a large
    # structure twice would double the cell's cost for the common case).
    if _unpicklable((values, shown)) is None:
        result.values, result.shown = values, shown
        return result
    for name, value in values.items():
        why = _unpicklable(value)
        if why is None:
            result.values[name] = value
        else:
            result.unsent[name] = why
    if shown is not None:
        if _unpicklable(shown) is None:
            result.shown = shown
        else:  # shown here, as text or a rich repr, since the value cannot travel
            _show(mime_bundle(shown))
    return result


def writable(value):
    """A read-only numpy array as a writable copy of its own, anything else itself. Arrays are
    mapped read-only from the store both ways: a cell's input it writes into (here), and a
    value a cell changed coming back to the notebook (``_magic``), where the notebook's own
    array was writable."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.ndarray) and not value.flags.writeable:
        return value.copy()
    return value


def _content_id(value) -> str | None:
    """The digest of ``value``'s encoding (arrays and tensors hashed in place, no copy), or
    None when it cannot be encoded (then it counts as changed)."""
    from .._codec import encode
    try:
        return encode(value).digest()
    except Exception:  # noqa: BLE001 - an unpicklable value: its own check reports it
        return None


def _returned(name: str, value):
    """What goes back for a bound name: a module by name, a value on the GPU as a handle (it
    stays in this executor: issue 29), anything else itself."""
    if isinstance(value, types.ModuleType):
        return ModuleName(value.__name__)
    if _resident.is_device_value(value):
        return _resident.keep(value, name)
    return value


def _unpicklable(value) -> str | None:
    """Why ``value`` cannot go back to the notebook, or None. Buffers (arrays, tensors) are
    not copied to find out: pickle protocol 5 hands them to the callback."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return None
    import cloudpickle
    try:
        cloudpickle.dumps(value, protocol=5, buffer_callback=lambda buffer: None)
    except Exception as exc:  # noqa: BLE001 - any failure means it stays on the cluster
        return f"a {type(value).__name__} cannot be pickled ({exc})"
    return None


def _show_figures() -> None:
    """Open matplotlib figures go to the cell as images and are closed, as the inline backend
    of a local kernel does."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    for number in pyplot.get_fignums():
        _show(figure_bundle(pyplot.figure(number)))
    pyplot.close("all")


def _show(bundle: dict) -> None:
    sys.stdout.flush()
    sys.stdout.write(display_line(bundle))
    sys.stdout.flush()
