"""The usage ledger as `bulletin usage` and Client.usage() show it: per user or group over a
period, GPU-hours reserved against GPU-hours busy, calls and credits."""

from __future__ import annotations

import csv
import io
import json
import time
from dataclasses import asdict, dataclass

from ._config import parse_duration
from ._errors import InvalidArgumentError
from ._html import html_table, link_line


@dataclass(frozen=True)
class UsageRow:
    user: str  # empty in a report by group
    group: str
    calls: int
    gpu_hours_reserved: float
    gpu_hours_busy: float
    credits_spent: float
    credits_earned: float  # group rows only
    queued_hours: float
    running_hours: float

    @property
    def busy_ratio(self) -> float | None:
        """GPU-hours busy per GPU-hour reserved; None when nothing was reserved."""
        if self.gpu_hours_reserved <= 0:
            return None
        return self.gpu_hours_busy / self.gpu_hours_reserved

    @classmethod
    def _from_proto(cls, msg) -> UsageRow:
        return cls(msg.user, msg.group, msg.calls, msg.gpu_seconds_reserved / 3600,
                   msg.gpu_seconds_busy / 3600, msg.credits_spent, msg.credits_earned,
                   msg.queued_seconds / 3600, msg.running_seconds / 3600)


_COLUMNS = ("calls", "GPU-h reserved", "GPU-h busy", "busy/reserved", "credits spent",
            "credits earned")


@dataclass(frozen=True)
class UsageReport:
    since: float  # epoch seconds
    until: float
    by: str  # "user" or "group"
    rows: tuple[UsageRow, ...]
    all_users: bool  # False: the caller's own calls only
    dashboard_url: str = ""

    @classmethod
    def _from_proto(cls, msg, dashboard_url: str = "") -> UsageReport:
        return cls(msg.since, msg.until, msg.by,
                   tuple(UsageRow._from_proto(r) for r in msg.rows), msg.all_users,
                   dashboard_url)

    def as_dicts(self) -> list[dict]:
        """One dict per row, with the ratio (None when nothing was reserved)."""
        return [{**asdict(r), "busy_ratio": r.busy_ratio} for r in self.rows]

    def to_json(self) -> str:
        return json.dumps({"since": self.since, "until": self.until, "by": self.by,
                           "all_users": self.all_users, "rows": self.as_dicts()}, indent=2)

    def to_csv(self) -> str:
        out = io.StringIO()
        fields = list(asdict(self.rows[0]).keys()) if self.rows else [
            f for f in UsageRow.__dataclass_fields__]
        writer = csv.DictWriter(out, fieldnames=[*fields, "busy_ratio"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.as_dicts())
        return out.getvalue()

    def _cells(self) -> list[tuple[str, ...]]:
        key = ("user", "group") if self.by == "user" else ("group",)
        rows = [(*key, *_COLUMNS)]
        for r in self.rows:
            ratio = "-" if r.busy_ratio is None else f"{r.busy_ratio:.0%}"
            earned = f"{r.credits_earned:.1f}" if self.by == "group" else "-"
            names = (r.user, r.group) if self.by == "user" else (r.group,)
            rows.append((*names, str(r.calls), f"{r.gpu_hours_reserved:.2f}",
                         f"{r.gpu_hours_busy:.2f}", ratio, f"{r.credits_spent:.1f}", earned))
        return rows

    def _title(self) -> str:
        def day(t: float) -> str:
            return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))
        whose = "all users" if self.all_users else "your calls only"
        return f"usage by {self.by}, {day(self.since)} to {day(self.until)} ({whose})"

    def __str__(self) -> str:
        if not self.rows:
            return self._title() + "\n  no calls ended in this period"
        cells = self._cells()
        widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
        return "\n".join([self._title(), *lines])

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        cells = self._cells()
        return (html_table(self._title(), cells[0], cells[1:])
                + link_line(self.dashboard_url))


def usage_request(since, until, by: str):
    """The UsageRequest for `since` ago (a duration) or an epoch time, up to `until` (now)."""
    from ._proto import bulletin_pb2 as pb
    if by not in ("user", "group"):
        raise InvalidArgumentError(f"by={by!r}: expected 'user' or 'group'")
    now = time.time()
    end = now if until is None else _when(until, "until", now)
    start = _when(since, "since", now)
    if start >= end:
        raise InvalidArgumentError(f"since={since!r} must be before until={until!r}")
    return pb.UsageRequest(since=start, until=end, by=by)


def _when(value, name: str, now: float) -> float:
    """A duration ago ("7d", "12h", seconds as a number) or a datetime."""
    import datetime
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    return now - parse_duration(value, name)
