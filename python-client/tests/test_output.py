"""A call's output on its way to the caller: whole lines, a label while calls overlap, and the
cell it belongs to (bulletin/_output.py). The end-to-end tests, in a real Jupyter kernel, are in
e2e/test_notebook_output.py."""

from __future__ import annotations

import pytest

import bulletin
from bulletin._future import Future
from bulletin._output import CallOutput, OutputPolicy, call_label, kernel_route


def test_text_is_held_until_its_line_ends():
    out = CallOutput("f-abc123")
    assert out.lines("stdout", "call 27 ") == ""
    assert out.lines("stdout", "line 0\ncall 27 li") == "call 27 line 0\n"
    assert out.lines("stderr", "warn\n") == "warn\n"  # each stream keeps its own partial line
    assert out.lines("stdout", "ne 1\n") == "call 27 line 1\n"


def test_a_carriage_return_ends_a_line_too_so_progress_bars_move():
    out = CallOutput("f-abc123")
    assert out.lines("stdout", " 10%\r 20%\r 3") == " 10%\r 20%\r"


def test_the_unfinished_last_line_is_written_as_a_line_of_its_own_at_the_end():
    out = CallOutput("f-abc123")
    out.lines("stdout", "done\nno newline")
    out.lines("stderr", "half")
    assert out.rest() == [("stdout", "no newline\n"), ("stderr", "half\n")]
    assert out.rest() == []


def test_lines_get_the_call_label_once_another_call_is_in_flight_and_keep_it():
    policy = OutputPolicy()
    out = policy.open("train-3f2a1c9d8e7f60514233445566778899")
    assert out.lines("stdout", "alone\n") == "alone\n"
    other = policy.open("eval-0123456789abcdef0123456789abcdef")
    assert out.lines("stdout", "a\nb\n") == "[train-3f2a1c] a\n[train-3f2a1c] b\n"
    other.rest()  # the other call ended: this call's lines stay recognisable
    assert out.lines("stdout", "c\n") == "[train-3f2a1c] c\n"


def test_the_last_call_of_a_map_keeps_its_label_after_the_others_ended():
    policy = OutputPolicy()
    calls = [policy.open(f"shout-{n:032x}") for n in range(3)]
    for call in calls[:2]:
        call.rest()
    assert calls[2].lines("stdout", "late\n") == f"[{call_label(f'shout-{2:032x}')}] late\n"
    calls[2].rest()
    assert policy.open("next-0123456789abcdef0123456789abcdef").lines("stdout", "x\n") == "x\n"


def test_the_label_can_be_turned_off():
    policy = OutputPolicy(prefix=False)
    policy.open("a-0123456789abcdef0123456789abcdef")
    assert policy.open("train-3f2a1c").lines("stdout", "a\n") == "a\n"


def test_the_label_is_the_start_of_the_key_as_the_future_shows_it():
    assert call_label("train-3f2a1c9d8e7f60514233445566778899") == "train-3f2a1c"
    assert call_label("my.key-0123456789abcdef0123456789abcdef") == "my.key-012345"
    assert call_label("nodash") == "nodash"


def test_outside_a_kernel_output_goes_to_sys_stdout_as_before(capsys):
    assert kernel_route() is None
    future = Future("f-0123456789abcdef", "f", lambda f: None)
    future._add_output("stdout", "hé".encode()[:2])  # a character cut in two by the pipe
    future._add_output("stdout", "hé\n".encode()[2:])
    future._add_output("stderr", b"oops")
    assert capsys.readouterr() == ("hé\n", "")
    future._set_finished(1)
    assert capsys.readouterr() == ("", "oops\n")
    assert future.output == "hé\noops"


def test_output_prefix_must_be_a_bool():
    with pytest.raises(bulletin.InvalidArgumentError, match="output_prefix='no'"):
        bulletin.Client("127.0.0.1:1", output_prefix="no")
