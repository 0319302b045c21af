"""Compact HTML tables for notebook displays (_repr_html_). Every cell is escaped: function
names, users and outputs are the user's text."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

_STYLE = ("border-collapse:collapse;font-size:12px;font-family:var(--jp-code-font-family,"
          "monospace)")
_CELL = "padding:1px 8px;text-align:left;border-bottom:1px solid #ddd"


def html_table(title: str, header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    head = "".join(f'<th style="{_CELL}">{html.escape(str(h))}</th>' for h in header)
    body = "".join("<tr>" + "".join(f'<td style="{_CELL}">{html.escape(str(c))}</td>'
                                    for c in row) + "</tr>" for row in rows)
    return (f'<div><strong>{html.escape(title)}</strong>'
            f'<table style="{_STYLE}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


def html_fields(title: str, fields: Iterable[tuple[str, object]]) -> str:
    """A two-column table of name and value."""
    return html_table(title, ("", ""), [(k, v) for k, v in fields if v not in (None, "")])


def link_line(url: str) -> str:
    """A link to the dashboard, when the runtime serves one (only http(s) links)."""
    if not url or not url.startswith(("http://", "https://")):
        return ""
    safe = html.escape(url, quote=True)
    return f'<div style="font-size:12px"><a href="{safe}" target="_blank">dashboard</a></div>'
