"""The ``pickle`` kind: cloudpickle protocol 5 with out-of-band buffers.

Stream layout: one record batch of one row; column ``pickle`` (large_binary) holds the pickle
stream, columns ``buffer_0`` .. ``buffer_{k-1}`` (large_binary) hold the out-of-band buffers in
the order the pickler produced them. Each value is its own Arrow buffer starting on a 64-byte
boundary of the stream. Buffers smaller than ``OUT_OF_BAND_MIN`` stay inside the pickle stream.

numpy arrays already pickle their memory as ``PickleBuffer`` under protocol 5. torch tensors do
not (plain pickling of a tensor goes through ``torch.save`` into the pickle bytes), so the pickler
here reduces strided torch tensors and Parameters itself: the tensor's bytes become one
``PickleBuffer`` and ``_rebuild_torch`` makes a tensor over the buffer on the other side. A CUDA
tensor is reduced from its CPU copy and arrives as a CPU tensor; a non-contiguous tensor is
made contiguous (one copy at encode). Two distinct tensors that share storage (views) travel
as two buffers.
"""

from __future__ import annotations

import collections
import io
import pickle
import sys
import types

import cloudpickle
import numpy as np
import pyarrow as pa

from ._encoded import copy_across_threads
from ._ipc import BodyLayout, FieldNode
from ._tensor import plain_torch_tensor

PROTOCOL = 5
OUT_OF_BAND_MIN = 4096


def _rebuild_torch(buffer, dtype_name: str, shape: tuple, requires_grad: bool, parameter: bool):
    import torch

    dtype = getattr(torch, dtype_name)
    view = memoryview(buffer)
    if view.nbytes == 0:
        t = torch.empty(shape, dtype=dtype)
    elif view.readonly:
        # torch has no read-only tensors (a write into a read-only mapping would crash the
        # process), so a read-only buffer is copied once, into the tensor's own memory.
        raw = torch.empty(view.nbytes, dtype=torch.uint8)
        copy_across_threads(raw.numpy(), np.frombuffer(view, dtype=np.uint8))
        t = raw.view(dtype).reshape(shape)
    else:  # a writable one is shared
        t = torch.frombuffer(buffer, dtype=torch.uint8).view(dtype).reshape(shape)
    if parameter:
        return torch.nn.Parameter(t, requires_grad=requires_grad)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _reduce_torch(t):
    torch = sys.modules["torch"]
    cpu = t.detach()
    if cpu.device.type != "cpu":
        cpu = cpu.cpu()
    cpu = cpu.resolve_conj().resolve_neg().contiguous()
    raw = cpu.reshape(-1).view(torch.uint8).numpy() if cpu.numel() else np.empty(0, np.uint8)
    args = (pickle.PickleBuffer(raw), str(t.dtype).removeprefix("torch."), tuple(t.shape),
            bool(t.requires_grad), type(t) is torch.nn.Parameter)
    return _rebuild_torch, args


_DYNAMIC_CODE = "<dynamic-code>"


def _code_keeping_its_file(code):
    """cloudpickle from 3.1.3 names the file of every code object it pickles "<dynamic-code>"
    (a payload that does not depend on where a function was defined): a remote traceback then
    has no file and no source lines to show. bulletin keeps the file's name, which it needs
    more than a payload that is the same for the same function in two files."""
    reduced = cloudpickle.cloudpickle._code_reduce(code)
    args = tuple(code.co_filename if type(a) is str and a == _DYNAMIC_CODE else a
                 for a in reduced[1])
    return (reduced[0], args, *reduced[2:])


def _dispatch_table():
    """cloudpickle's reducers, with its code reducer keeping the file name (see above) where
    it is the one that drops it."""
    table = cloudpickle.Pickler.dispatch_table
    if getattr(cloudpickle.cloudpickle, "_code_reduce", None) is not table.get(types.CodeType):
        return table  # another cloudpickle than the one this was written against: as it is
    return collections.ChainMap({types.CodeType: _code_keeping_its_file}, table)


class _Pickler(cloudpickle.Pickler):
    dispatch_table = _dispatch_table()

    def reducer_override(self, obj):
        torch = sys.modules.get("torch")
        if (torch is not None and type(obj) in (torch.Tensor, torch.nn.Parameter)
                and plain_torch_tensor(obj)):
            return _reduce_torch(obj)
        return super().reducer_override(obj)


def dumps(obj) -> tuple[bytes, list[memoryview]]:
    """The pickle stream and the out-of-band buffers (views of the objects' own memory)."""
    buffers: list[memoryview] = []

    def keep(buffer: pickle.PickleBuffer):
        try:
            raw = buffer.raw()
        except BufferError:  # not contiguous: only pickle itself can serialize it (in band)
            return True
        if raw.nbytes < OUT_OF_BAND_MIN:
            return True  # in band
        buffers.append(raw)
        return False

    out = io.BytesIO()
    _Pickler(out, protocol=PROTOCOL, buffer_callback=keep).dump(obj)
    return out.getvalue(), buffers


class PicklePlan:
    """The record batch of one pickle: the stream, then each out-of-band buffer, from
    :func:`dumps`."""

    def __init__(self, data: bytes, buffers: list[memoryview]) -> None:
        names = ["pickle"] + [f"buffer_{i}" for i in range(len(buffers))]
        self.fields = [pa.field(name, pa.large_binary(), nullable=False) for name in names]
        self.nodes = [FieldNode(1) for _ in names]
        self.length = 1
        self.metadata = {
            "bulletin.pickle.protocol": str(PROTOCOL),
            "bulletin.pickle.buffers": str(len(buffers)),
        }
        self.pickle_nbytes = len(data)
        body = BodyLayout()
        for value in [data, *buffers]:
            n = len(value) if isinstance(value, bytes) else value.nbytes
            body.empty()
            body.add(np.array([0, n], dtype="<i8").tobytes(), 16)
            body.add(value, n)
        self.body = body


def decode_pickle(batch: pa.RecordBatch, region):
    values = [region(column.buffers()[2]) for column in batch.columns]
    data = values[0] if values[0] is not None else b""
    buffers = [b if b is not None else b"" for b in values[1:]]
    return pickle.loads(data, buffers=buffers)
