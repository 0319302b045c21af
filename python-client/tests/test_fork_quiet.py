"""No gRPC noise at a fork: after ``bulletin.Client()`` in a notebook, every ``!ls`` printed
gRPC's ``fork_posix.cc:71] Other threads are currently calling into gRPC, skipping fork()
handlers`` (issue 27). The client's import turns gRPC's fork handlers off before grpc loads.

Each case runs in a fresh interpreter: a gRPC stream is open and a thread waits inside gRPC for
its next message, as a client's session stream does, and the process forks as a notebook's shell
escape does (pexpect: a pty fork), as ``os.fork`` and ``subprocess`` do; its stderr is read.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

NOISE = "skipping fork() handlers"

SCRIPT = r"""
import os, subprocess, sys, threading, time
if sys.argv[1] == "bulletin":
    import bulletin._connection  # the module bulletin.Client() loads grpc through
from concurrent import futures
import grpc

def stream(request, context):
    while context.is_active():
        time.sleep(0.02)
        yield b"x"

server = grpc.server(futures.ThreadPoolExecutor(2))
server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
    "t.T", {"S": grpc.unary_stream_rpc_method_handler(stream)})])
port = server.add_insecure_port("127.0.0.1:0")
server.start()
channel = grpc.insecure_channel(f"127.0.0.1:{port}")
messages = channel.unary_stream("/t.T/S")(b"")

def read():
    try:
        for _ in messages:
            pass
    except grpc.RpcError:  # cancelled at the end
        pass

threading.Thread(target=read, daemon=True).start()
time.sleep(0.5)
pid, _ = os.forkpty()  # IPython's `!cmd` (pexpect)
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
subprocess.run(["true"], check=True)
os.system("true")
messages.cancel()
channel.close()
server.stop(0)
print("forked")
"""


def run(mode: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("GRPC_")}
    environment.update(env)
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], env=environment,
                          capture_output=True, text=True, timeout=60)


def test_forks_after_the_client_loaded_grpc_print_nothing():
    plain = run("plain")
    assert plain.returncode == 0 and "forked" in plain.stdout, plain.stderr
    if NOISE not in plain.stderr:
        pytest.skip("this grpcio logs nothing at a fork with a thread inside gRPC: nothing to"
                    " check the client against")
    quiet = run("bulletin")
    assert quiet.returncode == 0 and "forked" in quiet.stdout, quiet.stderr
    assert quiet.stderr == ""


def test_a_user_who_asks_for_grpc_fork_support_keeps_it():
    """The client only sets a default. (Not forked here: with fork support on and a thread
    inside gRPC, gRPC's own fork handlers can hang the child, which is gRPC's business.)"""
    code = ("import os, bulletin._connection, grpc; "
            "print(os.environ['GRPC_ENABLE_FORK_SUPPORT'])")
    for asked, seen in ((None, "false"), ("true", "true"), ("1", "1")):
        environment = {k: v for k, v in os.environ.items() if not k.startswith("GRPC_")}
        if asked is not None:
            environment["GRPC_ENABLE_FORK_SUPPORT"] = asked
        out = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0 and out.stdout.strip() == seen, out.stderr
