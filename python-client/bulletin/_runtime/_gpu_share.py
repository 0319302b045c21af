"""A fractional call's GPU share in its executor (docs/scheduler.md, "Fractional GPUs").

The agent starts the executor of a call for a share of one GPU (``gpus=0.5``) with
``BULLETIN_GPU_FRACTION`` (left in the environment: user code may read it) and
``CUDA_VISIBLE_DEVICES`` naming the one GPU it shares. Where PyTorch is installed and sees CUDA,
the executor caps PyTorch's caching allocator to that share of the GPU's memory before any call
runs. That is an allocator cap, not a hardware limit: memory taken outside PyTorch's allocator
(another framework, the CUDA context itself) is not counted. Under CUDA MPS the agent also sets
``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` and ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``, which the driver
enforces.
"""

from __future__ import annotations

import importlib.util
import os
import sys


def gpu_fraction() -> float:
    """The executor's share of its GPU; 0.0 for an executor of whole GPUs."""
    try:
        fraction = float(os.environ.get("BULLETIN_GPU_FRACTION", "0") or 0)
    except ValueError:
        return 0.0
    return fraction if 0 < fraction < 1 else 0.0


def apply_gpu_fraction() -> str:
    """Caps PyTorch's GPU memory to the share, where it can; says what it did, for the log."""
    fraction = gpu_fraction()
    if not fraction:
        return ""
    if os.environ.get("BULLETIN_SIMULATED_GPUS") == "1":
        return f"GPU share {fraction:g} (simulated GPU: nothing to cap)"
    if importlib.util.find_spec("torch") is None:
        return f"GPU share {fraction:g} (PyTorch not installed: GPU memory not capped)"
    import torch  # noqa: PLC0415 (only executors of shares pay for the import)

    if not torch.cuda.is_available():
        return f"GPU share {fraction:g} (PyTorch sees no CUDA device: GPU memory not capped)"
    torch.cuda.set_per_process_memory_fraction(fraction, 0)
    return f"GPU share {fraction:g}: PyTorch's GPU memory capped to {fraction:g} of device 0"


def release_cached_gpu_memory() -> None:
    """After a call: the GPU memory PyTorch's caching allocator keeps for blocks the call freed
    goes back to the GPU, so the next call on it (another user's executor, another share) finds
    it free. A warm executor would otherwise hold the peak of its last call (measured on an
    H200: a half-GPU call's 56 GiB left a whole-GPU call 82 of 140 GiB). Tensors still
    referenced (a model kept in a global) stay. Nothing to do where the call never used CUDA
    through PyTorch."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001 - a broken CUDA state is the next call's error, not this one's
        pass
