"""bulletin: run one Python function on a GPU of a shared cluster.

    import bulletin

    @bulletin.gpu
    def train(n): ...

    train(10)                # runs remotely, prints its output here, returns its value
    f = train.submit(10)     # a bulletin.Future
"""

from ._decorators import RemoteFunction, cpu, gpu
from ._errors import (
    AuthenticationError,
    BulletinError,
    CallEnvironmentError,
    CallTimeoutError,
    InfeasibleError,
    InvalidArgumentError,
    InvalidRequestError,
    MemoryLimitError,
    RemoteError,
    RemoteTraceback,
    ResultSerializationError,
    RuntimeFailure,
    RuntimeUnreachableError,
    SerializationError,
    StoreFullError,
    TlsError,
    WorkerDiedError,
    WorkerLostError,
)
from ._runtime._preempt import on_preempt
from ._as_completed import as_completed
from ._cf_executor import Executor
from ._future import ALL_COMPLETED, FIRST_COMPLETED, FIRST_EXCEPTION, Future, WaitInfo, wait
from ._ref import Ref
from ._resident import Resident, ResidentLostError
from ._version import __version__

# Client and get_client load grpc; they are imported on first access (PEP 562) so that
# `import bulletin` stays cheap, above all in the executor processes.
_LAZY = {"Client": "._client", "get_client": "._client", "ClusterStatus": "._status",
         "UsageReport": "._usage", "cell_runs": "._magic", "CellRun": "._magic"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bulletin' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "ALL_COMPLETED", "FIRST_COMPLETED", "FIRST_EXCEPTION",
    "AuthenticationError", "BulletinError", "CallEnvironmentError", "CellRun", "CallTimeoutError", "Client",
    "ClusterStatus", "Executor", "Future", "InfeasibleError", "InvalidArgumentError", "InvalidRequestError",
    "MemoryLimitError", "RemoteError",
    "Ref", "RemoteFunction", "Resident", "ResidentLostError", "RemoteTraceback", "ResultSerializationError", "RuntimeFailure",
    "RuntimeUnreachableError", "SerializationError", "StoreFullError", "TlsError",
    "UsageReport",
    "WorkerDiedError", "WaitInfo", "WorkerLostError", "__version__",
    "as_completed", "cell_runs", "cpu", "get_client", "gpu", "on_preempt", "wait",
]


def load_ipython_extension(ipython) -> None:
    """``%load_ext bulletin``: registers ``%%bulletin`` and ``%bulletin`` (docs/notebooks.md)."""
    from ._magic import register
    register(ipython)


# In a notebook, `import bulletin` registers the magic too; elsewhere IPython is not loaded and
# this costs nothing (executors import bulletin).
if "IPython" in __import__("sys").modules:
    from ._magic import register_in_running_kernel as _register

    _register()
    del _register
