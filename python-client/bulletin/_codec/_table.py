"""The ``table`` kind: pyarrow Tables and RecordBatches, pandas DataFrames and Hugging Face
``datasets.Dataset``, as the record batches pyarrow's own stream writer produces.

The writer runs into a sink that only collects what it is handed: message metadata as small
bytes and every body buffer as a ``pyarrow.Buffer`` referencing the table's memory, so encoding
copies no column data (sliced arrays whose buffers pyarrow has to rebase are the exception: the
writer makes those new buffers itself). ``bulletin.table.type`` says what to rebuild; the
table's own schema metadata (pandas' index and dtypes, the datasets features) travels beside
the ``bulletin.*`` keys, which decoding removes again.

DataFrames go through ``pyarrow.Table.from_pandas`` and back through ``to_pandas`` (both convert,
as pyarrow's pandas metadata allows); a Dataset with an indices mapping (after ``shuffle``,
``select``, ``filter``) is materialized with ``take``; its format (``set_format``) is not kept.
"""

from __future__ import annotations

import sys
from typing import Any

import pyarrow as pa

_TYPES = {"pyarrow.Table", "pyarrow.RecordBatch", "pandas.DataFrame", "datasets.Dataset"}


def table_type(obj: Any) -> str | None:
    if isinstance(obj, pa.Table):
        return "pyarrow.Table"
    if isinstance(obj, pa.RecordBatch):
        return "pyarrow.RecordBatch"
    pandas = sys.modules.get("pandas")
    if pandas is not None and type(obj) is pandas.DataFrame:
        return "pandas.DataFrame"
    datasets = sys.modules.get("datasets")
    if datasets is not None and type(obj) is datasets.Dataset:
        return "datasets.Dataset"
    return None


def to_arrow(obj: Any, kind: str):
    if kind == "pandas.DataFrame":
        return pa.Table.from_pandas(obj)
    if kind == "datasets.Dataset":
        table = obj.data.table
        if obj._indices is not None:
            table = table.take(obj._indices.column(0))
        return table
    return obj


class _CollectingSink:
    """A write-only file that keeps what it is given: pyarrow hands body buffers over as
    ``pyarrow.Buffer`` objects (references), metadata as bytes."""

    closed = False

    def __init__(self) -> None:
        self.segments: list = []

    def write(self, data) -> int:
        self.segments.append(data)
        return memoryview(data).nbytes

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def write_stream(data, metadata: dict[str, str]) -> list:
    """The segments of the IPC stream of a Table or RecordBatch, with ``metadata`` added."""
    merged = dict(data.schema.metadata or {})
    merged.update({k.encode(): v.encode() for k, v in metadata.items()})
    data = data.replace_schema_metadata(merged)
    sink = _CollectingSink()
    with pa.ipc.new_stream(pa.PythonFile(sink, mode="w"), data.schema) as writer:
        if isinstance(data, pa.RecordBatch):
            writer.write_batch(data)
        else:
            writer.write_table(data)
    return sink.segments


def _own_metadata(schema: pa.Schema) -> dict | None:
    kept = {k: v for k, v in (schema.metadata or {}).items() if not k.startswith(b"bulletin.")}
    return kept or None


def decode_table(reader: pa.ipc.RecordBatchStreamReader, kind: str):
    if kind not in _TYPES:
        raise ValueError(f"unknown bulletin.table.type {kind!r}; this bulletin reads "
                         f"{sorted(_TYPES)}")
    if kind == "pyarrow.RecordBatch":
        batch = reader.read_next_batch()
        return batch.replace_schema_metadata(_own_metadata(batch.schema))
    table = reader.read_all()
    table = table.replace_schema_metadata(_own_metadata(table.schema))
    if kind == "pandas.DataFrame":
        return table.to_pandas()
    if kind == "datasets.Dataset":
        import datasets
        from datasets.table import InMemoryTable

        return datasets.Dataset(InMemoryTable(table))
    return table
