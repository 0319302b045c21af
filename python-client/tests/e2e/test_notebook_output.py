"""A call's output in a real Jupyter kernel (ipykernel, driven by jupyter_client and nbclient):
under the cell that started the call, whole lines, labelled while calls overlap."""

from __future__ import annotations

import re
import textwrap
import time

import nbformat
import pytest
from jupyter_client.manager import start_new_kernel
from nbclient import NotebookClient

KERNEL_SECONDS = 60


def connect_code(cluster, **options) -> str:
    extra = "".join(f", {name}={value!r}" for name, value in options.items())
    return (f"import bulletin, time\n"
            f"client = bulletin.Client({cluster.address!r}, token={cluster.token!r}{extra})\n")


@pytest.fixture
def kernel():
    manager, kc = start_new_kernel(kernel_name="python3", startup_timeout=KERNEL_SECONDS)
    try:
        yield kc
    finally:
        kc.stop_channels()
        manager.shutdown_kernel(now=True)


def run_cell(kc, code: str, streams: dict[str, list[str]]) -> str:
    """Runs one cell and reads IOPub until the kernel is idle after it; every stream message
    read on the way is filed under its parent cell's msg_id (nbclient keeps only the running
    cell's messages, so the routing to an earlier cell is read here by hand)."""
    msg_id = kc.execute(code)
    deadline = time.monotonic() + KERNEL_SECONDS
    while time.monotonic() < deadline:
        msg = kc.get_iopub_msg(timeout=KERNEL_SECONDS)
        parent = msg["parent_header"].get("msg_id")
        kind = msg["msg_type"]
        if kind == "stream":
            streams.setdefault(parent, []).append(msg["content"]["text"])
        elif kind == "error":
            pytest.fail(f"the cell failed: {msg['content']['evalue']}\n{code}")
        elif kind == "status" and parent == msg_id and msg["content"]["execution_state"] == "idle":
            return msg_id
    pytest.fail(f"the cell did not finish within {KERNEL_SECONDS} s:\n{code}")


def test_output_of_a_call_goes_under_the_cell_that_started_it(cluster, kernel):
    streams: dict[str, list[str]] = {}
    setup = run_cell(kernel, connect_code(cluster) + textwrap.dedent("""\
        def late():
            time.sleep(1)
            for i in range(3):
                print(f"late line {i}")
        """), streams)
    cell_a = run_cell(kernel, "f = client.submit(late)", streams)
    # Cell B runs while the call prints: the call's output arrives before it ends.
    cell_b = run_cell(kernel, textwrap.dedent("""\
        while not f.done():
            time.sleep(0.05)
        print("cell B ran")
        """), streams)
    cell_c = run_cell(kernel, "f.result(); client.close()", streams)
    assert "".join(streams.get(cell_a, [])) == "late line 0\nlate line 1\nlate line 2\n"
    assert "".join(streams.get(cell_b, [])) == "cell B ran\n"
    assert not streams.get(setup) and not streams.get(cell_c)


def test_forty_calls_printing_at_once_never_merge_a_line_and_say_which_call_printed(cluster):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(connect_code(cluster) + textwrap.dedent("""\
            def shout(n):
                for i in range(5):
                    print(f"call {n} line {i}")  # print writes the text and its newline apart
                    time.sleep(0.001)
            """)),
        nbformat.v4.new_code_cell("fs = client.map(shout, range(40))\n"
                                  "client.gather(fs)\n"
                                  "print('keys', *[f.key for f in fs])"),
        nbformat.v4.new_code_cell("client.output_prefix = False\n"
                                  "client.gather(client.map(shout, range(40)))\n"
                                  "client.close()"),
    ]
    NotebookClient(nb, timeout=KERNEL_SECONDS, kernel_name="python3").execute()
    labelled, plain = (stdout_lines(nb.cells[i]) for i in (1, 2))
    keys = labelled.pop().split()[1:]
    labels = {n: re.escape(f"[{key[:key.rindex('-') + 7]}] ") for n, key in enumerate(keys)}
    assert len(labelled) == 200 and len(plain) == 200
    for line in labelled:
        match = re.fullmatch(r"(\[shout-[0-9a-f]{6}\] )call (\d+) line \d", line)
        assert match, f"merged or unlabelled line: {line!r}"
        assert re.fullmatch(labels[int(match.group(2))], match.group(1)), line
    assert all(re.fullmatch(r"call \d+ line \d", line) for line in plain), plain
    assert sorted(plain) == sorted(line.split("] ", 1)[1] for line in labelled)


def stdout_lines(cell) -> list[str]:
    return "".join(out.get("text", "") for out in cell.outputs
                   if out.output_type == "stream" and out.name == "stdout").splitlines()
