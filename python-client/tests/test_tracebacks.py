"""Remote frames rebuilt as a real traceback (no cluster)."""

import linecache
import traceback

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
    assert [(f.name, f.lineno) for f in frames][-3:] == [("caller", 13), ("train", 12),
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
