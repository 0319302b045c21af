"""Remote frames rebuilt as a real traceback (no cluster)."""

import linecache
import traceback

import pytest

from bulletin._tracebacks import build_traceback

FRAMES = [("/remote/only/notebook_cell.py", 12, "train", "loss = model(x) / 0"),
          ("/remote/only/lib.py", 40, "step", "")]


def caller(exc, tb):
    raise exc.with_traceback(tb)


def test_remote_frames_follow_the_callers_own():
    tb = build_traceback(FRAMES)
    try:
        caller(ZeroDivisionError("division by zero"), tb)
    except ZeroDivisionError as exc:
        frames = traceback.extract_tb(exc.__traceback__)
    assert [(f.name, f.lineno) for f in frames][-3:] == [("caller", 15), ("train", 12),
                                                           ("step", 40)]
    assert frames[-2].filename == "/remote/only/notebook_cell.py"


def test_a_remote_source_line_unknown_here_is_shown():
    text = "".join(traceback.format_tb(build_traceback(FRAMES)))
    assert 'File "/remote/only/notebook_cell.py", line 12, in train' in text
    assert "loss = model(x) / 0" in text
    assert linecache.getline("/remote/only/notebook_cell.py", 11) == ""


def test_local_sources_win_over_remote_lines():
    here = __file__
    tb = build_traceback([(here, 1, "module", "not the real line")])
    assert "not the real line" not in "".join(traceback.format_tb(tb))


def test_nothing_to_rebuild_is_no_traceback():
    assert build_traceback([]) is None


def test_no_part_of_a_remote_line_is_marked_with_carets(tmp_path):
    # The stub's own columns would mark the remote line from its first character: wrong
    # columns. The interpreter's own printer is checked too (it prints uncaught errors, from
    # files it reads itself).
    import subprocess
    import sys
    source = tmp_path / "cell.py"
    source.write_text("def train():\n    loss = model(x) / 0\n")
    frames = [(str(source), 2, "train", "loss = model(x) / 0")]
    code = ("from bulletin._tracebacks import build_traceback\n"
            f"raise ZeroDivisionError('x').with_traceback(build_traceback({frames!r}))\n")
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stderr
    formatted = "".join(traceback.format_tb(build_traceback(frames)))
    for text in (printed, formatted):
        assert "loss = model(x) / 0" in text and "^" not in text, text


@pytest.mark.timeout(30)
def test_ipython_formats_remote_frames_of_a_notebook_cell():
    # IPython's formatter reads the executing node of each frame: a negative tb_lasti made it
    # loop for good, a code without line numbers made it fail ("Unexpected exception
    # formatting exception"), which a notebook shows instead of the error.
    ultratb = pytest.importorskip("IPython.core.ultratb")
    cell = "/tmp/ipykernel_1/cell.py"
    lines = ["x = 1\n", "y = [x]\n", "y[5]\n"]
    linecache.cache[cell] = (sum(map(len, lines)), None, lines, cell)
    tb = build_traceback([(cell, 3, "<module>", "y[5]")])
    text = ultratb.VerboseTB(theme_name="nocolor").text(IndexError, IndexError("out"), tb)
    assert "----> 3 y[5]" in text and "      1 x = 1" in text
