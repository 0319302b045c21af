import sys
import traceback

import cloudpickle
import pytest

import bulletin
from bulletin._envelope import exception_from_envelope, make_envelope


def raised(exc):
    try:
        raise exc
    except BaseException as caught:
        return make_envelope(caught)


def remote_function(lr):
    raise ValueError(f"bad lr {lr}")


def raised_in(fn, *args):
    try:
        fn(*args)
    except BaseException as caught:
        return make_envelope(caught, caught.__traceback__.tb_next)  # as the executor does


def test_importable_exception_comes_back_with_its_type_and_the_remote_frames():
    exc = exception_from_envelope(raised_in(remote_function, 0.1), "train-1")
    assert type(exc) is ValueError and str(exc) == "bad lr 0.1"
    frames = traceback.extract_tb(exc.__traceback__)
    assert [f.name for f in frames] == ["remote_function"]
    assert frames[0].filename == __file__ and 'raise ValueError(f"bad lr {lr}")' in frames[0].line
    assert exc.__cause__ is None  # nothing was chained remotely


def test_what_a_remote_exception_was_raised_from_is_its_cause():
    def chained():
        try:
            {}["missing"]
        except KeyError as error:
            raise RuntimeError("lookup failed") from error

    exc = exception_from_envelope(raised_in(chained))
    assert isinstance(exc.__cause__, bulletin.RemoteTraceback)
    assert "KeyError: 'missing'" in str(exc.__cause__)


def test_a_long_message_is_cut_saying_how_much():
    exc = exception_from_envelope(raised(ValueError("a" * 100_000)))
    message = str(exc)
    assert len(message) < 5000 and "a" * 100 in message
    assert "characters cut" in message and f"{100_000 - 3800:,} of 100,000" in message
    envelope = raised(ValueError("b" * 100_000))
    assert len(envelope["message"]) < 5000 and len(envelope["traceback"]) < 20_000


def test_bulletins_own_frames_are_dropped_from_the_top():
    from bulletin._future import Future
    from bulletin._nested import replace_futures

    def users_code(future):
        return 1 / 0

    # The call enters bulletin's code first (replace_futures, rebuild), which calls the user's.
    envelope = raised_in(replace_futures, [Future("k", "k", None)], users_code)
    assert [frame[2] for frame in envelope["frames"]] == ["users_code"]


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
