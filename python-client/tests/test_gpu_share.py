"""The executor's side of fractional GPUs: what it reads from BULLETIN_GPU_FRACTION and what it
caps (docs/scheduler.md, "Fractional GPUs")."""

from __future__ import annotations

import sys
import types

import pytest

from bulletin._runtime import _gpu_share


@pytest.mark.parametrize("value, fraction", [
    (None, 0.0), ("", 0.0), ("0.5", 0.5), ("0.125", 0.125), ("1", 0.0), ("2", 0.0),
    ("-0.5", 0.0), ("half", 0.0),
])
def test_the_fraction_is_a_share_below_one_or_none(monkeypatch, value, fraction):
    if value is None:
        monkeypatch.delenv("BULLETIN_GPU_FRACTION", raising=False)
    else:
        monkeypatch.setenv("BULLETIN_GPU_FRACTION", value)
    assert _gpu_share.gpu_fraction() == fraction


def test_an_executor_of_whole_gpus_caps_nothing(monkeypatch):
    monkeypatch.delenv("BULLETIN_GPU_FRACTION", raising=False)
    assert _gpu_share.apply_gpu_fraction() == ""


def test_a_simulated_gpu_share_is_named_but_not_capped(monkeypatch):
    monkeypatch.setenv("BULLETIN_GPU_FRACTION", "0.25")
    monkeypatch.setenv("BULLETIN_SIMULATED_GPUS", "1")
    assert _gpu_share.apply_gpu_fraction() == "GPU share 0.25 (simulated GPU: nothing to cap)"


def test_a_real_share_caps_pytorchs_allocator_where_cuda_is_there(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("BULLETIN_GPU_FRACTION", "0.5")
    monkeypatch.setenv("BULLETIN_SIMULATED_GPUS", "0")
    said = _gpu_share.apply_gpu_fraction()
    if torch.cuda.is_available():
        assert said == "GPU share 0.5: PyTorch's GPU memory capped to 0.5 of device 0"
        total = torch.cuda.get_device_properties(0).total_memory
        with pytest.raises(torch.cuda.OutOfMemoryError):
            torch.empty(int(total * 0.6), dtype=torch.uint8, device="cuda:0")
    else:
        assert said == "GPU share 0.5 (PyTorch sees no CUDA device: GPU memory not capped)"


class _StandInCuda:
    """Stands in for torch.cuda where no GPU is (the boundary a CPU machine cannot cross)."""

    def __init__(self, initialized: bool):
        self.initialized, self.emptied = initialized, 0

    def is_initialized(self):
        return self.initialized

    def empty_cache(self):
        self.emptied += 1


@pytest.mark.parametrize("initialized, emptied", [(True, 1), (False, 0)])
def test_a_call_that_used_cuda_gives_the_cached_memory_back(monkeypatch, initialized, emptied):
    cuda = _StandInCuda(initialized)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    _gpu_share.release_cached_gpu_memory()
    assert cuda.emptied == emptied


def test_an_executor_that_never_imported_torch_does_not_import_it(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    _gpu_share.release_cached_gpu_memory()
    assert "torch" not in sys.modules


def test_on_a_real_gpu_the_freed_blocks_leave_the_process():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here")
    block = torch.empty(256 << 20, dtype=torch.uint8, device="cuda:0")
    del block
    assert torch.cuda.memory_reserved(0) >= 256 << 20  # cached by the allocator
    _gpu_share.release_cached_gpu_memory()
    assert torch.cuda.memory_reserved(0) < 256 << 20
