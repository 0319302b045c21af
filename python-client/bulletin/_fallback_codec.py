"""A stand-in for ``bulletin._codec`` until the Arrow codec lands (same API, fewer kinds).

Every object becomes an Arrow IPC stream whose schema carries ``bulletin.kind`` = "pickle" and
``bulletin.format``: one record batch of length-1 ``large_binary`` columns, the first holding a
cloudpickle protocol-5 stream and the others its out-of-band buffers (numpy arrays' bytes are
never copied into the pickle). Decoding maps those buffers, so arrays come back zero copy.
"""

from __future__ import annotations

import pickle

import cloudpickle
import numpy as np
import pyarrow as pa
import xxhash

FORMAT = "bulletin-fallback-1"
_SCHEMA_METADATA = {"bulletin.kind": "pickle", "bulletin.format": FORMAT}


def _column(view) -> pa.Array:
    data = pa.py_buffer(view)
    offsets = pa.py_buffer(np.array([0, data.size], dtype=np.int64))
    return pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, data])


class _HashSink:
    """A file-like sink that hashes what pyarrow writes into it, without keeping it."""

    def __init__(self):
        self.hasher = xxhash.xxh3_128()
        self.closed = False

    def write(self, data) -> int:
        self.hasher.update(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


class Encoded:
    """An encoded object: ``kind``, ``nbytes``, and ways to write or hash its bytes."""

    def __init__(self, batch: pa.RecordBatch, kind: str = "pickle"):
        self.kind = kind
        self._batch = batch
        mock = pa.MockOutputStream()
        self._write(mock)
        self.nbytes = mock.size()
        self._digest: str | None = None

    def _write(self, sink) -> None:
        with pa.ipc.new_stream(sink, self._batch.schema) as writer:
            writer.write_batch(self._batch)

    def write_into(self, view: memoryview) -> None:
        """Writes the bytes into a writable buffer of at least ``nbytes`` (one copy)."""
        self._write(pa.FixedSizeBufferWriter(pa.py_buffer(view)))

    def to_bytes(self) -> bytes:
        sink = pa.BufferOutputStream()
        self._write(sink)
        return sink.getvalue().to_pybytes()

    def iter_chunks(self, chunk_size: int):
        data = memoryview(self.to_bytes())
        for offset in range(0, max(len(data), 1), chunk_size):
            yield data[offset:offset + chunk_size]

    def digest(self) -> str:
        if self._digest is None:
            sink = _HashSink()
            self._write(pa.PythonFile(sink, mode="w"))
            self._digest = sink.hasher.hexdigest()
        return self._digest


def encode(obj) -> Encoded:
    buffers: list[pickle.PickleBuffer] = []
    main = cloudpickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    views = [memoryview(main)] + [b.raw() for b in buffers]
    columns = [_column(v) for v in views]
    schema = pa.schema([(f"b{i}", pa.large_binary()) for i in range(len(columns))],
                       metadata=_SCHEMA_METADATA)
    return Encoded(pa.record_batch(columns, schema=schema))


def _reader(buf):
    if isinstance(buf, (bytes, bytearray, memoryview)):
        buf = pa.py_buffer(buf)
    return pa.ipc.open_stream(buf)


def peek_kind(buf) -> str:
    metadata = _reader(buf).schema.metadata or {}
    return metadata.get(b"bulletin.kind", b"unknown").decode()


def decode(buf):
    reader = _reader(buf)
    batch = reader.read_next_batch()
    views = []
    for column in batch.columns:
        _, offsets, data = column.buffers()
        start, end = np.frombuffer(offsets, dtype=np.int64, count=2)
        views.append(data.slice(int(start), int(end - start)))
    return pickle.loads(views[0], buffers=views[1:])
