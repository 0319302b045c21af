"""The Arrow encoding of objects (bulletin._codec): round trips, zero copy, content ids, layout.

torch is not installed by the test extra (PyPI's Linux wheel pulls several GB of CUDA
libraries): its tests are in test_codec_torch.py behind importorskip.
"""

from __future__ import annotations

import gc
import itertools
import json
import mmap
import os
import threading

import numpy as np
import pyarrow as pa
import pytest
import xxhash

from bulletin import SerializationError
from bulletin import _codec
from bulletin._codec import CodecError, decode, encode, map_file, peek_kind
from bulletin._codec import _encoded, _tensor
from bulletin._data._objects import write_file

# -- helpers --------------------------------------------------------------------------------------


def _base(buf) -> np.ndarray:
    return np.frombuffer(buf, dtype=np.uint8)


def _same_bytes(x: np.ndarray, y: np.ndarray) -> bool:
    return (x.dtype == y.dtype and x.shape == y.shape
            and np.ascontiguousarray(x).tobytes() == np.ascontiguousarray(y).tobytes())


def _batch(data: bytes) -> pa.RecordBatch:
    """Reads the stream with pyarrow's own reader and validates it fully: the independent check
    that the hand-written IPC metadata is what Arrow expects."""
    reader = pa.ipc.open_stream(data)
    batch = reader.read_next_batch()
    batch.validate(full=True)
    with pytest.raises(StopIteration):
        reader.read_next_batch()
    return batch


def _payload_offsets(data: bytes, batch: pa.RecordBatch) -> list[int]:
    base = pa.py_buffer(data).address
    offsets = []
    for column in batch.columns:
        stack = [column.storage if isinstance(column, pa.ExtensionArray) else column]
        while stack:
            array = stack.pop()
            for b in array.buffers():
                if b is not None and b.size >= 64:
                    offsets.append(b.address - base)
            if pa.types.is_fixed_size_list(array.type):
                stack.append(array.values)
    return offsets


DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "datetime64[ns]", "datetime64[s]", "timedelta64[us]"]
SHAPES = [(), (0,), (7,), (3, 4), (0, 5), (5, 0), (2, 3, 4), (1, 1, 5), (2, 1, 3, 1), (3, 2, 2, 3)]
LAYOUTS = ["C", "F", "reversed", "swap01", "step", "negative", "offset"]


def _values(dtype: str, shape: tuple, rng: np.random.Generator) -> np.ndarray:
    n = int(np.prod(shape))
    dt = np.dtype(dtype)
    if dt.kind in "Mm":
        raw = rng.integers(-(2**40), 2**40, size=n, dtype=np.int64).view(dt)
    elif dt.kind == "f":
        raw = rng.standard_normal(n).astype(dt)
    else:
        info = np.iinfo(dt)
        raw = rng.integers(info.min, info.max, size=n, dtype=dt, endpoint=True)
    return raw.reshape(shape)


def _with_layout(arr: np.ndarray, layout: str) -> np.ndarray:
    if layout == "C":
        return arr
    if layout == "F":
        return np.asfortranarray(arr)
    if layout == "reversed":
        return np.ascontiguousarray(arr.T).T  # logical shape kept, memory in reverse axis order
    if layout == "swap01":
        return np.ascontiguousarray(arr.swapaxes(0, 1)).swapaxes(0, 1) if arr.ndim >= 2 else arr
    if layout == "step":
        big = np.concatenate([arr, arr], axis=-1) if arr.ndim else arr
        return big[..., ::2] if arr.ndim else arr
    if layout == "negative":
        return arr[::-1] if arr.ndim else arr
    if layout == "offset":
        big = np.concatenate([arr[:1], arr]) if arr.ndim and arr.shape[0] else arr
        return big[1:] if arr.ndim and arr.shape[0] else arr
    raise AssertionError(layout)


# -- tensors --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_round_trip_over_shapes_and_layouts(dtype):
    rng = np.random.default_rng(abs(hash(dtype)) % 2**32)
    for shape, layout in itertools.product(SHAPES, LAYOUTS):
        x = _with_layout(_values(dtype, shape, rng), layout)
        enc = encode(x)
        assert enc.kind == "tensor", (shape, layout)
        data = enc.to_bytes()
        assert len(data) == enc.nbytes
        batch = _batch(data)
        y = decode(data)
        assert type(y) is np.ndarray
        assert _same_bytes(x, y), (shape, layout)
        if x.size:
            dense = _tensor._dense_permutation(x) is not None
            # A dense layout (any axis order) decodes as a view of the buffer with the original
            # strides; only a non-dense one (steps, negative strides) was copied to C order.
            assert np.shares_memory(y, _base(data)), (shape, layout)
            if dense:
                assert all(ys == xs for ys, xs, n in zip(y.strides, x.strides, x.shape) if n > 1)
            assert not y.flags.writeable  # a view of immutable bytes
            assert all(offset % 64 == 0 for offset in _payload_offsets(data, batch))


def test_tensor_random_arrays_property():
    rng = np.random.default_rng(7)
    for _ in range(300):
        ndim = int(rng.integers(0, 5))
        shape = tuple(int(rng.integers(0, 5)) for _ in range(ndim))
        x = _values(str(rng.choice(DTYPES)), shape, rng)
        if ndim:
            x = x.transpose(rng.permutation(ndim))
            index = tuple(slice(None, None, int(rng.choice([1, 1, 2, -1]))) for _ in range(ndim))
            x = x[index]
        enc = encode(x)
        data = enc.to_bytes()
        _batch(data)
        assert _same_bytes(x, decode(data)), (x.shape, x.strides)
        assert enc.digest() == xxhash.xxh3_128_hexdigest(data)


def test_tensor_schema_says_what_it_is_and_pyarrow_reads_the_same_tensor():
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    for arr in (x, np.asfortranarray(x), x.transpose(0, 2, 1), x.T):
        data = encode(arr).to_bytes()
        schema = pa.ipc.open_stream(data).schema
        meta = {k.decode(): v.decode() for k, v in schema.metadata.items()}
        assert meta["bulletin.kind"] == "tensor" and meta["bulletin.format"] == "1"
        assert meta["bulletin.dtype"] == "<f4"
        assert json.loads(meta["bulletin.shape"]) == list(arr.shape)
        assert meta["bulletin.layout"] == "fixed_shape_tensor"
        column = _batch(data).column(0)
        assert column.type.extension_name == "arrow.fixed_shape_tensor"
        # pyarrow's own reading of the extension type gives the same logical array.
        seen = column.to_numpy_ndarray()
        rows = seen if json.loads(meta["bulletin.memory_order"])[0] == 0 else seen[0]
        assert np.array_equal(rows.reshape(arr.shape), arr)
    c_order = json.loads(pa.ipc.open_stream(encode(x).to_bytes()).schema.metadata[
        b"bulletin.memory_order"])
    assert c_order == [0, 1, 2]
    assert _batch(encode(x).to_bytes()).num_rows == 2  # one row per x[i]


def test_tensor_whose_row_exceeds_arrow_list_size_uses_the_flat_layout(monkeypatch):
    # list_size is an int32 in Arrow; lowering the limit exercises the fallback without 8 GiB.
    monkeypatch.setattr(_tensor, "_INT32_MAX", 10)
    x = np.arange(60, dtype=np.int32).reshape(3, 4, 5)
    for arr in (x, x.T):
        enc = encode(arr)
        assert enc.metadata["bulletin.layout"] == "values"
        data = enc.to_bytes()
        assert _batch(data).num_rows == 60
        y = decode(data)
        assert _same_bytes(arr, y) and np.shares_memory(y, _base(data))


@pytest.mark.parametrize("x", [
    np.array([True, False, True]),
    np.arange(6, dtype=np.complex64).reshape(2, 3) * 1j,
    np.arange(3, dtype=np.complex128),
    np.array(["2024-01-01", "2024-02-03"], dtype="datetime64[D]"),
    np.array(["a", "bc"]),
    np.array([1, "x", None], dtype=object),
    np.zeros(3, dtype=[("a", "<i4"), ("b", "<f8")]),
    np.arange(4, dtype=">f4"),
    np.arange(4, dtype=np.longdouble),
    np.ma.masked_array([1, 2, 3], mask=[0, 1, 0]),
], ids=["bool", "complex64", "complex128", "datetime64[D]", "unicode", "object", "structured",
        "big-endian", "longdouble", "masked"])
def test_dtypes_arrow_cannot_hold_fall_back_to_pickle(x):
    enc = encode(x)
    assert enc.kind == "pickle"
    y = decode(enc.to_bytes())
    assert type(y) is type(x) and y.dtype == x.dtype and y.shape == x.shape
    if isinstance(x, np.ma.MaskedArray):
        assert (y.mask == x.mask).all() and (y.data == x.data).all()
    else:
        assert (y == x).all()
    if type(x) is np.ndarray:
        assert str(x.dtype) in enc.metadata["bulletin.pickle.reason"]


def test_large_fallback_array_travels_out_of_band():
    x = np.random.default_rng(0).standard_normal((512, 512)) * 1j  # complex128, 4 MiB
    enc = encode(x)
    data = enc.to_bytes()
    batch = _batch(data)
    assert enc.kind == "pickle" and batch.num_columns == 2
    assert len(batch.column("pickle")[0].as_py()) < 1024
    y = decode(data)
    assert (y == x).all() and np.shares_memory(y, _base(data))


# -- write_into, iter_chunks, digest --------------------------------------------------------------


def _objects():
    rng = np.random.default_rng(1)
    big = rng.standard_normal((300, 257)).astype(np.float32)
    return [big, big.T, big[:, ::3], np.array(5, dtype=np.int16),
            {"w": big, "b": np.arange(10), "tag": "x"},
            pa.table({"a": np.arange(100_000), "s": ["x"] * 100_000})]


def test_write_into_destinations_and_threads(tmp_path, monkeypatch):
    monkeypatch.setattr(_encoded, "_PARALLEL_MIN", 4096)
    monkeypatch.setattr(_encoded, "_PARALLEL_PIECE", 1000)
    for obj in _objects():
        enc = encode(obj)
        expected = enc.to_bytes()
        out = bytearray(enc.nbytes)
        enc.write_into(out)
        assert bytes(out) == expected
        for threads in (2, 3):
            out = bytearray(enc.nbytes)
            enc.write_into(memoryview(out), threads=threads)
            assert bytes(out) == expected
        path = tmp_path / "obj"
        with open(path, "wb+") as f:
            f.truncate(enc.nbytes)
            with mmap.mmap(f.fileno(), enc.nbytes) as mapped:
                enc.write_into(mapped)
                mapped.flush()
        assert path.read_bytes() == expected


def test_write_to_file_writes_the_bytes_write_into_writes(tmp_path, monkeypatch):
    """pwrite in pieces: a strided array's blocks, payload views, and a view split across
    several writes (the chunk made small here) all land at their offsets."""
    monkeypatch.setattr(_encoded, "_WRITE_CHUNK", 4093)
    for i, obj in enumerate(_objects()):
        enc = encode(obj)
        path = tmp_path / f"obj-{i}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            enc.write_to_file(fd)
        finally:
            os.close(fd)
        assert path.read_bytes() == enc.to_bytes()


def test_write_file_names_what_it_wrote_when_asked_to_digest(tmp_path):
    for i, obj in enumerate(_objects()):
        enc = encode(obj)
        write_file(tmp_path / f"obj-{i}", enc, digesting=True)
        written = (tmp_path / f"obj-{i}").read_bytes()
        assert written == enc.to_bytes()
        # Computed by the write (none of these streams is large enough for the hash tree).
        assert enc._digest == xxhash.xxh3_128_hexdigest(written)


def test_write_into_rejects_bad_destinations():
    enc = encode(np.arange(100))
    with pytest.raises(ValueError, match=f"exactly {enc.nbytes} bytes"):
        enc.write_into(bytearray(enc.nbytes + 1))
    with pytest.raises(ValueError, match="writable"):
        enc.write_into(bytes(enc.nbytes))
    with pytest.raises(ValueError, match="threads"):
        enc.write_into(bytearray(enc.nbytes), threads=0)


def test_copy_threads_setting_is_validated(monkeypatch):
    enc = encode(np.arange(10))
    monkeypatch.setenv("BULLETIN_COPY_THREADS", "many")
    with pytest.raises(ValueError, match="BULLETIN_COPY_THREADS"):
        enc.write_into(bytearray(enc.nbytes))


def test_iter_chunks_gives_the_same_bytes_in_exact_chunks():
    for obj in _objects():
        enc = encode(obj)
        expected = enc.to_bytes()
        for size in (1, 7, 64, 4096, 1 << 16, enc.nbytes, enc.nbytes + 10):
            if size == 1 and enc.nbytes > 50_000:
                continue
            chunks = list(enc.iter_chunks(size))
            assert b"".join(chunks) == expected
            assert all(len(c) == size for c in chunks[:-1]) and 0 < len(chunks[-1]) <= size
    with pytest.raises(ValueError, match="chunk_size"):
        next(encode(np.arange(3)).iter_chunks(0))


def test_iter_chunks_inside_a_payload_are_views_not_copies():
    x = np.arange(1 << 20, dtype=np.uint8)
    chunks = list(encode(x).iter_chunks(1 << 16))
    shared = [c for c in chunks if np.shares_memory(np.frombuffer(c, np.uint8), x)]
    assert len(shared) >= len(chunks) - 2


def test_strided_array_is_hashed_and_streamed_in_bounded_blocks(monkeypatch):
    monkeypatch.setattr(_encoded, "_SCRATCH_BYTES", 1000)
    x = np.arange(50 * 60 * 7, dtype=np.float64).reshape(50, 60, 7)[::2, :, ::3]
    enc = encode(x)
    data = enc.to_bytes()
    assert enc.digest() == xxhash.xxh3_128_hexdigest(data)
    segment = next(s for s in enc._segments if isinstance(s, _encoded.StridedSegment))
    assert max(len(b) for b in segment.blocks(1000)) <= 1000
    assert b"".join(enc.iter_chunks(999)) == data


def test_digest_is_xxh3_128_of_exactly_the_serialized_bytes():
    for obj in _objects():
        enc = encode(obj)
        d = enc.digest()
        assert d == xxhash.xxh3_128_hexdigest(enc.to_bytes())
        assert len(d) == 32 and d == d.lower() and int(d, 16) >= 0


def test_digest_stability_and_sensitivity():
    x = np.random.default_rng(2).standard_normal((64, 33))
    d = encode(x).digest()
    assert encode(x.copy()).digest() == d  # same content, another object
    assert encode(np.array(x.tolist())).digest() == d
    stepped = np.repeat(x, 2, axis=1)[:, ::2]  # same values, strided memory: same bytes
    assert encode(stepped).digest() == d
    changed = x.copy()
    changed[40, 7] = np.nextafter(changed[40, 7], 1.0)  # one ulp of one element
    assert encode(changed).digest() != d
    assert encode(x.reshape(33, 64)).digest() != d  # same bytes, other shape
    assert encode(x.view(np.int64)).digest() != d  # same bytes, other dtype
    assert encode(np.asfortranarray(x)).digest() != d  # other memory order: other bytes
    assert encode({"a": x}).digest() == encode({"a": x.copy()}).digest()


# -- tables ---------------------------------------------------------------------------------------


def _rich_table() -> pa.Table:
    n = 1000
    rng = np.random.default_rng(3)
    struct = pa.StructArray.from_arrays(
        [pa.array(rng.integers(0, 9, n)), pa.array([f"s{i}" if i % 5 else None for i in range(n)])],
        names=["k", "name"])
    lists = pa.array([list(range(i % 4)) if i % 7 else None for i in range(n)],
                     type=pa.list_(pa.int16()))
    return pa.table({
        "i": pa.array([i if i % 3 else None for i in range(n)], type=pa.int64()),
        "f": pa.array(rng.standard_normal(n)),
        "b": pa.array([bool(i % 2) if i % 11 else None for i in range(n)]),
        "dict": pa.array(["red", "green", "blue", None] * (n // 4)).dictionary_encode(),
        "ts": pa.array(np.arange(n) * 10**9, type=pa.timestamp("ns", tz="Europe/Paris")),
        "large": pa.array(["x" * (i % 50) for i in range(n)], type=pa.large_string()),
        "bin": pa.array([bytes([i % 256]) * (i % 9) for i in range(n)], type=pa.binary()),
        "nested": struct,
        "lists": lists,
        "large_list": pa.array([[1.5] * (i % 3) for i in range(n)],
                               type=pa.large_list(pa.float32())),
        "dec": pa.array([i for i in range(n)], type=pa.decimal128(12, 2)),
    }, metadata={"owner": "test"})


def test_table_round_trip_keeps_schema_metadata_and_shares_memory():
    t = _rich_table()
    enc = encode(t)
    assert enc.kind == "table"
    data = enc.to_bytes()
    assert peek_kind(data) == "table"
    u = decode(data)
    assert isinstance(u, pa.Table)
    assert u.equals(t, check_metadata=True)
    assert u.schema.metadata == {b"owner": b"test"}
    assert np.shares_memory(u.column("f").chunk(0).to_numpy(), _base(data))


def test_chunked_table_with_changing_dictionaries_and_slices():
    a = pa.table({"d": pa.array(["a", "b"] * 500).dictionary_encode(), "v": np.arange(1000)})
    b = pa.table({"d": pa.array(["x", "y", "z"] * 300).dictionary_encode(),
                  "v": np.arange(900)})
    t = pa.concat_tables([a, b.slice(100, 500), a.slice(3, 10)])
    u = decode(encode(t).to_bytes())
    assert u.num_rows == t.num_rows and u.to_pylist() == t.to_pylist()


def test_record_batch_and_empty_tables():
    batch = _rich_table().to_batches()[0].slice(10, 100)
    u = decode(encode(batch).to_bytes())
    assert isinstance(u, pa.RecordBatch) and u.equals(batch)
    empty = pa.table({"x": pa.array([], type=pa.int32()), "y": pa.array([], type=pa.string())})
    assert decode(encode(empty).to_bytes()).equals(empty)
    no_batches = pa.Table.from_batches([], schema=empty.schema)
    assert decode(encode(no_batches).to_bytes()).equals(no_batches)


def test_table_encoding_references_column_memory():
    x = np.arange(1 << 20, dtype=np.float64)
    enc = encode(pa.table({"x": x}))
    assert any(np.shares_memory(np.frombuffer(s, np.uint8), x) for s in enc._segments)


def test_pandas_round_trip_keeps_index_and_dtypes():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({
        "int": np.arange(6, dtype=np.int32),
        "nullable": pd.array([1, None, 3, 4, None, 6], dtype="Int64"),
        "float": np.linspace(0, 1, 6),
        "cat": pd.Categorical(["a", "b", "a", "c", "b", "a"]),
        "when": pd.date_range("2024-01-01", periods=6, freq="h", tz="UTC"),
        "text": ["x", "yy", None, "zzz", "", "w"],
        "flag": [True, False, True, True, False, False],
    }, index=pd.Index(list("pqrstu"), name="key"))
    enc = encode(df)
    assert enc.kind == "table" and enc.metadata["bulletin.table.type"] == "pandas.DataFrame"
    out = decode(enc.to_bytes())
    pd.testing.assert_frame_equal(out, df)
    multi = df.reset_index().set_index(["key", "int"])
    pd.testing.assert_frame_equal(decode(encode(multi).to_bytes()), multi)
    ranged = pd.DataFrame({"a": [1.0, 2.0]})
    pd.testing.assert_frame_equal(decode(encode(ranged).to_bytes()), ranged)


def test_datasets_round_trip():
    datasets = pytest.importorskip("datasets")
    features = datasets.Features({
        "text": datasets.Value("string"),
        "label": datasets.ClassLabel(names=["neg", "pos"]),
        "ids": datasets.Sequence(datasets.Value("int32")),
    })
    ds = datasets.Dataset.from_dict(
        {"text": [f"t{i}" for i in range(20)], "label": [i % 2 for i in range(20)],
         "ids": [list(range(i % 5)) for i in range(20)]}, features=features)
    for original in (ds, ds.shuffle(seed=1).select(range(7))):
        enc = encode(original)
        assert enc.kind == "table"
        out = decode(enc.to_bytes())
        assert type(out) is datasets.Dataset
        assert out.features == features
        assert out.to_dict() == original.to_dict()
        assert out.features["label"].int2str(out[0]["label"]) in ("neg", "pos")


# -- pickle ---------------------------------------------------------------------------------------


class Model:
    def __init__(self, weights, name):
        self.weights = weights
        self.name = name

    def score(self):
        return float(sum(w.sum() for w in self.weights))


def test_dict_of_arrays_travels_out_of_band_and_decodes_zero_copy():
    rng = np.random.default_rng(4)
    obj = {"a": rng.standard_normal((256, 256)), "b": rng.integers(0, 9, 100_000),
           "small": np.arange(3), "f": np.asfortranarray(rng.standard_normal((100, 50))),
           "meta": {"lr": 0.1, "names": ["x", "y"]}}
    enc = encode(obj)
    data = enc.to_bytes()
    batch = _batch(data)
    payload = obj["a"].nbytes + obj["b"].nbytes + obj["f"].nbytes
    assert enc.kind == "pickle" and enc.metadata["bulletin.pickle.buffers"] == "3"
    pickle_size = len(batch.column("pickle")[0].as_py())
    assert pickle_size < 2048 < payload  # the stream holds no payload byte
    assert enc.nbytes < payload + 4096
    assert all(offset % 64 == 0 for offset in _payload_offsets(data, batch))
    out = decode(data)
    for key in ("a", "b", "f"):
        assert np.array_equal(out[key], obj[key]) and np.shares_memory(out[key], _base(data))
        assert not out[key].flags.writeable
    assert out["f"].flags.f_contiguous
    assert out["meta"] == obj["meta"] and np.array_equal(out["small"], obj["small"])


def test_pickle_references_the_arrays_it_encodes():
    x = np.ones(1 << 20)
    enc = encode({"x": x})
    assert any(np.shares_memory(np.frombuffer(s, np.uint8), x) for s in enc._segments)


def test_many_buffers_and_user_classes():
    def local_factory():
        class Local:  # defined in a function: cloudpickle pickles it by value
            def __init__(self):
                self.arrays = [np.full(2000, i, dtype=np.float32) for i in range(40)]
        return Local()

    obj = [Model([np.ones((100, 100)), np.zeros(10)], "m"), local_factory(), lambda v: v + 1]
    enc = encode(obj)
    assert int(enc.metadata["bulletin.pickle.buffers"]) == 41
    data = enc.to_bytes()
    _batch(data)
    model, local, fn = decode(data)
    assert isinstance(model, Model) and model.name == "m" and model.score() == 10_000.0
    assert [a[0] for a in local.arrays] == list(range(40))
    assert fn(1) == 2
    assert decode(encode(None).to_bytes()) is None
    assert decode(encode("plain").to_bytes()) == "plain"


def test_arrow_and_pandas_objects_inside_a_pickle_travel_out_of_band():
    pd = pytest.importorskip("pandas")
    x = np.arange(1 << 18, dtype=np.float64)
    for obj in ({"table": pa.table({"x": x})}, {"frame": pd.DataFrame({"x": x})},
                [pd.Series(x)], (pa.array(x),)):
        enc = encode(obj)
        assert enc.kind == "pickle" and enc.metadata["bulletin.pickle.buffers"] == "1"
        assert enc.nbytes < x.nbytes + 8192
        out = decode(enc.to_bytes())
        assert type(out) is type(obj) and len(out) == 1


def test_memmap_is_a_tensor(tmp_path):
    path = tmp_path / "m.bin"
    m = np.memmap(path, dtype=np.float32, mode="w+", shape=(64, 32))
    m[:] = np.arange(64 * 32).reshape(64, 32)
    enc = encode(m)
    assert enc.kind == "tensor"
    out = decode(enc.to_bytes())
    assert type(out) is np.ndarray and np.array_equal(out, m)


def test_unpicklable_object_names_its_type():
    with pytest.raises(SerializationError, match="_thread.lock|lock"):
        encode({"lock": threading.Lock()})


# -- decode inputs, zero copy and lifetime ------------------------------------------------------


def test_decode_accepts_every_buffer_kind(tmp_path):
    x = np.arange(10_000, dtype=np.float32).reshape(100, 100)
    enc = encode(x)
    data = enc.to_bytes()
    path = tmp_path / "obj"
    path.write_bytes(data)
    mapped = pa.memory_map(str(path), "r")
    mapped.seek(5)
    sources = [data, bytearray(data), memoryview(data), pa.py_buffer(data), mapped,
               map_file(path)]
    for source in sources:
        y = decode(source)
        assert np.array_equal(y, x)
        assert peek_kind(source) == "tensor"
    assert mapped.tell() == 5  # decode and peek_kind leave the file position alone


def test_writability_follows_the_buffer(tmp_path):
    x = np.arange(1000, dtype=np.int64)
    data = encode(x).to_bytes()
    path = tmp_path / "obj"
    path.write_bytes(data)
    assert not decode(pa.memory_map(str(path), "r")).flags.writeable
    private = decode(map_file(path))
    assert private.flags.writeable
    private[:] = -1  # copy-on-write: the file keeps its bytes
    assert path.read_bytes() == data
    assert np.array_equal(decode(path.read_bytes()), x)
    shared = decode(bytearray(data))
    assert shared.flags.writeable


def test_decoded_objects_keep_their_buffer_alive(tmp_path):
    x = np.random.default_rng(5).standard_normal(1 << 16)
    path = tmp_path / "obj"
    path.write_bytes(encode({"x": x}).to_bytes())
    out = decode(map_file(path))["x"]
    table_path = tmp_path / "table"
    table_path.write_bytes(encode(pa.table({"x": x})).to_bytes())
    table = decode(pa.memory_map(str(table_path), "r"))
    array_path = tmp_path / "array"
    array_path.write_bytes(encode(x).to_bytes())
    mapped = pa.memory_map(str(array_path), "r")
    array = decode(mapped)
    mapped.close()  # the decoded array holds the mapped region, not the file object
    del mapped
    gc.collect()
    assert np.array_equal(array, x)
    assert np.array_equal(out, x)
    assert np.array_equal(table.column("x").to_numpy(), x)


def test_peek_kind_reads_only_the_schema_message():
    x = np.arange(1 << 16)
    data = encode(x).to_bytes()
    schema_size = pa.ipc.open_stream(data).schema.serialize().size
    truncated = data[:schema_size] + b"\x00" * 16  # the payload is gone
    assert peek_kind(truncated) == "tensor"
    with pytest.raises(CodecError):
        decode(truncated)
    assert peek_kind(encode({"a": 1}).to_bytes()) == "pickle"


# -- bad input ----------------------------------------------------------------------------------


def test_bad_input_gets_clear_errors():
    with pytest.raises(CodecError, match="not a bulletin object"):
        decode(b"definitely not arrow")
    with pytest.raises(CodecError, match="not a bulletin object"):
        peek_kind(b"definitely not arrow")
    plain = pa.BufferOutputStream()
    with pa.ipc.new_stream(plain, pa.schema([("x", pa.int8())])) as writer:
        writer.write_batch(pa.record_batch([pa.array([1], pa.int8())], names=["x"]))
    with pytest.raises(CodecError, match="no bulletin.kind"):
        decode(plain.getvalue())
    future = pa.BufferOutputStream()
    schema = pa.schema([("x", pa.int8())], metadata={"bulletin.kind": "tensor",
                                                      "bulletin.format": "2"})
    with pa.ipc.new_stream(future, schema):
        pass
    with pytest.raises(CodecError, match="format '2'.*reads format 1"):
        decode(future.getvalue())
    with pytest.raises(TypeError, match="decode takes"):
        decode(12345)
    with pytest.raises(TypeError, match="to_bytes"):
        decode(encode(1))


def test_objects_of_a_schema_seen_before_decode_the_same_and_fail_the_same():
    # Small pickles share one schema message: the second of each is read with the cached
    # schema, and must give its own value (not the first's), buffers included.
    big = np.arange(4096, dtype=np.int64)
    values = [1, "two", {"three": 3}, [big, big + 1], (big * 2,)]
    for _ in range(2):
        for value in values:
            again = decode(encode(value).to_bytes())
            if isinstance(value, (list, tuple)):
                assert all(np.array_equal(a, b) for a, b in zip(again, value))
            else:
                assert again == value
    # A stream whose schema is cached but whose batch is cut or missing is still refused.
    whole = encode(12345).to_bytes()
    decode(whole)
    schema_end = 8 + int.from_bytes(whole[4:8], "little")
    for broken in (whole[:schema_end] + _codec.EOS, whole[:schema_end + 20]):
        with pytest.raises(CodecError, match="corrupt bulletin object"):
            decode(broken)


def test_a_small_pickle_is_the_same_stream_as_the_general_way_builds():
    # Small pickles are framed from a kept prefix and suffix per length: the bytes (and so the
    # content id) must be what the general layout writes, at every length and padding, and
    # read back by pyarrow's reader.
    from bulletin._codec import _pickle

    _codec._SMALL_PICKLES.clear()  # what earlier tests kept: the count below is this test's
    for n in itertools.chain(range(0, 80), range(4000, 4100)):
        value = ("x" * n, n)
        fast = encode(value)
        general = _codec._assemble("pickle", _pickle.PicklePlan(*_pickle.dumps(value)))
        assert fast.to_bytes() == general.to_bytes(), n
        assert fast.metadata == general.metadata
        assert fast.digest() == general.digest()
        assert decode(fast.to_bytes()) == value
    assert len(_codec._SMALL_PICKLES) > 50  # the short ones were framed from what was kept
    # One with out-of-band buffers, or a reason, goes the general way.
    big = np.arange(1 << 16, dtype=np.int64)
    assert len(encode([big]).to_bytes()) > big.nbytes
    assert "bulletin.pickle.reason" in encode(np.array([object()])).metadata


def test_format_version_is_public():
    assert _codec.FORMAT_VERSION == 1
    assert encode(np.arange(3)).metadata["bulletin.format"] == "1"


def test_crc32c_with_the_digest_equals_the_crc32c_of_the_bytes():
    import google_crc32c
    a = np.random.default_rng(3).random((700, 900))[:, ::2]  # strided: copied block by block
    together, apart = encode(a), encode(a)
    assert together.digest(with_crc32c=True) == apart.digest()
    assert together.crc32c() == apart.crc32c() == google_crc32c.value(apart.to_bytes())


def test_write_digesting_copies_and_hashes_in_one_pass_as_write_into_and_digest_do():
    from bulletin._codec import encode
    a = np.random.default_rng(5).random(700_000, dtype=np.float32)
    for value in (a, a[::3], {"x": a, "meta": [1, "two"]}):
        plain = encode(value)
        fused = encode(value)
        out = bytearray(fused.nbytes)
        assert fused.write_digesting(out) == plain.digest()
        assert fused.digest() == plain.digest()  # kept: not computed again
        assert bytes(out) == plain.to_bytes()
    with pytest.raises(ValueError, match="exactly"):
        encode(a).write_digesting(bytearray(10))
    with pytest.raises(ValueError, match="read-only"):
        small = encode(np.zeros(3))
        small.write_digesting(bytes(small.nbytes))


def test_write_digesting_of_a_stream_hashed_already_only_copies(monkeypatch):
    from bulletin._codec import _encoded, encode
    a = np.random.default_rng(6).random(1 << 24, dtype=np.float32)  # 64 MiB: the hash tree
    for value in (a, a[:1000]):
        encoded = encode(value)
        digest = encoded.digest()
        monkeypatch.setattr(_encoded.xxhash, "xxh3_128", None)  # no second hash would work
        out = bytearray(encoded.nbytes)
        assert encoded.write_digesting(out) == digest
        assert bytes(out) == encode(value).to_bytes()
        monkeypatch.undo()


def _tree_reference(data: bytes) -> str:
    """The hash tree of the module doc, computed here from the bytes alone."""
    leaves = b"".join(xxhash.xxh3_128_digest(data[lo:lo + _encoded._TREE_LEAF])
                      for lo in range(0, len(data), _encoded._TREE_LEAF))
    return xxhash.xxh3_128_hexdigest(_encoded._TREE_TAG + leaves)


@pytest.fixture
def small_tree(monkeypatch):
    """The tree's sizes scaled down 64 times (1 MiB streams, 128 KiB pieces), so that pieces
    straddle segments without gigabytes of test data."""
    monkeypatch.setattr(_encoded, "_TREE_MIN", 1 << 20)
    monkeypatch.setattr(_encoded, "_TREE_LEAF", 128 << 10)
    monkeypatch.setattr(_encoded, "_HASH_SLICE", 48 << 10)


@pytest.mark.parametrize("threads", [1, 3, 8])
def test_a_large_stream_is_named_by_the_hash_tree_of_its_bytes(small_tree, threads):
    # A table of three columns: several payload segments, pieces that straddle them.
    table = pa.table({"a": np.arange(60_000, dtype=np.int64),
                      "b": np.random.default_rng(5).random(60_000),
                      "c": np.arange(60_000, dtype=np.int32)})
    enc = encode(table)
    data = enc.to_bytes()
    assert enc.nbytes >= _encoded._TREE_MIN and len(enc._segments) > 2
    expected = _tree_reference(data)
    assert expected != xxhash.xxh3_128_hexdigest(data)
    assert encode(table).digest() == expected
    out = bytearray(enc.nbytes)
    assert encode(table).write_digesting(out, threads=threads) == expected
    assert bytes(out) == data


def test_the_tree_changes_with_any_byte_and_not_with_how_it_was_computed(small_tree):
    x = np.random.default_rng(9).integers(0, 255, 3 << 20, dtype=np.uint8)
    d = encode(x).digest()
    assert encode(x.copy()).digest() == d
    for where in (0, len(x) // 2, len(x) - 1):
        y = x.copy()
        y[where] ^= 1
        assert encode(y).digest() != d


def test_a_stream_just_under_the_tree_size_keeps_the_flat_hash(small_tree):
    x = np.zeros((1 << 20) - 4096, dtype=np.uint8)
    enc = encode(x)
    assert enc.nbytes < _encoded._TREE_MIN
    assert enc.digest() == xxhash.xxh3_128_hexdigest(enc.to_bytes())


def test_a_large_strided_stream_keeps_the_flat_hash(small_tree):
    x = np.arange(4 << 20, dtype=np.uint8).reshape(2048, 2048)[:, ::2]
    enc = encode(x)
    assert enc.nbytes >= _encoded._TREE_MIN
    assert enc.digest() == xxhash.xxh3_128_hexdigest(enc.to_bytes())


def test_copy_threads_follow_the_cpus_and_the_environment(monkeypatch):
    monkeypatch.delenv("BULLETIN_COPY_THREADS", raising=False)
    assert 1 <= _encoded._copy_threads() <= min(8, len(os.sched_getaffinity(0)))
    monkeypatch.setenv("BULLETIN_COPY_THREADS", "3")
    assert _encoded._copy_threads() == 3
    monkeypatch.setenv("BULLETIN_COPY_THREADS", "many")
    with pytest.raises(ValueError, match="BULLETIN_COPY_THREADS"):
        _encoded._copy_threads()


def test_a_function_pickled_by_value_keeps_the_file_it_was_defined_in():
    # cloudpickle >= 3.1.3 renames every pickled code object's file "<dynamic-code>": a
    # remote traceback would show no file and no source line.
    import traceback

    def inner(x):
        return x / 0

    fn = decode(encode(inner).to_bytes())
    assert fn.__code__.co_filename == __file__
    with pytest.raises(ZeroDivisionError) as raised:
        fn(1)
    assert traceback.extract_tb(raised.value.__traceback__)[-1].line == "return x / 0"
