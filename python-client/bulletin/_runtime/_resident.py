"""Values that stay in this executor between calls, named by ``bulletin.Resident`` handles.

An executor belongs to one user for its life (docs/DESIGN: tenancy), so this registry is that
user's: a handle of another user names nothing here, and resolving it fails as a lost value.
Each entry belongs to the client session whose call kept it (``in_session``): a notebook's names
are its own (two notebooks of a user may both bind ``model``), and ``drop_session`` forgets a
session's entries when it ends. Another session of the user may use a handle while its keeping
session lives.

- ``keep`` registers a value and returns its handle (the same handle again for the same
  object, so a cell that only used ``model`` in place hands back the handle it was given).
- ``resolving_handles`` resolves handles while a call's arguments are unpickled: from the
  registry (the object itself, 0 bytes moved), else from the object it was spilled to (the
  agent names the user's spill objects in the call: ``spilled``), else ResidentLostError.
- ``spill`` writes every value into one store object file (one pickle, so a model and the optimizer
  holding its parameters stay linked), frees them, and says which handles it holds; the agent
  calls it before it ends this executor for any reason other than the values' end.

Under ``--simulate-gpus`` (BULLETIN_SIMULATED_GPUS=1) there is no CUDA: torch tensors, modules
and optimizers on the CPU stand in for device values. That is a simulation, named so; the copy
on restore (decoding a read-only mapping) stands in for the host-to-device copy.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

from .._data._objects import encode, open_object, write_file
from .._resident import Resident, ResidentLostError, resolving
from ._gpu_share import release_cached_gpu_memory

SIMULATED = os.environ.get("BULLETIN_SIMULATED_GPUS") == "1"
_CAP = int(os.environ.get("BULLETIN_RESIDENT_MAX_BYTES", "0") or 0)  # 0: no cap


@dataclass
class _Entry:
    value: object
    handle: Resident
    session: str = ""  # the client session whose call kept it ("": the call named none)


_entries: dict[str, _Entry] = {}  # handle id -> entry
_by_object: dict[int, str] = {}  # id(value) -> handle id (entries hold the values alive)
# (session, the name a handle was last bound to in it) -> handle id
_by_name: dict[tuple[str, str], str] = {}
# The agent asks drop_session beside a running call (another Py4J thread): one at a time.
_lock = threading.RLock()
_session = ""  # the session of the call running now (one call at a time per executor)


@contextlib.contextmanager
def in_session(session: str):
    """While a call of ``session`` runs: what it keeps is that session's."""
    global _session
    _session = session or ""
    try:
        yield
    finally:
        _session = ""


def is_device_value(value) -> bool:
    """Whether ``value`` lives on a GPU (under simulation: a torch tensor, module, optimizer)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    if isinstance(value, torch.Tensor):
        return SIMULATED or value.is_cuda
    if isinstance(value, torch.nn.Module):
        return any(SIMULATED or t.is_cuda for t in _module_tensors(value))
    if isinstance(value, torch.optim.Optimizer):
        return any(SIMULATED or t.is_cuda for t in _optimizer_tensors(value))
    return False


def keep(value, name: str):
    """Registers ``value`` under ``name``; its handle (the value itself when keeping it would
    pass the user's cap). A handle already bound to ``name`` for another object is dropped (the
    notebook's name now holds the new handle)."""
    with _lock:
        return _keep(value, name)


def _keep(value, name: str):
    known = _by_object.get(id(value))
    if known is not None:
        _by_name[(_session, name)] = known
        return _entries[known].handle
    description = _describe(value)
    if 0 < _CAP < nbytes() + description[-1]:
        from .._status import format_bytes
        print(f"[bulletin] {name} comes back by value: keeping it on the GPU would pass your "
              f"cap of {format_bytes(_CAP)} kept there (the worker's --resident-user-bytes)",
              file=sys.stderr)
        return value
    handle = Resident(uuid.uuid4().hex, name, *description, gpus=_gpus(),
                      worker=os.environ.get("BULLETIN_EXECUTOR_ID", "").rpartition("-e")[0])
    _drop_name(name)
    _entries[handle.id] = _Entry(value, handle, _session)
    _by_object[id(value)] = handle.id
    _by_name[(_session, name)] = handle.id
    return handle


def forget_names(names) -> None:
    """The cell deleted these names: the values their handles held go."""
    with _lock:
        for name in names:
            _drop_name(name)


def drop_session(session: str) -> dict:
    """The session ended (or released its values): its entries go and their GPU memory is
    freed (a call of another session still using one holds it until that call ends).
    ``{"dropped": n, "keeps": bytes still kept}``."""
    with _lock:
        gone = [h for h, entry in _entries.items() if entry.session == session]
        for handle_id in gone:
            _by_object.pop(id(_entries.pop(handle_id).value), None)
        for key in [key for key, h in _by_name.items() if key[0] == session or h in gone]:
            del _by_name[key]
        kept = keeps()
    if gone:
        gc.collect()  # a module and its optimizer may hold each other: free them now
        release_cached_gpu_memory()
    return {"dropped": len(gone), "keeps": kept}


def resolving_handles(spilled: dict[str, str], dropped: dict[str, str]):
    """The context in which a call's arguments are unpickled: handles become values."""
    return resolving(lambda handle_id: resolve(handle_id, spilled, dropped))


def resolve(handle_id: str, spilled: dict[str, str], dropped: dict[str, str]):
    with _lock:
        return _resolve(handle_id, spilled, dropped)


def _resolve(handle_id: str, spilled: dict[str, str], dropped: dict[str, str]):
    entry = _entries.get(handle_id)
    if entry is not None:
        return entry.value
    path = spilled.get(handle_id)
    if path is None:
        why = dropped.get(handle_id, "it is another user's, its session ended, or it was kept "
                                     "on another host")
        raise ResidentLostError(
            f"resident value {handle_id[:12]} is not on the cluster any more: {why}. Run the "
            "cell that made it again")
    _restore(path)
    return _entries[handle_id].value


def spill(path: str) -> dict | None:
    """Writes every value into one object file at ``path`` (the agent publishes it; a file
    there already, at least the object's size, is a pre-faulted one it staged) and frees them:
    ``{"id", "size", "handles", "sessions"}`` (each handle's session), or None when nothing is
    kept here."""
    with _lock:
        return _spill(path)


def _spill(path: str) -> dict | None:
    if not _entries:
        return None
    sessions = {h: entry.session for h, entry in _entries.items()}
    payload = {"handles": {h: entry.handle._fields() for h, entry in _entries.items()},
               "values": {h: entry.value for h, entry in _entries.items()},
               "sessions": sessions}
    encoded = encode(payload)  # the codec copies device tensors to the host (_codec._pickle)
    try:  # the agent stages a pre-faulted file of the store's arena when it has one
        staged = os.stat(path).st_size >= encoded.nbytes
        if not staged:
            os.unlink(path)  # too small for it, or left by an earlier attempt
    except FileNotFoundError:
        staged = False
    write_file(Path(path), encoded, digesting=True, staged=staged)
    spilled = {"id": encoded.digest(), "size": encoded.nbytes, "handles": list(_entries),
               "sessions": sessions}
    _entries.clear()
    _by_object.clear()
    _by_name.clear()
    del payload, encoded
    release_cached_gpu_memory()
    return spilled


def host_copy(value):
    """A copy of ``value`` on the host, the value itself untouched (``Resident.fetch``)."""
    import copy
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach().cpu() if value.is_cuda else value
    if torch is not None and isinstance(value, torch.nn.Module) and not SIMULATED:
        return copy.deepcopy(value).cpu()
    return value  # pickling it back copies it (the codec moves tensors to the host)


def keeps() -> int:
    """The bytes kept here (0: none): the agent stages that much memory for a spill."""
    return nbytes() if _entries else 0


def nbytes() -> int:
    """The bytes this executor keeps (the caps count them)."""
    with _lock:
        return sum(entry.handle.nbytes for entry in _entries.values())


def _restore(path: str) -> None:
    """Loads a spill object: every handle in it comes back (they were spilled together)."""
    payload = open_object(path)
    sessions = payload.get("sessions", {})  # a spill of an older executor names none
    for handle_id, fields in payload["handles"].items():
        if handle_id in _entries:
            continue
        handle = Resident(*fields)
        value = _to_device(payload["values"][handle_id], handle.device)
        session = sessions.get(handle_id, "")
        _entries[handle_id] = _Entry(value, handle, session)
        _by_object[id(value)] = handle_id
        _by_name.setdefault((session, handle.name), handle_id)


def _to_device(value, device: str):
    """Back on its device (under simulation it is there: the decode copied it out of the
    read-only mapping, which stands in for the copy to the device)."""
    if SIMULATED or device == "cpu":
        return value
    torch = sys.modules["torch"]
    visible = "cuda" if torch.cuda.is_available() else "cpu"  # the GPU this executor has
    if isinstance(value, torch.Tensor):
        return value.to(visible)
    if isinstance(value, torch.nn.Module):
        return value.to(visible)
    if isinstance(value, torch.optim.Optimizer):
        for state in value.state.values():
            for key, item in state.items():
                if isinstance(item, torch.Tensor):
                    state[key] = item.to(visible)
    return value


def _drop_name(name: str) -> None:
    """The running call's session no longer binds ``name``."""
    old = _by_name.pop((_session, name), None)
    if old is not None and old not in _by_name.values():
        entry = _entries.pop(old, None)
        if entry is not None:
            _by_object.pop(id(entry.value), None)


def _describe(value) -> tuple:
    """(kind, shape, dtype, device, nbytes) of a value, for its handle."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), str(value.dtype).removeprefix("torch."),
                _device(value), value.nbytes)
    tensors = (_module_tensors(value) if torch is not None and isinstance(value, torch.nn.Module)
               else _optimizer_tensors(value) if torch is not None
               and isinstance(value, torch.optim.Optimizer) else [])
    device = _device(tensors[0]) if tensors else "cpu"
    return (type(value).__name__, None, "", device, sum(t.nbytes for t in tensors))


def _device(tensor) -> str:
    return f"{tensor.device} (simulated GPU)" if SIMULATED else str(tensor.device)


def _gpus() -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return len(visible.split(",")) if visible else 1


def _module_tensors(module) -> list:
    return list(module.parameters()) + list(module.buffers())


def _optimizer_tensors(optimizer) -> list:
    found = [t for state in optimizer.state.values() for t in state.values()
             if hasattr(t, "is_cuda")]
    return found or [p for group in optimizer.param_groups for p in group["params"]]
