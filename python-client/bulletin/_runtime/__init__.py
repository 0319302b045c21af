"""What runs inside an executor process: the executor itself (``python -m
bulletin._runtime._executor``, started by a worker agent) and the preemption hooks a call
registers with ``bulletin.on_preempt``.

Nothing here is imported by the client except ``_preempt`` (for ``bulletin.on_preempt``), which
stays free of heavy imports.
"""
