"""Every error bulletin raises itself; each message says what to do about it."""

from __future__ import annotations

import pickle


class BulletinError(Exception):
    """Base class of the errors of bulletin itself (not of your function)."""


class InvalidArgumentError(BulletinError, ValueError):
    """A resource or option value bulletin cannot understand (e.g. memory="lots")."""


class SerializationError(BulletinError, TypeError, pickle.PicklingError):
    """The function or one of its arguments cannot be pickled; nothing was sent. A
    ``pickle.PicklingError`` too, as the standard executors report it."""


class ResultSerializationError(BulletinError, pickle.PicklingError):
    """The remote function returned a value that cannot be pickled back to the caller. A
    ``pickle.PicklingError`` too, as the standard executors report it."""


class RuntimeUnreachableError(BulletinError, ConnectionError):
    """No bulletin runtime answers at the address, or it went away."""


class TlsError(RuntimeUnreachableError):
    """TLS does not match between this client and the runtime: it speaks TLS and no CA was
    found here, its certificate is not signed by the CA used here, or it speaks plaintext where
    TLS was expected. The message names the CA used, where it looked, and what to do."""


class AuthenticationError(BulletinError):
    """The runtime does not know the token."""


class RemoteError(BulletinError):
    """The remote function raised an exception that cannot be rebuilt here.

    Raised when the exception's type is not importable in this process or could not be
    pickled remotely, and for a remote ``SystemExit`` or ``KeyboardInterrupt`` (which must not
    end this program); ``type_name``, ``remote_message`` and ``remote_traceback`` say what it
    was. The remote traceback is also its ``__cause__`` (a ``RemoteTraceback``), printed above
    it, as for any remote exception.
    """

    def __init__(self, type_name: str, message: str, traceback: str):
        super().__init__(f"the remote call raised {type_name}: {message} (raised here as a "
                         "bulletin.RemoteError; its remote traceback is this error's cause)")
        self.type_name = type_name
        self.remote_message = message
        self.remote_traceback = traceback
        cause = RemoteTraceback(traceback)
        cause._whole = True  # the whole remote traceback (see _tracebacks.attach_remote_cause)
        self.__cause__ = cause

    def __reduce__(self):
        return (type(self), (self.type_name, self.remote_message, self.remote_traceback))


class InfeasibleError(BulletinError):
    """No worker of the cluster could ever run the call with the resources it asks for."""


class WorkerDiedError(BulletinError):
    """The process running the call died (exit, signal, out of memory)."""


class MemoryLimitError(BulletinError, MemoryError):
    """The call went over the memory it asked for (``memory=``); the message names the limit.
    Its executor is replaced; ask for more memory, or allocate less."""


class CallEnvironmentError(BulletinError):
    """The call's Python environment cannot be had on its worker: it was made from another
    Python version, or building its ``pip=[...]`` environment failed. The message names both
    sides and what to do."""


class WorkerLostError(WorkerDiedError):
    """The worker running the call went away (stopped, killed, its allocation ended)."""


class CallTimeoutError(BulletinError, TimeoutError):
    """The call ran past its timeout and was stopped."""


class InvalidRequestError(BulletinError, ValueError):
    """The runtime rejected the request as malformed."""


class RuntimeFailure(BulletinError):
    """The runtime itself failed the call."""


class RemoteTraceback(Exception):
    """The remote traceback's text (``tb``), as the ``__cause__`` of a remote exception raised
    here: as ``concurrent.futures.ProcessPoolExecutor`` does, so it is still there where a
    framework dropped the exception's ``__traceback__``, and it prints above the local one.
    """

    def __init__(self, tb: str):
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return f'\n"""\n{self.tb.rstrip()}\n"""'


class StoreFullError(BulletinError):
    """An object does not fit in the cluster's object store; nothing was uploaded."""
