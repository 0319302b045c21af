"""torch through bulletin._codec. Skipped where torch is not installed: the test extra does not
install it (PyPI's Linux wheel pulls several GB of CUDA libraries). The CUDA test runs only
where a GPU is present."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

torch = pytest.importorskip("torch")

from bulletin._codec import decode, encode, map_file  # noqa: E402

TENSOR_DTYPES = [torch.float32, torch.float64, torch.float16, torch.int8, torch.int16,
                 torch.int32, torch.int64, torch.uint8]
PICKLED_DTYPES = [torch.bool, torch.bfloat16, torch.complex64]


def _make(dtype, shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    return torch.randint(0, 100, shape, generator=g).to(dtype)


def _layouts(t):
    yield "contiguous", t
    if t.dim() >= 2:
        yield "transposed", t.transpose(0, 1)
        yield "permuted", t.permute(*reversed(range(t.dim())))
        yield "stepped", t[:, ::2]
    if t.dim() >= 1 and t.shape[0] > 1:
        yield "offset", t[1:]


def _stored(tmp_path, enc):
    path = tmp_path / "obj"
    path.write_bytes(enc.to_bytes())
    return path


@pytest.mark.parametrize("dtype", TENSOR_DTYPES + PICKLED_DTYPES, ids=str)
def test_tensor_round_trip(dtype, tmp_path):
    for shape in [(), (0,), (5,), (4, 6), (0, 3), (2, 3, 4)]:
        for name, t in _layouts(_make(dtype, shape)):
            enc = encode(t)
            assert enc.kind == ("tensor" if dtype in TENSOR_DTYPES else "pickle"), (shape, name)
            for source in (enc.to_bytes(), map_file(_stored(tmp_path, enc))):
                out = decode(source)
                assert type(out) is torch.Tensor
                assert out.dtype == t.dtype and out.shape == t.shape, (shape, name)
                assert torch.equal(out, t), (shape, name)


def test_tensor_zero_copy_where_the_buffer_allows(tmp_path):
    t = torch.arange(1 << 16, dtype=torch.float32).reshape(256, 256)
    enc = encode(t)
    assert enc.metadata["bulletin.framework"] == "torch"
    assert enc.metadata["bulletin.torch.dtype"] == "float32"
    # Encoding references the tensor's memory.
    assert any(np.shares_memory(np.frombuffer(s, np.uint8), t.numpy()) for s in enc._segments)
    mapped = map_file(_stored(tmp_path, enc))
    out = decode(mapped)
    assert np.shares_memory(out.numpy(), np.frombuffer(mapped, np.uint8))
    out.add_(1)  # copy-on-write mapping: private to this process, the file is unchanged
    assert torch.equal(decode(map_file(tmp_path / "obj")), t)
    # torch has no read-only tensors: from immutable bytes the decoded tensor is a copy.
    data = enc.to_bytes()
    copied = decode(data)
    assert not np.shares_memory(copied.numpy(), np.frombuffer(data, np.uint8))
    transposed = decode(map_file(_stored(tmp_path, encode(t.T))))
    assert transposed.stride() == t.T.stride()


def test_a_pickled_tensor_from_read_only_bytes_is_copied_on_several_threads(monkeypatch):
    """Inside a container (the pickle kind: a resident value's spill, a state dict), a tensor
    from a read-only buffer is copied into its own memory; a large one across the copy threads,
    each piece landing where it belongs."""
    from bulletin._codec import _encoded
    monkeypatch.setattr(_encoded, "_PARALLEL_MIN", 4096)
    monkeypatch.setenv("BULLETIN_COPY_THREADS", "3")
    t = torch.arange(100_003, dtype=torch.float64)  # pieces that do not divide evenly
    data = encode({"w": t, "tag": "x"}).to_bytes()
    out = decode(data)["w"]
    assert torch.equal(out, t) and out.dtype == t.dtype
    assert not np.shares_memory(out.numpy(), np.frombuffer(data, np.uint8))
    out.add_(1)  # its own memory, writable
    assert torch.equal(decode(data)["w"], t)


def test_requires_grad_and_parameters():
    w = torch.randn(3, 4, requires_grad=True)
    out = decode(encode(w).to_bytes())
    assert out.requires_grad and out.is_leaf and torch.equal(out.detach(), w.detach())
    p = torch.nn.Parameter(torch.randn(100, 100))
    got = decode(encode({"p": p}).to_bytes())["p"]
    assert type(got) is torch.nn.Parameter and got.requires_grad and torch.equal(got, p)


def test_state_dict_travels_out_of_band(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(512, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    state = model.state_dict()
    enc = encode(state)
    assert enc.kind == "pickle"
    data = enc.to_bytes()
    batch = pa.ipc.open_stream(data).read_next_batch()
    payload = sum(v.numel() * v.element_size() for v in state.values())
    pickle_size = len(batch.column("pickle")[0].as_py())
    # The two weight matrices are out of band; only the biases (< 4 KiB) stay in the stream.
    assert int(enc.metadata["bulletin.pickle.buffers"]) == 2
    assert pickle_size < 8192 < payload
    mapped = map_file(_stored(tmp_path, enc))
    out = decode(mapped)
    assert list(out) == list(state)
    assert np.shares_memory(out["0.weight"].numpy(), np.frombuffer(mapped, np.uint8))
    fresh = torch.nn.Sequential(torch.nn.Linear(512, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    fresh.load_state_dict(out)
    x = torch.randn(8, 512)
    assert torch.equal(fresh(x), model(x))


def test_dataloader_over_tensor_dataset_round_trips_and_iterates(tmp_path):
    from torch.utils.data import DataLoader, TensorDataset

    images = torch.randint(0, 255, (1000, 3, 8, 8), dtype=torch.uint8)
    labels = torch.randint(0, 10, (1000,))
    loader = DataLoader(TensorDataset(images, labels), batch_size=128, shuffle=False)
    enc = encode(loader)
    assert enc.kind == "pickle" and int(enc.metadata["bulletin.pickle.buffers"]) == 2
    batch = pa.ipc.open_stream(enc.to_bytes()).read_next_batch()
    assert len(batch.column("pickle")[0].as_py()) < images.numel()  # payload not in the stream
    mapped = map_file(_stored(tmp_path, enc))
    out = decode(mapped)
    assert type(out) is DataLoader and out.batch_size == 128
    assert np.shares_memory(out.dataset.tensors[0].numpy(), np.frombuffer(mapped, np.uint8))
    seen = [(x.clone(), y.clone()) for x, y in out]
    assert len(seen) == 8
    assert torch.equal(torch.cat([x for x, _ in seen]), images)
    assert torch.equal(torch.cat([y for _, y in seen]), labels)


def test_user_class_holding_tensors():
    class Holder:  # local: pickled by value
        def __init__(self):
            self.t = torch.arange(10_000, dtype=torch.float64)
            self.view = self.t[::2]  # a non-contiguous view: travels as its contiguous copy

    out = decode(encode(Holder()).to_bytes())
    assert torch.equal(out.t, torch.arange(10_000, dtype=torch.float64))
    assert torch.equal(out.view, torch.arange(10_000, dtype=torch.float64)[::2])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_cuda_tensor_arrives_as_cpu_tensor():
    t = torch.randn(64, 32, device="cuda")
    enc = encode(t)
    assert enc.kind == "tensor" and enc.metadata["bulletin.torch.device"].startswith("cuda")
    out = decode(enc.to_bytes())
    assert out.device.type == "cpu" and torch.equal(out, t.cpu())
    state = decode(encode({"w": t, "b": torch.randn(3, device="cuda")}).to_bytes())
    assert state["w"].device.type == "cpu" and torch.equal(state["w"], t.cpu())
