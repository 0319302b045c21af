"""The executor's wire format: one call in (ExecutorCall.java), one reply out
(ExecutorReply.java), JSON over Py4J."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import NamedTuple


class Call(NamedTuple):
    """One call as the agent sends it: JSON ``{"task", "function", "args", "refs", "result"}``,
    paths of store files, ``refs`` mapping each argument object's id to its path."""
    task_id: str
    function_path: str
    args_path: str
    refs: dict
    result_path: str
    # The user's spilled resident values this worker holds: handle id -> spill object's path.
    spilled: dict = {}
    # The user's resident values this worker dropped: handle id -> why (the next call says so).
    dropped: dict = {}
    # The client session that submitted the call: what it keeps is that session's ("": none).
    session: str = ""

    @staticmethod
    def from_wire(text: str) -> "Call":
        try:
            fields = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"the agent's call is not JSON: {exc}") from None
        if not isinstance(fields, dict):
            raise ValueError(f"the agent's call is not a JSON object: {text[:80]!r}")
        call = Call(fields.get("task"), fields.get("function"), fields.get("args"),
                    fields.get("refs", {}), fields.get("result"), fields.get("spilled", {}),
                    fields.get("dropped", {}), fields.get("session") or "")
        for name, value in (("task", call.task_id), ("function", call.function_path),
                            ("args", call.args_path), ("result", call.result_path)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"the agent's call has no valid {name!r}: {value!r}")
        if not isinstance(call.refs, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in call.refs.items()):
            raise ValueError(f"the agent's call has malformed 'refs' (id -> path): {call.refs!r}")
        if not isinstance(call.spilled, dict) or not isinstance(call.dropped, dict):
            raise ValueError(f"the agent's call has malformed 'spilled': {call.spilled!r}")
        if not isinstance(call.session, str):
            raise ValueError(f"the agent's call has a malformed 'session': {call.session!r}")
        return call


@dataclass(frozen=True)
class Finished:
    """The call ended: its result (or error envelope, ``raised``) is in the result file, or the
    store already holds it under ``result``. ``retire`` says why this executor must not run
    another call (a process limit the call changed and that cannot be set back), else empty."""
    result: str
    size: int
    raised: bool
    run_seconds: float
    retire: str = ""
    keeps: int = 0  # bytes of values kept in this executor (_resident): spilled before it ends
    calls: int | None = None  # a lease's: the calls it ran (the ledger counts each of them)


@dataclass(frozen=True)
class Stage:
    """A large result is encoded and waits: the agent may stage a released object's file at the
    result path (its memory is allocated already), then calls ``commit``. ``mapped``: objects
    whose files this executor still maps, which the agent gives back first."""
    size: int
    mapped: tuple
    spare_ready: bool = False  # a spare of its own fits: the agent need not hand out arena memory


@dataclass(frozen=True)
class Unfit:
    """The executor could not load the call, and an earlier call may have damaged its process
    (a lowered memory limit, a broken import state): the call did not run. The agent retires
    this executor and runs the call on a fresh one, which decides whether the call is at fault."""
    reason: str


def _for_py4j(exc: BaseException) -> Exception:
    """What the Py4J entry points raise for ``exc``: py4j answers the agent only for an
    Exception; a SystemExit or KeyboardInterrupt would end its connection's thread with no
    answer, and the agent would wait for that call for good."""
    if isinstance(exc, Exception):
        return exc
    return RuntimeError(f"the executor's call ended with {exc!r}")


def to_wire(reply) -> str:
    """The one place a reply is written (parsed in one place too: ExecutorReply.parse)."""
    if type(reply) is Finished and not reply.retire and not reply.keeps and reply.calls is None:
        # Every call's reply, so written directly: the id is hex, the rest are numbers.
        return (f'{{"kind": "finished", "result": "{reply.result}", "size": {reply.size:d}, '
                f'"raised": {"true" if reply.raised else "false"}, '
                f'"run_seconds": {float(reply.run_seconds):.9f}}}')
    if isinstance(reply, Finished):
        fields = {"kind": "finished", "result": reply.result, "size": reply.size,
                  "raised": reply.raised, "run_seconds": reply.run_seconds}
        if reply.retire:
            fields["retire"] = reply.retire
        if reply.keeps:
            fields["keeps"] = reply.keeps
        if reply.calls is not None:
            fields["calls"] = reply.calls
    elif isinstance(reply, Stage):
        fields = {"kind": "stage", "size": reply.size, "mapped": list(reply.mapped),
                  "spare_ready": reply.spare_ready}
    elif isinstance(reply, Unfit):
        fields = {"kind": "unfit", "reason": reply.reason}
    else:
        raise TypeError(f"not an executor reply: {reply!r}")
    return json.dumps(fields)
