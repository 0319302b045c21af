"""The executor's side of fractional GPUs: what it reads from BULLETIN_GPU_FRACTION and what it
caps (docs/scheduler.md, "Fractional GPUs")."""

from __future__ import annotations

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
