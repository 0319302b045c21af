"""The ``tensor`` kind: numpy arrays and CPU torch tensors as one Arrow record batch.

Layout of the stream (schema metadata keys are listed in ``bulletin._codec``):

- ``ndim >= 2``: one column ``tensor`` of the canonical extension type
  ``arrow.fixed_shape_tensor`` (storage ``fixed_size_list<value_type>[list_size]``; its ``shape``
  is the physical one and its ``permutation`` maps it to the logical one, as the Arrow spec and
  pyarrow define them). When the outermost axis in memory is axis 0 (C order, or any layout that
  only permutes the other axes) a row is one ``arr[i]``: ``rows = arr.shape[0]``; otherwise
  (Fortran order, a transpose that moves axis 0 inward) the whole array is one row. The
  ``permutation`` records a dense but permuted layout, so a transposed or Fortran-ordered array
  is written in its own memory order (no transposing copy on encode) and decodes to a view with
  the same strides.
- ``ndim <= 1``, or a tensor whose row holds more than 2**31 - 1 elements (``list_size`` is an
  int32 in Arrow): one plain column ``values`` holding every element in memory order.
- An array that is not one dense block (stepped slices, negative strides) is copied to C order:
  by ``write_into`` straight into the destination, never into a temporary.

The decoder does not depend on which column type was chosen: it takes the leaf values buffer and
rebuilds the array from ``bulletin.dtype``, ``bulletin.shape`` and ``bulletin.memory_order``, as a
view of the buffer (read-only when the buffer is, writable otherwise).

Element types: signed and unsigned integers, float16/32/64, and datetime64/timedelta64 in
s/ms/us/ns (Arrow timestamp/duration). Everything else (bool, which Arrow bit-packs; complex;
datetime64 in days; strings; objects; records; bfloat16; non-native byte order) is not a tensor:
``tensor_from_numpy``/``tensor_from_torch`` return None and the object goes through the pickle
kind, which still carries the array bytes out of band without copying them.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import numpy as np
import pyarrow as pa

from ._encoded import StridedSegment
from ._ipc import BodyLayout, FieldNode

_INT32_MAX = 2**31 - 1
_TIME_UNITS = ("s", "ms", "us", "ns")


def arrow_value_type(dtype: np.dtype) -> pa.DataType | None:
    """The Arrow type with the same bytes as ``dtype``, or None when Arrow has none."""
    if dtype.itemsize > 1 and not dtype.isnative:
        return None
    if dtype.kind in "iu" and dtype.itemsize in (1, 2, 4, 8):
        return pa.from_numpy_dtype(dtype)
    if dtype.kind == "f" and dtype.itemsize in (2, 4, 8):
        return pa.from_numpy_dtype(dtype)
    if dtype.kind in "Mm":
        unit, count = np.datetime_data(dtype)
        if unit in _TIME_UNITS and count == 1:
            return pa.timestamp(unit) if dtype.kind == "M" else pa.duration(unit)
    return None


def _dense_permutation(arr: np.ndarray) -> list[int] | None:
    """The axis order in which ``arr`` is one C-contiguous block (``arr.transpose(perm)`` is
    C-contiguous), or None when its memory is not dense."""
    nd = arr.ndim
    if arr.flags.c_contiguous or arr.size == 0:
        return list(range(nd))
    # Axes of length 1 do not move through memory: put them first, in order.
    trivial = [i for i in range(nd) if arr.shape[i] == 1]
    order = sorted((i for i in range(nd) if arr.shape[i] > 1), key=lambda i: -arr.strides[i])
    expected = arr.itemsize
    for axis in reversed(order):
        if arr.strides[axis] != expected:
            return None
        expected *= arr.shape[axis]
    return trivial + order


class TensorPlan:
    """How one array is laid out in the stream: schema, record batch nodes and body pieces."""

    def __init__(self, arr: np.ndarray, value_type: pa.DataType, extra: dict[str, str]) -> None:
        perm = _dense_permutation(arr)
        if perm is None:
            payload: Any = StridedSegment(arr)
            perm = list(range(arr.ndim))
        else:
            physical = arr.transpose(perm)
            payload = physical.reshape(-1).view(np.uint8) if arr.size else b""
        shape = list(arr.shape)
        self.metadata = {
            "bulletin.dtype": arr.dtype.str,
            "bulletin.shape": json.dumps(shape),
            "bulletin.memory_order": json.dumps(perm),
            **extra,
        }
        body = BodyLayout()
        if arr.ndim >= 2 and perm[0] == 0 and math.prod(shape[1:]) <= _INT32_MAX:
            rows, element_shape, element_perm = shape[0], shape[1:], [p - 1 for p in perm[1:]]
        elif arr.ndim >= 2 and arr.size <= _INT32_MAX:
            rows, element_shape, element_perm = 1, shape, perm
        else:
            rows = None
        if rows is None:
            self.metadata["bulletin.layout"] = "values"
            field = pa.field("values", value_type, nullable=False)
            self.nodes = [FieldNode(arr.size)]
            self.length = arr.size
            body.empty()
        else:
            self.metadata["bulletin.layout"] = "fixed_shape_tensor"
            # Arrow's shape is the physical one and its permutation maps physical axes to
            # logical ones (logical = physical.transpose(permutation)): the inverse of ours.
            physical_shape = [element_shape[p] for p in element_perm]
            arrow_perm = [int(i) for i in np.argsort(element_perm)]
            identity = element_perm == list(range(len(element_perm)))
            tensor_type = pa.fixed_shape_tensor(value_type, physical_shape,
                                                permutation=None if identity else arrow_perm)
            field = pa.field("tensor", tensor_type, nullable=False)
            self.nodes = [FieldNode(rows), FieldNode(arr.size)]
            self.length = rows
            body.empty()
            body.empty()
        body.add(payload, arr.nbytes)
        self.body = body
        self.fields = [field]


def tensor_from_numpy(arr: np.ndarray) -> TensorPlan | None:
    value_type = arrow_value_type(arr.dtype)
    if value_type is None:
        return None
    return TensorPlan(arr, value_type, {"bulletin.framework": "numpy"})


def _torch():
    return sys.modules.get("torch")


def is_torch_tensor(obj: Any) -> bool:
    torch = _torch()
    return torch is not None and type(obj) is torch.Tensor


def plain_torch_tensor(t) -> bool:
    """A strided tensor of real numbers that numpy can view (no sparse, quantized, nested,
    named or meta tensors: those keep torch's own pickling)."""
    torch = _torch()
    return (t.layout == torch.strided and not t.is_quantized and not t.is_nested
            and t.device.type != "meta" and not any(getattr(t, "names", None) or ()))


def tensor_from_torch(t) -> TensorPlan | None:
    """A CUDA (or other device) tensor is encoded as its CPU copy and decodes as a CPU tensor."""
    if not plain_torch_tensor(t) or t.is_complex() or t.dtype == _torch().bool:
        return None
    device = str(t.device)
    cpu = t.detach()
    if cpu.device.type != "cpu":
        cpu = cpu.cpu()
    try:
        arr = cpu.numpy()
    except (TypeError, RuntimeError):  # bfloat16, float8 and other types numpy lacks
        return None
    value_type = arrow_value_type(arr.dtype)
    if value_type is None:
        return None
    extra = {
        "bulletin.framework": "torch",
        "bulletin.torch.dtype": str(t.dtype).removeprefix("torch."),
        "bulletin.torch.requires_grad": "1" if t.requires_grad else "0",
        "bulletin.torch.device": device,
    }
    return TensorPlan(arr, value_type, extra)


def decode_tensor(batch: pa.RecordBatch, meta: dict[str, str], region):
    """``region`` maps an Arrow buffer of the batch to the memory to view (a writable view of
    the caller's buffer when it is writable)."""
    dtype = np.dtype(meta["bulletin.dtype"])
    shape = json.loads(meta["bulletin.shape"])
    perm = json.loads(meta["bulletin.memory_order"])
    count = math.prod(shape)
    column = batch.column(0)
    if isinstance(column, pa.ExtensionArray):
        column = column.storage
    if pa.types.is_fixed_size_list(column.type):
        column = column.values
    if count == 0:
        arr = np.empty(shape, dtype=dtype)
    else:
        values = region(column.buffers()[1])
        flat = np.frombuffer(values, dtype=dtype, count=count)
        physical = flat.reshape([shape[p] for p in perm])
        arr = physical.transpose(np.argsort(perm)) if perm != sorted(perm) else physical
    if meta.get("bulletin.framework") != "torch":
        return arr
    return _to_torch(arr, meta)


def _to_torch(arr: np.ndarray, meta: dict[str, str]):
    import torch

    if not arr.flags.writeable:
        # torch has no read-only tensors: a view of a read-only mapping would crash the process
        # on the first in-place write, so a read-only buffer costs one copy (layout kept).
        arr = np.array(arr, order="K", copy=True)
    t = torch.from_numpy(arr)
    expected = getattr(torch, meta.get("bulletin.torch.dtype", ""), None)
    if expected is not None and t.dtype != expected:
        raise ValueError(f"tensor dtype mismatch: stored {expected}, decoded {t.dtype}")
    if meta.get("bulletin.torch.requires_grad") == "1":
        t.requires_grad_(True)
    return t
