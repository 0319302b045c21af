"""Rich displays (``display()``, a figure, an HTML repr) from a call to the notebook cell.

A call's output reaches the client as text, so a display travels as one line of its stdout:
``"\\x1eBULLETIN-DISPLAY <base64 of the JSON {"data": mime bundle, "metadata": {}}>\\n"``. The
client shows it as Jupyter shows a display (``display_data`` under the call's cell), or, outside
a notebook, prints its text/plain part. Only for calls that asked (``%%bulletin`` cells, whose
code would display the same run here): any other call's output stays text, since a function
printing data it was given (a scraped page) must not put that data's HTML and scripts into the
notebook.
"""

from __future__ import annotations

import base64
import io
import json
import re

MARKER = "\x1eBULLETIN-DISPLAY "

_REPRS = (("_repr_html_", "text/html"), ("_repr_markdown_", "text/markdown"),
          ("_repr_svg_", "image/svg+xml"), ("_repr_png_", "image/png"),
          ("_repr_jpeg_", "image/jpeg"), ("_repr_latex_", "text/latex"),
          ("_repr_json_", "application/json"))


def display_line(bundle: dict) -> str:
    payload = json.dumps({"data": bundle, "metadata": {}}).encode()
    return MARKER + base64.b64encode(payload).decode("ascii") + "\n"


def mime_bundle(obj) -> dict:
    """The MIME bundle IPython would make of ``obj`` from its ``_repr_*_`` methods."""
    bundle = {}
    if not isinstance(obj, type):  # a class's _repr_html_ is an unbound method
        mimebundle = getattr(obj, "_repr_mimebundle_", None)
        if callable(mimebundle):
            bundle.update(_called(mimebundle, {}) or {})
        for method, mime in _REPRS:
            render = getattr(obj, method, None)
            if mime not in bundle and callable(render):
                value = _called(render, None)
                if value is not None:
                    bundle[mime] = _text(value)
        if _is_figure(obj):
            bundle.update(figure_bundle(obj))
    bundle.setdefault("text/plain", repr(obj))
    return bundle


def figure_bundle(figure) -> dict:
    """A matplotlib figure as the inline backend shows it: a PNG."""
    png = io.BytesIO()
    figure.savefig(png, format="png", bbox_inches="tight")
    return {"image/png": base64.b64encode(png.getvalue()).decode("ascii"),
            "text/plain": repr(figure)}


def split(text: str) -> list[tuple[str, object]]:
    """``text`` as ("text", str) and ("display", {"data", "metadata"}) pieces, in order. A
    line that only looks like a display (bad base64 or JSON) stays text."""
    if MARKER not in text:
        return [("text", text)]
    pieces: list[tuple[str, object]] = []
    plain = []
    for line in lines(text):
        start = line.find(MARKER)
        message = _decoded(line[start + len(MARKER):]) if start >= 0 else None
        if message is None:
            plain.append(line)
            continue
        if plain:  # what comes before the marker on its line is a call's label: dropped
            pieces.append(("text", "".join(plain)))
            plain = []
        pieces.append(("display", message))
    if plain:
        pieces.append(("text", "".join(plain)))
    return [(kind, value) for kind, value in pieces if kind == "display" or value]


def lines(text: str) -> list[str]:
    """``text`` cut after each newline or carriage return (a progress bar's line), ends kept.
    Not ``str.splitlines``, which also cuts at \\x1e, the marker's first character."""
    return [line for line in re.split(r"(?<=[\n\r])", text) if line]


def show(message: dict) -> None:
    """Shows a display here: in IPython as a display, else its text."""
    try:
        from IPython import get_ipython
        from IPython.display import publish_display_data
    except ImportError:
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        publish_display_data(message["data"], message.get("metadata") or {})
        return
    import sys
    if sys.stdout is not None:
        sys.stdout.write(str(message["data"].get("text/plain", "")) + "\n")
        sys.stdout.flush()


def _decoded(payload: str):
    try:
        message = json.loads(base64.b64decode(payload.strip(), validate=True))
    except ValueError:
        return None
    if not isinstance(message, dict) or not isinstance(message.get("data"), dict):
        return None
    return message


def _called(method, default):
    try:
        return method()
    except Exception:  # noqa: BLE001 - a broken repr shows as text, as IPython does
        return default


def _text(value):
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, tuple):  # (data, metadata), as IPython allows
        return _text(value[0])
    return value


def _is_figure(obj) -> bool:
    return any(cls.__module__ == "matplotlib.figure" and cls.__name__ == "Figure"
               for cls in type(obj).__mro__)
