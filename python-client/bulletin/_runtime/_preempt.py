"""Checkpoint hooks for preemption: ``bulletin.on_preempt(save)``.

A preemptible call (QoS class ``scavenger``, or work borrowing another group's idle GPUs) can be
stopped to give its GPUs back. Before that, its executor gets SIGUSR1 and runs the hooks the
call registered; once they have returned (at once when there are none) it tells the agent, which
stops it then. The cluster's ``preemption_grace`` (default 30 s) is the longest the hooks may
take: past it the call is stopped anyway. The call is then requeued and runs again from the
start, so a hook that saves a checkpoint lets the next run resume. The hooks run on the executor's main thread while the call's own thread
keeps running: keep them short, and make what they read safe to read concurrently.

Hooks belong to the call that registered them: each call starts with none. Outside an executor
(``fn.local(...)``, plain Python) registering is harmless and nothing calls them.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
from typing import Callable

_hooks: list[Callable[[], object]] = []
_lock = threading.Lock()
_task_id = ""


def on_preempt(hook: Callable[[], object]) -> Callable[[], object]:
    """Registers ``hook()`` to run if the current call is preempted; returns it (a decorator)."""
    if not callable(hook):
        raise TypeError(f"on_preempt needs a function to call, got {type(hook).__name__}")
    with _lock:
        _hooks.append(hook)
    return hook


def _begin_call(task_id: str = "") -> None:
    """A new call starts with no hooks (the previous call's must not run for it)."""
    global _task_id
    with _lock:
        _hooks.clear()
        _task_id = task_id


def _run_hooks(signum=None, frame=None) -> None:
    with _lock:
        hooks = list(_hooks)
        task_id = _task_id
    print(f"[bulletin] preempted: running {len(hooks)} checkpoint hook(s)", file=sys.stderr,
          flush=True)
    for hook in hooks:
        try:
            hook()
        except BaseException:  # noqa: BLE001 - a failing hook must not kill the executor
            traceback.print_exc()
            sys.stderr.flush()
    # The call is safe to stop now: the agent stops it on this line instead of waiting out the
    # grace (OutputPump recognises it; the agent honours it only for a call it preempts).
    os.write(2, f"\x1eBULLETIN-PREEMPT-SAFE {task_id}\n".encode())


def _install() -> None:
    """Called once by the executor: SIGUSR1 runs the current call's hooks."""
    signal.signal(signal.SIGUSR1, _run_hooks)
