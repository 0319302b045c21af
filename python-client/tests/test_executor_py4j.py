"""`python -m bulletin._runtime._executor` against a real Py4J GatewayServer in a small Java
program.

The Java side mirrors the worker agent's launch contract (docs/internals.md): a gateway with a
per-launch token, the executor registering its callback port, then run/ping calls. Skipped
where no JDK is installed.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import cloudpickle
import pytest

from py4j.java_gateway import find_jar_path

from bulletin._data._objects import encode, open_object

pytestmark = pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK (javac)")

AGENT = r'''
import dev.bulletin.worker.PythonExecutor;
import java.util.concurrent.*;
import py4j.GatewayServer;

public class Agent {
  public static class Registrar {
    final CompletableFuture<Object[]> got = new CompletableFuture<>();
    public void register(PythonExecutor executor, int callbackPort) {
      got.complete(new Object[] {executor, callbackPort});
    }
  }

  public static void main(String[] args) throws Exception {
    String token = "t0ken-" + System.nanoTime();
    Registrar registrar = new Registrar();
    GatewayServer gateway = new GatewayServer.GatewayServerBuilder().entryPoint(registrar)
        .javaPort(0).javaAddress(java.net.InetAddress.getLoopbackAddress())
        .callbackClient(0, java.net.InetAddress.getLoopbackAddress(), token).authToken(token).build();
    gateway.start(true);
    ProcessBuilder pb = new ProcessBuilder(args[0], "-m", "bulletin._runtime._executor").inheritIO();
    pb.environment().put("BULLETIN_GATEWAY_PORT", Integer.toString(gateway.getListeningPort()));
    pb.environment().put("BULLETIN_GATEWAY_TOKEN", token);
    pb.environment().put("BULLETIN_STORE_DIR", args[1]);
    pb.environment().put("PYTHONUNBUFFERED", "1");
    Process python = pb.start();
    Object[] reg = registrar.got.get(30, TimeUnit.SECONDS);
    gateway.resetCallbackClient(java.net.InetAddress.getLoopbackAddress(), (Integer) reg[1]);
    PythonExecutor executor = (PythonExecutor) reg[0];
    System.out.println("PING " + executor.ping());
    System.out.println("RUN " + executor.run("task-1", args[1] + "/" + args[2],
        args[1] + "/" + args[3], "", args[1] + "/.result-task-1"));
    System.out.flush();
    gateway.shutdown();
    System.out.println("EXIT " + (python.waitFor(20, TimeUnit.SECONDS) ? python.exitValue() : -1));
  }
}
'''

PYTHON_EXECUTOR = '''
package dev.bulletin.worker;
public interface PythonExecutor { String run(String taskId, String functionPath, String argsPath, String refs, String resultPath); String ping(); }
'''


def greet(name):
    print(f"hello {name}")
    return name.upper()


@pytest.fixture(scope="module")
def agent_classes(tmp_path_factory):
    src = tmp_path_factory.mktemp("agent")
    (src / "dev/bulletin/worker").mkdir(parents=True)
    (src / "dev/bulletin/worker/PythonExecutor.java").write_text(PYTHON_EXECUTOR)
    (src / "Agent.java").write_text(AGENT)
    jar = find_jar_path()
    if not jar:
        pytest.skip("the py4j jar is not installed (share/py4j)")
    subprocess.run(["javac", "-cp", str(jar), "-d", str(src), str(src / "Agent.java"),
                    str(src / "dev/bulletin/worker/PythonExecutor.java")], check=True)
    return f"{src}{os.pathsep}{jar}"


def put(store: Path, obj) -> str:
    encoded = encode(obj)
    (store / encoded.digest()).write_bytes(encoded.to_bytes())
    return encoded.digest()


def test_executor_registers_runs_a_call_and_exits_with_the_gateway(agent_classes, tmp_path):
    fid, aid = put(tmp_path, greet), put(tmp_path, (("py4j",), {}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), *sys.path]))
    proc = subprocess.run(["java", "-cp", agent_classes, "Agent", sys.executable, str(tmp_path),
                           fid, aid], capture_output=True, text=True, timeout=60, env=env)
    out = proc.stdout
    assert "PING pong" in out, proc.stderr
    run_line = next(line for line in out.splitlines() if line.startswith("RUN "))
    kind, result_id, size, _ = run_line.split()[1:]
    assert kind == "ok"
    assert open_object(tmp_path / ".result-task-1") == "PY4J"
    assert "hello py4j\n\x1eBULLETIN-END task-1\n" in out
    assert "\x1eBULLETIN-END task-1\n" in proc.stderr
    assert "EXIT 0" in out
    assert "Traceback" not in proc.stderr
