"""The Arrow encoding of objects (the Python side of arrow-bridge).

    enc = encode(obj)              # holds references; copies no payload
    enc.kind, enc.nbytes           # "tensor" | "table" | "pickle", exact stream size
    enc.write_into(mapped_file)    # one copy of each payload byte
    enc.iter_chunks(1 << 22)       # the same bytes, for streaming
    enc.digest()                   # content id
    obj2 = decode(buffer)          # zero copy where the layout allows

Format (version 1): every object is one Arrow IPC *stream*: a schema message, record batch
messages, the end-of-stream marker. The schema's custom metadata always holds

    bulletin.kind    "tensor" | "table" | "pickle"
    bulletin.format  "1"

so a reader (the Java store) learns what an object is from the first message alone. The kinds:

- ``tensor`` (numpy arrays, CPU torch tensors): see ``_tensor``; keys ``bulletin.dtype`` (numpy
  dtype string, e.g. "<f4"), ``bulletin.shape`` (JSON list, the logical shape) and
  ``bulletin.memory_order`` (JSON list: the axes from outermost to innermost in memory; the
  payload is ``arr.transpose(memory_order)`` in C order),
  ``bulletin.layout`` ("fixed_shape_tensor" | "values"), ``bulletin.framework`` ("numpy" |
  "torch") and for torch ``bulletin.torch.dtype``, ``bulletin.torch.requires_grad``,
  ``bulletin.torch.device`` (where it came from: a CUDA tensor is encoded as its CPU copy and
  decodes as a CPU tensor). Payload buffers start on 64-byte boundaries of the stream.
- ``table`` (pyarrow Table/RecordBatch, pandas DataFrame, datasets.Dataset): see ``_table``; key
  ``bulletin.table.type`` names the type to rebuild. pyarrow's writer lays out the body
  (8-byte alignment), dictionaries included.
- ``pickle`` (anything else, and arrays whose dtype Arrow cannot hold): see ``_pickle``; keys
  ``bulletin.pickle.protocol`` ("5") and ``bulletin.pickle.buffers`` (the count of out-of-band
  buffers); each out-of-band buffer is its own 64-byte aligned Arrow buffer.

Content id: ``digest()`` depends on the complete stream bytes (exactly ``Encoded.nbytes`` of
them) and nothing else; equal bytes give equal ids. Under 64 MiB it is the lowercase hex of
XXH3-128 (seed 0) over the bytes; from 64 MiB on, of a one-level hash tree over their 8 MiB
pieces, hashed on several threads (``_encoded``'s module doc says exactly how).

Zero copy on read: ``decode`` wraps its argument without copying; decoded arrays, Arrow
columns and pickled numpy arrays are views of it and keep it alive. They are read-only when the
buffer is (``bytes``, a read-only mapping) and writable when it is writable: ``map_file`` maps a
file copy-on-write, so writes to a decoded array stay private and never reach the file. torch
has no read-only tensors, so a torch tensor decoded from a read-only buffer is a copy.

Trust: decoding a ``pickle`` object runs code, like ``pickle.loads``: decode only objects of
the same user (the store namespaces objects per user).
"""

from __future__ import annotations

import mmap
import os
import struct
from typing import Any

import numpy as np
import pyarrow as pa

from .._errors import BulletinError, SerializationError
from . import _pickle, _table, _tensor
from ._encoded import Encoded
from ._ipc import ALIGNMENT, EOS, PAGE, PAGE_ALIGNED_BODY, pad_to, record_batch_header

__all__ = ["FORMAT_VERSION", "CodecError", "Encoded", "decode", "encode", "map_file",
           "peek_kind"]

FORMAT_VERSION = 1
KINDS = ("tensor", "table", "pickle")


class CodecError(BulletinError, ValueError):
    """Bytes that are not a bulletin object this version can read."""


def _base_metadata(kind: str) -> dict[str, str]:
    return {"bulletin.kind": kind, "bulletin.format": str(FORMAT_VERSION)}


# Serialized schema messages of pickles, by (buffer count, reason): a small call's pickle has the
# same schema every time, and building and serializing it costs more than pickling the call.
_PICKLE_SCHEMAS: dict[tuple, pa.Buffer] = {}
# Parsed schemas of streams read, by the schema message's exact bytes: a reader that sees the
# same small object kind again and again (results, arguments) parses it once.
_READ_SCHEMAS: dict[bytes, tuple[pa.Schema, dict[str, str]]] = {}
_SCHEMA_CACHE_ENTRIES = 256
_CACHED_SCHEMA_MAX_BYTES = 4096


def _remember(cache: dict, key, value) -> None:
    if len(cache) >= _SCHEMA_CACHE_ENTRIES:
        cache.clear()  # a bound, not an LRU: a few shapes repeat, a stream of new ones does not
    cache[key] = value


def _schema_message(kind: str, plan, metadata: dict[str, str]) -> pa.Buffer:
    if kind != "pickle":  # tensors' fields carry dtype and shape: built each time
        return pa.schema(plan.fields, metadata=metadata).serialize()
    key = (len(plan.fields), metadata.get("bulletin.pickle.reason"))
    message = _PICKLE_SCHEMAS.get(key)
    if message is None:
        message = pa.schema(plan.fields, metadata=metadata).serialize()
        _remember(_PICKLE_SCHEMAS, key, message)
    return message


def _assemble(kind: str, plan) -> Encoded:
    metadata = {**_base_metadata(kind), **plan.metadata}
    schema_message = _schema_message(kind, plan, metadata)
    body_length = plan.body.finish()
    header = record_batch_header(
        schema_message.size, plan.length, plan.nodes, plan.body.buffers, body_length,
        PAGE if kind == "tensor" and body_length >= PAGE_ALIGNED_BODY else ALIGNMENT)
    segments: list = [schema_message, header]
    for piece in plan.body.pieces:
        segments.append(bytes(piece[1]) if piece[0] == "pad" else piece[1])
    segments.append(EOS)
    return Encoded(kind, segments, metadata)


# A small pickle's stream, by the pickle's length: everything before the pickle's bytes,
# everything after them, and the schema's metadata. A call's arguments and a small result are
# such pickles, and building their stream piece by piece (fields, body layout, header, joined
# segments) cost more than pickling them: a third of a client's CPU per call in a map.
_SMALL_PICKLES: dict[int, tuple[bytes, bytes, dict[str, str]]] = {}
_SMALL_PICKLE_BYTES = 4096


def _small_pickle(data: bytes) -> Encoded:
    """The stream of a pickle without out-of-band buffers: the same bytes as the general way,
    whose frame, built once per length, is kept."""
    frame = _SMALL_PICKLES.get(len(data))
    if frame is None:
        encoded = _assemble("pickle", _pickle.PicklePlan(data, []))
        whole = encoded.to_bytes()
        start = len(whole) - len(data) - pad_to(len(data), 8) - len(EOS)  # the pickle is last
        frame = (whole[:start], whole[start + len(data):], encoded.metadata)
        _remember(_SMALL_PICKLES, len(data), frame)
    return Encoded("pickle", [frame[0] + data + frame[1]], frame[2])


def _encode_pickle(obj: Any, reason: str | None = None) -> Encoded:
    try:
        data, buffers = _pickle.dumps(obj)
    except Exception as exc:
        what = type(obj).__module__ + "." + type(obj).__qualname__
        raise SerializationError(
            f"a {what} cannot be encoded: pickling it failed with {type(exc).__name__}: {exc}. "
            "Pass something picklable instead (e.g. a path, or the data it holds)."
        ) from exc
    if not buffers and not reason and len(data) <= _SMALL_PICKLE_BYTES:
        return _small_pickle(data)
    plan = _pickle.PicklePlan(data, buffers)
    if reason:
        plan.metadata["bulletin.pickle.reason"] = reason
    return _assemble("pickle", plan)


def encode(obj: Any) -> Encoded:
    """Serializes ``obj`` as an Arrow IPC stream held by reference (see the module doc)."""
    if type(obj) is np.ndarray or type(obj) is np.memmap:  # a memmap decodes as an ndarray
        plan = _tensor.tensor_from_numpy(obj)
        if plan is not None:
            return _assemble("tensor", plan)
        return _encode_pickle(obj, f"numpy dtype {obj.dtype} has no Arrow tensor type")
    if _tensor.is_torch_tensor(obj):
        plan = _tensor.tensor_from_torch(obj)
        if plan is not None:
            return _assemble("tensor", plan)
        return _encode_pickle(obj, f"torch tensor of {obj.dtype} ({obj.layout}) is not an "
                                   "Arrow tensor")
    table_type = _table.table_type(obj)
    if table_type is not None:
        metadata = {**_base_metadata("table"), "bulletin.table.type": table_type}
        data = _table.to_arrow(obj, table_type)
        return Encoded("table", _table.write_stream(data, metadata), metadata)
    return _encode_pickle(obj)


# -- reading --------------------------------------------------------------------------------------

def _as_buffer(buf: Any) -> pa.Buffer:
    if isinstance(buf, pa.Buffer):
        return buf
    if isinstance(buf, pa.MemoryMappedFile):
        # The whole file from offset 0. Not read_buffer(size): pyarrow advises the kernel
        # (madvise WILLNEED) over the range read, which costs ~0.7 ms per GiB. A tiny read gives
        # the mapping's address and holds the mapped region alive (even after the file is
        # closed); the buffer over the whole file is then built from that address.
        position = buf.tell()
        try:
            size = buf.size()
            if size == 0:
                raise CodecError("the mapped file is empty: not a bulletin object")
            buf.seek(0)
            head = buf.read_buffer(min(size, 8))
        finally:
            buf.seek(position)
        return pa.foreign_buffer(head.address, size, base=head)
    if isinstance(buf, Encoded):
        raise TypeError("decode takes the serialized bytes; for an Encoded use "
                        "decode(enc.to_bytes()) or write it into a buffer first")
    try:
        return pa.py_buffer(buf)
    except TypeError:
        raise TypeError(f"decode takes a pyarrow.Buffer, a pyarrow.MemoryMappedFile, bytes or "
                        f"any object with the buffer protocol, not a {type(buf).__name__}")


def _bulletin_metadata(schema: pa.Schema) -> dict[str, str]:
    raw = schema.metadata or {}
    meta = {k.decode(): v.decode() for k, v in raw.items() if k.startswith(b"bulletin.")}
    kind = meta.get("bulletin.kind")
    if kind is None:
        raise CodecError("this Arrow stream is not a bulletin object: its schema has no "
                         "bulletin.kind metadata (was it written by bulletin's encode?)")
    version = meta.get("bulletin.format")
    if version != str(FORMAT_VERSION):
        raise CodecError(f"bulletin object format {version!r} cannot be read by this version, "
                         f"which reads format {FORMAT_VERSION}: use the same bulletin version "
                         "on both sides")
    if kind not in KINDS:
        raise CodecError(f"unknown bulletin.kind {kind!r}; this version reads {list(KINDS)}")
    return meta


def _open(buffer: pa.Buffer) -> pa.ipc.RecordBatchStreamReader:
    try:
        return pa.ipc.open_stream(buffer)
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as exc:
        raise CodecError(f"not a bulletin object ({buffer.size} bytes are not an Arrow IPC "
                         f"stream: {exc})") from exc


def _read_only(part: pa.Buffer | None):
    return part


def _writable_regions(buffer: pa.Buffer):
    """pyarrow's reader hands out immutable slices even of a mutable buffer: the same bytes as
    writable memoryviews of the caller's buffer (still no copy)."""
    whole = memoryview(buffer)
    base, end = buffer.address, buffer.address + buffer.size

    def region(part: pa.Buffer | None):
        if part is None or not (base <= part.address and part.address + part.size <= end):
            return part  # not inside the buffer (pyarrow copied it): keep pyarrow's
        start = part.address - base
        return whole[start:start + part.size]

    return region


def _schema_bytes(buffer: pa.Buffer) -> bytes | None:
    """The schema message (continuation, length, flatbuffer) at the start of a stream, when it
    is small enough to key the cache of read schemas; None otherwise."""
    if buffer.size < 8:
        return None
    continuation, length = struct.unpack_from("<Ii", buffer)
    if continuation != 0xFFFFFFFF or not 0 < length <= _CACHED_SCHEMA_MAX_BYTES \
            or 8 + length > buffer.size:
        return None
    return memoryview(buffer)[:8 + length].tobytes()


def _first_batch(buffer: pa.Buffer) -> tuple[dict[str, str], Any]:
    """The stream's bulletin metadata and its first record batch (or, for a table, its reader);
    a schema seen before is not parsed again."""
    key = _schema_bytes(buffer)
    cached = _READ_SCHEMAS.get(key) if key is not None else None
    if cached is not None:
        schema, meta = cached
        return meta, pa.ipc.read_record_batch(buffer.slice(len(key)), schema)
    reader = _open(buffer)
    meta = _bulletin_metadata(reader.schema)
    if meta["bulletin.kind"] == "table":  # dictionaries and many batches: the reader's job
        return meta, reader
    if key is not None:
        _remember(_READ_SCHEMAS, key, (reader.schema, meta))
    return meta, reader.read_next_batch()


def decode(buf: Any) -> Any:
    """Rebuilds the object from its stream (see the module doc for what is shared, not copied)."""
    buffer = _as_buffer(buf)
    try:
        meta, batch = _first_batch(buffer)
    except (pa.ArrowInvalid, OSError, EOFError, StopIteration) as exc:
        raise CodecError(f"corrupt bulletin object: {type(exc).__name__}: {exc}") from exc
    kind = meta["bulletin.kind"]
    try:
        if kind == "table":
            return _table.decode_table(batch, meta.get("bulletin.table.type", ""))
        region = _writable_regions(buffer) if buffer.is_mutable else _read_only
        if kind == "tensor":
            return _tensor.decode_tensor(batch, meta, region)
        return _pickle.decode_pickle(batch, region)
    except (pa.ArrowInvalid, StopIteration, KeyError, IndexError) as exc:
        raise CodecError(f"corrupt bulletin {kind} object: {type(exc).__name__}: {exc}") from exc


def peek_kind(buf: Any) -> str:
    """The object's kind, from the schema message alone (the payload is not read)."""
    if isinstance(buf, pa.NativeFile):
        position = buf.tell()
        try:
            buf.seek(0)
            message = pa.ipc.read_message(buf)
        except (pa.ArrowInvalid, OSError) as exc:
            raise CodecError(f"not a bulletin object: {exc}") from exc
        finally:
            buf.seek(position)
    else:
        try:
            message = pa.ipc.read_message(_as_buffer(buf))
        except (pa.ArrowInvalid, OSError) as exc:
            raise CodecError(f"not a bulletin object: {exc}") from exc
    if message.type != "schema":
        raise CodecError(f"not a bulletin object: its first Arrow message is a {message.type}, "
                         "not a schema")
    return _bulletin_metadata(pa.ipc.read_schema(message))["bulletin.kind"]


def map_file(path: str | os.PathLike) -> pa.Buffer:
    """Maps a stored object copy-on-write: zero copy, and ``decode`` of the result gives
    writable arrays and shared (not copied) torch tensors whose writes never reach the file.
    The mapping lives as long as the buffer or anything decoded from it."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise CodecError(f"{path} is empty: not a bulletin object")
        mapped = mmap.mmap(f.fileno(), size, flags=mmap.MAP_PRIVATE,
                           prot=mmap.PROT_READ | mmap.PROT_WRITE)
    return pa.py_buffer(mapped)
