import sys

import cloudpickle
import pytest

import bulletin
from bulletin._envelope import exception_from_envelope, make_envelope


def raised(exc):
    try:
        raise exc
    except BaseException as caught:
        return make_envelope(caught)


def test_importable_exception_comes_back_with_its_type_and_remote_traceback_as_cause():
    exc = exception_from_envelope(raised(ValueError("bad lr")), "train-1")
    assert type(exc) is ValueError and str(exc) == "bad lr"
    assert isinstance(exc.__cause__, bulletin.RemoteTraceback)
    assert "ValueError: bad lr" in str(exc.__cause__)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="add_note is 3.11+")
def test_rebuilt_exception_notes_the_task_it_came_from():
    exc = exception_from_envelope(raised(ValueError("x")), "train-1")
    assert any("train-1" in note for note in exc.__notes__)


def test_exception_of_a_type_not_importable_here_becomes_remote_error():
    envelope = {"type": "torch.cuda.OutOfMemoryError", "message": "CUDA out of memory",
                "traceback": "Traceback ...\ntorch.cuda.OutOfMemoryError: CUDA out of memory\n",
                # what cloudpickle wrote remotely for a class importable only there
                "exception": cloudpickle.dumps(ValueError).replace(b"builtins", b"nomodule")}
    exc = exception_from_envelope(envelope)
    assert isinstance(exc, bulletin.RemoteError) and isinstance(exc, bulletin.BulletinError)
    assert exc.type_name == "torch.cuda.OutOfMemoryError"
    assert "CUDA out of memory" in str(exc) and "Traceback" in exc.remote_traceback


def test_exception_that_was_not_picklable_remotely_becomes_remote_error():
    envelope = {"type": "mylib.Weird", "message": "m", "traceback": "tb", "exception": None}
    assert isinstance(exception_from_envelope(envelope), bulletin.RemoteError)


def test_remote_system_exit_does_not_exit_the_caller():
    exc = exception_from_envelope(raised(SystemExit(2)))
    assert isinstance(exc, bulletin.RemoteError) and exc.type_name == "SystemExit"


def test_remote_error_survives_pickling():
    exc = bulletin.RemoteError("a.B", "msg", "tb")
    again = cloudpickle.loads(cloudpickle.dumps(exc))
    assert (again.type_name, again.remote_message, again.remote_traceback) == ("a.B", "msg", "tb")
