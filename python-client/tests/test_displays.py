"""Notebook displays escape what users control, link only to a real dashboard, and the
progress bars appear only when asked for and go away when done."""

from __future__ import annotations

from bulletin import _progress
from bulletin._future import Future
from bulletin._proto import bulletin_pb2 as pb
from bulletin._usage import UsageReport

EVIL = "<script>alert(1)</script>"


def test_future_html_escapes_name_and_output_and_shows_timings():
    f = Future("key-1", EVIL, lambda future: None)
    f._output.append("<img src=x onerror=alert(2)>\n")
    f._timings.update({"queue": 0.25, "run": 1.5})
    html = f._repr_html_()
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;" in html and "&lt;img" in html
    assert "queue" in html and "0.250 s" in html and "1.500 s" in html


def test_usage_report_html_escapes_users_and_links_only_http_dashboards():
    reply = pb.UsageReport(since=1, until=3601, by="user", all_users=True, rows=[pb.UsageRow(
        user=EVIL, group="g", calls=2, gpu_seconds_reserved=7200, gpu_seconds_busy=3600)])
    report = UsageReport._from_proto(reply, "javascript:alert(3)")
    html = report._repr_html_()
    assert "<script>" not in html and "javascript:" not in html
    assert "50%" in html and "2.00" in html
    linked = UsageReport._from_proto(reply, "http://head:8780/")._repr_html_()
    assert 'href="http://head:8780/"' in linked
    assert report.rows[0].busy_ratio == 0.5
    assert "busy_ratio" in report.to_csv().splitlines()[0]


def test_progress_is_off_outside_a_terminal_and_when_turned_off(monkeypatch):
    # pytest's stderr is not a terminal: no bar, whatever the size.
    assert not _progress.enabled()
    assert _progress.upload_bar(1 << 30, "upload") is None
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    monkeypatch.setenv("BULLETIN_PROGRESS", "0")
    assert not _progress.enabled()


def test_queue_wait_bar_follows_the_position_and_goes_away(monkeypatch):
    monkeypatch.setattr(_progress, "enabled", lambda: True)
    monkeypatch.setattr(_progress, "QUEUE_GRACE_SECONDS", 0.0)
    assert _progress.upload_bar(1 << 20, "small") is None  # under the threshold
    wait = _progress.QueueWait("train")
    wait.update("queued", 3)
    assert wait._bar is not None and wait._bar.n == 0
    wait.update("queued", 1)
    assert wait._bar.n == 2
    wait.update("running", None)
    assert wait._bar is None


def test_a_display_line_comes_out_as_a_display_between_its_text():
    from bulletin import _displays
    line = _displays.display_line({"text/plain": "3", "text/html": "<b>3</b>"})
    pieces = _displays.split("before\n[call-1a2b3c] " + line + "after\r")
    assert pieces == [("text", "before\n"),
                      ("display", {"data": {"text/plain": "3", "text/html": "<b>3</b>"},
                                   "metadata": {}}),
                      ("text", "after\r")]


def test_a_line_that_only_looks_like_a_display_stays_text():
    from bulletin import _displays
    text = _displays.MARKER + "not base64!\n" + _displays.MARKER + "bm90IGpzb24=\n"
    assert _displays.split(text) == [("text", text)]


def test_a_values_rich_reprs_make_its_bundle():
    from bulletin import _displays

    class Rich:
        def _repr_html_(self):
            return "<i>rich</i>"

        def _repr_png_(self):
            return b"\x89PNG"

        def __repr__(self):
            return "Rich()"

    class Broken:
        def _repr_html_(self):
            raise ValueError("no html")

    assert _displays.mime_bundle(Rich()) == {"text/html": "<i>rich</i>",
                                            "image/png": "iVBORw==", "text/plain": "Rich()"}
    assert list(_displays.mime_bundle(Broken())) == ["text/plain"]
